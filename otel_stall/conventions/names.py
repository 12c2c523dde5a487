"""An agent's name from its span's name, for agent spans that carry no name key.

Most OpenInference instrumentors mark a span ``AGENT`` without an
``agent.name``: CrewAI names it ``main._execute_core``, smolagents
``main.run``. The GenAI conventions name it ``invoke_agent {gen_ai.agent.name}``.
A name read this way beats calling every such run "run".

Decisions:

- ``invoke_agent X``, ``create_agent X`` (and ``execute_tool X``, a tool that is an
  agent's run) give ``X``; the bare operation
  gives no name (it names the operation, not the agent).
- ``X.method`` gives ``X`` when ``method`` is a known entry point (``run``,
  ``_execute_core``, ``kickoff``, ...): the prefix is the agent, the suffix
  the framework's method. Other dotted names (``ai.generateText``) are kept
  whole: their prefix is a library, not an agent.
- Any other name is the agent's name as it stands: it is what the user's
  trace UI shows for that span.
"""

from __future__ import annotations

from typing import Final

__all__ = ["name_from_span"]

_OPERATIONS: Final = frozenset({"invoke_agent", "create_agent", "execute_tool"})
"""GenAI operation names that span names start with, before the agent's name (a tool
span that is an agent's run, ``execute_tool X``, is the agent ``X``)."""
_ENTRY_POINTS: Final = frozenset(
    {
        "run",
        "arun",
        "run_sync",
        "run_stream",
        "_execute_core",
        "execute_task",
        "kickoff",
        "kickoff_async",
        "invoke",
        "ainvoke",
        "stream",
        "astream",
        "__call__",
    }
)
"""Method names frameworks append to an agent's name in its span's name."""


def name_from_span(span_name: str) -> str | None:
    """The agent's name in an agent span's name; ``None`` if it names only the operation."""
    name = span_name.strip()
    operation, _, rest = name.partition(" ")
    if operation in _OPERATIONS:
        return rest.strip() or None
    if name in _OPERATIONS or not name:
        return None
    head, dot, method = name.rpartition(".")
    if dot and head and method in _ENTRY_POINTS:
        return head
    return name
