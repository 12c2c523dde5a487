"""One reading per span: all that detection takes from a span, read once.

:meth:`Conventions.read <otel_stall.conventions.builtin.Conventions.read>`
returns a :class:`Reading`: the span's role, its call record (a
:class:`~otel_stall.core.records.ToolCall` or a
:class:`~otel_stall.core.records.ModelCall`), the session it names, the agent
a handoff hands to and, for a tool call without content, the switch that
captures content. The live processor, the replay and the gateway all take a
span's facts from it, so none of them asks the conventions twice, and a plain
span leaves with the shared :data:`PLAIN` reading and no record at all.

The helpers below read payloads and marks; they are the conventions' own and
live here to keep :mod:`~otel_stall.conventions.builtin` to its tables.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from otel_stall.core.records import ABSENT, ModelCall, ToolCall
from otel_stall.core.run_state import Role


class Reading(NamedTuple):
    """What the conventions make of one span, read once (see the module's docstring).

    A named tuple: immutable and slot-free like a frozen slotted dataclass, and
    built by ``tuple.__new__`` rather than one ``object.__setattr__`` per field,
    which on every tool and model span cost the live processor about 7k
    instructions (bench_processor_instructions, chat spans: 183k -> 176k added a span).
    """

    role: Role
    tool: ToolCall | None = None
    """A tool span's call (payloads as captured, not yet signed)."""
    model: ModelCall | None = None
    """A model span's call: its outcome, usage and output hashes (no text)."""
    session: str | None = None
    """The session a tool or model span names (see ``Conventions.session``)."""
    handoff: str | None = None
    """The agent a handoff tool hands its run to (``""``: unnamed); ``None``: no handoff."""
    content_switch: str | None = None
    """A tool call with neither arguments nor result: how to turn content capture on."""


PLAIN: Final = Reading(Role.OTHER)
"""The reading of every plain span: shared, so a plain span costs no record."""
AGENT: Final = Reading(Role.AGENT)
"""The reading of an agent span: its run is the run model's business, not a record's."""


def named_in(value: Any, key: str, depth: int) -> str | None:
    """The text under ``key`` in arguments (JSON text or decoded), a few levels deep."""
    if isinstance(value, str | bytes) and depth:
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, Mapping) and depth:
        found = value.get(key)
        if isinstance(found, str):
            return found
        for inner in value.values():
            if isinstance(inner, Mapping):
                name = named_in(inner, key, depth - 1)
                if name is not None:
                    return name
    return None


def marked(attributes: Mapping[str, Any], marks: tuple[tuple[str, str], ...]) -> bool:
    """Whether every ``(key, value)`` mark is on the span.

    A loop, not ``all()`` over a generator: 0.2 us against 1.2 us per span that
    names a session key (measured with ``timeit``), on the live processor's path.
    """
    for key, value in marks:  # noqa: SIM110
        if attributes.get(key) != value:
            return False
    return True


def first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The value of the first of ``keys`` the span holds, else :data:`ABSENT`."""
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            return value
    return ABSENT


def first_text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """:func:`first`, as text; ``None`` when no key holds a value."""
    value = first(attributes, keys)
    return None if value is ABSENT else str(value)


__all__ = ["AGENT", "PLAIN", "Reading", "first", "first_text", "marked", "named_in"]
