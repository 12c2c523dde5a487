"""The processor's cost in the wiring users run, as the application's CPU time per span.

Pipeline A: TracerProvider -> BatchSpanProcessor -> OTLPSpanExporter (gRPC) -> a receiver
in another process. Pipeline B: the same with StallSpanProcessor around the batch
processor. Both live in this process, side by side; the repetitions alternate A/B
(the first side swapped every time), so a burst of load from elsewhere on a shared
machine lands on both alike.

Each repetition traces about 500 spans (one batch) and then calls ``force_flush()``,
and costs this process's CPU time over all its threads (``time.process_time``: the
application's, the batch worker's, gRPC's), so the export counts wherever it runs.
Receiving does not count: the receiver is ``tests/otlp_sink.py`` in its own process.
The garbage collector stays on, as in an application. The table gives the medians
with their interquartile range, and the ratio of the medians with the interquartile
range of the per-repetition ratios. After each workload the receiver must hold every
span both pipelines sent and the processor must have finished every agent run
without an internal error, or the script fails: a lost span would flatter the ratio.

Run ``.venv/bin/python bench/bench_processor_wiring.py [--quick] [--check]``; with
another checkout's interpreter it measures that checkout's code (the receiver stays
this checkout's). ``--check`` also fails when a budget is missed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from workloads import WORKLOADS, Receiver, Workload, payload_bytes, pipeline

import otel_stall

DASH = "\N{EN DASH}"


@dataclass(frozen=True)
class Result:
    """One workload's per-span CPU times (A and B) and its ratio, each with quartiles."""

    spans: int
    plain: tuple[float, float, float]
    stall: tuple[float, float, float]
    ratio: float
    ratio_spread: tuple[float, float]


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile."""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def measure(receiver: Receiver, workload: Workload, reps: int) -> Result:
    """Runs ``workload`` ``reps`` times on A and on B, alternating, and checks the delivery."""
    before = receiver.count()
    plain, _ = pipeline(receiver.port, stall=False)
    stall, processor = pipeline(receiver.port, stall=True)
    assert processor is not None
    sides = ((plain, plain.get_tracer("bench")), (stall, stall.get_tracer("bench")))
    sent = 0
    for provider, tracer in sides:  # warm up both: first exports open the gRPC channels
        sent += workload.work(tracer, workload.units)
        provider.force_flush()
    times: tuple[list[int], list[int]] = ([], [])
    spans = 0
    gc.collect()
    for i in range(reps):
        for side in (0, 1) if i % 2 == 0 else (1, 0):
            provider, tracer = sides[side]
            start = time.process_time_ns()
            spans = workload.work(tracer, workload.units)
            provider.force_flush()
            times[side].append(time.process_time_ns() - start)
            sent += spans
    plain.shutdown()
    stall.shutdown()
    check_delivery(receiver, before + sent, workload)
    check_processor(processor.stats(), workload, reps)
    per_span = [[t / spans / 1000 for t in side] for side in times]
    paired = [b / a for a, b in zip(times[0], times[1], strict=True)]
    ratio_q1, _, ratio_q3 = quartiles(paired)
    a, b = quartiles(per_span[0]), quartiles(per_span[1])
    return Result(spans, a, b, b[1] / a[1], (ratio_q1, ratio_q3))


def check_delivery(receiver: Receiver, expected: int, workload: Workload) -> None:
    """The receiver got every span sent so far: lose nothing."""
    deadline = time.monotonic() + 30
    received = receiver.count()
    while received < expected and time.monotonic() < deadline:
        time.sleep(0.05)
        received = receiver.count()
    if received != expected:
        raise SystemExit(f"{workload.name}: the receiver got {received} spans of {expected} sent")


def check_processor(stats: otel_stall.ProcessorStats, workload: Workload, reps: int) -> None:
    """Pipeline B did its work: every agent run finished, no internal error."""
    if stats.errors:
        raise SystemExit(f"{workload.name}: the processor caught {stats.errors} internal errors")
    if workload.name != "non-tool spans" and stats.finished_runs != (reps + 1) * workload.units:
        raise SystemExit(f"{workload.name}: {stats.finished_runs} runs finished")


def code_under_test() -> str:
    """Where the measured ``otel_stall`` comes from, with its commit when it is a checkout."""
    package = Path(otel_stall.__file__).resolve().parent
    head = package.parent / ".git"
    commit = ""
    if head.exists():
        out = subprocess.run(
            ["git", "-C", str(package.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        commit = f" at commit {out.stdout.strip()}" if out.returncode == 0 else ""
    return f"`{package.parent}`{commit}"


def row(workload: Workload, result: Result) -> str:
    """One markdown table row."""
    a, b = result.plain, result.stall
    low, high = result.ratio_spread
    verdict = "pass" if result.ratio <= workload.budget else "**miss**"
    return (
        f"| {workload.name} | {result.spans} | {a[1]:.1f} ({a[0]:.1f}{DASH}{a[2]:.1f}) "
        f"| {b[1]:.1f} ({b[0]:.1f}{DASH}{b[2]:.1f}) "
        f"| **{result.ratio:.3f}** ({low:.2f}{DASH}{high:.2f}) | ≤ {workload.budget} | {verdict} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="21 repetitions instead of 121")
    parser.add_argument("--check", action="store_true", help="exit 1 when a budget is missed")
    options = parser.parse_args(argv)
    reps = 21 if options.quick else 121
    print("## Live processor: CPU time in the wiring users run\n")
    print(
        "`TracerProvider` → [`StallSpanProcessor` →] `BatchSpanProcessor` → "
        "`OTLPSpanExporter` (gRPC) → a receiver in another process. CPU time of the "
        "application process over all its threads, per span, median of "
        f"{reps} repetitions of about 500 spans (one batch each) per side, A and B "
        "interleaved; in brackets the interquartile range. The ratio is B's median over "
        "A's, in brackets the interquartile range of the per-repetition ratios. "
        f"Tool calls carry {payload_bytes()} B of JSON arguments and result, every call "
        f"different. Code measured: {code_under_test()}.\n"
    )
    print(
        "| workload | spans per repetition | without otel-stall, CPU µs/span "
        "| with otel-stall, CPU µs/span | ratio | budget | |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    missed = False
    with Receiver() as receiver:
        for workload in WORKLOADS:
            result = measure(receiver, workload, reps)
            missed |= result.ratio > workload.budget
            print(row(workload, result), flush=True)
        total = receiver.count()
    print(
        f"\nThe receiver got all {total:,} spans the pipelines sent; "
        "the processor finished every agent run, with no internal error.\n"
    )
    return 1 if missed and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
