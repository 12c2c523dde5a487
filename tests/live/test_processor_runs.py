"""Run resolution and rounds: sub-agents, trace-as-run, nested tools, live vs batch."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from stall_pipeline import STYLES, Agent, Call, events, make_pipeline, stall

from otel_stall import ProcessorSettings, SpanRecord, analyse_spans
from otel_stall.live.processor import span_record
from otel_stall.semconv import StallAttributes as S

GENAI = STYLES[0]
SEARCH = Call("search", {"query": "x"}, {"hits": [1]})


def test_sub_agent_is_its_own_run() -> None:
    """Tools under a nested invoke_agent are the sub-agent's run; its stall warns the parent."""
    pipe = make_pipeline()
    outer = Agent(pipe.tracer, GENAI, "planner")
    inner = Agent(pipe.tracer, GENAI, "researcher")
    with outer.run():
        outer.model()
        name, attrs = GENAI.tool("delegate", {"to": "researcher"}, {"ok": True})
        with pipe.tracer.start_as_current_span(name, attributes=attrs), inner.run():
            for _ in range(3):
                inner.round(SEARCH)
        outer.model()
    sub = stall(pipe.one("invoke_agent researcher"))
    top = stall(pipe.one("invoke_agent planner"))
    assert (sub[S.TOOL_CALLS], sub[S.ROUNDS], sub[S.VERDICT]) == (3, 3, "warn")
    assert (top[S.TOOL_CALLS], top[S.ROUNDS], top[S.VERDICT]) == (1, 2, "warn")
    assert stall(pipe.one("execute_tool delegate"))[S.SEQ] == 1
    assert [stall(s)[S.SEQ] for s in pipe.named("execute_tool search")] == [1, 2, 3]
    (delegated,) = events(pipe.one("invoke_agent planner"))
    assert (delegated["stall.kind"], delegated["gen_ai.tool.name"]) == (
        "delegate_stalled",
        "researcher",
    )
    assert pipe.metrics()[("stall.runs", frozenset({("stall.verdict", "warn")}))] == 2


def test_trace_without_agent_is_the_run_on_its_root() -> None:
    """No agent span: the trace is the run and the root span gets the run attributes."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with pipe.tracer.start_as_current_span("POST /chat", attributes={"http.method": "POST"}):
        for _ in range(5):
            agent.round(SEARCH)
    root = pipe.one("POST /chat")
    attributes = stall(root)
    assert attributes.pop(S.WASTED_SECONDS) > 0
    assert attributes == {
        S.VERDICT: "break",
        S.DETECTED: True,
        S.SCORE: 0.95,
        S.TOOL_CALLS: 5,
        S.ROUNDS: 5,
        S.REFUSALS: 4,  # duplicate_call at calls 2 to 5: no event each, counted here
        S.WASTED_CALLS: 4,  # tool calls 2 to 5: the stall began at the first repeat
        S.WASTED_MODEL_CALLS: 3,  # the model calls of rounds 3 to 5, after it
    }
    assert [e["stall.kind"] for e in events(root)].count("repeat") == 2
    assert root.attributes["http.method"] == "POST"  # type: ignore[index]


def test_tool_nested_in_tool_counts_once() -> None:
    """An MCP client span inside execute_tool is the same call: only the outer one counts."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        for _ in range(2):
            agent.model()
            name, attrs = GENAI.tool("search", {"q": 1}, {"r": 2})
            inner = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "search"}
            with (
                pipe.tracer.start_as_current_span(name, attributes=attrs),
                pipe.tracer.start_as_current_span("tools/call search", attributes=inner),
            ):
                pass
    assert all(stall(s) == {} for s in pipe.named("tools/call search"))
    assert [stall(s)[S.SEQ] for s in pipe.named("execute_tool search")] == [1, 2]
    assert stall(pipe.one("invoke_agent researcher"))[S.TOOL_CALLS] == 2


def test_events_are_added_while_the_run_span_is_open() -> None:
    """An escalation appears as a stall.detected event on the live agent span before it ends."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run() as span:
        agent.round(SEARCH)
        assert [e.name for e in span.events] == []  # type: ignore[attr-defined]
        agent.round(SEARCH)  # refused (duplicate_call): a refusal gets no event
        assert [f.kind.value for f in pipe.findings] == ["duplicate_call"]
        assert [e.name for e in span.events] == []  # type: ignore[attr-defined]
        agent.round(SEARCH)
        live = [dict(e.attributes or {}) for e in span.events]  # type: ignore[attr-defined]
        assert [(e["stall.kind"], e["stall.seq"]) for e in live] == [("repeat", 3)]
    exported = events(pipe.one("invoke_agent researcher"))
    assert exported == live  # not duplicated on the copy


def test_findings_at_run_end_go_on_the_copy() -> None:
    """no_new_facts closing with the last round fires at run end, as an event on the copy."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run() as span:
        for i in range(6):
            agent.round(Call("search", {"query": f"q{i}"}, {"hits": ["same"]}))
        assert [e.name for e in span.events] == []  # type: ignore[attr-defined]
    run_span = pipe.one("invoke_agent researcher")
    (event,) = [e for e in run_span.events if e.name == "stall.detected"]
    assert event.timestamp == run_span.end_time
    attrs = dict(event.attributes or {})
    assert (attrs["stall.kind"], attrs["stall.action"]) == ("no_new_facts", "break")
    assert (attrs["stall.count"], attrs["stall.first_seq"], attrs["stall.seq"]) == (5, 2, 6)
    assert stall(run_span)[S.VERDICT] == "break"
    assert [f.kind.value for f in pipe.findings] == ["no_new_facts"]


def test_tool_calls_without_model_calls_are_rounds_each() -> None:
    """With no model spans every tool call is its own round."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        for i in range(3):
            agent.tool(Call("read", {"path": f"/f{i}"}, {"text": str(i)}))
    assert [stall(s)[S.ROUND] for s in pipe.named("execute_tool read")] == [1, 2, 3]
    assert stall(pipe.one("invoke_agent researcher"))[S.ROUNDS] == 3


def test_agent_without_tool_or_model_calls_is_left_alone() -> None:
    """An agent span with no calls under it is forwarded as is, like the batch analysis does."""
    pipe = make_pipeline()
    with Agent(pipe.tracer, GENAI).run():
        pass
    assert stall(pipe.one("invoke_agent researcher")) == {}
    assert pipe.metric_total("stall.runs") == 0


def test_live_events_off_puts_all_events_on_the_copy() -> None:
    """With live events off the exported run span carries the same events, added at its end."""
    results = []
    for live in (True, False):
        pipe = make_pipeline(settings=ProcessorSettings(live_events=live))
        agent = Agent(pipe.tracer, GENAI)
        with agent.run() as span:
            for _ in range(5):
                agent.round(SEARCH)
            live_count = len(span.events)  # type: ignore[attr-defined]
        assert live_count == (2 if live else 0)  # repeat warns, then breaks
        exported = pipe.one("invoke_agent researcher")
        results.append([(e.name, dict(e.attributes or {})) for e in exported.events])
    assert results[0] == results[1]
    assert len(results[0]) == 2


def _strip(span: ReadableSpan) -> SpanRecord:
    record = span_record(span)
    attrs = {k: v for k, v in record.attributes.items() if not k.startswith("stall.")}
    record.attributes = attrs
    return record


def test_live_results_equal_the_batch_analysis() -> None:
    """For a complete trace the processor attaches what the batch analysis computes afterwards."""
    pipe = make_pipeline()
    outer = Agent(pipe.tracer, GENAI, "planner")
    inner = Agent(pipe.tracer, GENAI, "researcher")
    with pipe.tracer.start_as_current_span("POST /chat"):
        outer.round(Call("plan", {"goal": "g"}, {"steps": 2}))
        with outer.run():
            for i in range(3):
                outer.round(SEARCH, Call("read", {"doc": i % 2}, {"text": "same"}))
            name, attrs = GENAI.tool("delegate", {"to": "r"}, {"ok": True})
            with pipe.tracer.start_as_current_span(name, attributes=attrs), inner.run():
                for i in range(7):
                    inner.round(Call("search", {"query": f"q{i}"}, {"hits": ["same"]}))
    spans = list(pipe.spans())
    trace_id = format(spans[0].context.trace_id, "032x")
    result = analyse_spans([_strip(s) for s in spans])[trace_id]
    for span in spans:
        span_id = format(span.context.span_id, "016x")
        assert stall(span) == result.attributes.get(span_id, {}), span.name
        want: list[tuple[Any, ...]] = [
            (e.name, e.time_ns, e.attributes) for e in result.events.get(span_id, [])
        ]
        got = [(e.name, e.timestamp, dict(e.attributes or {})) for e in span.events]
        assert got == want, span.name
    assert len(result.reports) == 3
