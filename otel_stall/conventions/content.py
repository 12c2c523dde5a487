"""Tool content as frameworks write it: envelopes with per-call ids, placeholders, error flags.

Why here and not in the normaliser's volatile keys: ``id`` is noise only beside
a call id (``{"id": null, "tool_call_id": "call_3"}`` in a LangGraph
``ToolMessage``), while an ``id`` in a tool's own result is often the very fact
that tells two results apart. A key list cannot say "beside"; the normaliser's
keys are also the user's policy (``OTEL_STALL_VOLATILE_KEYS``) and the compiled
canonicaliser's. So the conventions strip a framework's envelope, and only a
payload that names a call id (one substring test, no parse otherwise) is
parsed at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

CALL_ID_KEYS: Final = frozenset({"tool_call_id", "call_id", "callId"})
"""Keys holding the model's id for one call: new on every call by design."""
BESIDE_CALL_ID: Final = frozenset({"id", "traceId", "prompt_id", "schedulerId"})
"""Keys that are per call when a call id sits beside them (a message envelope's own ids)."""
TIMING_KEYS: Final = frozenset(
    {"durationMs", "duration_ms", "duration", "startTime", "endTime", "start_time", "end_time"}
)
"""Durations and start/end times inside an envelope: differ on every call."""
_ERROR_STATUSES: Final = frozenset({"error", "failed", "failure"})

Event = tuple[str, Mapping[str, Any]]
"""A span event as the conventions read it: its name and attributes."""


def without_call_ids(value: Any) -> Any:
    """``value`` without its envelope's per-call fields, if it names a call id.

    A JSON text that holds none of :data:`CALL_ID_KEYS` comes back as it is
    (one substring scan each); one that does comes back parsed, without the
    call ids, the keys beside them, timings, and any string equal to a call id.
    """
    if type(value) is str:
        if 'call_id"' not in value and '"callId"' not in value:  # call_id" ends tool_call_id" too
            return value
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    elif isinstance(value, dict | list):
        parsed = value
    else:
        return value
    if not isinstance(parsed, dict | list):
        return value
    ids: set[str] = set()
    _collect_ids(parsed, ids, 0)
    if not ids:
        return value
    return _strip(parsed, ids, 0)


def _collect_ids(value: Any, ids: set[str], depth: int) -> None:
    if depth > 64:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key in CALL_ID_KEYS and isinstance(item, str):
                ids.add(item)
            else:
                _collect_ids(item, ids, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _collect_ids(item, ids, depth + 1)


def _strip(value: Any, ids: set[str], depth: int) -> Any:
    if depth > 64:
        return value
    if isinstance(value, dict):
        envelope = not CALL_ID_KEYS.isdisjoint(value)
        return {
            key: _strip(item, ids, depth + 1)
            for key, item in value.items()
            if key not in CALL_ID_KEYS
            and key not in TIMING_KEYS
            and not (envelope and key in BESIDE_CALL_ID)
            and not (isinstance(item, str) and item in ids)
        }
    if isinstance(value, list):
        return [_strip(item, ids, depth + 1) for item in value]
    return value


def says_error(result: Any) -> bool:
    """Whether a result reports a failure in its own envelope, the span being OK.

    ``{"status": "error"}`` (gemini-cli, a LangChain ``ToolMessage`` under
    ``data``, or serialised with ``lc`` as OpenLLMetry writes it),
    ``is_error``/``isError`` (LlamaIndex, MCP), or a lone ``{"error": ...}``
    (Google ADK's ``on_tool_error_callback``).
    """
    if type(result) is str:
        if "error" not in result and "Error" not in result:
            return False
        text = result.lstrip()
        if not text.startswith("{"):
            return False
        try:
            result = orjson.loads(text)
        except orjson.JSONDecodeError:
            return False
    if not isinstance(result, dict):
        return False
    data = result.get("data")
    output = result.get("output")
    return (
        _error_status(result.get("status"))
        or (isinstance(data, dict) and _error_status(data.get("status")))
        or _lc_error(result)
        or (isinstance(output, dict) and _lc_error(output))
        or result.get("is_error") is True
        or result.get("isError") is True
        or (len(result) == 1 and "error" in result)
    )


def _lc_error(value: dict[Any, Any]) -> bool:
    """Whether a LangChain-serialised ``ToolMessage`` says it failed.

    ``{"lc": 1, "kwargs": {"status": "error"}}``, as OpenLLMetry's LangChain
    instrumentation writes it (under ``output``).
    """
    kwargs = value.get("kwargs")
    return value.get("lc") == 1 and isinstance(kwargs, dict) and _error_status(kwargs.get("status"))


def _error_status(value: Any) -> bool:
    return isinstance(value, str) and value.lower() in _ERROR_STATUSES


def event_value(events: Sequence[Event], names: Sequence[tuple[str, str]]) -> Any:
    """The first ``(event name, attribute)`` of ``names`` that an event holds, or ``None``."""
    for wanted, key in names:
        for name, attributes in events:
            if name == wanted and attributes:
                value = attributes.get(key)
                if value is not None:
                    return value
    return None


def event_values(events: Sequence[Event], names: Sequence[tuple[str, str]]) -> list[Any]:
    """Every value of ``names`` the events hold, in event order (one per choice, say)."""
    wanted = dict(names)
    values = []
    for name, attributes in events:
        key = wanted.get(name)
        if key is not None and attributes:
            value = attributes.get(key)
            if value is not None:
                values.append(value)
    return values


__all__ = [
    "BESIDE_CALL_ID",
    "CALL_ID_KEYS",
    "TIMING_KEYS",
    "Event",
    "event_value",
    "event_values",
    "says_error",
    "without_call_ids",
]
