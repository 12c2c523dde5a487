"""Why a span got its role, and where its tool name, arguments, result and status came from.

``otel-stall explain`` prints this for every span of a file: the tool a user
runs when their framework's runs come out empty. It reads the same compiled
tables as :class:`~otel_stall.conventions.builtin.Conventions`, and its role
and tool name are checked against the conventions' own on every framework
fixture (``tests/conventions/test_explain.py``), so the explanation cannot drift from the
behaviour it explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otel_stall.conventions.builtin import STATUS_ERROR, Conventions, Role, SpanRecord
from otel_stall.conventions.content import says_error
from otel_stall.core.records import ABSENT
from otel_stall.semconv import ErrorAttributes as Err


@dataclass(frozen=True, slots=True)
class Explanation:
    """One span as the conventions see it; ``*_from`` name the key or event read, or say why not."""

    span_id: str
    name: str
    role: str
    why: str
    tool: str | None = None
    tool_from: str | None = None
    arguments_from: str | None = None
    result_from: str | None = None
    status: str | None = None
    status_from: str | None = None

    def lines(self) -> list[str]:
        """Human-readable lines, the span first."""
        out = [f"{self.span_id}  {self.name!r}: {self.role} ({self.why})"]
        if self.role == "tool":
            out.append(f"    tool       {self.tool!r} from {self.tool_from}")
            out.append(f"    arguments  {self.arguments_from}")
            out.append(f"    result     {self.result_from}")
            out.append(f"    status     {self.status} from {self.status_from}")
        return out


def explain(conventions: Conventions, span: SpanRecord) -> Explanation:
    """How ``conventions`` read ``span``."""
    attrs = span.attributes
    role = conventions.span_role(span.name, attrs)
    why = _why(conventions, span, role)
    if role is Role.OTHER and conventions.role(attrs) is Role.OTHER:
        by_name = conventions.role_by_name(span.name)
        if by_name is not Role.OTHER:
            role, why = by_name, f"span name {span.name!r}"
    if role is not Role.TOOL:
        return Explanation(span.span_id, span.name, _ROLE_NAMES[role], why)
    call = conventions.tool_call(span)
    tables = conventions.tables
    tool_key = _first_key(attrs, tables.name_keys)
    return Explanation(
        span.span_id,
        span.name,
        "tool",
        why,
        call.tool,
        f"attribute {tool_key}" if tool_key else f"the span name {span.name!r}",
        _content_from(conventions, span, tables.argument_keys, tables.argument_events),
        _content_from(conventions, span, tables.result_keys, tables.result_events),
        call.status.value,
        _status_from(span, call.result),
    )


_ROLE_NAMES = {Role.TOOL: "tool", Role.MODEL: "model", Role.AGENT: "agent", Role.OTHER: "plain"}


def _why(conventions: Conventions, span: SpanRecord, role: Role) -> str:
    attrs = span.attributes
    tables = conventions.tables
    for key, roles, fold in tables.by_value:
        value = attrs.get(key)
        if isinstance(value, str) and (value.upper() if fold else value) in roles:
            found = roles[value.upper() if fold else value]
            if role is Role.OTHER and found is Role.AGENT:
                return f"{key}={value!r}, but marked as a step of its graph's run"
            if role is Role.OTHER:
                return f"{key}={value!r}, but a synthetic span (not a call)"
            return f"{key}={value!r}"
    for key, _ in tables.by_presence:
        if key in attrs:
            if role is Role.OTHER:
                return f"{key} is set, but a synthetic span (not a call)"
            return f"{key} is set"
    keys = [f"{k}={attrs[k]!r}" for k in sorted(tables.role_keys) if attrs.get(k) is not None]
    if keys:
        return f"no role: {', '.join(keys[:3])}: no value the conventions know"
    if any(k.startswith("gen_ai.") for k in attrs):
        return "no role: gen_ai.* attributes, but no role key (gen_ai.operation.name)"
    return "no role key and no agent or model span name"


def _first_key(attrs: Any, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        if attrs.get(key) is not None:
            return key
    return None


def _content_from(
    conventions: Conventions,
    span: SpanRecord,
    keys: tuple[str, ...],
    events: tuple[tuple[str, str], ...],
) -> str:
    attrs = span.attributes
    key = _first_key(attrs, keys)
    if key is not None:
        marks = conventions.tables.placeholders.get(key, frozenset())
        value = attrs[key]
        if isinstance(value, str) and value in marks:
            return f"not captured: {key} holds {value!r}{_hint(conventions, attrs)}"
        return f"attribute {key}"
    for name, attribute in events:
        for event_name, event_attrs in span.events:
            if event_name == name and event_attrs and event_attrs.get(attribute) is not None:
                return f"event {name!r} attribute {attribute}"
    return f"not captured (none of {', '.join(keys[:4])}, ...){_hint(conventions, attrs)}"


def _hint(conventions: Conventions, attrs: Any) -> str:
    switch = conventions.content_switch(attrs)
    return f"; turn content capture on with {switch}" if switch else ""


def _status_from(span: SpanRecord, result: Any) -> str:
    attrs = span.attributes
    if attrs.get(Err.ERROR_TYPE) is not None:
        return f"{Err.ERROR_TYPE}={attrs[Err.ERROR_TYPE]!r}"
    if span.status_code == STATUS_ERROR:
        return "the span status (ERROR)"
    if result is not ABSENT and says_error(result):
        return "the result, which reports an error"
    return "the span status"


__all__ = ["Explanation", "explain"]
