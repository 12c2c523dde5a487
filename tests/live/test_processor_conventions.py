"""The live processor on realistic agent traces in every supported convention."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from stall_pipeline import (
    STYLE_PARAMS,
    STYLES,
    Agent,
    Call,
    Style,
    events,
    make_pipeline,
    needs_map_attributes,
    stall,
    stall_values,
)

from otel_stall import Conventions, Role, SpanRecord, ToolCall, analyse_spans
from otel_stall.core.records import RunKey
from otel_stall.live.enriched import span_record
from otel_stall.semconv import StallAttributes as S

SEARCH = Call("search", {"query": "quarterly report", "limit": 5}, {"hits": ["doc-1", "doc-2"]})
# Why these actions: seq 2 re-runs an executed call (duplicate_call: refuse); the third
# identical call in a row warns (warn_at=3), the fifth breaks (break_at=5); warn outranks
# refuse, and from warn_at on a repeat stays at least warn.
LOOP_ACTIONS = ["continue", "refuse", "warn", "warn", "break"]
LOOP_FINDINGS = [
    ("duplicate_call", "refuse", 2),
    ("repeat", "warn", 3),
    ("duplicate_call", "refuse", 3),
    ("duplicate_call", "refuse", 4),
    ("repeat", "break", 5),
    ("duplicate_call", "refuse", 5),
]
# One event per escalation: the refusals show on their tool spans and in stall.refusals.
LOOP_EVENTS = [f for f in LOOP_FINDINGS if f[1] != "refuse"]


def _tool_spans(style: Style, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    name = style.tool("search", {}, {})[0]
    return [s for s in spans if s.name == name]


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_loop_enriches_tool_spans(style: Style) -> None:
    """Five identical rounds: each tool span carries the ledger row as stall.* attributes."""
    pipe = make_pipeline(conventions=style.conventions)
    agent = Agent(pipe.tracer, style)
    with agent.run():
        for _ in range(5):
            agent.round(SEARCH)
    tools = _tool_spans(style, list(pipe.spans()))
    assert len(tools) == 5
    rows = [stall_values(s) for s in tools]
    assert [r[S.SEQ] for r in rows] == [1, 2, 3, 4, 5]
    assert [r[S.ROUND] for r in rows] == [1, 2, 3, 4, 5]
    assert [r[S.REPEAT_COUNT] for r in rows] == [1, 2, 3, 4, 5]
    assert [r[S.REPEAT_CONSECUTIVE] for r in rows] == [1, 2, 3, 4, 5]
    assert [r.get(S.REPEAT_OF) for r in rows] == [None, 1, 1, 1, 1]
    assert [r[S.NEW_FACT] for r in rows] == [True, False, False, False, False]
    assert [r[S.ACTION] for r in rows] == LOOP_ACTIONS
    exported = [stall(s) for s in tools]
    # A first call that brought something new carries no attribute at its default...
    assert set(exported[0]) == {
        S.SEQ,
        S.ROUND,
        S.SIGNATURE,
        S.CALL_SIGNATURE,
        S.RESULT_DIGEST,
        S.ACTION,  # always: span metrics group by it
    }
    # ...and a repeat carries every one.
    assert set(exported[1]) == set(exported[0]) | {
        S.REPEAT_COUNT,
        S.REPEAT_OF,
        S.REPEAT_CONSECUTIVE,
        S.NEW_FACT,
    }
    assert len({r[S.SIGNATURE] for r in rows}) == 1
    assert len({r[S.CALL_SIGNATURE] for r in rows}) == 1
    assert len({r[S.RESULT_DIGEST] for r in rows}) == 1
    first = rows[0]
    assert set(first) == {
        S.SEQ,
        S.ROUND,
        S.REPEAT_COUNT,
        S.REPEAT_CONSECUTIVE,
        S.SIGNATURE,
        S.CALL_SIGNATURE,
        S.RESULT_DIGEST,
        S.NEW_FACT,
        S.ACTION,
    }
    for key in (S.SIGNATURE, S.CALL_SIGNATURE, S.RESULT_DIGEST):
        assert isinstance(first[key], str)
        assert len(first[key]) == 16  # xxh3-64 hex
    assert first[S.NEW_FACT] is True


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_loop_marks_the_run_span(style: Style) -> None:
    """The agent span gets verdict, detected, score, counts, refusals, one event per escalation."""
    pipe = make_pipeline(conventions=style.conventions)
    agent = Agent(pipe.tracer, style)
    with agent.run():
        for _ in range(5):
            agent.round(SEARCH)
    run_span = pipe.one(style.agent("researcher")[0])
    attrs = stall(run_span)
    assert attrs[S.WASTED_SECONDS] > 0
    assert {k: v for k, v in attrs.items() if k != S.WASTED_SECONDS} == {
        S.VERDICT: "break",
        S.DETECTED: True,
        S.SCORE: 0.95,
        S.TOOL_CALLS: 5,
        S.ROUNDS: 5,
        S.REFUSALS: 4,
        S.WASTED_CALLS: 4,  # from the first repeat (call 2) to call 5
        S.WASTED_MODEL_CALLS: 3,  # the model calls of rounds 3 to 5
    }
    assert attrs[S.DETECTED] is True
    assert isinstance(attrs[S.SCORE], float)
    got = [(e["stall.kind"], e["stall.action"], e["stall.seq"]) for e in events(run_span)]
    assert got == LOOP_EVENTS
    tool_span = _tool_spans(style, list(pipe.spans()))[4]
    last = events(run_span)[-1]
    assert last["gen_ai.tool.name"] == "search"
    assert last["stall.signature"] == stall(tool_span)[S.SIGNATURE]
    assert last["stall.count"] == 5
    assert last["stall.first_seq"] == 1
    assert "loop is stopped" in last["stall.message"]
    assert [f.kind.value for f in pipe.findings] == [k for k, _, _ in LOOP_FINDINGS]


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_progress_run_is_ok(style: Style) -> None:
    """Different queries with different results: all continue, verdict ok, nothing but counts."""
    pipe = make_pipeline(conventions=style.conventions)
    agent = Agent(pipe.tracer, style)
    with agent.run():
        for i in range(6):
            agent.round(Call("search", {"query": f"q{i}"}, {"hits": [f"doc-{i}"]}))
    rows = [stall_values(s) for s in _tool_spans(style, list(pipe.spans()))]
    assert [r[S.ACTION] for r in rows] == ["continue"] * 6
    assert all(r[S.NEW_FACT] is True for r in rows)
    assert all(S.REPEAT_OF not in r for r in rows)
    run_span = pipe.one(style.agent("researcher")[0])
    run_attrs = stall_values(run_span)
    assert run_attrs[S.VERDICT] == "ok"
    assert run_attrs[S.DETECTED] is False
    assert run_attrs[S.SCORE] == 0.0
    assert run_attrs[S.REFUSALS] == 0
    assert (run_attrs[S.TOOL_CALLS], run_attrs[S.ROUNDS]) == (6, 6)
    assert set(stall(run_span)) == {S.VERDICT, S.TOOL_CALLS, S.ROUNDS}  # the rest at default
    assert events(pipe.one(style.agent("researcher")[0])) == []


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_metrics_count_calls_findings_and_runs(style: Style) -> None:
    """Counters stall.tool_calls, stall.findings and stall.runs with their attributes."""
    pipe = make_pipeline(conventions=style.conventions)
    agent = Agent(pipe.tracer, style)
    with agent.run():
        for _ in range(5):
            agent.round(SEARCH)
    metrics = pipe.metrics()

    def point(name: str, **attrs: object) -> float:
        return metrics[(name, frozenset(attrs.items()))]

    tool = "gen_ai.tool.name"
    calls = "stall.tool_calls"
    assert point(calls, **{tool: "search", "stall.repeat": False, "stall.new_fact": True}) == 1
    assert point(calls, **{tool: "search", "stall.repeat": True, "stall.new_fact": False}) == 4
    findings = "stall.findings"
    assert (
        point(
            findings, **{"stall.kind": "duplicate_call", "stall.action": "refuse", tool: "search"}
        )
        == 4
    )
    assert point(findings, **{"stall.kind": "repeat", "stall.action": "warn", tool: "search"}) == 1
    assert point(findings, **{"stall.kind": "repeat", "stall.action": "break", tool: "search"}) == 1
    assert point("stall.runs", **{"stall.verdict": "break"}) == 1
    assert pipe.metric_total("stall.runs") == 1


@needs_map_attributes
def test_structured_and_json_arguments_sign_alike() -> None:
    """GenAI arguments as a JSON string or a structured map (any key order) hash the same."""
    by_style: dict[str, set[object]] = {}
    for style, args in (
        (STYLES[0], '{"limit": 5, "filters": {"lang": ["en", "fr"]}, "query": "q"}'),
        (STYLES[1], {"query": "q", "filters": {"lang": ["en", "fr"]}, "limit": 5}),
        (STYLES[1], {"limit": 5, "query": "q", "filters": {"lang": ["en", "fr"]}}),
    ):
        pipe = make_pipeline()
        agent = Agent(pipe.tracer, style)
        with agent.run():
            agent.round(Call("search", args, [{"id": 1, "title": "a"}]))
        (span,) = _tool_spans(style, list(pipe.spans()))
        by_style.setdefault("call", set()).add(stall(span)[S.CALL_SIGNATURE])
        by_style.setdefault("full", set()).add(stall(span)[S.SIGNATURE])
    assert len(by_style["call"]) == 1
    assert len(by_style["full"]) == 1


def test_truncated_openllmetry_input_is_hashed_as_text() -> None:
    """Cut (invalid JSON) entity inputs still compare: same cut text same call, other text not."""
    style = next(s for s in STYLES if s.name == "openllmetry")
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, style)
    with agent.run():
        agent.round(Call("search", {"query": "a"}, {"hits": [1]}))
        agent.round(Call("search", {"query": "a"}, {"hits": [1]}))
        agent.round(Call("search", {"query": "b"}, {"hits": [1]}))
    spans = _tool_spans(style, list(pipe.spans()))
    texts = [(s.attributes or {})["traceloop.entity.input"] for s in spans]
    assert texts[0] != texts[2]
    sigs = [stall(s)[S.CALL_SIGNATURE] for s in spans]
    assert sigs[0] == sigs[1] != sigs[2]
    assert stall(spans[1])[S.ACTION] == "refuse"


def test_absent_result_has_no_digest() -> None:
    """A tool span without a captured result gets no stall.result.digest and counts as new."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span(
        "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for _ in range(2):
            with pipe.tracer.start_as_current_span(
                "execute_tool fetch",
                attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch"},
            ):
                pass
    rows = [stall_values(s) for s in pipe.named("execute_tool fetch")]
    assert all(S.RESULT_DIGEST not in r for r in rows)
    assert [r[S.NEW_FACT] for r in rows] == [True, True]
    assert [r[S.SEQ] for r in rows] == [1, 2]


class _ToolsAreExempt(Conventions):
    """A subclass with its own tool_call: every call is exempt (polling tools, say)."""

    def tool_call(self, span: SpanRecord, run_key: RunKey = None) -> ToolCall:
        return replace(super().tool_call(span, run_key), exempt=True)


@pytest.mark.parametrize("conventions", [Conventions(), _ToolsAreExempt()], ids=["base", "own"])
def test_a_conventions_subclass_makes_its_own_tool_calls(conventions: Conventions) -> None:
    """A Conventions subclass that overrides tool_call() is used live, not bypassed."""
    pipe = make_pipeline(conventions=conventions)
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        for _ in range(5):
            agent.round(Call("poll", {"job": 1}, {"state": "running"}))
    exempt = isinstance(conventions, _ToolsAreExempt)
    assert (pipe.findings == []) is exempt


class _NamedTools(Conventions):
    """Classifies by an attribute no built-in convention reads: a subclass's own rule."""

    def role(self, attributes: Any) -> Role:
        return (
            Role.TOOL if attributes and attributes.get("kind") == "t" else super().role(attributes)
        )


@pytest.mark.parametrize("conventions", [Conventions(), _NamedTools()], ids=["base", "own-role"])
def test_a_conventions_subclass_classifies_every_live_span(conventions: Conventions) -> None:
    """A subclass that overrides role() is asked about every span live, as replay asks it."""
    pipe = make_pipeline(conventions=conventions)
    with pipe.tracer.start_as_current_span("crawl"):
        for _ in range(5):
            attributes = {"kind": "t", "input.value": '{"url": "x"}'}
            with pipe.tracer.start_as_current_span("fetch page", attributes=attributes):
                pass
    live = [stall_values(s).get(S.ACTION) for s in pipe.named("fetch page")]
    records = [span_record(s) for s in pipe.spans()]
    (replayed,) = analyse_spans(records, conventions=conventions).values()
    ledger: list[str | None] = [
        row.action.value for report in replayed.reports for row in report.ledger
    ]
    assert live == (ledger or [None] * 5)
    assert (ledger == []) is (type(conventions) is Conventions)
