"""Memory the live processor keeps per open agent run, and for runs whose span never ends.

1. Per open run of 10 tool calls (issue #26's budget): many agent runs are
   started, each makes 10 tool calls with the processor benchmarks' 1.4 KB
   payloads (all ended), and none has ended yet: the state a live run holds
   while the agent works. Three pipelines, TracerProvider -> [processor ->]
   SimpleSpanProcessor -> an exporter that drops what it gets: without
   otel-stall, with the floor processor (``workloads.FloorProcessor``: a
   signature count per run) and with ``StallSpanProcessor``. The bytes per run
   are the ``tracemalloc`` growth over the runs, minus the same without
   otel-stall (the application's own open spans), over the runs.

Then issue #21, item 6; the attack: an agent span starts, makes a model call and a
tool call (both end), and is then abandoned, never ended and no longer referenced by
the application. Far more such runs than ``max_runs`` go through the real wiring: TracerProvider ->
StallSpanProcessor -> BatchSpanProcessor -> an exporter that drops what it gets.

2. Bytes kept per abandoned run once ``max_runs`` is reached, by ``tracemalloc``:
   the growth over a window of runs that are all evicted, divided by the window.
   Everything the processor keeps for an evicted run shows up here (the application
   keeps nothing).
3. Resident memory (RSS) after 80,000 abandoned runs with the default settings,
   each scenario in a fresh interpreter.

Measured (2 shared cores, Python 3.11, SDK 1.45), before -> after issue #21 item 6:
bytes kept per abandoned run 6,609 -> about 0 (the window reads -435: it replaces
state made before tracing); RSS for 80,000 runs 626 MB -> 96 MB, with
``tracked_spans`` 97,490 -> 20,000 (the 10,000 tracked runs' agent and root entries).

Run: ``.venv/bin/python bench/bench_processor_memory.py [--quick]``.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tracemalloc
from collections.abc import Sequence

from budgets import BUDGETS, record
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from workloads import ARGUMENTS, RESULT, SIDES, Side, _tool_span, _vary, provider_for

from otel_stall import ProcessorSettings, StallSpanProcessor

OPEN_RUNS = 400
CALLS_PER_RUN = 10


class Drop(SpanExporter):
    """Counts what it is given and keeps nothing."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Count the batch, keep none of it."""
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def pipeline(max_runs: int) -> tuple[trace.Tracer, StallSpanProcessor, Drop]:
    """The wiring users run, with a dropping exporter."""
    exporter = Drop()
    processor = StallSpanProcessor(
        BatchSpanProcessor(exporter, max_queue_size=100_000),
        settings=ProcessorSettings(max_runs=max_runs),
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider.get_tracer("bench"), processor, exporter


def abandoned_run(tracer: trace.Tracer, i: int) -> None:
    """An agent span with one round (model call, tool call) that never ends."""
    agent = tracer.start_span(
        "invoke_agent researcher",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
        context=trace.set_span_in_context(trace.INVALID_SPAN),
    )
    with trace.use_span(agent, end_on_exit=False):
        with tracer.start_as_current_span("chat gpt", attributes={"gen_ai.operation.name": "chat"}):
            pass
        with tracer.start_as_current_span(
            "execute_tool search",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.arguments": json.dumps({"q": i}),
                "gen_ai.tool.call.result": json.dumps({"hits": [i, i + 1]}),
            },
        ):
            pass


def bytes_per_abandoned_run(max_runs: int, window: int) -> float:
    """Traced bytes added per run once every run of the window is evicted (the least of two)."""
    tracer, processor, _ = pipeline(max_runs)
    n = 0
    for _ in range(2 * max_runs):
        abandoned_run(tracer, n)
        n += 1
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(window):  # replaces what was allocated before tracing
            abandoned_run(tracer, n)
            n += 1
        growth = []
        for _ in range(2):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(window):
                abandoned_run(tracer, n)
                n += 1
            gc.collect()
            growth.append((tracemalloc.get_traced_memory()[0] - before) / window)
    finally:
        tracemalloc.stop()
    processor.shutdown()
    return min(growth)


def open_runs_bytes(side: Side, runs: int) -> float:
    """Traced bytes held once ``runs`` agent runs of 10 tool calls each are open, per run."""
    provider, processor = provider_for(side, SimpleSpanProcessor(Drop()))
    tracer = provider.get_tracer("bench")
    payloads = [
        [(_vary(ARGUMENTS, "page"), _vary(RESULT, "total")) for _ in range(CALLS_PER_RUN)]
        for _ in range(2 * runs)
    ]
    agents = []

    def open_run(r: int) -> None:
        agent = tracer.start_span(
            "invoke_agent researcher",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "r"},
            context=trace.set_span_in_context(trace.INVALID_SPAN),
        )
        agents.append(agent)
        with trace.use_span(agent, end_on_exit=False):
            for k, (arguments, result) in enumerate(payloads[r]):
                _tool_span(tracer, f"call_{r}_{k}", arguments, result)

    for r in range(runs):  # warm: first runs fill caches and free lists
        open_run(r)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for r in range(runs, 2 * runs):
            open_run(r)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    if isinstance(processor, StallSpanProcessor) and processor.stats().active_runs != 2 * runs:
        raise SystemExit(f"{processor.stats().active_runs} runs open, {2 * runs} expected")
    for agent in agents:
        agent.end()
    provider.shutdown()
    return grown / runs


def open_runs_row(runs: int) -> None:
    """Bytes per open run of 10 calls on the three sides, and the row for the summary."""
    held = {side: open_runs_bytes(side, runs) for side in SIDES}
    floor = (held["floor"] - held["without"]) / 1000
    stall = (held["with"] - held["without"]) / 1000
    budget = BUDGETS["memory.open_run"]
    print("## Live processor: memory per open run\n")
    print(
        f"{runs} agent runs open at once (started, not ended), each with {CALLS_PER_RUN} "
        "ended tool calls carrying the 1.4 KB payloads above, every call different; the "
        "processor hands spans to a `SimpleSpanProcessor` and an exporter that drops them. "
        "Bytes held per run by `tracemalloc`, minus the same pipeline without otel-stall "
        "(the application's own open agent spans). The floor is the minimal processor "
        "above, which keeps a signature count per run.\n"
    )
    print("| | floor | with otel-stall | budget | |")
    print("|---|---:|---:|---:|---|")
    verdict = "within" if budget.met(stall) else "over"
    print(
        f"| memory per open run of {CALLS_PER_RUN} calls | {floor:.1f} KB | **{stall:.1f} KB** "
        f"| {budget.text} | {verdict} |\n"
    )
    record("memory.open_run", value=stall, floor=floor)


def rss_child(runs: int) -> None:
    """In a fresh interpreter: RSS (MB) after ``runs`` abandoned runs with default settings."""
    tracer, processor, exporter = pipeline(ProcessorSettings().max_runs)
    for i in range(runs):
        abandoned_run(tracer, i)
    gc.collect()
    stats = processor.stats()
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    processor.force_flush()
    print(
        json.dumps(
            {
                "runs": runs,
                "rss_mb": round(rss / 1024, 1),
                "active_runs": stats.active_runs,
                "tracked_spans": stats.tracked_spans,
                "evicted_runs": stats.evicted_runs,
                "exported": exporter.exported,
            }
        )
    )


def main(argv: list[str]) -> int:
    if argv[:1] == ["--rss-child"]:
        rss_child(int(argv[1]))
        return 0
    quick = "--quick" in argv
    open_runs_row(OPEN_RUNS)
    per_run = bytes_per_abandoned_run(max_runs=500 if quick else 2000, window=2000)
    print("## Live processor: runs whose agent span never ends\n")
    print(f"Bytes kept per abandoned run after eviction: {per_run:.0f}.\n")
    runs = 20_000 if quick else 80_000
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    info = json.loads(out.stdout)
    print(
        f"RSS after {runs:,} abandoned agent runs (default settings): {info['rss_mb']:.0f} MB, "
        f"with {info['active_runs']:,} runs tracked and {info['evicted_runs']:,} evicted.\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
