"""Wrapped processors see every hook exactly as if they were registered directly."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall.processor import StallSpanProcessor


class Recording(SpanProcessor):
    """A downstream processor that uses all three hooks, like a tail sampler might."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.calls.append(("start", span.name))

    def _on_ending(self, span: Span) -> None:
        self.calls.append(("ending", span.name))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("end", span.name))


def _trace(processor: StallSpanProcessor) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("GET /"), tracer.start_as_current_span("SELECT"):
        pass


@pytest.mark.parametrize("extra", [0, 1], ids=["alone", "beside an SDK processor"])
def test_every_hook_is_relayed_in_order(extra: int) -> None:
    """on_start, _on_ending and on_end reach a wrapped processor that implements them."""
    recording = Recording()
    exporter = InMemorySpanExporter()
    others = [SimpleSpanProcessor(exporter)] * extra
    _trace(StallSpanProcessor(*others, recording))
    assert recording.calls == [
        ("start", "GET /"),
        ("start", "SELECT"),
        ("ending", "SELECT"),
        ("end", "SELECT"),
        ("ending", "GET /"),
        ("end", "GET /"),
    ]
    assert len(exporter.get_finished_spans()) == 2 * extra
