"""Fail open: errors never break the user's pipeline; under pytest they surface."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stall_pipeline import STYLES, Agent, Call, make_pipeline, stall

from otel_stall import Conventions, Finding, ProcessorSettings, Role, StallSpanProcessor

GENAI = STYLES[0]
SEARCH = Call("search", {"q": 1}, {"r": 1})


def _boom(finding: Finding) -> None:
    raise RuntimeError(f"callback failed on {finding.kind}")


def test_raising_callback_does_not_break_export(caplog: pytest.LogCaptureFixture) -> None:
    """A raising on_finding is logged once per kind; every enriched span is still exported."""
    pipe = make_pipeline(on_finding=_boom, raise_errors=False)
    agent = Agent(pipe.tracer, GENAI)
    with caplog.at_level(logging.ERROR, logger="otel_stall"), agent.run():
        for _ in range(5):
            agent.round(SEARCH)
    assert len(pipe.spans()) == 11
    assert [stall(s)["stall.seq"] for s in pipe.named("execute_tool search")] == [1, 2, 3, 4, 5]
    assert stall(pipe.one("invoke_agent researcher"))["stall.verdict"] == "break"
    assert pipe.processor.stats().errors == 6  # one per finding
    logged = [r for r in caplog.records if r.name == "otel_stall"]
    assert len(logged) == 1
    assert "on_finding callback" in logged[0].getMessage()


def test_errors_surface_when_asked() -> None:
    """raise_errors=True re-raises after the span was forwarded."""
    pipe = make_pipeline(on_finding=_boom, raise_errors=True)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        with pytest.raises(RuntimeError, match="callback failed"):
            agent.round(SEARCH)
    assert len(pipe.named("execute_tool search")) == 2


def test_auto_mode_raises_under_pytest() -> None:
    """raise_errors left to auto re-raises here, because PYTEST_CURRENT_TEST is set."""
    assert ProcessorSettings().should_raise is True
    pipe = make_pipeline(on_finding=_boom)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        with pytest.raises(RuntimeError):
            agent.round(SEARCH)


class BrokenConventions(Conventions):
    """A user convention with a bug: classifying a marked span raises."""

    def role(self, attributes: Mapping[str, Any] | None) -> Role:
        if attributes and attributes.get("poison"):
            raise ValueError("bad convention")
        return super().role(attributes)


def test_internal_error_forwards_the_original_span() -> None:
    """An error inside the processor still hands the span, unchanged, to downstream."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = StallSpanProcessor(
        SimpleSpanProcessor(exporter), conventions=BrokenConventions(), raise_errors=False
    )
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    attrs: dict[str, Any] = {"poison": True, "gen_ai.operation.name": "execute_tool", "k": "v"}
    with tracer.start_as_current_span("poisoned", attributes=attrs):
        pass
    (span,) = exporter.get_finished_spans()
    assert dict(span.attributes or {}) == attrs
    assert processor.stats().errors == 2  # on_start and on_end


class Exploding(SpanProcessor):
    """A downstream processor that always raises."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("downstream on_start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("downstream on_end")


def test_one_failing_downstream_does_not_starve_the_next() -> None:
    """A raising downstream processor is logged; the following one still gets every span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = StallSpanProcessor(Exploding(), SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    agent = Agent(provider.get_tracer("t"), GENAI)
    with agent.run():
        agent.round(SEARCH)
    assert len(exporter.get_finished_spans()) == 3
    assert processor.stats().errors == 6


def test_no_downstream_still_detects() -> None:
    """Without downstream processors, events, metrics and callbacks still happen."""
    seen: list[Finding] = []
    provider = TracerProvider()
    processor = StallSpanProcessor(on_finding=seen.append)
    provider.add_span_processor(processor)
    agent = Agent(provider.get_tracer("t"), GENAI)
    with agent.run() as span:
        for _ in range(3):
            agent.round(SEARCH)
        assert len(span.events) == 1  # type: ignore[attr-defined]  # repeat warns; refusals: none
    assert [f.kind.value for f in seen] == ["duplicate_call", "repeat", "duplicate_call"]
    assert processor.downstream == ()
    assert processor.force_flush() is True


def test_disabled_processor_forwards_untouched() -> None:
    """enabled=False is a kill switch: spans pass through with no stall.* attributes."""
    pipe = make_pipeline(settings=ProcessorSettings(enabled=False))
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        for _ in range(5):
            agent.round(SEARCH)
    assert all(stall(s) == {} for s in pipe.spans())
    assert pipe.findings == []
