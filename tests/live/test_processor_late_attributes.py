"""Spans whose attributes arrive after they start (Google ADK): live and batch agree."""

from __future__ import annotations

import pytest
from opentelemetry.trace import Tracer
from stall_pipeline import STYLES, make_pipeline, stall

from otel_stall import analyse_spans
from otel_stall.conventions import is_agent_span_name
from otel_stall.live.enriched import span_record

ADK = next(style for style in STYLES if style.name == "adk")


def _late(tracer: Tracer, name: str, attributes: dict[str, object]) -> None:
    """Start a span with no attributes and set them afterwards, as ADK does."""
    with tracer.start_as_current_span(name) as span:
        for key, value in attributes.items():
            span.set_attribute(key, value)  # type: ignore[arg-type]


def _adk_run(tracer: Tracer, agent: str, calls: int) -> None:
    name, attributes = ADK.agent(agent)
    with tracer.start_as_current_span(name) as span:
        span.set_attributes(attributes)
        for _ in range(calls):
            _late(tracer, *ADK.model())
            _late(tracer, *ADK.tool("lookup", {"id": 7}, {"rows": ["same"]}))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("invoke_agent", True),
        ("invoke_agent planner", True),
        ("invoke_agents", False),
        ("execute_tool invoke_agent", False),
        ("", False),
    ],
)
def test_agent_span_names(name: str, expected: bool) -> None:
    """Only ``invoke_agent`` and ``invoke_agent {name}`` name an agent span."""
    assert is_agent_span_name(name) is expected


def test_late_agent_attributes_still_make_a_run_live_and_in_replay() -> None:
    """Each ADK agent span is its own run live, with the same attributes a replay computes."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span("invocation"):
        _adk_run(pipe.tracer, "looper", calls=5)
        _adk_run(pipe.tracer, "helper", calls=1)
    pipe.provider.force_flush()
    exported = pipe.spans()

    looper, helper = pipe.one("invoke_agent looper"), pipe.one("invoke_agent helper")
    assert stall(looper)["stall.verdict"] == "break"
    assert stall(looper)["stall.tool_calls"] == 5
    assert stall(helper)["stall.verdict"] == "ok"
    assert stall(helper)["stall.tool_calls"] == 1
    assert "stall.verdict" not in stall(pipe.one("invocation"))

    replayed = analyse_spans(span_record(s) for s in exported)
    (result,) = replayed.values()
    for span in exported:
        context = span.context
        assert context is not None
        expected = result.attributes.get(format(context.span_id, "016x"), {})
        assert stall(span) == expected, span.name


OI_MODEL: dict[str, object] = {"openinference.span.kind": "LLM"}


def _oi_tool(tracer: Tracer, name: str, query: str) -> None:
    """An OpenInference tool span with its content from the start."""
    attributes = {
        "openinference.span.kind": "TOOL",
        "tool.name": name,
        "input.value": query,
        "output.value": f"result of {query}",
    }
    with tracer.start_as_current_span(name, attributes=attributes):
        pass


def test_late_model_role_makes_an_agent_used_as_a_tool_a_run() -> None:
    """A model span known as one only at its end still makes its tool span a run of its own."""
    pipe = make_pipeline()
    tool = {"openinference.span.kind": "TOOL", "tool.name": "research", "input.value": "q"}
    agent = {"openinference.span.kind": "AGENT"}
    with pipe.tracer.start_as_current_span("main", attributes=agent):
        _late(pipe.tracer, "ChatOpenAI", OI_MODEL)
        with (
            pipe.tracer.start_as_current_span("research", attributes=tool),
            pipe.tracer.start_as_current_span("LangGraph"),
        ):
            for _ in range(3):
                _late(pipe.tracer, "ChatOpenAI", OI_MODEL)
                _oi_tool(pipe.tracer, "fetch_page", "page 1")
        _late(pipe.tracer, "ChatOpenAI", OI_MODEL)
    exported = pipe.spans()
    research, main = stall(pipe.one("research")), stall(pipe.one("main"))
    assert (research["stall.tool_calls"], research["stall.rounds"]) == (3, 3)
    assert (main["stall.tool_calls"], main["stall.rounds"]) == (1, 2)
    replayed = analyse_spans(span_record(s) for s in exported)
    (result,) = replayed.values()
    for span in exported:
        assert span.context is not None
        expected = result.attributes.get(format(span.context.span_id, "016x"), {})
        assert stall(span) == expected, span.name
