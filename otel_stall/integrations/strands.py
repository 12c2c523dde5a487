"""Strands Agents: the live gate as an agent plugin (hooks and one model middleware).

One line on an existing agent::

    from otel_stall.integrations.strands import StallPlugin

    agent = Agent(model=model, tools=[...], plugins=[StallPlugin()])

What each action becomes in Strands' own terms:

- **refuse**: a ``BeforeToolCallEvent`` hook sets ``event.cancel_tool`` to the
  guidance; Strands does not run the tool and hands the model a tool result
  with ``status: "error"`` and the guidance as its text.
- **warn**: the call runs; the ``AfterToolCallEvent`` hook appends the guidance
  to the tool result's content, which the model reads with the result.
- **break** / **escalate**: an ``InvokeModelStage.Input`` middleware gives that
  model call no tool specs (and no tool choice) and appends the answer-now
  instruction to the system prompt, so the model writes its final answer from
  what it has; a call asked for anyway is refused the same way.

The run is one invocation of the agent (``agent(...)``, ``invoke_async``,
``stream_async``), from ``BeforeInvocationEvent`` to ``AfterInvocationEvent``;
a Strands agent runs one invocation at a time. Strands makes OTel spans itself,
so with ``otel_stall.install()`` on the global provider the gate asks the
processor's run of the current span instead; a refused call has no Strands
span (Strands records none for a cancelled call), so the gate records one,
marked ``stall.refused``.

This module imports Strands; nothing in the package imports this module.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable
from typing import Any, Final

from strands.agent import Agent
from strands.hooks import (
    AfterInvocationEvent,
    AfterToolCallEvent,
    BeforeInvocationEvent,
    BeforeToolCallEvent,
)
from strands.middleware import InvokeModelContext, InvokeModelStage
from strands.plugins import Plugin
from strands.types.content import SystemPrompt
from strands.types.tools import ToolResult

from otel_stall.integrations.gate import BREAK_MESSAGE, ToolGate, answer_now, default_gate


def with_instruction(system_prompt: SystemPrompt | None, instruction: str) -> SystemPrompt:
    """The system prompt with ``instruction`` after it (a string, or one more text block)."""
    if system_prompt is None:
        return instruction
    if isinstance(system_prompt, str):
        return f"{system_prompt}\n\n{instruction}" if system_prompt else instruction
    return [*system_prompt, {"text": instruction}]


def with_note(result: ToolResult, note: str) -> ToolResult:
    """The tool result with the guidance as one more text block."""
    noted: Any = dict(result)
    noted["content"] = [*result.get("content", []), {"text": note}]
    return noted  # type: ignore[no-any-return]


_COUNTER: Final = itertools.count(1)


class StallPlugin(Plugin):
    """The gate for one or more Strands agents: ``Agent(..., plugins=[StallPlugin()])``.

    ``gate`` defaults to the process's :func:`default_gate`. Every hook fails
    open: the gate never raises, and neither does the translation around it.
    """

    def __init__(self, gate: ToolGate | None = None) -> None:
        super().__init__()
        self.gate = gate if gate is not None else default_gate()
        self._runs: dict[int, Hashable] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The plugin's id in Strands' registry."""
        return "otel_stall"

    def init_agent(self, agent: Agent) -> None:
        """Register the hooks and the model middleware on ``agent``."""
        agent.add_hook(self.start_run, BeforeInvocationEvent)
        agent.add_hook(self.end_run, AfterInvocationEvent)
        agent.add_hook(self.before_tool, BeforeToolCallEvent)
        agent.add_hook(self.after_tool, AfterToolCallEvent)
        agent.add_middleware(InvokeModelStage.Input, self.before_model)

    # -- the run ----------------------------------------------------------------

    def run_of(self, agent: Any) -> Hashable:
        """The current invocation of ``agent`` (one made up if it started before the plugin)."""
        with self._lock:
            run = self._runs.get(id(agent))
            if run is None:
                run = self._runs[id(agent)] = ("strands", id(agent), next(_COUNTER))
            return run

    def start_run(self, event: BeforeInvocationEvent) -> None:
        """A new invocation: a new run."""
        with self._lock:
            self._runs[id(event.agent)] = ("strands", id(event.agent), next(_COUNTER))

    def end_run(self, event: AfterInvocationEvent) -> None:
        """The invocation ended: free its state."""
        with self._lock:
            run = self._runs.pop(id(event.agent), None)
        if run is not None:
            self.gate.end_run(run)

    # -- tools and model turns -----------------------------------------------------

    def before_tool(self, event: BeforeToolCallEvent) -> None:
        """Cancel a repeated call with the gate's guidance (Strands then hands it over)."""
        try:
            if event.cancel_tool:
                return  # another hook cancelled it already
            tool_use = event.tool_use
            decision = self.gate.before_tool(
                tool_use["name"], tool_use.get("input"), run=self.run_of(event.agent)
            )
            if decision.refused:
                event.cancel_tool = decision.message or BREAK_MESSAGE
            elif decision.stops:
                event.cancel_tool = answer_now(decision)
        except Exception as exc:
            self.gate._failed("strands.before_tool", exc)

    def after_tool(self, event: AfterToolCallEvent) -> None:
        """Record the call that ran; at ``warn`` add the guidance to its result."""
        try:
            if event.cancel_message is not None:
                return  # never ran: a refusal is recorded as such by the gate
            tool_use, result = event.tool_use, event.result
            failed = event.exception is not None or result.get("status") == "error"
            error: BaseException | str | None = None
            if failed:
                error = event.exception if event.exception is not None else "error"
            decision = self.gate.after_tool(
                tool_use["name"],
                tool_use.get("input"),
                _result_value(result),
                run=self.run_of(event.agent),
                error=error,
            )
            if decision.warns and decision.message:
                event.result = with_note(result, decision.message)
        except Exception as exc:
            self.gate._failed("strands.after_tool", exc)

    def before_model(self, context: InvokeModelContext) -> InvokeModelContext:
        """At a stop, this model call gets no tools and the answer-now instruction."""
        try:
            decision = self.gate.before_model(run=self.run_of(context.agent))
            if not decision.stops:
                return context
            return context.replace(
                tool_specs=[],
                tool_choice=None,
                system_prompt=with_instruction(context.system_prompt, answer_now(decision)),
            )
        except Exception as exc:
            self.gate._failed("strands.before_model", exc)
            return context


def _result_value(result: ToolResult) -> Any:
    """What the detector compares of a tool result: its content blocks, not its call id."""
    return result.get("content")


__all__ = ["StallPlugin", "with_instruction", "with_note"]
