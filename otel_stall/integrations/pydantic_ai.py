"""The live gate in a pydantic-ai agent: one capability, added where the agent is made.

::

    from otel_stall.integrations.pydantic_ai import StallGuard

    agent = Agent(model, tools=[...], capabilities=[StallGuard()])

What the model sees, all through pydantic-ai's own channels:

- **refuse**: the tool does not run; the call's result is a failed tool return
  (``ToolFailed``: pydantic-ai's "done, and failed: adapt, don't retry") whose
  text is the gate's guidance. It uses none of the tool's retry budget.
- **warn**: the tool runs; the guidance follows its result in the next request,
  as a system prompt part enqueued with ``RunContext.enqueue``.
- **break** / **escalate**: the next model request offers no function tools
  (output tools stay, so a structured answer is still possible) and carries the
  "answer now" guidance, so the model writes its final answer from what it
  has. A call it asks for anyway is refused. The run is never cancelled.

The run is pydantic-ai's ``RunContext.run_id`` (a fresh UUID per run); with
``Agent.instrument_all()`` and :func:`otel_stall.install` the gate asks the
live processor's run of the current span instead. pydantic-ai is imported only
by this module, which nothing in ``otel_stall`` imports.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import AgentRunResult, RunContext, ToolDefinition
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapRunHandler, WrapToolExecuteHandler
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, SkipToolExecution, ToolFailed
from pydantic_ai.messages import SystemPromptPart, ToolCallPart
from pydantic_ai.models import ModelRequestContext

from otel_stall.integrations.gate import Decision, ToolGate, default_gate

__all__ = ["StallGuard"]


_NOT_RUN = (CallDeferred, ApprovalRequired, SkipToolExecution)
"""pydantic-ai's control flow out of a tool call: the tool did not run, nothing to record."""


@dataclass
class StallGuard(AbstractCapability[Any]):
    """A pydantic-ai capability that asks a :class:`ToolGate` before each tool call and step.

    ``gate`` defaults to the process's shared gate (:func:`default_gate`), which
    finds the processor :func:`otel_stall.install` put on the global provider.
    One instance may serve many agents and concurrent runs: its state is the
    gate's, keyed by run.
    """

    gate: ToolGate = field(default_factory=default_gate)

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Once per step: at a stop, this request offers no function tools and says why.

        Here rather than in ``prepare_tools``: the model request span is open by
        now, so the live processor has opened the round and its verdict is current.
        """
        decision = self.gate.before_model(run=_run(ctx))
        if decision.warns or decision.stops:
            _tell(ctx, decision)
        if not decision.stops:
            return request_context
        parameters = replace(request_context.model_request_parameters, function_tools=[])
        return replace(request_context, model_request_parameters=parameters)

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Refuse a repeated call before it runs; record the call and its result after."""
        run = _run(ctx)
        tool_args = _arguments(call)
        decision = self.gate.before_tool(call.tool_name, tool_args, run=run)
        if decision.refused or decision.stops:
            raise ToolFailed(decision.message or "")
        try:
            result = await handler(args)
        except _NOT_RUN:
            raise
        except Exception as exc:  # the tool's failure (ModelRetry, ToolFailed too) is its result
            self.gate.after_tool(call.tool_name, tool_args, None, run=run, error=exc)
            raise
        after = self.gate.after_tool(call.tool_name, tool_args, result, run=run)
        if after.warns:  # a stop is told with the next model request
            _tell(ctx, after)
        return result

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Free the gate's state of the run when it ends, however it ends."""
        try:
            return await handler()
        finally:
            if ctx.run_id is not None:
                self.gate.end_run(ctx.run_id)


def _run(ctx: RunContext[Any]) -> Hashable | None:
    return ctx.run_id


def _arguments(call: ToolCallPart) -> Any:
    """The model's arguments as it sent them (a dict), so repeats compare as the spans do."""
    try:
        return call.args_as_dict()
    except Exception:  # malformed JSON the tool's validation will reject: compare as text
        return call.args


def _tell(ctx: RunContext[Any], decision: Decision) -> None:
    """The guidance in the conversation, in the system's voice: pydantic-ai's steering channel."""
    if not decision.message:
        return
    try:
        ctx.enqueue(SystemPromptPart(decision.message))
    except Exception as exc:  # a context with no queue: the decision stands, the note is lost
        _noted(exc)


_NOTED: set[str] = set()


def _noted(exc: Exception) -> None:
    import logging

    kind = type(exc).__name__
    if kind not in _NOTED:
        _NOTED.add(kind)
        logging.getLogger("otel_stall.integrations").warning(
            "otel-stall: pydantic-ai did not take the gate's note (%s); the model is not told", exc
        )
