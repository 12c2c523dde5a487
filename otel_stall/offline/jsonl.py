"""The reference's JSONL tool-call trace format, one event per line.

::

    {"type": "model_call"}
    {"type": "tool_call", "seq": 1, "tool": "search", "args": {...}, "result": {...},
     "status": "ok"}

(one object per line; wrapped here for width).

``model_call`` lines open a round. Optional fields: ``run`` (or ``run_key``) to
hold several runs in one file, ``exempt`` and ``approval`` (booleans) for a
tool that declares itself, ``call_id``, ``span_id``, ``start_ns``, ``end_ns``
and, on model calls, ``model``. Lines of any other ``type`` are skipped
silently, as the reference does.

Capture is not the same as content: a missing ``"result"`` (or ``"args"``)
key means the content was not captured (:data:`~otel_stall.core.records.ABSENT`),
while ``"result": null`` is a result that holds nothing (empty).

A bad line becomes an :class:`~otel_stall.core.errors.InputError` naming the file,
the line and the reason; it is skipped and the other lines go on. So does a
line longer than ``max_line`` bytes (a compression bomb's one endless line must
not be read into memory whole).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any, Final

import orjson

from otel_stall.core.errors import InputError
from otel_stall.core.records import ABSENT, ModelCall, RunKey, Status, ToolCall

__all__ = [
    "DEFAULT_MAX_LINE",
    "LoadResult",
    "capped_lines",
    "is_event",
    "load_events",
    "looks_like_trace_line",
    "too_long",
]

DEFAULT_MAX_LINE: Final = 128 << 20
"""Longest line (or message) read: 32 times the collector's 4 MiB default gRPC
receive limit, so real exports fit, while a bomb's line is skipped, not loaded."""
_STATUSES = {s.value: s for s in Status}
_EVENT_TYPES = ("tool_call", "model_call")
_PIECE: Final = 1 << 20
"""The most one read of a line takes: a longer line is read in several."""


@dataclass(frozen=True, slots=True)
class LoadResult:
    """The events read from one source, and every line that could not be read."""

    events: list[ToolCall | ModelCall] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    lines: int = 0
    """Non-blank lines read, whether they became events, were skipped or were bad."""
    skipped: int = 0
    """Well-formed lines of another ``type`` (logs, notes), ignored on purpose."""

    @property
    def ok(self) -> bool:
        """Whether every line was read."""
        return not self.errors


class _BadLine(ValueError):
    """The reason a line is not a valid event."""


def load_events(
    source: str | os.PathLike[str] | IO[str] | IO[bytes],
    *,
    name: str | None = None,
    max_line: int = DEFAULT_MAX_LINE,
) -> LoadResult:
    """Read every event of a JSONL trace from a path or an open text or binary stream.

    ``name`` labels errors (it defaults to the path, or the stream's ``name``)
    and is the run key of events that carry no ``run`` field, so traces read
    from two files never merge into one run. Never raises for bad content:
    an unreadable file is one error, a bad line is one error, and so is a line
    longer than ``max_line`` (bytes, or characters for a text stream).
    """
    if isinstance(source, str | os.PathLike):
        label = name if name is not None else os.fspath(source)
        try:
            with open(source, "rb") as stream:
                return _load(stream, label, max_line)
        except OSError as exc:
            reason = exc.strerror or exc.__class__.__name__
            return LoadResult(errors=[InputError(label, None, None, f"cannot read: {reason}")])
    label = name if name is not None else str(getattr(source, "name", "<stream>"))
    return _load(source, label, max_line)


def looks_like_trace_line(line: bytes | str) -> bool:
    """Whether one line is an event of this format: a cheap check for format sniffing."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return is_event(obj)


def is_event(obj: Any) -> bool:
    """Whether a parsed line is a tool or model call (``type`` may be implied by ``tool``)."""
    if not isinstance(obj, dict):
        return False
    kind = obj.get("type")
    return kind in _EVENT_TYPES or (kind is None and "tool" in obj)


def too_long(limit: int) -> str:
    """The reason given for a line or message over the cap, with the flag that raises it."""
    size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
    return f"over the {size} cap: skipped (raise the cap with --max-message-mib)"


def _load(stream: IO[str] | IO[bytes], label: str, max_line: int) -> LoadResult:
    events: list[ToolCall | ModelCall] = []
    errors: list[InputError] = []
    lines = skipped = 0
    position = [0]
    try:
        for number, raw in _numbered(stream, position, max_line):
            lines += 1
            if raw is None:
                errors.append(InputError(label, number, None, f"line {too_long(max_line)}"))
                continue
            try:
                event = _event(raw, label)
            except _BadLine as exc:
                errors.append(InputError(label, number, None, str(exc)))
                continue
            if event is None:
                skipped += 1
            else:
                events.append(event)
    except (OSError, UnicodeError) as exc:
        # A text stream that cannot decode cannot go on; keep what was read. It
        # decodes in chunks, so the bad line is somewhere after the last good one.
        where = f"past line {position[0]}" if position[0] else "from the start"
        errors.append(InputError(label, None, None, f"cannot read {where}: {exc}"))
    return LoadResult(events, errors, lines, skipped)


def _numbered(
    stream: IO[Any], position: list[int], max_line: int
) -> Iterator[tuple[int, str | bytes | None]]:
    """Non-blank lines with their numbers; ``None`` stands for a line over ``max_line``."""
    for number, line in enumerate(capped_lines(stream, max_line), 1):
        position[0] = number
        if line is None or line.strip():
            yield number, line


def capped_lines(stream: IO[Any], max_line: int) -> Iterator[Any]:
    """Each line of a text or binary stream, or ``None`` for one over ``max_line``.

    A line is read in pieces of at most 1 MiB, so one over the cap costs at
    most ``max_line`` of memory, and its rest is read and dropped: a bomb's
    endless line is never held whole. A line is over the cap when it holds
    more than ``max_line`` bytes (characters, for text) before its newline.
    """
    readline = stream.readline
    while True:
        parts, size = _line_parts(readline, max_line + 1)
        if not parts:
            return
        if size > max_line and not _ends_line(parts[-1]):
            del parts
            _drop_rest_of_line(readline)
            yield None
        else:
            yield parts[0] if len(parts) == 1 else parts[0][:0].join(parts)


def _line_parts(readline: Callable[[int], Any], limit: int) -> tuple[list[Any], int]:
    """The pieces of one line, up to ``limit`` in all, and their total length."""
    parts: list[Any] = []
    size = 0
    while size < limit:
        part = readline(min(_PIECE, limit - size))
        if not part:
            break
        parts.append(part)
        size += len(part)
        if _ends_line(part):
            break
    return parts, size


def _ends_line(part: Any) -> bool:
    return bool(part.endswith(b"\n" if isinstance(part, bytes) else "\n"))


def _drop_rest_of_line(readline: Callable[[int], Any]) -> None:
    while True:
        piece = readline(_PIECE)
        if not piece or _ends_line(piece):
            return


def _event(raw: str | bytes, default_run: str) -> ToolCall | ModelCall | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise _BadLine(f"invalid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise _BadLine(f"expected a JSON object, got {_json_type(obj)}")
    kind = obj.get("type")
    if kind is None and "tool" in obj:
        kind = "tool_call"  # the type is implied by the fields
    if not isinstance(kind, str):
        raise _BadLine('"type" must be "tool_call" or "model_call"')
    if kind not in _EVENT_TYPES:
        return None
    run_key = _run_key(obj, default_run)
    span_id = _optional(obj, "span_id", str)
    start_ns = _optional(obj, "start_ns", int) or 0
    end_ns = _optional(obj, "end_ns", int) or 0
    if kind == "model_call":
        model = _optional(obj, "model", str)
        return ModelCall(run_key, span_id, start_ns, end_ns, model)
    tool = obj.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        raise _BadLine('"tool" must be a non-empty string')
    return ToolCall(
        tool=tool,
        arguments=obj.get("args", ABSENT),
        result=obj.get("result", ABSENT),
        status=_status(obj.get("status", "ok")),
        run_key=run_key,
        seq=_optional(obj, "seq", int),
        call_id=_optional(obj, "call_id", str),
        span_id=span_id,
        start_ns=start_ns,
        end_ns=end_ns,
        exempt=_optional(obj, "exempt", bool) or False,
        approval=_optional(obj, "approval", bool) or False,
    )


def _status(value: Any) -> Status:
    if isinstance(value, str):
        status = _STATUSES.get(value.strip().lower())
        if status is not None:
            return status
    choices = ", ".join(_STATUSES)
    raise _BadLine(f'"status" must be one of {choices}, got {_short(value)}')


def _run_key(obj: dict[str, Any], default: str) -> RunKey:
    for key in ("run", "run_key"):
        if key in obj:
            value = obj[key]
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                return value
            raise _BadLine(f'"{key}" must be a string or a whole number, got {_short(value)}')
    return default


def _optional(obj: dict[str, Any], key: str, kind: type[Any]) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if not ok:
        expected = {str: "a string", int: "a whole number", bool: "true or false"}[kind]
        raise _BadLine(f'"{key}" must be {expected}, got {_short(value)}')
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 40 else text[:37] + "..."
