"""Strands Agents with the gate: a real Agent on a scripted model, offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import integration_support
import pytest

integration_support.require("strands")

from strands_agent import LOOP, Call, Outcome, run_agent  # noqa: E402

from otel_stall.core.policy import DuplicateMode, StallPolicy  # noqa: E402
from otel_stall.integrations.gate import BREAK_MESSAGE, ToolGate  # noqa: E402
from otel_stall.integrations.strands import StallPlugin  # noqa: E402

pytestmark = pytest.mark.integrations

HERE = Path(__file__).parent


def refusals(outcome: Outcome) -> list[str]:
    """Every refusal the model read: the text of a tool result with status error."""
    last = outcome.turns[-1]
    return [text for r in last.results() if r["status"] == "error" for text in last.texts(r)]


def assert_loop_stopped(outcome: Outcome) -> None:
    """The loop's shape: one run, refusals read, then one turn without tools that answers."""
    assert outcome.runs["search"] == 1  # calls 2..6 never ran
    third = outcome.turns[2]
    assert third.tools  # the model still had tools when it read the refusal
    (refused,) = [r for r in third.results() if r["status"] == "error"]
    assert third.texts(refused)[0].startswith("Refused: `search` already ran")
    assert len([t for t in outcome.turns if t.tools]) == 6
    last = outcome.turns[-1]
    assert last.tools == []
    assert last.system.startswith("Answer the user's question.")
    assert last.system.endswith(BREAK_MESSAGE)
    assert outcome.turns.index(last) == 6
    assert outcome.stop_reason == "end_turn"
    assert outcome.final == "Final answer, from what I gathered: no results for otel"


def test_the_plugin_refuses_the_repeat_and_the_run_ends_with_an_answer() -> None:
    """6 identical calls: 2..6 cancelled (tool ran once), then a turn with no tools answers."""
    gate = ToolGate()
    outcome = run_agent(LOOP, plugins=[StallPlugin(gate)])
    assert_loop_stopped(outcome)
    assert len(refusals(outcome)) == 5
    assert gate.open_runs == 0  # the end of the invocation freed its state


def test_the_plugin_guards_an_async_invocation() -> None:
    """``invoke_async`` on the event loop: the same refusals and the same stop."""
    outcome = run_agent(LOOP, plugins=[StallPlugin(ToolGate())], agent_async=True)
    assert_loop_stopped(outcome)


HEALTHY: list[Call] = [
    ("search", {"query": "otel"}),
    ("search", {"query": "opentelemetry spans"}),
    ("poll_status", {"job": "7"}),
]


def test_a_healthy_run_is_untouched() -> None:
    """Different calls: the model's every input is the same with and without the plugin."""
    bare = run_agent(HEALTHY)
    guarded = run_agent(HEALTHY, plugins=[StallPlugin(ToolGate())])
    assert [t.tools for t in guarded.turns] == [t.tools for t in bare.turns]
    assert [t.system for t in guarded.turns] == [t.system for t in bare.turns]
    assert [t.messages for t in guarded.turns] == [t.messages for t in bare.turns]
    assert guarded.runs == bare.runs == {"search": 2, "poll_status": 1}
    assert guarded.final == bare.final


def test_an_exempt_polling_tool_is_never_refused() -> None:
    """``exempt_tools``: 6 identical polls all run, and the model reads no refusal."""
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"poll_status"})))
    polls: list[Call] = [("poll_status", {"job": "7"})] * 6
    outcome = run_agent(polls, plugins=[StallPlugin(gate)])
    assert outcome.runs["poll_status"] == 6
    assert refusals(outcome) == []
    assert all(t.tools for t in outcome.turns)


def test_a_warning_is_added_to_the_result_and_a_break_takes_the_tools() -> None:
    """Duplicates allowed: the 3rd same result carries the warning, the 5th ends the loop."""
    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    outcome = run_agent(LOOP, plugins=[StallPlugin(gate)])
    assert outcome.runs["search"] == 5
    last = outcome.turns[-1]
    noted = [last.texts(r) for r in last.results() if len(last.texts(r)) > 1]
    assert len(noted) == 1  # told once, not nagged
    assert noted[0][0] == "no results for otel"  # the result itself, then the note
    assert "called 3 times in a row" in noted[0][1]
    assert last.texts(outcome.turns[3].results()[2]) == noted[0]  # on the 3rd call's result
    assert last.tools == []
    assert outcome.turns.index(last) == 5
    assert outcome.final.startswith("Final answer")


def test_a_failing_call_is_recorded_as_failed_and_its_loop_escalates() -> None:
    """Strands turns a raised error into an error result: the gate sees 3 failures, escalates."""
    gate = ToolGate()
    failing: list[Call] = [("lookup", {"key": "k"})] * 6
    outcome = run_agent(failing, plugins=[StallPlugin(gate)])
    assert outcome.runs["lookup"] == 3
    last = outcome.turns[-1]
    assert [r["status"] for r in last.results()] == ["error"] * 3
    assert last.tools == []
    assert "`lookup` failed 3 times in a row" in last.system
    assert outcome.turns.index(last) == 3
    assert outcome.final == "Final answer: I found nothing."


def test_the_processor_mode_records_refused_tool_spans() -> None:
    """With ``otel_stall.install()``, the gate asks the processor's run of Strands' spans."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.getcwd()])}
    done = subprocess.run(
        [sys.executable, str(HERE / "strands_agent.py"), "9"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["runs"] == {"search": 1}
    assert result["own_runs"] == 0  # the gate kept no state of its own: the processor had the run
    spans = result["tool_spans"]
    assert spans[0]["action"] == "continue"
    assert [s["refused"] for s in spans[1:6]] == [True] * 5
    assert {s["action"] for s in spans[1:6]} == {"refuse"}
    tools = [bool(t["tools"]) for t in result["turns"]]
    assert tools[-1] is False
    assert tools.count(False) == 1
    assert result["turns"][-1]["system"].endswith(BREAK_MESSAGE)
    assert result["final"] == "Final answer, from what I gathered: no results for otel"
