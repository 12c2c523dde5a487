"""The live gate in an MCP client: one line, ``session = guard_session(session)``.

```python
from mcp import ClientSession
from otel_stall.integrations.mcp import guard_session

async with ClientSession(read, write) as session:
    await session.initialize()
    session = guard_session(session)
    result = await session.call_tool("search", {"q": "weather in Paris"})
```

The guarded session is the session, with :meth:`GuardedSession.call_tool`
asking the gate first:

- **Refuse:** a refused call is not sent to the server; it returns a
  ``CallToolResult`` with ``isError`` true and the gate's guidance as its text,
  the MCP way of telling the model a call failed (a result, not a protocol
  error), so the host hands it to the model as that call's result.
- **Record and warn:** every result (``isError`` ones as failures) goes to
  :meth:`ToolGate.after_tool`; a warning is appended to the result's content
  as one more text block (structured content is left as the server sent it).
- **Break:** an MCP session does not see the model's turns, so the host's loop
  asks :meth:`GuardedSession.before_model` before each turn (``stops``: give the
  model no tools and ``decision.message``); once a run is stopped, every call
  is refused with the stop's guidance. A host that never asks still gets
  refusals of repeated calls.

Works with anything that has MCP's ``call_tool(name, arguments, ...)``: a
``ClientSession``, or ``mcp.client.Client``. The run is the guarded session
(``run=`` names another: one per agent run, say), freed when the wrapper is.
The gate always keeps its own run state here (``ToolGate(own_state=True)``):
MCP's own OpenTelemetry spans carry no arguments, so an installed processor's
run would see every call to a tool as the same call, or none as a repeat; the
processor's policy still applies.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Hashable, Iterable
from typing import Any

from otel_stall.integrations.gate import Decision, ToolGate
from otel_stall.live.settings import PYTEST_ENV

logger = logging.getLogger("otel_stall.integrations")

_ERRORS: set[str] = set()

_GATE = ToolGate(own_state=True)
"""The gate of sessions given none: its own run state always, since the processor never sees
a call's arguments in MCP's spans; the processor's policy when one is installed."""


class GuardedSession:
    """An MCP client session whose ``call_tool`` asks the gate; everything else is the session's.

    ``gate`` defaults to one shared by every guarded session, keeping its own
    run state; ``exempt`` names tools never refused here (besides the policy's).
    """

    def __init__(
        self,
        session: Any,
        *,
        gate: ToolGate | None = None,
        run: Hashable | None = None,
        exempt: Iterable[str] = (),
    ) -> None:
        self.session = session
        self.gate = gate if gate is not None else _GATE
        self.exempt = frozenset(exempt)
        self.run: Hashable = run if run is not None else ("mcp", id(self))
        if run is None:  # the wrapper's own run ends with it
            weakref.finalize(self, self.gate.end_run, self.run)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kwargs: Any
    ) -> Any:
        """The session's ``call_tool``, unless the gate refuses: then an ``isError`` result."""
        exempt = name in self.exempt
        decision = self.gate.before_tool(name, arguments or {}, run=self.run, exempt=exempt)
        if (decision.refused or decision.stops) and decision.message:
            return _result(decision.message)
        result = await self.session.call_tool(name, arguments, *args, **kwargs)
        try:
            error = "tool error" if getattr(result, "is_error", False) else None
            after = self.gate.after_tool(
                name, arguments or {}, _text(result), run=self.run, error=error, exempt=exempt
            )
            if (after.warns or after.stops) and after.message:
                result = _with_note(result, after.message)
        except Exception as exc:
            _failed("after call_tool", exc)
        return result

    def before_model(self) -> Decision:
        """Ask before each model turn: ``stops`` means give the model no tools, and the message."""
        return self.gate.before_model(run=self.run)

    def end_run(self) -> None:
        """Forget this run's calls (a new agent run on the same session starts afresh)."""
        self.gate.end_run(self.run)


def guard_session(
    session: Any,
    *,
    gate: ToolGate | None = None,
    run: Hashable | None = None,
    exempt: Iterable[str] = (),
) -> GuardedSession:
    """``session`` with the gate in its ``call_tool`` (:class:`GuardedSession`)."""
    return GuardedSession(session, gate=gate, run=run, exempt=exempt)


def _result(message: str) -> Any:
    """A refusal, as the server's own failed calls arrive: ``isError``, the reason as text."""
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def _text(result: Any) -> Any:
    """What the detector compares of a result: its text blocks and structured content."""
    content = getattr(result, "content", None)
    if content is None:
        return result
    texts = [getattr(block, "text", None) or getattr(block, "type", "") for block in content]
    structured = getattr(result, "structured_content", None)
    return texts if structured is None else [texts, structured]


def _with_note(result: Any, note: str) -> Any:
    """The result with the gate's note as one more text block (a copy: the server's is kept)."""
    from mcp.types import TextContent

    return result.model_copy(update={"content": [*result.content, TextContent(text=note)]})


def _failed(where: str, exc: Exception) -> None:
    """Fail open: log once per kind; under pytest the error surfaces."""
    kind = f"{where}: {type(exc).__name__}"
    if kind not in _ERRORS:
        _ERRORS.add(kind)
        logger.error(
            "otel-stall mcp: %s failed; the result is returned as it was", where, exc_info=exc
        )
    if PYTEST_ENV in os.environ:
        raise exc


__all__ = ["GuardedSession", "guard_session"]
