"""The live gate: before_call, verdict and raise_if_stalled on the current span's run."""

from __future__ import annotations

import ast
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from stall_pipeline import STYLES, Agent, Call, make_pipeline

from otel_stall import Kind, Refusal, StallDetected, StallGuard, StallPolicy, Verdict
from otel_stall.live import guard as guard_module

GENAI = STYLES[0]
ARGS = {"query": "x"}
SEARCH = Call("search", ARGS, {"hits": [1]})


def test_before_call_refuses_a_call_that_already_ran() -> None:
    """Inside the agent span a call that already ran is refused, with guidance for the model."""
    pipe = make_pipeline()
    guard = pipe.processor.guard
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        assert guard.before_call("search", ARGS) is None
        agent.round(SEARCH)
        refusal = guard.before_call("search", {"query": "x"})
        assert isinstance(refusal, Refusal)
        assert refusal.finding.kind is Kind.DUPLICATE_CALL
        assert "already ran" in refusal.message
        assert str(refusal) == refusal.message
        assert guard.before_call("search", {"query": "y"}) is None
        assert guard.before_call("search", ARGS, exempt=True) is None
    assert pipe.processor.guard is guard


def test_before_call_works_inside_a_tool_span() -> None:
    """Called from within the execute_tool span, the guard finds the same run."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        name, attrs = GENAI.tool("search", ARGS, {})
        with pipe.tracer.start_as_current_span(name, attributes=attrs):
            assert pipe.processor.guard.before_call("search", ARGS) is not None


def test_no_current_span_or_no_state_allows_the_call() -> None:
    """Outside any span, or in a span with no run state, nothing is refused."""
    pipe = make_pipeline()
    guard = pipe.processor.guard
    assert guard.before_call("search", ARGS) is None
    assert guard.verdict() == (Verdict.OK, None)
    with pipe.tracer.start_as_current_span("unrelated"):
        assert guard.before_call("search", ARGS) is None
        assert guard.verdict().report is None


def test_consecutive_mode_refuses_only_the_third_in_a_row() -> None:
    """duplicate_mode=consecutive: the Nth back-to-back identical call is refused."""
    pipe = make_pipeline(policy=StallPolicy(duplicate_mode="consecutive"))  # type: ignore[arg-type]
    guard = pipe.processor.guard
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        assert guard.before_call("search", ARGS) is None
        agent.round(SEARCH)
        assert guard.before_call("search", ARGS) is not None
        agent.round(Call("other", {}, {"x": 1}))
        assert guard.before_call("search", ARGS) is None


def test_runs_are_separate_for_the_guard() -> None:
    """A sub-agent's guard sees only the sub-agent's calls."""
    pipe = make_pipeline()
    guard = pipe.processor.guard
    outer, inner = Agent(pipe.tracer, GENAI, "planner"), Agent(pipe.tracer, GENAI, "sub")
    with outer.run():
        outer.round(SEARCH)
        with inner.run():
            assert guard.before_call("search", ARGS) is None
            inner.round(SEARCH)
            assert guard.before_call("search", ARGS) is not None
        assert guard.verdict().report is not None
        assert guard.verdict().report.tool_calls == 1  # type: ignore[union-attr]


def test_verdict_and_raise_if_stalled() -> None:
    """The verdict rises with the run; raise_if_stalled raises StallDetected at break."""
    pipe = make_pipeline()
    guard = StallGuard(pipe.processor)
    agent = Agent(pipe.tracer, GENAI)
    seen = []
    with agent.run():
        for _ in range(5):
            guard.raise_if_stalled()
            agent.round(SEARCH)
            seen.append(guard.verdict().verdict)
        with pytest.raises(StallDetected) as caught:
            guard.raise_if_stalled()
        verdict, report = guard.verdict()
    assert seen == [Verdict.OK, Verdict.OK, Verdict.WARN, Verdict.WARN, Verdict.BREAK]
    assert verdict is Verdict.BREAK
    assert report is not None
    assert report.tool_calls == 5
    error = caught.value
    assert error.report.verdict is Verdict.BREAK
    assert error.finding is not None
    assert error.finding.kind is Kind.REPEAT
    assert str(error) == error.finding.message


def test_raise_if_stalled_threshold_is_configurable() -> None:
    """raise_if_stalled(at=WARN) stops at the first warning."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        pipe.processor.guard.raise_if_stalled(at=Verdict.WARN)
        agent.round(SEARCH)
        pipe.processor.guard.raise_if_stalled(at=Verdict.WARN)  # one repeat is not a stall
        agent.round(SEARCH)
        with pytest.raises(StallDetected):
            pipe.processor.guard.raise_if_stalled(at=Verdict.WARN)


def test_guard_for_trace_run() -> None:
    """With no agent span, the guard uses the trace's run."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    with pipe.tracer.start_as_current_span("POST /chat"):
        agent.round(SEARCH)
        assert pipe.processor.guard.before_call("search", ARGS) is not None
    assert trace.get_current_span() is trace.INVALID_SPAN


class InstrumentedArgs(Mapping[str, Any]):
    """Arguments whose own code makes a tool span when read, as instrumented user code may."""

    def __init__(self, data: dict[str, Any], when_read: Callable[[], None]) -> None:
        self._data = data
        self._when_read = when_read

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        self._when_read()
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def test_before_call_runs_the_callers_code_outside_the_run_lock() -> None:
    """Reading the caller's arguments may end a span of the same run: no deadlock, no lost span."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI)
    other = Call("lookup", {"id": 1}, {"ok": True})
    outcome: list[Refusal | None] = []

    def run() -> None:
        with agent.run():
            agent.round(SEARCH)
            args = InstrumentedArgs(dict(ARGS), lambda: agent.tool(other))
            outcome.append(pipe.processor.guard.before_call("search", args))

    # On a thread of its own, so a deadlock fails the test instead of hanging it.
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive(), "before_call deadlocked on the run's lock"
    assert isinstance(outcome[0], Refusal)
    assert [(s.attributes or {}).get("stall.seq") for s in pipe.named("execute_tool lookup")] == [2]


def test_the_guard_module_does_not_import_the_processor() -> None:
    """guard.py reads the run state through its narrow RunState interface, never the processor."""
    tree = ast.parse(Path(guard_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "otel_stall.live.run_table" in imported  # the check sees the module's imports
    assert "otel_stall.live.processor" not in imported


def test_gate_refuses_the_next_try_of_an_escalated_failure_loop() -> None:
    """After the same call failed the same way 3 times, the gate refuses a 4th try."""
    pipe = make_pipeline()
    guard = StallGuard(pipe.processor)
    agent = Agent(pipe.tracer, GENAI)
    deploy = Call("deploy", {"env": "prod"}, "connection refused", {"error.type": "ConnectError"})
    failing = Call(deploy.tool, deploy.args, deploy.result, deploy.attributes, error=True)
    with agent.run():
        for _ in range(2):
            agent.round(failing)
        assert guard.before_call("deploy", {"env": "prod"}) is None  # two failures: retry
        agent.round(failing)
        refusal = guard.before_call("deploy", {"env": "prod"})
        assert guard.before_call("deploy", {"env": "staging"}) is None
        verdict = guard.verdict().verdict
    assert refusal is not None
    assert refusal.finding.kind is Kind.FAILURE_LOOP
    assert "failed 3 times in a row" in refusal.message
    assert verdict is Verdict.ESCALATE


@pytest.mark.parametrize(
    ("calls", "kind"),
    [
        pytest.param(
            [Call("a", {"n": 1}, {"r": 1}), Call("b", {"n": 2}, {"r": 2})] * 5,
            Kind.CYCLE,
            id="cycle",
        ),
        pytest.param(
            [Call("run", {"c": 1}, f"line {n}", {"error.type": "E"}, error=True) for n in range(3)],
            Kind.FAILURE_LOOP,
            id="failure-loop",
        ),
    ],
)
def test_raise_if_stalled_names_each_new_kind(calls: list[Call], kind: Kind) -> None:
    """StallDetected carries the new rule's finding and its guidance for the model."""
    pipe = make_pipeline()
    guard = StallGuard(pipe.processor)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        for call in calls:
            agent.round(call)
        with pytest.raises(StallDetected) as caught:
            guard.raise_if_stalled(at=Verdict.WARN)
    assert caught.value.finding is not None
    assert caught.value.finding.kind is kind
    assert str(caught.value) == caught.value.finding.message
