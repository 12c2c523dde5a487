"""What goes out: defaults omitted (and read back), one event per escalation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from stall_pipeline import STYLES, Agent, Call, events, make_pipeline, stall

from otel_stall.core.records import Action, Finding, Kind, LedgerRow, RunReport, Status, Verdict
from otel_stall.core.stall_attributes import (
    RUN_SPAN_DEFAULTS,
    TOOL_SPAN_DEFAULTS,
    escalations,
    is_escalation,
    run_span_attributes,
    tool_span_attributes,
    with_defaults,
)
from otel_stall.live.settings import ProcessorSettings
from otel_stall.semconv import StallAttributes as S

_HEX = st.text("0123456789abcdef", min_size=16, max_size=16)


@st.composite
def rows(draw: st.DrawFn) -> LedgerRow:
    """Any ledger row: a first call or a repeat, with or without a captured result."""
    seq = draw(st.integers(1, 10_000))
    repeat_of = draw(st.none() | st.integers(1, seq))
    return LedgerRow(
        seq=seq,
        tool=draw(st.sampled_from(["search", "fetch"])),
        signature=draw(_HEX),
        call_signature=draw(_HEX),
        result_digest=draw(st.none() | _HEX),
        repeat_of=repeat_of,
        count=1 if repeat_of is None else draw(st.integers(2, 50)),
        consecutive=draw(st.integers(1, 50)),
        new_fact=draw(st.booleans()),
        round=draw(st.integers(1, 10_000)),
        status=draw(st.sampled_from(list(Status))),
        action=draw(st.sampled_from(list(Action))),
    )


def _finding(action: Action, seq: int = 1) -> Finding:
    return Finding(Kind.REPEAT, action, "search", "0" * 16, 3, 1, seq, 1, "stop")


@st.composite
def reports(draw: st.DrawFn) -> RunReport:
    """Any run report, from a healthy run to one that stalled and was refused."""
    findings = tuple(_finding(a) for a in draw(st.lists(st.sampled_from(list(Action)))))
    stalled = draw(st.booleans())
    return RunReport(
        run_key=None,
        verdict=draw(st.sampled_from(list(Verdict))),
        stall_score=draw(st.sampled_from([0.0, 0.25, 0.95])),
        tool_calls=draw(st.integers(0, 100)),
        rounds=draw(st.integers(0, 100)),
        findings=findings,
        wasted_calls=draw(st.integers(0, 9)) if stalled else None,
        wasted_tokens=draw(st.none() | st.integers(0, 9)) if stalled else None,
        wasted_seconds=draw(st.floats(0, 9)) if stalled else None,
    )


def _every_tool_attribute(row: LedgerRow) -> dict[str, Any]:
    """What each field of a row means on the span, written out in full (the reference)."""
    full: dict[str, Any] = {
        S.SEQ: row.seq,
        S.ROUND: row.round,
        S.REPEAT_COUNT: row.count,
        S.REPEAT_CONSECUTIVE: row.consecutive,
        S.SIGNATURE: row.signature,
        S.CALL_SIGNATURE: row.call_signature,
        S.NEW_FACT: row.new_fact,
        S.ACTION: row.action.value,
    }
    if row.repeat_of is not None:
        full[S.REPEAT_OF] = row.repeat_of
    if row.result_digest is not None:
        full[S.RESULT_DIGEST] = row.result_digest
    return full


@given(rows())
def test_a_tool_span_omits_only_what_its_defaults_give_back(row: LedgerRow) -> None:
    """Absent means default: the defaults put back give every field; only defaults are left out."""
    exported = tool_span_attributes(row)
    full = _every_tool_attribute(row)
    assert with_defaults(exported) == full
    for key in full.keys() - exported.keys():
        assert TOOL_SPAN_DEFAULTS[key] == full[key]


@given(reports())
def test_a_run_span_omits_only_what_its_defaults_give_back(report: RunReport) -> None:
    """The run span's defaults put back give every field; refusals are counted, not evented."""
    exported = run_span_attributes(report)
    full = with_defaults(exported)
    assert full[S.VERDICT] == report.verdict.value
    assert full[S.DETECTED] is report.detected
    assert full[S.SCORE] == report.stall_score
    assert (full[S.TOOL_CALLS], full[S.ROUNDS]) == (report.tool_calls, report.rounds)
    refused = [f for f in report.findings if f.action is Action.REFUSE]
    assert full[S.REFUSALS] == len(refused)
    continued = [f for f in report.findings if f.action is Action.CONTINUE]
    assert len(escalations(report.findings)) + len(refused) + len(continued) == len(report.findings)
    assert (S.WASTED_CALLS in exported) is (report.wasted_calls is not None)
    for key in full.keys() - exported.keys():
        assert RUN_SPAN_DEFAULTS[key] == full[key]


@pytest.mark.parametrize("action", list(Action))
def test_only_a_warning_a_break_or_an_escalation_is_an_event(action: Action) -> None:
    """A refusal (or a continue) gets no stall.detected event; the rest each get one."""
    expected = action in (Action.WARN, Action.BREAK, Action.ESCALATE)
    assert is_escalation(_finding(action)) is expected
    assert escalations([_finding(action)]) == ([_finding(action)] if expected else [])


def _loop(settings: ProcessorSettings | None = None) -> tuple[list[ReadableSpan], ReadableSpan]:
    pipe = make_pipeline(settings=settings)
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        for _ in range(5):
            agent.round(Call("search", {"q": 1}, {"hits": [1]}))
    return pipe.named("execute_tool search"), pipe.one("invoke_agent researcher")


def test_full_attributes_writes_the_defaults_live() -> None:
    """full_attributes=True: every tool span carries every attribute, as the defaults say."""
    compact_tools, compact_run = _loop()
    full_tools, full_run = _loop(ProcessorSettings(full_attributes=True))
    assert S.REPEAT_COUNT not in stall(compact_tools[0])
    for compact, full in zip(compact_tools, full_tools, strict=True):
        assert stall(full) == with_defaults(stall(compact))
        assert TOOL_SPAN_DEFAULTS.keys() <= stall(full).keys()
    timed = S.WASTED_SECONDS  # wall time: differs between the two runs
    full_attrs, compact_attrs = stall(full_run), stall(compact_run)
    assert full_attrs.pop(timed) > 0
    assert compact_attrs.pop(timed) > 0
    assert full_attrs == with_defaults(compact_attrs)
    assert events(full_run) == events(compact_run)  # events do not change with it


def test_full_attributes_comes_from_the_environment() -> None:
    """OTEL_STALL_FULL_ATTRIBUTES is read as the other settings are; a bad value says how."""
    assert ProcessorSettings.from_env({"OTEL_STALL_FULL_ATTRIBUTES": "true"}).full_attributes
    assert not ProcessorSettings.from_env({}).full_attributes
    with pytest.raises(ValueError, match="OTEL_STALL_FULL_ATTRIBUTES"):
        ProcessorSettings.from_env({"OTEL_STALL_FULL_ATTRIBUTES": "maybe"})


def test_a_looping_run_has_an_event_per_escalation_and_counts_its_refusals() -> None:
    """Five identical calls: repeat warns, then breaks (2 events); 4 refusals, on spans, counted."""
    tools, run = _loop()
    assert [(e["stall.kind"], e["stall.action"]) for e in events(run)] == [
        ("repeat", "warn"),
        ("repeat", "break"),
    ]
    assert stall(run)[S.REFUSALS] == 4
    assert [stall(t)[S.ACTION] for t in tools] == ["continue", "refuse", "warn", "warn", "break"]
