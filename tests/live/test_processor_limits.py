"""Enriched copies obey the provider's span limits, as if otel-stall had set them on live spans."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable

import pytest
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue
from stall_pipeline import STYLES, Agent, Call, make_pipeline
from user_process import run_python

from otel_stall import ProcessorSettings, StallSpanProcessor

GENAI = STYLES[0]
UNLIMITED = SpanLimits(
    max_span_attributes=SpanLimits.UNSET,
    max_event_attributes=SpanLimits.UNSET,
    max_attribute_length=SpanLimits.UNSET,
    max_span_attribute_length=SpanLimits.UNSET,
)
LOOP = Call("search", {"query": "quarterly revenue"}, {"hits": ["report-2024-q3.pdf"]})


def _agent_run(tracer: Tracer) -> None:
    """An agent that repeats one search until it breaks: enriched tool spans and run span."""
    agent = Agent(tracer, GENAI)
    with agent.run():
        for _ in range(6):
            agent.round(LOOP)


def _trace_run(tracer: Tracer) -> None:
    """Tool calls under a plain root with attributes of its own: the root is the run span."""
    attributes: dict[str, AttributeValue] = {
        "http.request.method": "POST",
        "url.path": "/ask",
        "server.port": 8080,
    }
    with tracer.start_as_current_span("POST /ask", attributes=attributes):
        for _ in range(4):
            Agent(tracer, GENAI).tool(LOOP)


def _exported(
    work: Callable[[Tracer], None], limits: SpanLimits, redact: bool
) -> list[tuple[ReadableSpan, ReadableSpan]]:
    """Each span as a limited processor exports it, beside an unlimited one's copy.

    Both processors see the very same SDK spans (one provider, made under ``limits``),
    so they detect alike and differ only in how their copies are bounded.
    """
    provider = TracerProvider(span_limits=limits)
    settings = ProcessorSettings(live_events=False, redact=redact)
    exporters = InMemorySpanExporter(), InMemorySpanExporter()
    for exporter, own in zip(exporters, (limits, UNLIMITED), strict=True):
        provider.add_span_processor(
            StallSpanProcessor(SimpleSpanProcessor(exporter), settings=settings, span_limits=own)
        )
    work(provider.get_tracer("agent-test"))
    limited, reference = (e.get_finished_spans() for e in exporters)
    assert [s.context for s in limited] == [s.context for s in reference]
    return list(zip(limited, reference, strict=True))


@pytest.mark.parametrize("redact", [False, True], ids=["raw", "redacted"])
@pytest.mark.parametrize("length", [None, 14], ids=["any length", "length 14"])
@pytest.mark.parametrize("count", [None, 5, 9, 12], ids=lambda c: f"count {c or 'default'}")
@pytest.mark.parametrize("work", [_agent_run, _trace_run], ids=["agent run", "trace run"])
def test_copies_are_bounded_as_the_sdk_bounds_attributes_set_on_a_span(
    work: Callable[[Tracer], None], count: int | None, length: int | None, redact: bool
) -> None:
    """A copy holds what the SDK's bounded attributes would: the newest, cut, the rest counted."""
    limits = SpanLimits(max_span_attributes=count, max_span_attribute_length=length)
    pairs = _exported(work, limits, redact)
    bounded_any = False
    for limited, reference in pairs:
        expected = BoundedAttributes(
            limits.max_span_attributes, reference.attributes, max_value_len=length
        )
        assert dict(limited.attributes or {}) == dict(expected), limited.name
        assert limited.dropped_attributes == reference.dropped_attributes + expected.dropped
        bounded_any |= expected.dropped > 0
    enriched = [r for _, r in pairs if any(k.startswith("stall.") for k in r.attributes or {})]
    assert enriched, "nothing was enriched: the test would prove nothing"
    widest, cap = max(len(r.attributes or {}) for r in enriched), limits.max_span_attributes
    assert bounded_any == (cap is not None and widest > cap)


EventSummary = tuple[str, dict[str, AttributeValue], int]


def _run_span_events(live_events: bool, limits: SpanLimits) -> list[EventSummary]:
    """The run span's events, with their dropped counts, from one pipeline.

    Value limits stay above 12 characters, so ``execute_tool`` itself is not cut.
    """
    pipe = make_pipeline(settings=ProcessorSettings(live_events=live_events), span_limits=limits)
    _agent_run(pipe.tracer)
    run_span = pipe.one("invoke_agent researcher")
    found = [(e.name, dict(e.attributes or {}), e.dropped_attributes) for e in run_span.events]
    assert found, "no finding event: the test would prove nothing"
    return found


@pytest.mark.parametrize(
    "limits",
    [
        SpanLimits(max_event_attributes=3),
        SpanLimits(max_attribute_length=14),
        SpanLimits(max_event_attributes=5, max_attribute_length=20),
    ],
    ids=["count 3", "length 14", "count 5, length 20"],
)
def test_events_added_to_the_copy_are_bounded_as_live_ones(limits: SpanLimits) -> None:
    """Findings that go on the run span's copy obey the event limits that live events obey."""
    assert _run_span_events(False, limits) == _run_span_events(True, limits)


SCRIPT = textwrap.dedent(
    """
    import json
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from otel_stall import StallSpanProcessor

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(exporter)))
    tracer = provider.get_tracer("t")
    agent = {"gen_ai.operation.name": "invoke_agent"}
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.arguments": '{"q": 1}',
        "gen_ai.tool.call.result": "[1]",
    }
    with tracer.start_as_current_span("invoke_agent a", attributes=agent):
        for _ in range(3):
            with tracer.start_as_current_span("execute_tool search", attributes=tool):
                pass
    spans = exporter.get_finished_spans()
    print(json.dumps([[sorted(s.attributes), s.dropped_attributes] for s in spans]))
    """
)


def test_by_default_the_limits_are_the_sdks_from_the_environment() -> None:
    """With no span_limits given, OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT bounds the copies too."""
    done = run_python(["-c", SCRIPT], env={"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "4"})
    spans = json.loads(done.stdout)
    assert [len(keys) for keys, _ in spans] == [4, 4, 4, 4]  # three tool spans, the agent's
    tool_keys, tool_dropped = spans[2]
    assert tool_dropped > 0
    assert "stall.action" in tool_keys  # the newest stay
