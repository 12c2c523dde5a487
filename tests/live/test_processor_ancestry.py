"""Ancestry tracking: only spans that matter are remembered; late spans do not reopen a trace."""

from __future__ import annotations

import json

import pytest
from opentelemetry import trace
from stall_pipeline import STYLES, Agent, Call, events, make_pipeline, stall

from otel_stall.semconv import StallAttributes as S

GENAI = STYLES[0]
SEARCH = Call("search", {"query": "x"}, {"hits": [1]})


def test_plain_trace_tracks_only_its_root() -> None:
    """A trace with no agent, tool or model span remembers its open root and nothing else."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span("GET /orders", attributes={"http.method": "GET"}):
        for i in range(5):
            with pipe.tracer.start_as_current_span("SELECT", attributes={"db.query.id": i}):
                assert pipe.processor.stats().tracked_spans == 1
    stats = pipe.processor.stats()
    assert (stats.tracked_spans, stats.active_runs) == (0, 0)
    assert len(pipe.spans()) == 6
    assert all(stall(s) == {} for s in pipe.spans())


def test_plain_spans_under_an_agent_are_tracked_until_they_end() -> None:
    """Spans between an agent and its tools are remembered, so the tools find their run."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    step, sub = pipe.tracer.start_as_current_span("step"), pipe.tracer.start_as_current_span("sub")
    with agent.run(), step, sub:
        assert pipe.processor.stats().tracked_spans == 4  # agent (also the root), step, sub
        for _ in range(3):
            agent.round(SEARCH)
    assert stall(pipe.one("invoke_agent researcher"))[S.TOOL_CALLS] == 3
    assert pipe.processor.stats().tracked_spans == 0


def test_trace_run_is_created_by_a_late_classified_tool() -> None:
    """A root-level span that becomes a tool only at its end still opens the trace run."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span("handle") as root:
        for _ in range(4):
            with pipe.tracer.start_as_current_span("tool") as span:
                span.set_attributes(GENAI.tool("search", {"q": 1}, {"r": 1})[1])
        assert pipe.processor.stats().active_runs == 1
        assert [e.name for e in root.events].count("stall.detected") >= 1  # type: ignore[attr-defined]
    assert stall(pipe.one("handle"))[S.TOOL_CALLS] == 4
    assert [stall(s)[S.SEQ] for s in pipe.named("tool")] == [1, 2, 3, 4]
    assert pipe.processor.stats().active_runs == 0


def test_tool_ending_after_its_trace_root_passes_through() -> None:
    """A tool span that ends after its trace's root is forwarded as is and opens no run."""
    pipe = make_pipeline()
    name, attrs = GENAI.tool("search", {"q": 1}, {"r": 1})
    with pipe.tracer.start_as_current_span("POST /chat"):
        late = pipe.tracer.start_span(name, attributes=attrs)
    late.end()
    exported = pipe.one(name)
    assert stall(exported) == {}
    assert json.loads(str(exported.attributes["gen_ai.tool.call.arguments"])) == {"q": 1}  # type: ignore[index]
    stats = pipe.processor.stats()
    assert (stats.active_runs, stats.tracked_spans) == (0, 0)
    assert events(pipe.one("POST /chat")) == []


@pytest.mark.parametrize("classified", ["at start", "at end"])
def test_a_tool_span_started_after_its_agent_ended_passes_through(classified: str) -> None:
    """Under a plain root, a tool span begun after its agent span ended opens no trace run."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    name, attrs = GENAI.tool(SEARCH.tool, SEARCH.args, SEARCH.result)
    with pipe.tracer.start_as_current_span("POST /ask"):
        with agent.run() as agent_span:
            agent.round(SEARCH)
        inside = trace.set_span_in_context(agent_span)  # a task that outlived the agent
        if classified == "at start":
            late = pipe.tracer.start_span(name, context=inside, attributes=attrs)
        else:  # the tool's attributes arrive just before it ends
            late = pipe.tracer.start_span(name, context=inside)
            late.set_attributes(attrs)
        late.end()
    assert [stall(s).get(S.SEQ) for s in pipe.named(name)] == [1, None]
    assert stall(pipe.one("POST /ask")) == {}  # no run of its own on the root
    stats = pipe.processor.stats()
    assert (stats.active_runs, stats.finished_runs) == (0, 1)
    assert pipe.metric_total("stall.runs") == 1
