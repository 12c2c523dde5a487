"""The conventions compiled: flat tables in precedence order, what each span is read with.

:func:`compile_conventions` turns :class:`~otel_stall.conventions.mappings.SpanConvention`
values (the built-ins, then a user's) into one :class:`Tables`, once per
:class:`~otel_stall.conventions.builtin.Conventions`: every per-span lookup is
then a dict or set test, never a walk over the conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_stall.conventions.mappings import SpanConvention
from otel_stall.core.run_state import Role
from otel_stall.semconv import GenAIOperation as Op

_ROLES: Final = {"tool": Role.TOOL, "model": Role.MODEL, "agent": Role.AGENT}


@dataclass(frozen=True, slots=True)
class Tables:
    """Conventions compiled into what each span needs: flat tuples, in precedence order."""

    by_value: tuple[tuple[str, Mapping[str, Role], bool], ...]
    """Role by an attribute's string value: (key, value → role, fold case)."""
    by_presence: tuple[tuple[str, Role], ...]
    """Role by an attribute's mere presence, after every value rule."""
    role_keys: frozenset[str]
    agent_prefixes: tuple[str, ...]
    name_keys: tuple[str, ...]
    argument_keys: tuple[str, ...]
    result_keys: tuple[str, ...]
    argument_events: tuple[tuple[str, str], ...]
    result_events: tuple[tuple[str, str], ...]
    output_events: tuple[tuple[str, str], ...]
    placeholders: Mapping[str, frozenset[str]]
    """Values of a content key that mean "not captured"."""
    tool_name_prefixes: tuple[str, ...]
    synthetic_spans: frozenset[str]
    synthetic_tools: frozenset[str]
    steps: tuple[tuple[str, str], ...]
    model_keys: tuple[str, ...]
    model_names: frozenset[str]
    """Span names that mark a model span from its start, also followed by a space and more."""
    model_prefixes: tuple[str, ...]
    content_keys: frozenset[str]
    handoffs: Mapping[str, str] = field(default_factory=dict)
    """Handoff tools: tool name -> the argument naming the agent the run goes to."""
    sessions: tuple[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], ...] = ()
    """Per convention that names sessions: the marks of its spans, and its session keys."""
    session_keys: frozenset[str] = frozenset()
    """Every convention's session keys: a span holding none names no session."""
    error_flags: tuple[str, ...] = ()
    """Keys whose value ``True`` says a call failed on a span left OK (Haystack's)."""


def compile_conventions(conventions: tuple[SpanConvention, ...]) -> Tables:
    """Flatten conventions into lookup tables; earlier conventions take precedence."""
    by_value: dict[str, tuple[dict[str, Role], bool]] = {}
    placeholders: dict[str, set[str]] = {}
    for conv in conventions:
        for key, values in conv.roles.items():
            roles, fold = by_value.setdefault(key, ({}, key in conv.fold_case))
            for value, role in values.items():
                roles.setdefault(value.upper() if fold else value, _ROLES[role])
        for key in (*conv.arguments_keys, *conv.result_keys):
            placeholders.setdefault(key, set()).update(conv.placeholders)

    def flat(attr: str) -> tuple[Any, ...]:
        return tuple(dict.fromkeys(item for conv in conventions for item in getattr(conv, attr)))

    presence = tuple((key, _ROLES[role]) for key, role in flat("present"))
    arguments, results = flat("arguments_keys"), flat("result_keys")
    return Tables(
        by_value=tuple((key, roles, fold) for key, (roles, fold) in by_value.items()),
        by_presence=presence,
        role_keys=frozenset(by_value) | {key for key, _ in presence},
        agent_prefixes=(Op.INVOKE_AGENT,),
        name_keys=flat("tool_name_keys"),
        argument_keys=arguments,
        result_keys=results,
        argument_events=flat("arguments_events"),
        result_events=flat("result_events"),
        output_events=flat("output_events"),
        placeholders={k: frozenset(v) for k, v in placeholders.items() if v},
        tool_name_prefixes=flat("tool_name_prefixes"),
        synthetic_spans=frozenset(flat("synthetic_spans")),
        synthetic_tools=frozenset(flat("synthetic_tools")),
        steps=flat("step_markers"),
        model_keys=flat("model_keys"),
        model_names=frozenset(flat("model_span_names")),
        model_prefixes=tuple(f"{name} " for name in flat("model_span_names")),
        content_keys=frozenset(
            (
                *arguments,
                *results,
                *(name for name, _ in flat("arguments_events")),
                *(name for name, _ in flat("result_events")),
                *(name for name, _ in flat("output_events")),
            )
        ),
        handoffs=dict(reversed(flat("handoff_tools"))),
        sessions=tuple(
            (conv.session_marks, conv.session_keys) for conv in conventions if conv.session_keys
        ),
        session_keys=frozenset(flat("session_keys")),
        error_flags=flat("error_flags"),
    )


__all__ = ["Tables", "compile_conventions"]
