"""The live gate in the OpenAI Agents SDK: one line, ``agent = guard(agent)``.

```python
from agents import Agent, Runner
from otel_stall.integrations.openai_agents import guard

agent = guard(Agent(name="researcher", instructions="...", tools=[search, fetch]))
result = await Runner.run(agent, "question")
```

:func:`guard` returns a clone of the agent whose function tools carry the
gate, in the SDK's own terms:

- **Refuse:** a tool input guardrail asks :meth:`ToolGate.before_tool`; a
  refused call is rejected with ``reject_content``, so the tool does not run and
  the model reads the gate's guidance as that call's output (the rejection is in
  ``RunResult.tool_input_guardrail_results``).
- **Record and warn:** a tool output guardrail hands each result to
  :meth:`ToolGate.after_tool` and never changes it; a warning is added to the
  agent's instructions on the model's next turn only (the SDK lets a hook
  change a tool's output only by rejecting it, which would mark a good result
  as refused).
- **Break:** each turn, before the SDK lists the tools, every guarded tool's
  ``is_enabled`` asks :meth:`ToolGate.before_model` (once per turn); at
  ``break`` or ``escalate`` the guarded tools are disabled, so the model's turn
  has none, and the instructions of that turn say to answer now. The run then
  ends with the model's answer, as any run does.

The run is the SDK run's own ``Usage`` object, which its run context and
every tool context share; the gate's state of a run is freed when that object
is (the run result holds it). The turn is the run context's ``turn_input``
list, which the SDK makes anew for each turn. The SDK makes no OpenTelemetry
spans of its own (its tracing is separate), so the gate keeps its own run state
unless an OpenTelemetry instrumentation of the SDK makes spans the installed
processor sees.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import json
import logging
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from otel_stall.integrations.gate import Decision, ToolGate, default_gate
from otel_stall.live.settings import PYTEST_ENV

logger = logging.getLogger("otel_stall.integrations")

MAX_RUNS: Final = 4096
"""Runs whose turn state this module holds at once; the oldest is dropped beyond (the gate
keeps its own bound too). A run's state is freed as soon as its ``Usage`` object is."""

_NAME: Final = "otel_stall"
"""The guardrails' name, as the SDK's guardrail results show it."""


@dataclass(slots=True)
class _Run:
    """One SDK run's turn state: which turn the gate last opened and what that turn is told."""

    key: tuple[str, int, int]
    marker: object = None
    """The ``turn_input`` list of the turn the gate last opened (held: its id is not reused)."""
    stops: bool = False
    note: str | None = None
    """Told to the model in the instructions of the marked turn."""
    pending: list[str] = field(default_factory=list)
    """Warnings from this turn's tool results, told on the next turn."""


class _Runs:
    """The runs of one gate, keyed by their ``Usage`` object's identity while it lives."""

    def __init__(self, gate: ToolGate) -> None:
        self.gate = gate
        self._runs: OrderedDict[int, _Run] = OrderedDict()
        self._lock = threading.Lock()
        self._errors: set[str] = set()

    def get(self, usage: Any) -> _Run:
        """The state of the run that ``usage`` is the usage of (made on its first call)."""
        ident = id(usage)
        with self._lock:
            run = self._runs.get(ident)
            if run is not None:
                return run
            run = _Run(("openai-agents", id(self.gate), ident))
            self._runs[ident] = run
            while len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        # not weakly referable: the table's bound and the gate's idle time free it instead
        with contextlib.suppress(TypeError):
            weakref.finalize(usage, self._forget, ident, run.key)
        return run

    def _forget(self, ident: int, key: tuple[str, int, int]) -> None:
        with self._lock:
            self._runs.pop(ident, None)
        self.gate.end_run(key)

    def open_turn(self, context: Any) -> _Run:
        """The run of ``context``, with the gate asked once for the turn it is on."""
        run = self.get(context.usage)
        marker = context.turn_input
        if run.marker is not marker:
            run.marker = marker
            decision = self.gate.before_model(run=run.key)
            run.stops = decision.stops
            told = [*run.pending]
            run.pending.clear()
            message = decision.message if decision.stops or decision.warns else None
            if message and message not in told:  # a stop heard after a tool is said once
                told.append(message)
            run.note = "\n\n".join(told) or None
        return run

    def failed(self, where: str, exc: Exception) -> None:
        """Fail open: log once per kind; under pytest the error surfaces."""
        kind = f"{where}: {type(exc).__name__}"
        if kind not in self._errors:
            self._errors.add(kind)
            logger.error(
                "otel-stall openai-agents: %s failed; the agent runs on", where, exc_info=exc
            )
        if PYTEST_ENV in os.environ:
            raise exc


_TABLES: weakref.WeakKeyDictionary[ToolGate, _Runs] = weakref.WeakKeyDictionary()
_TABLES_LOCK = threading.Lock()


def _runs_of(gate: ToolGate) -> _Runs:
    """One turn table per gate, so the agents of a handoff chain share a run's turns."""
    with _TABLES_LOCK:
        runs = _TABLES.get(gate)
        if runs is None:
            runs = _TABLES[gate] = _Runs(gate)
        return runs


def guard(agent: Any, *, gate: ToolGate | None = None) -> Any:
    """A clone of ``agent`` whose function tools the gate guards (the original is unchanged).

    ``gate`` defaults to the process's shared gate (:func:`default_gate`),
    which asks the processor :func:`otel_stall.install` installed when there is
    one. Guard every agent of a handoff chain: the agents of one run share
    its state. Tools that are not function tools (hosted tools, MCP servers'
    tools) are passed through unguarded.
    """
    from agents import FunctionTool

    runs = _runs_of(gate if gate is not None else default_gate())
    tools = [
        _guarded_tool(tool, runs) if isinstance(tool, FunctionTool) else tool
        for tool in agent.tools
    ]
    return agent.clone(tools=tools, instructions=_instructions(agent.instructions, runs))


def _guarded_tool(tool: Any, runs: _Runs) -> Any:
    """A copy of ``tool`` with the gate's two guardrails and its ``is_enabled`` check."""
    from agents import ToolInputGuardrail, ToolOutputGuardrail

    guarded = copy.copy(tool)
    guarded.tool_input_guardrails = [
        *(tool.tool_input_guardrails or ()),
        ToolInputGuardrail(guardrail_function=_before_tool(runs), name=_NAME),
    ]
    guarded.tool_output_guardrails = [
        *(tool.tool_output_guardrails or ()),
        ToolOutputGuardrail(guardrail_function=_after_tool(runs), name=_NAME),
    ]
    guarded.is_enabled = _is_enabled(tool.is_enabled, runs)
    return guarded


def _arguments(raw: str) -> Any:
    """The call's arguments as the model sent them, parsed so key order does not matter."""
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw


def _before_tool(runs: _Runs) -> Callable[[Any], Any]:
    from agents import ToolGuardrailFunctionOutput

    def otel_stall_before_tool(data: Any) -> Any:
        try:
            context = data.context
            run = runs.get(context.usage)
            decision = runs.gate.before_tool(
                context.tool_name, _arguments(context.tool_arguments), run=run.key
            )
            if (decision.refused or decision.stops) and decision.message:
                return ToolGuardrailFunctionOutput.reject_content(
                    decision.message, output_info=_info(decision)
                )
        except Exception as exc:
            runs.failed("tool input guardrail", exc)
        return ToolGuardrailFunctionOutput.allow()

    return otel_stall_before_tool


def _after_tool(runs: _Runs) -> Callable[[Any], Any]:
    from agents import ToolGuardrailFunctionOutput

    def otel_stall_after_tool(data: Any) -> Any:
        try:
            context = data.context
            run = runs.get(context.usage)
            decision = runs.gate.after_tool(
                context.tool_name, _arguments(context.tool_arguments), data.output, run=run.key
            )
            if (decision.warns or decision.stops) and decision.message:
                run.pending.append(decision.message)
        except Exception as exc:
            runs.failed("tool output guardrail", exc)
        return ToolGuardrailFunctionOutput.allow()

    return otel_stall_after_tool


def _info(decision: Decision) -> dict[str, str]:
    """What the SDK's guardrail result records of a rejection."""
    finding = decision.finding
    return {"action": decision.action.value, "kind": finding.kind.value if finding else ""}


EnabledCheck = bool | Callable[[Any, Any], bool | Awaitable[bool]]


def _is_enabled(original: EnabledCheck, runs: _Runs) -> Callable[[Any, Any], Any]:
    """The tool's own ``is_enabled``, and not when the gate stopped the run."""

    def otel_stall_is_enabled(context: Any, agent: Any) -> Any:
        stops = False
        try:
            stops = runs.open_turn(context).stops
        except Exception as exc:
            runs.failed("is_enabled", exc)
        if stops:
            return False
        if isinstance(original, bool):
            return original
        return original(context, agent)

    return otel_stall_is_enabled


def _instructions(original: Any, runs: _Runs) -> Callable[[Any, Any], Any]:
    """The agent's instructions, and the gate's note on the turn it is for."""

    def otel_stall_instructions(context: Any, agent: Any) -> Any:
        base = original(context, agent) if callable(original) else original
        if inspect.isawaitable(base):
            return _awaited(base, context, runs)
        return _with_note(base, context, runs)

    return otel_stall_instructions


async def _awaited(base: Awaitable[Any], context: Any, runs: _Runs) -> str | None:
    return _with_note(await base, context, runs)


def _with_note(base: str | None, context: Any, runs: _Runs) -> str | None:
    note = None
    try:
        run = runs.get(context.usage)
        if run.marker is context.turn_input:
            note = run.note
    except Exception as exc:
        runs.failed("instructions", exc)
    if not note:
        return base
    return f"{base}\n\n{note}" if base else note


__all__ = ["guard"]
