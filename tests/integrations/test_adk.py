"""Google ADK with the gate: a real LlmAgent on InMemoryRunner, a scripted model, offline."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import integration_support
import pytest

integration_support.require("google.adk")

from adk_agent import LOOP, Call, Outcome, report_error, run_agent  # noqa: E402

from otel_stall.core.policy import DuplicateMode, StallPolicy  # noqa: E402
from otel_stall.integrations.adk import (  # noqa: E402
    ERROR_KEY,
    NOTE_KEY,
    StallPlugin,
    stall_callbacks,
)
from otel_stall.integrations.gate import BREAK_MESSAGE, ToolGate  # noqa: E402

pytestmark = pytest.mark.integrations

HERE = Path(__file__).parent


def refusals(outcome: Outcome) -> list[str]:
    """Every refusal the model read, as the error text of a function response."""
    last = outcome.turns[-1]
    return [r[ERROR_KEY] for r in last.responses() if ERROR_KEY in r]


def assert_loop_stopped(outcome: Outcome) -> None:
    """The loop's shape: one run, refusals read, then one turn without tools that answers."""
    assert outcome.runs["search"] == 1  # calls 2..6 never ran
    third = outcome.turns[2]
    assert third.tools  # the model still had tools when it read the refusal
    refused = [r for r in third.responses() if ERROR_KEY in r]
    assert len(refused) == 1
    assert refused[0][ERROR_KEY].startswith("Refused: `search` already ran")
    with_tools = [t for t in outcome.turns if t.tools]
    assert len(with_tools) == 6
    last = outcome.turns[-1]
    assert last.tools == []
    assert last.system.endswith(BREAK_MESSAGE)
    assert outcome.turns.index(last) == 6
    assert outcome.final.startswith("Final answer, from what I gathered:")
    assert "no results for otel" in outcome.final


def test_the_plugin_refuses_the_repeat_and_the_run_ends_with_an_answer() -> None:
    """6 identical calls: 2..6 refused (tool ran once), then a turn with no tools answers."""
    gate = ToolGate()
    outcome = asyncio.run(run_agent(LOOP, plugins=[StallPlugin(gate)]))
    assert_loop_stopped(outcome)
    assert len(refusals(outcome)) == 5
    assert gate.open_runs == 0  # the end of the invocation freed its state


def test_the_agent_callbacks_guard_the_same_loop() -> None:
    """``LlmAgent(..., **stall_callbacks())`` refuses and stops the loop as the plugin does."""
    gate = ToolGate()
    outcome = asyncio.run(run_agent(LOOP, callbacks=stall_callbacks(gate)))
    assert_loop_stopped(outcome)
    assert gate.open_runs == 1  # no end-of-run hook on an agent: the gate's bounds free it
    gate.end_run(outcome.invocation_id)
    assert gate.open_runs == 0


HEALTHY: list[Call] = [
    ("search", {"query": "otel"}),
    ("search", {"query": "opentelemetry spans"}),
    ("poll_status", {"job": "7"}),
]


def test_a_healthy_run_is_untouched() -> None:
    """Different calls: the model's every input is the same with and without the plugin."""
    bare = asyncio.run(run_agent(HEALTHY))
    guarded = asyncio.run(run_agent(HEALTHY, plugins=[StallPlugin(ToolGate())]))
    assert [t.tools for t in guarded.turns] == [t.tools for t in bare.turns]
    assert [t.system for t in guarded.turns] == [t.system for t in bare.turns]
    assert [t.contents for t in guarded.turns] == [t.contents for t in bare.turns]
    assert guarded.runs == bare.runs == {"search": 2, "poll_status": 1}
    assert guarded.final == bare.final


def test_an_exempt_polling_tool_is_never_refused() -> None:
    """``exempt_tools``: 6 identical polls all run, and the model reads no refusal."""
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"poll_status"})))
    polls: list[Call] = [("poll_status", {"job": "7"})] * 6
    outcome = asyncio.run(run_agent(polls, plugins=[StallPlugin(gate)]))
    assert outcome.runs["poll_status"] == 6
    assert refusals(outcome) == []
    assert all(t.tools for t in outcome.turns)


def test_a_warning_is_added_to_the_result_and_a_break_takes_the_tools() -> None:
    """Duplicates allowed: the 3rd same result carries the warning, the 5th ends the loop."""
    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    outcome = asyncio.run(run_agent(LOOP, plugins=[StallPlugin(gate)]))
    assert outcome.runs["search"] == 5
    notes = [r[NOTE_KEY] for r in outcome.turns[-1].responses() if NOTE_KEY in r]
    assert len(notes) == 1  # told once, not nagged
    assert "called 3 times in a row" in notes[0]
    assert outcome.turns[3].responses()[2][NOTE_KEY] == notes[0]  # on the 3rd call's result
    assert outcome.turns[-1].tools == []
    assert outcome.turns.index(outcome.turns[-1]) == 5
    assert outcome.final.startswith("Final answer")


def test_a_failing_call_is_recorded_once_and_its_loop_escalates() -> None:
    """A tool error reaches the gate once (not again as the recovered result): 3 escalate."""
    gate = ToolGate()
    failing: list[Call] = [("lookup", {"key": "k"})] * 6
    outcome = asyncio.run(
        run_agent(
            failing,
            plugins=[StallPlugin(gate)],
            callbacks={"on_tool_error_callback": report_error},
        )
    )
    assert outcome.runs["lookup"] == 3
    last = outcome.turns[-1]
    assert [r[ERROR_KEY] for r in last.responses()] == ["backend unavailable for k"] * 3
    assert last.tools == []
    assert "`lookup` failed 3 times in a row" in last.system
    assert outcome.turns.index(last) == 3
    assert outcome.final == "Final answer: I found nothing."


def test_the_processor_mode_marks_adk_tool_spans_refused() -> None:
    """With ``otel_stall.install()``, the gate asks the processor's run of ADK's own spans."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.getcwd()])}
    done = subprocess.run(
        [sys.executable, str(HERE / "adk_agent.py"), "9"],
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
    assert "no results for otel" in result["final"]
