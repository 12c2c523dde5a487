"""The live gate in a LangChain v1 agent: one middleware in ``create_agent``.

::

    from otel_stall.integrations.langchain import StallMiddleware

    agent = create_agent(model, tools=[...], middleware=[StallMiddleware()])

What the model sees, in LangChain's own terms:

- **refuse**: the tool does not run (``wrap_tool_call`` never calls its
  handler); the call's ``ToolMessage`` is the gate's guidance, with
  ``status="error"``.
- **warn**: the tool runs; the guidance is appended to its ``ToolMessage``.
- **break** / **escalate**: ``wrap_model_call`` sends the next model call with
  no tools and the guidance as a last message (for that call only, not kept in
  the state), so the model writes its final answer. If the model asks for a
  tool anyway, its tool calls are dropped from that answer, so the agent ends
  with it instead of looping until the graph's recursion limit.

The run is one agent invocation: ``before_agent`` puts a fresh id in a private
state key (it survives an interrupt and its resume) and ``after_agent`` frees
it. Sync (``invoke``) and async (``ainvoke``) agents both work; no hook blocks
an event loop. LangChain makes no OpenTelemetry spans of its own, so the gate
keeps its own run state, unless an OpenTelemetry instrumentation of LangChain
made the current span and :func:`otel_stall.install` put the processor on its
provider. LangChain is imported only by this module, which nothing in
``otel_stall`` imports.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Hashable
from typing import Annotated, Any, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, PrivateStateAttr
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from otel_stall.integrations.gate import Decision, ToolGate, default_gate
from otel_stall.live.settings import PYTEST_ENV

logger = logging.getLogger("otel_stall.integrations")

__all__ = ["RUN_KEY", "StallMiddleware", "StallState"]

RUN_KEY = "otel_stall_run"
"""The private state key holding the run id the gate keys this invocation by."""

ModelResult = ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]
ToolResult = ToolMessage | Command[Any]


class StallState(AgentState[Any]):
    """The agent state, plus the gate's run id (private: not in the agent's input or output)."""

    otel_stall_run: NotRequired[Annotated[str, PrivateStateAttr]]


class StallMiddleware(AgentMiddleware[StallState, Any, Any]):
    """A LangChain agent middleware that asks a :class:`ToolGate` before each tool and model call.

    ``gate`` defaults to the process's shared gate (:func:`default_gate`). One
    instance may serve many agents and concurrent invocations: its state is the
    gate's, keyed by each invocation's run id.
    """

    state_schema = StallState

    def __init__(self, gate: ToolGate | None = None) -> None:
        super().__init__()
        self.gate = gate if gate is not None else default_gate()

    # -- the run ----------------------------------------------------------------

    def before_agent(self, state: StallState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """A fresh run id per invocation: a thread's next question is a new run."""
        return {RUN_KEY: uuid.uuid4().hex}

    async def abefore_agent(
        self, state: StallState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """As :meth:`before_agent`."""
        return {RUN_KEY: uuid.uuid4().hex}

    def after_agent(self, state: StallState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Free the gate's state of the run."""
        run = state.get(RUN_KEY)
        if run is not None:
            self.gate.end_run(run)
        return None

    async def aafter_agent(self, state: StallState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """As :meth:`after_agent`."""
        return self.after_agent(state, runtime)

    # -- model calls --------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResult:
        """At a stop: no tools for this call, the guidance as its last message."""
        decision = self.gate.before_model(run=_run(request.state))
        response = handler(_fail_open(_model_request, request, request, decision))
        return _fail_open(_answer, response, response, decision)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResult:
        """As :meth:`wrap_model_call`."""
        decision = self.gate.before_model(run=_run(request.state))
        response = await handler(_fail_open(_model_request, request, request, decision))
        return _fail_open(_answer, response, response, decision)

    # -- tool calls ---------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolResult]
    ) -> ToolResult:
        """Refuse a repeated call before it runs; record it and its result after."""
        name, args, run = _call(request)
        refusal = self._refusal(request, name, args, run)
        if refusal is not None:
            return refusal
        try:
            result = handler(request)
        except GraphBubbleUp:  # an interrupt or a hand-off: the call did not finish
            raise
        except Exception as exc:
            self.gate.after_tool(name, args, None, run=run, error=exc)
            raise
        return self._after(name, args, run, result)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        """As :meth:`wrap_tool_call`."""
        name, args, run = _call(request)
        refusal = self._refusal(request, name, args, run)
        if refusal is not None:
            return refusal
        try:
            result = await handler(request)
        except GraphBubbleUp:
            raise
        except Exception as exc:
            self.gate.after_tool(name, args, None, run=run, error=exc)
            raise
        return self._after(name, args, run, result)

    def _refusal(
        self, request: ToolCallRequest, name: str, args: Any, run: Hashable | None
    ) -> ToolMessage | None:
        decision = self.gate.before_tool(name, args, run=run)
        if not (decision.refused or decision.stops):
            return None
        return ToolMessage(
            content=decision.message or "",
            tool_call_id=request.tool_call.get("id") or "",
            name=name,
            status="error",
        )

    def _after(self, name: str, args: Any, run: Hashable | None, result: ToolResult) -> ToolResult:
        if not isinstance(result, ToolMessage):  # a Command: nothing to read, nothing to add to
            self.gate.after_tool(name, args, None, run=run)
            return result
        error = result.text if result.status == "error" else None
        decision = self.gate.after_tool(name, args, result.content, run=run, error=error)
        if decision.warns and decision.message:  # a stop is told on the next model call
            return _fail_open(_noted, result, result, decision.message)
        return result


_T = TypeVar("_T")
_FAILED: set[str] = set()


def _fail_open(change: Callable[..., _T], unchanged: _T, *args: Any) -> _T:
    """``change(*args)``, or ``unchanged`` if it fails: the agent's call goes on as it was.

    Logged once per kind; under pytest the error surfaces, as in the gate.
    """
    try:
        return change(*args)
    except Exception as exc:
        kind = f"{change.__name__}: {type(exc).__name__}"
        if kind not in _FAILED:
            _FAILED.add(kind)
            logger.error("otel-stall langchain: %s failed; left unchanged", kind, exc_info=exc)
        if PYTEST_ENV in os.environ:
            raise
        return unchanged


def _run(state: Any) -> Hashable | None:
    run = state.get(RUN_KEY) if isinstance(state, dict) else None
    return run if isinstance(run, str) else None


def _call(request: ToolCallRequest) -> tuple[str, Any, Hashable | None]:
    call = request.tool_call
    return str(call.get("name", "")), call.get("args", {}), _run(request.state)


def _model_request(request: ModelRequest[Any], decision: Decision) -> ModelRequest[Any]:
    """The request as sent: at a stop without tools; with the guidance when there is one."""
    if not decision.message or not (decision.stops or decision.warns):
        return request
    messages = [*request.messages, HumanMessage(content=decision.message)]
    if decision.stops:
        return request.override(tools=[], tool_choice=None, messages=messages)
    return request.override(messages=messages)


def _answer(response: ModelResponse[Any], decision: Decision) -> ModelResponse[Any]:
    """At a stop, the model's answer without tool calls: the agent ends with it."""
    if not decision.stops or response.structured_response is not None:
        return response  # a structured answer's tool call is the answer: it stays
    result = [_without_tool_calls(m) if isinstance(m, AIMessage) else m for m in response.result]
    return ModelResponse(result=result, structured_response=response.structured_response)


def _without_tool_calls(message: AIMessage) -> AIMessage:
    if not message.tool_calls and not message.invalid_tool_calls:
        return message
    return message.model_copy(update={"tool_calls": [], "invalid_tool_calls": []})


def _noted(result: ToolMessage, note: str) -> ToolMessage:
    """The tool's message with the gate's note after its content."""
    content = result.content
    if isinstance(content, str):
        updated: Any = f"{content}\n\n{note}" if content else note
    else:
        updated = [*content, {"type": "text", "text": note}]
    return result.model_copy(update={"content": updated})
