"""Session runs: an instrumentation with no span spanning a run names its session instead.

gemini-cli makes every model call and every tool round a trace of its own, tied
only by ``gen_ai.conversation.id`` (its spans say ``gen_ai.agent.name =
gemini-cli``). Its calls outside every agent span are one run per session, in
replay and live alike; live, such a run ends idle, by a bound, at shutdown or by
``end_session``, since no span's end can close it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Tracer
from stall_pipeline import make_pipeline, stall

from otel_stall import Conventions, analyse_spans
from otel_stall.conventions.user import load_conventions
from otel_stall.live.processor import span_record
from otel_stall.semconv import StallAttributes as S

GEMINI = {"gen_ai.agent.name": "gemini-cli"}


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _session_round(
    tracer: Tracer, session: str, query: str, marks: dict[str, str] | None = None
) -> None:
    """One model call and one tool round, each its own trace, as gemini-cli emits them."""
    common = {**(GEMINI if marks is None else marks), "gen_ai.conversation.id": session}
    model = {**common, "gen_ai.operation.name": "llm_call", "gen_ai.request.model": "m"}
    with tracer.start_as_current_span("llm_call", attributes=model):
        pass
    tool = {
        **common,
        "gen_ai.operation.name": "tool_call",
        "gen_ai.tool.name": "read_file",
        "gen_ai.tool.call.arguments": f'{{"file_path": "{query}"}}',
        "gen_ai.tool.call.result": f"contents of {query}",
    }
    with (
        tracer.start_as_current_span("schedule_tool_calls", attributes=common),
        tracer.start_as_current_span("tool_call", attributes=tool),
    ):
        pass


def _agent_round(tracer: Tracer, session: str, query: str) -> None:
    """A run of its own (an ``invoke_agent`` span) in a trace that also names a session."""
    agent = {**GEMINI, "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": session}
    with tracer.start_as_current_span("invoke_agent helper", attributes=agent):
        _session_round(tracer, session, query)


def _other_round(tracer: Tracer, session: str, query: str) -> None:
    """The same spans from another framework: the conversation id is not gemini-cli's."""
    _session_round(tracer, session, query, {"gen_ai.agent.name": "other"})


def test_live_session_is_one_run_across_traces() -> None:
    """Five rounds in ten traces are one run: the repeats fire, and end_session reports it."""
    pipe = make_pipeline()
    for _ in range(5):
        _session_round(pipe.tracer, "s-1", "paris.txt")
    assert len({s.context.trace_id for s in pipe.spans() if s.context}) == 10
    assert [stall(s)[S.SEQ] for s in pipe.named("tool_call")] == [1, 2, 3, 4, 5]
    assert {f.kind.value for f in pipe.findings} >= {"repeat"}
    report = pipe.processor.end_session("s-1")
    assert report is not None
    assert (report.verdict.value, report.tool_calls, report.rounds) == ("break", 5, 5)
    assert report.attributes["session"] == "s-1"
    assert all(stall(s) == {} for s in pipe.named("schedule_tool_calls"))
    assert pipe.processor.end_session("s-1") is None
    assert pipe.processor.stats().active_runs == 0


def test_replay_joins_a_session_as_live_does() -> None:
    """Replay finds the session's one run and gives its tool spans the live attributes."""
    pipe = make_pipeline()
    for query in ("a", "b", "b", "b"):
        _session_round(pipe.tracer, "s-2", query)
    spans = pipe.spans()
    results = analyse_spans(span_record(s) for s in spans)
    reports = [r for result in results.values() for r in result.reports]
    assert [(r.tool_calls, r.rounds, r.attributes["session"]) for r in reports] == [(4, 4, "s-2")]
    for span in pipe.named("tool_call"):
        assert span.context is not None
        trace = results[format(span.context.trace_id, "032x")]
        assert trace.attributes[format(span.context.span_id, "016x")] == stall(span)


def _runs(spans: tuple[ReadableSpan, ...]) -> list[tuple[int, Any]]:
    """Each replayed run's tool calls and session, sorted."""
    results = analyse_spans(span_record(s) for s in spans)
    reports = [r for t in results.values() for r in t.reports]
    return sorted(((r.tool_calls, r.attributes.get("session")) for r in reports), key=str)


@pytest.mark.parametrize(
    ("round_", "runs"),
    [
        (_session_round, [(2, "s-3")]),
        (_agent_round, [(1, None), (1, None)]),
        (_other_round, [(0, None), (0, None), (1, None), (1, None)]),
    ],
    ids=["gemini-cli", "inside-an-agent-span", "another-framework"],
)
def test_only_calls_outside_agents_of_a_marked_instrumentation_join(
    round_: Any, runs: list[tuple[int, Any]]
) -> None:
    """A conversation id joins calls only outside agent spans, on the convention's own spans."""
    pipe = make_pipeline()
    for query in ("a", "b"):
        round_(pipe.tracer, "s-3", query)
    assert _runs(pipe.spans()) == runs


def test_idle_session_run_ends_by_the_ttl() -> None:
    """No span ends a session run: idle past the run TTL, it is finished and counted."""
    clock = Clock()
    pipe = make_pipeline(run_ttl=10.0, clock=clock)
    for _ in range(2):
        _session_round(pipe.tracer, "s-4", "x")
    clock.now += 11
    assert pipe.processor.evict_expired() == 1
    assert pipe.metric_total("stall.runs") == 1
    assert pipe.processor.end_session("s-4") is None


def test_session_runs_are_bounded_by_max_runs() -> None:
    """Open session runs count against max_runs: the least recently used one is finished."""
    pipe = make_pipeline(max_runs=2)
    for session in ("s-5", "s-6", "s-7"):
        _session_round(pipe.tracer, session, "x")
    stats = pipe.processor.stats()
    assert (stats.active_runs, stats.evicted_runs) == (2, 1)
    assert pipe.processor.end_session("s-5") is None
    assert pipe.processor.end_session("s-7") is not None


def test_a_user_mapping_names_sessions(tmp_path: Path) -> None:
    """session_keys and session_marks in a mapping file make a library's sessions runs."""
    path = tmp_path / "acme.toml"
    path.write_text(
        "[[convention]]\n"
        'name = "acme"\n'
        'roles = { "acme.kind" = { step = "tool" } }\n'
        'session_keys = ["acme.session"]\n'
        'session_marks = [["acme.app", "chat"]]\n'
    )
    conventions = Conventions(mappings=load_conventions(path))
    assert conventions.session({"acme.app": "chat", "acme.session": "42"}) == "42"
    assert conventions.session({"acme.app": "cli", "acme.session": "42"}) is None
    assert conventions.session({"acme.session": "42"}) is None
