"""The gate's own run state (no framework, no OpenTelemetry): a run is kept while it is used."""

from __future__ import annotations

import pytest

from otel_stall.integrations.gate import ToolGate

pytestmark = pytest.mark.integrations

ARGS = {"query": "x"}


def test_a_new_run_is_kept_on_a_machine_up_longer_than_the_idle_time() -> None:
    """A run just made is not idle: the repeat of its call is refused (idle time 1 s)."""
    gate = ToolGate(idle_seconds=1.0)  # the monotonic clock is past 1 s on any machine
    assert gate.before_model(run="r").action.value == "continue"
    assert not gate.before_tool("search", ARGS, run="r").refused
    gate.after_tool("search", ARGS, {"hits": 0}, run="r")
    assert gate.open_runs == 1
    gate.before_model(run="r")
    decision = gate.before_tool("search", ARGS, run="r")
    assert decision.refused
    assert decision.message is not None
    assert decision.message.startswith("Refused: `search` already ran")


def test_the_oldest_run_goes_past_the_count_bound() -> None:
    """``max_runs``: a third run drops the least recently used, whose state starts over."""
    gate = ToolGate(max_runs=2)
    for run in ("a", "b"):
        gate.after_tool("search", ARGS, {"hits": 0}, run=run)
    gate.before_tool("search", ARGS, run="a")  # "a" used last: "b" is the oldest
    gate.after_tool("search", ARGS, {"hits": 0}, run="c")
    assert gate.open_runs == 2
    assert gate.before_tool("search", ARGS, run="a").refused
    assert not gate.before_tool("search", ARGS, run="b").refused  # forgotten: a new run
