"""The processor's cost in the wiring users run, as the application's CPU time per span.

Three pipelines, side by side in this process: A, TracerProvider ->
BatchSpanProcessor -> OTLPSpanExporter (gRPC) -> a receiver in another process;
the floor, the same with ``workloads.FloorProcessor`` (sign, count, 4 attributes)
around the batch processor; B, the same with StallSpanProcessor there. The
repetitions rotate the order of the three, so a burst of load from elsewhere on
a shared machine lands on all alike.

Each repetition traces about 500 spans (one batch) and then calls ``force_flush()``,
and costs this process's CPU time over all its threads (``time.process_time``: the
application's, the batch worker's, gRPC's), so the export counts wherever it runs.
Receiving does not count: the receiver is ``tests/otlp_sink.py`` in its own process.
The garbage collector stays on, as in an application. The table gives the medians
with their interquartile range, and the ratios of the medians to A's with the
interquartile range of the per-repetition ratios. After each workload the receiver
must hold every span the pipelines sent and the processor must have finished every
agent run without an internal error, or the script fails: a lost span would flatter
the ratio.

Run ``.venv/bin/python bench/bench_processor_wiring.py [--quick] [--check]``; with
another checkout's interpreter it measures that checkout's code (the receiver stays
this checkout's). ``--check`` also fails when a budget is missed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import dataclass

from budgets import BUDGETS, record
from workloads import (
    SIDES,
    WORKLOADS,
    Receiver,
    Side,
    Workload,
    code_under_test,
    payload_bytes,
    pipeline,
)

import otel_stall

DASH = "\N{EN DASH}"


@dataclass(frozen=True)
class Result:
    """One workload's per-span CPU times on each side, and the ratios to A, with quartiles."""

    spans: int
    times: dict[Side, tuple[float, float, float]]
    """Per side: CPU µs per span, first quartile, median, third quartile."""
    ratios: dict[Side, tuple[float, float, float]]
    """Per side but A: the ratio of medians, and the quartiles of the per-repetition ratios."""


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """First quartile, median and third quartile."""
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def measure(receiver: Receiver, workload: Workload, reps: int) -> Result:
    """Runs ``workload`` ``reps`` times on each side, in rotating order, and checks the delivery."""
    before = receiver.count()
    built = {side: pipeline(receiver.port, side) for side in SIDES}
    sent = 0
    for provider, _ in built.values():  # warm up: the first exports open the gRPC channels
        sent += workload.work(provider.get_tracer("bench"), workload.units)
        provider.force_flush()
    tracers = {
        side: (provider, provider.get_tracer("bench")) for side, (provider, _) in built.items()
    }
    times: dict[Side, list[int]] = {side: [] for side in SIDES}
    spans = 0
    gc.collect()
    for i in range(reps):
        order = SIDES[i % 3 :] + SIDES[: i % 3]
        for side in order if i % 2 == 0 else reversed(order):
            provider, tracer = tracers[side]
            start = time.process_time_ns()
            spans = workload.work(tracer, workload.units)
            provider.force_flush()
            times[side].append(time.process_time_ns() - start)
            sent += spans
    for provider, _ in built.values():
        provider.shutdown()
    check_delivery(receiver, before + sent, workload)
    stall = built["with"][1]
    assert isinstance(stall, otel_stall.StallSpanProcessor)
    check_processor(stall.stats(), workload, reps)
    per_span = {side: quartiles([t / spans / 1000 for t in times[side]]) for side in SIDES}
    ratios = {}
    for side in ("floor", "with"):
        paired = [b / a for a, b in zip(times["without"], times[side], strict=True)]
        low, _, high = quartiles(paired)
        ratios[side] = (per_span[side][1] / per_span["without"][1], low, high)
    return Result(spans, per_span, ratios)


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


def row(workload: Workload, result: Result) -> str:
    """One markdown table row."""

    def cell(q: tuple[float, float, float], bold: bool = False) -> str:
        median = f"**{q[0]:.3f}**" if bold else f"{q[0]:.3f}"
        return f"{median} ({q[1]:.2f}{DASH}{q[2]:.2f})"

    times = [result.times[side] for side in SIDES]
    ratio = result.ratios["with"][0]
    verdict = "within" if ratio <= workload.budget else "over"
    return (
        f"| {workload.name} | {result.spans} | "
        + " | ".join(f"{q[1]:.1f} ({q[0]:.1f}{DASH}{q[2]:.1f})" for q in times)
        + f" | {cell(result.ratios['floor'])} | {cell(result.ratios['with'], True)} "
        f"| {BUDGETS[workload.key].text} | {verdict} | {added_per_call(workload, result)} |"
    )


def added_per_call(workload: Workload, result: Result) -> str:
    """What otel-stall adds per tool call (or per span, with no tool calls), in CPU µs."""
    added = result.times["with"][1] - result.times["without"][1]
    if not workload.tool_calls:
        return f"{added:.1f} per span"
    calls = workload.units * workload.tool_calls
    return f"{added * result.spans / calls:.0f} per tool call"


def save(workload: Workload, result: Result) -> None:
    """The row for run_all's summary."""
    added = result.times["with"][1] - result.times["without"][1]
    calls = workload.units * workload.tool_calls
    record(
        workload.key,
        value=result.ratios["with"][0],
        floor=result.ratios["floor"][0],
        spread=result.ratios["with"][1:],
        micros_span=added,
        micros_call=added * result.spans / calls if calls else None,
        without_span=result.times["without"][1],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="15 repetitions instead of 61")
    parser.add_argument("--check", action="store_true", help="exit 1 when a budget is missed")
    options = parser.parse_args(argv)
    reps = 15 if options.quick else 61
    print("## Live processor: CPU time in the wiring users run\n")
    print(
        "`TracerProvider` → [`StallSpanProcessor` →] `BatchSpanProcessor` → "
        "`OTLPSpanExporter` (gRPC) → a receiver in another process. CPU time of the "
        "application process over all its threads, per span, median of "
        f"{reps} repetitions of about 500 spans (one batch each) per side, the three sides "
        "interleaved; in brackets the interquartile range. The *floor* is a minimal "
        "processor in otel-stall's place: it canonicalises and hashes each tool call's "
        "arguments and result (orjson, sorted keys, xxhash), counts calls and repeats per "
        "run and sets 4 attributes. The ratios are a side's median over the median without "
        "otel-stall, in brackets the interquartile range of the per-repetition ratios. "
        f"Tool calls carry {payload_bytes()} B of JSON arguments and result, every call "
        f"different. Code measured: {code_under_test()}.\n"
    )
    print(
        "| workload | spans per repetition | without otel-stall, CPU µs/span "
        "| floor, CPU µs/span | with otel-stall, CPU µs/span | floor ratio | ratio "
        "| budget | | otel-stall adds, CPU µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    missed = False
    with Receiver() as receiver:
        for workload in WORKLOADS:
            print(f"wiring: {workload.name}", file=sys.stderr, flush=True)
            result = measure(receiver, workload, reps)
            missed |= result.ratios["with"][0] > workload.budget
            print(row(workload, result), flush=True)
            save(workload, result)
        total = receiver.count()
    print(
        f"\nThe receiver got all {total:,} spans the pipelines sent; "
        "the processor finished every agent run, with no internal error.\n"
    )
    return 1 if missed and options.check else 0


if __name__ == "__main__":
    sys.exit(main())
