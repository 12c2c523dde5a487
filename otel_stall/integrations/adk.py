"""Google ADK: the live gate as a runner plugin, or as one agent's callbacks.

Every agent the runner runs (the recommended wiring; it also frees the run's
state when the invocation ends)::

    from otel_stall.integrations.adk import StallPlugin

    app = App(name="my_app", root_agent=agent, plugins=[StallPlugin()])
    runner = InMemoryRunner(app=app)  # or Runner(app=app, ...)

One agent only::

    from otel_stall.integrations.adk import stall_callbacks

    agent = LlmAgent(name="main", model=model, tools=[...], **stall_callbacks())

What each action becomes in ADK's own terms:

- **refuse**: ``before_tool_callback`` returns ``{"error": <guidance>}``, ADK's
  shape for a call the model should correct; the tool does not run, and the
  model reads the dict as that call's function response.
- **warn**: the call runs; ``after_tool_callback`` returns its result with the
  guidance under :data:`NOTE_KEY`, which the model reads with the result.
- **break** / **escalate**: ``before_model_callback`` takes every tool off the
  ``LlmRequest`` (its declarations and ``tools_dict``) and appends the
  answer-now instruction to the system instruction, so the model's next turn
  writes the final answer; a call asked for anyway is refused the same way.

The run is ADK's invocation (``invocation_id``): one user message and every
model turn and tool call it leads to, sub-agents included. ADK makes OTel spans
itself, so with ``otel_stall.install()`` on the global provider the gate asks
the processor's run of the current span instead (give ADK content capture,
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY``, or the
processor sees no arguments to compare).

This module imports ADK; nothing in the package imports this module.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Final

from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext

from otel_stall.integrations.gate import BREAK_MESSAGE, ToolGate, answer_now, default_gate

NOTE_KEY: Final = "stall_guidance"
"""Key of the guidance added to a tool's result dict at ``warn``."""

ERROR_KEY: Final = "error"
"""Key of a refused call's result dict: ADK's own key for an error the model should fix."""

_MAX_PENDING: Final = 4096
"""Calls answered (refused, or their error recorded) whose after-tool callback is still due."""


def _with_note(result: Any, note: str) -> dict[str, Any]:
    """The tool's result with the guidance beside it (ADK wraps a non-dict result the same way)."""
    body = dict(result) if isinstance(result, dict) else {"result": result}
    body[NOTE_KEY] = note
    return body


def strip_tools(llm_request: LlmRequest, instruction: str) -> None:
    """No tools on this model turn, and the instruction to answer from what it has."""
    config = llm_request.config
    config.tools = None
    config.tool_config = None
    config.automatic_function_calling = None
    llm_request.tools_dict.clear()
    llm_request.append_instructions([instruction])


class StallCallbacks:
    """The gate behind ADK's tool and model callbacks; shared by the plugin and the agent form.

    ``gate`` defaults to the process's :func:`default_gate`. Every method fails
    open (the gate never raises; neither does the translation around it).
    """

    def __init__(self, gate: ToolGate | None = None) -> None:
        self.gate = gate if gate is not None else default_gate()
        self._answered: OrderedDict[Hashable, None] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _call_key(tool_context: Any) -> Hashable:
        """One tool call: its invocation and ADK's function-call id (the context's, if none)."""
        call_id = getattr(tool_context, "function_call_id", None)
        return (tool_context.invocation_id, call_id if call_id is not None else id(tool_context))

    def _mark(self, key: Hashable) -> None:
        with self._lock:
            self._answered[key] = None
            while len(self._answered) > _MAX_PENDING:
                self._answered.popitem(last=False)

    def _was_answered(self, key: Hashable) -> bool:
        with self._lock:
            if key not in self._answered:
                return False
            del self._answered[key]
            return True

    def before_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """A refused call's result (the tool then does not run), or ``None`` to run it."""
        try:
            decision = self.gate.before_tool(tool.name, args, run=tool_context.invocation_id)
            if not (decision.refused or decision.stops):
                return None
            self._mark(self._call_key(tool_context))
            text = decision.message if decision.refused else answer_now(decision)
            return {ERROR_KEY: text or BREAK_MESSAGE}
        except Exception as exc:
            self.gate._failed("adk.before_tool", exc)
            return None

    def after_tool(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, result: Any
    ) -> dict[str, Any] | None:
        """Record the call; at ``warn`` its result with the guidance, else ``None`` (unchanged)."""
        try:
            if self._was_answered(self._call_key(tool_context)):
                return None  # refused (recorded as such) or its error already recorded
            decision = self.gate.after_tool(tool.name, args, result, run=tool_context.invocation_id)
            if decision.warns and decision.message:
                return _with_note(result, decision.message)
            return None
        except Exception as exc:
            self.gate._failed("adk.after_tool", exc)
            return None

    def on_tool_error(
        self, tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: BaseException
    ) -> None:
        """Record a call that raised; ADK's own error handling goes on unchanged."""
        try:
            if isinstance(error, asyncio.CancelledError):
                return  # cancelled, not failed: it tells nothing about progress
            self.gate.after_tool(tool.name, args, None, run=tool_context.invocation_id, error=error)
            self._mark(self._call_key(tool_context))  # a recovering callback's result follows
        except Exception as exc:
            self.gate._failed("adk.on_tool_error", exc)

    def before_model(self, callback_context: CallbackContext, llm_request: LlmRequest) -> None:
        """At a stop, this model turn gets no tools and the answer-now instruction."""
        try:
            decision = self.gate.before_model(run=callback_context.invocation_id)
            if decision.stops:
                strip_tools(llm_request, answer_now(decision))
        except Exception as exc:
            self.gate._failed("adk.before_model", exc)

    def end_run(self, invocation_id: str) -> None:
        """Free the gate's state of an invocation that ended."""
        self.gate.end_run(invocation_id)


class StallPlugin(BasePlugin):
    """The gate for every agent an app runs: ``App(..., plugins=[StallPlugin()])``.

    Plugins run before the agents' own callbacks; a refusal short-circuits them,
    as any plugin's answer does in ADK.
    """

    def __init__(self, gate: ToolGate | None = None, *, name: str = "otel_stall") -> None:
        super().__init__(name=name)
        self.callbacks = StallCallbacks(gate)

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """Refuse a repeated call (the tool does not run), or let it run."""
        return self.callbacks.before_tool(tool, tool_args, tool_context)

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """Record the call; add the guidance to its result at ``warn``."""
        return self.callbacks.after_tool(tool, tool_args, tool_context, result)

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """Record a failed call; ADK's error handling is left as it is."""
        self.callbacks.on_tool_error(tool, tool_args, tool_context, error)
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """At a stop, take the tools away for this turn and ask for the final answer."""
        self.callbacks.before_model(callback_context, llm_request)
        return None

    async def after_run_callback(self, *, invocation_context: Any) -> None:
        """The invocation ended: free its state."""
        try:
            self.callbacks.end_run(invocation_context.invocation_id)
        except Exception as exc:
            self.callbacks.gate._failed("adk.after_run", exc)


def stall_callbacks(gate: ToolGate | None = None) -> dict[str, Any]:
    """The gate as one agent's callbacks: ``LlmAgent(..., **stall_callbacks())``.

    To keep callbacks of your own, pass lists (ADK runs them in order, stopping
    at the first that answers), e.g. ``before_tool_callback=[cbs["before_tool_callback"],
    mine]``. Without the plugin's end-of-run hook the gate's own run state is
    freed by its bounds (count, idle time) instead.
    """
    callbacks = StallCallbacks(gate)

    def before_tool_callback(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        return callbacks.before_tool(tool, args, tool_context)

    def after_tool_callback(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: Any
    ) -> dict[str, Any] | None:
        return callbacks.after_tool(tool, args, tool_context, tool_response)

    def on_tool_error_callback(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: Exception
    ) -> dict[str, Any] | None:
        callbacks.on_tool_error(tool, args, tool_context, error)
        return None

    def before_model_callback(
        callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        callbacks.before_model(callback_context, llm_request)
        return None

    return {
        "before_tool_callback": before_tool_callback,
        "after_tool_callback": after_tool_callback,
        "on_tool_error_callback": on_tool_error_callback,
        "before_model_callback": before_model_callback,
    }


__all__ = [
    "ERROR_KEY",
    "NOTE_KEY",
    "StallCallbacks",
    "StallPlugin",
    "stall_callbacks",
    "strip_tools",
]
