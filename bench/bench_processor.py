"""Overhead of StallSpanProcessor over the same pipeline without it, measured side by side.

Pipeline A: TracerProvider -> SimpleSpanProcessor -> no-op exporter.
Pipeline B: TracerProvider -> StallSpanProcessor -> SimpleSpanProcessor -> no-op exporter.

Two workloads, each run on A and B alternately (A/B/A/B ...) and compared by
median, so drift and noise on a busy machine hit both sides alike:

1. non-tool spans (an HTTP-ish trace: a root and nine children): target <= 1.05.
   For scale, it also times the floor of any wrapping processor: one that only
   reads each span's attributes at its start and at its end, then forwards it;
2. tool spans with ~1.4 KB of payload (300 B arguments, 1.1 KB result) under an
   agent span: target <= 1.5, aim 1.25. Every call's arguments and result are
   different, across repetitions too, so the signer's payload cache never hits;
   a looping run (the same payload every call) is timed for information.
   For scale, it also times the floor of any detecting processor: one that
   reads each span's attributes at start and end and, for a tool span, builds
   its call, signs it, runs the same detector and forwards an enriched span,
   with none of the rest (other conventions, ancestry, run bounds, TTL, locks,
   events, callbacks, failing open).

The exporter drops spans without encoding them, which makes the pipeline as
cheap as it can be and the ratio as high as it can be. Rows marked "with OTLP
encoding" use an exporter that serialises every span to OTLP protobuf, the
work any real OTLP exporter does, for a ratio closer to production (info).

Metrics go to the global (no-op) meter provider, as in a process that has not
configured metrics. Run: ``.venv/bin/python bench/bench_processor.py [--quick]``.
"""

from __future__ import annotations

import gc
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

from otel_stall.conventions import ROLE_KEYS
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Status, ToolCall
from otel_stall.core.stall_attributes import tool_span_attributes
from otel_stall.live.enriched import EnrichedSpan
from otel_stall.live.processor import StallSpanProcessor
from otel_stall.metrics import StallMetrics


class NullExporter(SpanExporter):
    """Accepts and drops spans: the pipeline's own cost is what is measured."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Drop the batch."""
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


class EncodingExporter(SpanExporter):
    """Encodes each batch to OTLP protobuf bytes, as every OTLP exporter must, then drops it."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Serialise the batch; the bytes go nowhere."""
        encode_spans(spans).SerializeToString()
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


def tracers(
    wrapper: Callable[[SpanProcessor], SpanProcessor], exporter: Callable[[], SpanExporter]
) -> tuple[Tracer, Tracer]:
    """Pipeline A, and pipeline B: the same with ``wrapper`` around its processor."""
    plain = TracerProvider()
    plain.add_span_processor(SimpleSpanProcessor(exporter()))
    stall = TracerProvider()
    stall.add_span_processor(wrapper(SimpleSpanProcessor(exporter())))
    return plain.get_tracer("bench"), stall.get_tracer("bench")


class ReadOnlyWrapper(SpanProcessor):
    """The floor of a wrapping processor: read the attributes at start and end, forward."""

    def __init__(self, downstream: SpanProcessor) -> None:
        self.downstream = downstream
        self.keys = ROLE_KEYS
        self.last = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Read the parent and the attributes, as any ancestry tracking must."""
        attributes = span.attributes.copy()  # type: ignore[union-attr]
        self.last = span.parent is None or self.keys.isdisjoint(attributes)

    def on_end(self, span: ReadableSpan) -> None:
        """Read the attributes again (they may have changed), then forward."""
        self.last = span.parent is None or self.keys.isdisjoint(span.attributes)  # type: ignore[arg-type]
        self.downstream.on_end(span)


class DetectOnlyWrapper(SpanProcessor):
    """The floor of a detecting processor: GenAI tool spans under an agent span, nothing else.

    Reads the attributes at start (as ancestry tracking must) and at end; a tool
    span's call is built, signed, fed to the run's detector (the agent span is
    its parent here) and counted, and downstream gets an enriched span.
    """

    def __init__(self, downstream: SpanProcessor) -> None:
        self.downstream = downstream
        self.policy = StallPolicy()
        self.signer = self.policy.signer
        self.metrics = StallMetrics()
        self.detectors: dict[int, RunDetector] = {}
        self.last: object = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Read the attributes, as any ancestry tracking must."""
        self.last = span.attributes.copy().get(OPERATION)  # type: ignore[union-attr]

    def on_end(self, span: ReadableSpan) -> None:
        """Detect on a tool span and forward it enriched; forward anything else."""
        attrs = span.attributes.copy()  # type: ignore[union-attr]
        operation = attrs.get(OPERATION)
        if operation == "execute_tool" and span.parent is not None:
            run = span.parent.span_id
            detector = self.detectors.get(run)
            if detector is None:
                detector = self.detectors[run] = RunDetector(self.policy, ("t", None))
            get = attrs.get
            tool, args, result = get("gen_ai.tool.name"), get(ARGUMENTS), get(RESULT_KEY)
            call = ToolCall(
                tool, args, result, Status.OK, call_id=get("gen_ai.tool.call.id"),
                start_ns=span.start_time or 0, end_ns=span.end_time or 0,
            )  # fmt: skip
            row = detector.tool_call(call, self.signer.sign(tool, args, result, Status.OK)).row
            self.metrics.record_row(row)
            attrs.update(tool_span_attributes(row))
            span = EnrichedSpan(span, attrs)
        elif operation == "invoke_agent" and span.context is not None:
            self.detectors.pop(span.context.span_id, None)
        self.downstream.on_end(span)


OPERATION = "gen_ai.operation.name"
ARGUMENTS = "gen_ai.tool.call.arguments"
RESULT_KEY = "gen_ai.tool.call.result"


def non_tool(tracer: Tracer, traces: int) -> None:
    for i in range(traces):
        with tracer.start_as_current_span(
            "GET /orders", attributes={"http.request.method": "GET", "url.path": "/orders"}
        ):
            for j in range(9):
                with tracer.start_as_current_span(
                    "SELECT orders", attributes={"db.system": "postgresql", "db.query.id": j + i}
                ):
                    pass


ARGS = json.dumps(
    {
        "query": "quarterly revenue by region for the EMEA sales organisation",
        "filters": {"region": ["emea", "uk", "dach"], "year": 2024, "quarter": [1, 2, 3]},
        "limit": 25,
        "include": ["title", "url", "snippet", "score", "owner", "updated"],
        "sort": {"field": "score", "order": "desc"},
        "page": 0,
    }
)
RESULT = json.dumps(
    {
        "hits": [
            {
                "title": f"Regional revenue report {k}",
                "url": f"https://docs.example.com/reports/{k}",
                "snippet": "Revenue grew in the region, driven by enterprise renewals.",
                "score": 0.9 - k / 100,
            }
            for k in range(6)
        ],
        "total": 6,
    }
)
TOOLS_PER_RUN = 50
_calls = itertools.count()
"""Numbers every call's payloads, so no two calls in the whole bench are alike."""


def tool(tracer: Tracer, runs: int, looping: bool = False) -> None:
    for r in range(runs):
        with tracer.start_as_current_span(
            "invoke_agent researcher",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "r"},
        ):
            for k in range(TOOLS_PER_RUN):
                with tracer.start_as_current_span(
                    "execute_tool search",
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "search",
                        "gen_ai.tool.call.id": f"call_{r}_{k}",
                        "gen_ai.tool.call.arguments": ARGS if looping else _vary(ARGS, "page"),
                        "gen_ai.tool.call.result": RESULT if looping else _vary(RESULT, "total"),
                    },
                ):
                    pass


def _vary(payload: str, key: str) -> str:
    """``payload`` with its top-level ``key`` set to a number no other call has."""
    return payload.replace(f'"{key}": ', f'"{key}": 1{next(_calls)}', 1)


def looping(tracer: Tracer, runs: int) -> None:
    tool(tracer, runs, looping=True)


def measure(
    work: Callable[[Tracer, int], None],
    size: int,
    reps: int,
    wrapper: Callable[[SpanProcessor], SpanProcessor] = StallSpanProcessor,
    exporter: Callable[[], SpanExporter] = NullExporter,
) -> tuple[float, float, float]:
    plain, stall = tracers(wrapper, exporter)
    work(plain, size)  # warm up both
    work(stall, size)
    a: list[float] = []
    b: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for i in range(reps):
            # Alternate which side goes first, so neither always follows the other.
            order = ((plain, a), (stall, b)) if i % 2 == 0 else ((stall, b), (plain, a))
            for tracer, out in order:
                start = time.perf_counter_ns()
                work(tracer, size)
                out.append(time.perf_counter_ns() - start)
            if i % 20 == 19:
                gc.collect()
    finally:
        gc.enable()
    ma, mb = statistics.median(a), statistics.median(b)
    return ma, mb, mb / ma


def main(argv: Sequence[str]) -> int:
    quick = "--quick" in argv
    # Many short repetitions (a few ms each), alternated A/B: a burst of load from
    # elsewhere on the machine then lands on both sides alike instead of on one.
    reps = 41 if quick else 301
    Wrapper = Callable[[SpanProcessor], SpanProcessor]
    Exporter = Callable[[], SpanExporter]
    Work = Callable[[Tracer, int], None]
    stall, floor, null, otlp = StallSpanProcessor, ReadOnlyWrapper, NullExporter, EncodingExporter
    detect_only = DetectOnlyWrapper
    per_run = TOOLS_PER_RUN + 1
    results: list[tuple[str, Work, int, int, float | None, Wrapper, Exporter]] = [
        ("non-tool spans", non_tool, 20, 10, 1.05, stall, null),
        ("  floor: read attributes only", non_tool, 20, 10, None, floor, null),
        ("  with OTLP encoding", non_tool, 20, 10, None, stall, otlp),
        ("tool spans, 1.4 KB payload", tool, 1, per_run, 1.5, stall, null),
        ("  floor: detect and enrich only", tool, 1, per_run, None, detect_only, null),
        ("  same, a looping run", looping, 1, per_run, None, stall, null),
        ("  with OTLP encoding", tool, 1, per_run, None, stall, otlp),
    ]
    print(
        f"payload: arguments {len(ARGS)} B + result {len(RESULT)} B = {len(ARGS) + len(RESULT)} B"
    )
    print(
        f"{'workload':<30} {'plain us/span':>14} {'stall us/span':>14} {'ratio':>7} {'target':>7}"
    )
    failed = False
    for name, work, size, spans_per_unit, target, wrapper, exporter in results:
        ma, mb, ratio = measure(work, size, reps, wrapper, exporter)
        spans = size * spans_per_unit
        ok = target is None or ratio <= target
        failed |= not ok
        verdict = "(info)" if target is None else "ok" if ok else "MISSED"
        print(
            f"{name:<30} {ma / spans / 1000:>14.2f} {mb / spans / 1000:>14.2f} "
            f"{ratio:>7.3f} {'' if target is None else '<=' + str(target):>7} {verdict}"
        )
    return 1 if failed and "--check" in argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
