"""Memory the live processor keeps for agent runs whose span never ends (issue #21, item 6).

The attack: an agent span starts, makes a model call and a tool call (both end), and
is then abandoned, never ended and no longer referenced by the application. Far more
such runs than ``max_runs`` go through the real wiring: TracerProvider ->
StallSpanProcessor -> BatchSpanProcessor -> an exporter that drops what it gets.

1. Bytes kept per abandoned run once ``max_runs`` is reached, by ``tracemalloc``:
   the growth over a window of runs that are all evicted, divided by the window.
   Everything the processor keeps for an evicted run shows up here (the application
   keeps nothing).
2. Resident memory (RSS) after 80,000 abandoned runs with the default settings,
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

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from otel_stall.live.processor import StallSpanProcessor
from otel_stall.live.settings import ProcessorSettings


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
    per_run = bytes_per_abandoned_run(max_runs=500 if quick else 2000, window=2000)
    print(f"bytes kept per abandoned run after eviction: {per_run:.0f}")
    runs = 20_000 if quick else 80_000
    out = subprocess.run(
        [sys.executable, __file__, "--rss-child", str(runs)],
        check=True,
        capture_output=True,
        text=True,
    )
    print(f"RSS after {runs} abandoned agent runs (default settings): {out.stdout.strip()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
