"""The gate every framework adapter asks, on its own: no framework, no OpenTelemetry set up."""

from __future__ import annotations

import time

from otel_stall import Action, StallPolicy
from otel_stall.integrations import BREAK_MESSAGE, ToolGate


def loop(gate: ToolGate, run: str, turns: int = 8, tool: str = "search") -> list[Action]:
    """A model that asks for the same call every turn; the actions the gate answered, in order."""
    actions: list[Action] = []
    for _ in range(turns):
        turn = gate.before_model(run=run)
        if turn.stops:
            actions.append(turn.action)
            break
        decision = gate.before_tool(tool, {"q": "spans"}, run=run)
        actions.append(decision.action)
        if not decision.refused:
            gate.after_tool(tool, {"q": "spans"}, "3 hits", run=run)
    return actions


def test_the_second_identical_call_is_refused_and_the_run_stops_after_five_refused_rounds() -> None:
    """Call 1 runs, calls 2 to 6 are refused, then the next model turn is told to stop."""
    actions = loop(ToolGate(policy=StallPolicy()), "run-1")
    assert actions == [Action.CONTINUE] + [Action.REFUSE] * 5 + [Action.BREAK]


def test_a_stop_tells_the_model_to_answer() -> None:
    """The stop's message is the finding's guidance: the model is told what to do now."""
    gate = ToolGate(policy=StallPolicy())
    loop(gate, "run-1")
    stop = gate.before_model(run="run-1")
    assert stop.stops
    assert stop.message
    assert stop.message != BREAK_MESSAGE or stop.finding is None


def test_an_exempt_polling_tool_is_never_refused() -> None:
    """A tool the policy exempts repeats by design: every call runs."""
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"job_status"})))
    actions = loop(gate, "run-1", turns=6, tool="job_status")
    assert Action.REFUSE not in actions


def test_runs_are_apart() -> None:
    """A call that ran in one run is not refused in another."""
    gate = ToolGate(policy=StallPolicy())
    loop(gate, "run-1", turns=2)
    assert not gate.before_tool("search", {"q": "spans"}, run="run-2").refused


def test_a_new_run_is_kept_however_long_the_process_has_been_up() -> None:
    """Idle time counts from a run's last call, not from the clock's zero."""
    gate = ToolGate(policy=StallPolicy(), idle_seconds=1.0)
    assert loop(gate, "run-1", turns=2) == [Action.CONTINUE, Action.REFUSE]
    assert gate.open_runs == 1


def test_idle_runs_are_evicted_and_the_count_is_capped() -> None:
    """Own run state is bounded by count and by idle time; end_run frees a run at once."""
    gate = ToolGate(policy=StallPolicy(), max_runs=3, idle_seconds=0.2)
    for n in range(5):
        gate.after_tool("search", {"q": n}, "hit", run=f"run-{n}")
    assert gate.open_runs == 3
    gate.end_run("run-4")
    assert gate.open_runs == 2
    time.sleep(0.3)
    gate.after_tool("search", {"q": 0}, "hit", run="fresh")
    assert gate.open_runs == 1


def test_the_least_recently_used_run_goes_first_past_the_count_bound() -> None:
    """``max_runs``: a third run drops the run used longest ago, whose state starts over."""
    gate = ToolGate(policy=StallPolicy(), max_runs=2)
    args = {"query": "x"}
    for run in ("a", "b"):
        gate.after_tool("search", args, {"hits": 0}, run=run)
    gate.before_tool("search", args, run="a")  # "a" used last: "b" is the oldest
    gate.after_tool("search", args, {"hits": 0}, run="c")
    assert gate.open_runs == 2
    assert gate.before_tool("search", args, run="a").refused
    assert not gate.before_tool("search", args, run="b").refused  # forgotten: a new run
