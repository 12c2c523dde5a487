"""The processor's cost in the wiring users run, as instructions per span (callgrind).

The clock on a shared machine moves with everything else running there; an
instruction count does not. This runs the same workloads through the same two
pipelines as ``bench_processor_wiring.py`` (A: batch processor and OTLP/gRPC
exporter; B: the same with ``StallSpanProcessor`` around it), each in a fresh
interpreter under ``valgrind --tool=callgrind``, and counts every instruction
the application process executes, in all its threads: the application's spans,
the batch processor's export (protobuf encoding, the gRPC call) and gRPC's own
threads. The receiver runs in another process, outside valgrind.

Each pipeline runs twice, with a few and with more repetitions of about 500
spans (one flushed batch each); instructions per span are the difference of the
two totals over the difference in spans, so the interpreter's start-up, the
imports, the warm-up and the shutdown cancel out. Hash randomisation is fixed,
so a run repeats its count closely (gRPC's threads add a little jitter).
Under valgrind the exporter gets a long timeout, and at the end the receiver must
hold every span the runs sent, or the script fails: an export that timed out and
was retried, or dropped, would skew the count.

Run ``.venv/bin/python bench/bench_processor_instructions.py [--quick]``; without
valgrind it says so and exits 0.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from workloads import WORKLOADS, Receiver, Workload, pipeline

EXPORT_TIMEOUT = 600.0
"""Seconds an export may take under valgrind, on a loaded machine, before it is retried."""

TOTALS = re.compile(rb"^(?:summary|totals): (\d+)", re.MULTILINE)


def drive(workload: Workload, stall: bool, reps: int, port: int) -> None:
    """The measured process: warm up, then ``reps`` flushed repetitions, then shut down."""
    provider, _ = pipeline(port, stall, export_timeout=EXPORT_TIMEOUT)
    tracer = provider.get_tracer("bench")
    for _ in range(reps + 1):
        workload.work(tracer, workload.units)
        if not provider.force_flush(int(EXPORT_TIMEOUT * 1000)):
            raise SystemExit("force_flush timed out")
    provider.shutdown()


def instructions(workload: int, stall: bool, reps: int, port: int, scratch: Path) -> int:
    """Instructions of one driver process under callgrind, all threads together."""
    out = scratch / f"callgrind.{workload}.{int(stall)}.{reps}"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
        "--drive",
        f"{workload},{int(stall)},{reps},{port}",
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, env=env, check=False)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{tail}")
    found = TOTALS.search(out.read_bytes())
    if found is None:
        raise SystemExit(f"no instruction total in {out}")
    return int(found.group(1))


def per_span(index: int, stall: bool, counts: tuple[int, int], port: int, scratch: Path) -> float:
    """Instructions per span: the difference of two runs over their difference in spans."""
    workload = WORKLOADS[index]
    few, more = (instructions(index, stall, reps, port, scratch) for reps in counts)
    return (more - few) / ((counts[1] - counts[0]) * spans_per_rep(workload))


def spans_per_rep(workload: Workload) -> int:
    """Spans one repetition ends (traced against a provider with no processor)."""
    return workload.work(TracerProvider().get_tracer("count"), workload.units)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="1 and 2 repetitions, not 2 and 6")
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.drive:
        index, stall, reps, port = (int(part) for part in options.drive.split(","))
        drive(WORKLOADS[index], stall == 1, reps, port)
        return 0
    print("## Live processor: instructions per span (callgrind)\n")
    if shutil.which("valgrind") is None:
        print("valgrind is not installed here: no instruction counts.\n")
        return 0
    counts = (1, 2) if options.quick else (2, 6)
    print(
        "The same workloads and pipelines as above, each pipeline in a fresh interpreter "
        "under `valgrind --tool=callgrind`, counting every instruction of the application "
        "process in all its threads (the spans, the batch processor's protobuf encoding and "
        "gRPC export, gRPC's own threads); the receiver is another process, not counted. "
        f"Per span: the difference between a run of {counts[0]} and one of {counts[1]} "
        "repetitions of about 500 spans, over the difference in spans, so start-up, imports "
        "and shutdown cancel out.\n"
    )
    print("| workload | without otel-stall | with otel-stall | added | ratio | budget (CPU time) |")
    print("|---|---:|---:|---:|---:|---:|")
    jobs = [(i, stall) for i in range(len(WORKLOADS)) for stall in (False, True)]
    with (
        tempfile.TemporaryDirectory(prefix="otel-stall-callgrind-") as tmp,
        Receiver() as sink,
        ThreadPoolExecutor(max_workers=2) as pool,  # valgrind runs one thread at a time
    ):
        results = list(
            pool.map(lambda job: per_span(job[0], job[1], counts, sink.port, Path(tmp)), jobs)
        )
        sent = sum(
            (reps + 1) * spans_per_rep(WORKLOADS[index]) for index, _ in jobs for reps in counts
        )
        if sink.count() != sent:
            raise SystemExit(f"the receiver got {sink.count()} of {sent} spans: counts invalid")
    for i, workload in enumerate(WORKLOADS):
        plain, with_stall = results[2 * i], results[2 * i + 1]
        print(
            f"| {workload.name} | {plain / 1000:.1f}k | {with_stall / 1000:.1f}k "
            f"| {(with_stall - plain) / 1000:.1f}k | **{with_stall / plain:.3f}** "
            f"| ≤ {workload.budget} |"
        )
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
