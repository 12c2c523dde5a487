"""The processor's cost in the wiring users run, as instructions per span (callgrind).

The clock on a shared machine moves with everything else running there; an
instruction count does not. This runs the same workloads through the same three
pipelines as ``bench_processor_wiring.py`` (A: batch processor and OTLP/gRPC
exporter; the floor: the same with the minimal ``FloorProcessor`` around it; B:
the same with ``StallSpanProcessor`` around it), each in a fresh
interpreter under ``valgrind --tool=callgrind``, and counts every instruction
the application process executes, in all its threads: the application's spans,
the batch processor's export (protobuf encoding, the gRPC call) and gRPC's own
threads. The receiver runs in another process, outside valgrind.

Each pipeline runs in one process for all the workloads: per workload, a
warm-up repetition of about 500 spans (the first export opens the gRPC channel),
then a counted window (``callgrind.window``) of a few flushed repetitions, so
the interpreter's start-up, the imports, the warm-up and the shutdown stay
outside the count. Hash randomisation is fixed, so a run repeats its count
closely (gRPC's threads add a little jitter). Under valgrind the exporter gets a
long timeout, and at the end the receiver must hold every span the runs sent, or
the script fails: an export that timed out and was retried, or dropped, would
skew the count.

Run ``.venv/bin/python bench/bench_processor_instructions.py [--quick]``; without
valgrind it says so and exits 0.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

import callgrind
from budgets import BUDGETS, record
from opentelemetry.sdk.trace import TracerProvider
from workloads import SIDES, WORKLOADS, Receiver, Side, Workload, pipeline

WINDOWS = 2
"""Counted windows per workload, the least kept: gRPC's threads add instructions that grow
with the wall time of a window (spinning and polling while valgrind runs one thread at a time),
worst on a loaded machine (one window of 500 spans ran 50% high at load 15); never fewer."""

EXPORT_TIMEOUT = 600.0
"""Seconds an export may take under valgrind, on a loaded machine, before it is retried."""


def drive(side: Side, reps: int, port: int) -> None:
    """The measured process: per workload, warm up, then count ``reps`` flushed repetitions."""
    for workload in WORKLOADS:
        provider, _ = pipeline(port, side, export_timeout=EXPORT_TIMEOUT)
        tracer = provider.get_tracer("bench")
        workload.work(tracer, workload.units)
        provider.force_flush(int(EXPORT_TIMEOUT * 1000))
        for _ in range(WINDOWS):
            with callgrind.window():
                for _ in range(reps):
                    workload.work(tracer, workload.units)
                    if not provider.force_flush(int(EXPORT_TIMEOUT * 1000)):
                        raise SystemExit("force_flush timed out")
        provider.shutdown()


def per_span(side: int, reps: int, port: int) -> list[float]:
    """Instructions per span of each workload on one side, in one process under callgrind."""
    print(f"callgrind: {SIDES[side]} otel-stall", file=sys.stderr, flush=True)
    command = [sys.executable, __file__, "--drive", f"{side},{reps},{port}"]
    counts = callgrind.count(command, WINDOWS * len(WORKLOADS))
    least = [min(counts[WINDOWS * i : WINDOWS * (i + 1)]) for i in range(len(WORKLOADS))]
    return [n / (reps * spans_per_rep(w)) for n, w in zip(least, WORKLOADS, strict=True)]


def spans_per_rep(workload: Workload) -> int:
    """Spans one repetition ends (traced against a provider with no processor)."""
    return workload.work(TracerProvider().get_tracer("count"), workload.units)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="1 counted repetition per window, not 2"
    )
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.drive:
        side, reps, port = (int(part) for part in options.drive.split(","))
        drive(SIDES[side], reps, port)
        return 0
    print("## Live processor: instructions per span (callgrind)\n")
    if not callgrind.available():
        print("valgrind is not installed here: no instruction counts.\n")
        return 0
    reps = 1 if options.quick else 2
    print(
        "The same workloads and pipelines as above, each pipeline in a fresh interpreter "
        "under `valgrind --tool=callgrind`, counting every instruction of the application "
        "process in all its threads (the spans, the batch processor's protobuf encoding and "
        "gRPC export, gRPC's own threads); the receiver is another process, not counted. "
        f"Per span: the instructions of {reps} flushed repetition(s) of about 500 spans, "
        f"after a warm-up, over their spans, the least of {WINDOWS} such windows (gRPC's "
        "threads add a little that grows with the machine's load); start-up, imports and "
        "shutdown are not counted.\n"
    )
    print(
        "| workload | without otel-stall | floor | with otel-stall | otel-stall adds "
        "| floor ratio | ratio | budget (CPU time) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with Receiver() as sink, ThreadPoolExecutor(max_workers=2) as pool:
        # valgrind runs one thread at a time: two processes keep both cores busy
        by_side = list(pool.map(lambda side: per_span(side, reps, sink.port), range(len(SIDES))))
        sent = len(SIDES) * sum((WINDOWS * reps + 1) * spans_per_rep(w) for w in WORKLOADS)
        if sink.count() != sent:
            raise SystemExit(f"the receiver got {sink.count()} of {sent} spans: counts invalid")
    results = [by_side[side][i] for i in range(len(WORKLOADS)) for side in range(len(SIDES))]
    for i, workload in enumerate(WORKLOADS):
        plain, floor, with_stall = results[3 * i : 3 * i + 3]
        print(
            f"| {workload.name} | {plain / 1000:.1f}k | {floor / 1000:.1f}k "
            f"| {with_stall / 1000:.1f}k | {(with_stall - plain) / 1000:.1f}k "
            f"| {floor / plain:.3f} | **{with_stall / plain:.3f}** "
            f"| {BUDGETS[workload.key].text} |"
        )
        record(
            workload.key,
            instructions=with_stall / plain,
            instructions_floor=floor / plain,
            instructions_span=(with_stall - plain),
        )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
