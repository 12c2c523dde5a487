"""OTLP trace messages (protobuf or OTLP/JSON) to :class:`SpanRecord` values.

Why not ``google.protobuf.json_format.Parse`` for OTLP/JSON: it reads the
``traceId`` / ``spanId`` fields as base64, so the hex ids that OTLP/JSON uses
are silently mangled. The JSON path here is a plain dict walk over what
``orjson.loads`` returns, which is also several times faster.

OTLP/JSON rules followed: ids are hex (any case, may be empty); 64-bit
integers come as strings or numbers; enums are integers (names are accepted
too); unknown fields are ignored; camelCase keys are standard and the proto
snake_case names are accepted; every ``AnyValue`` shape is decoded (arrays to
lists, kvlists to dicts, bytes from base64 to :class:`bytes`).

This is the one OTLP decoder: the replay, the gateway and the tests all read
spans here. :func:`decode_proto` and :func:`decode_json` hand each span to a
:class:`SpanSink`; :func:`spans_from_proto` and :func:`spans_from_json` are
the same walk collecting :class:`SpanRecord` values.

Plain spans (a parent, no role attribute, no agent span name) can be handed
over as their parent link alone: the analysis keeps nothing else of them. In
protobuf that spares reading their attribute values, status and times: a
replay of ``bench/bench_replay.py``'s binary spans runs 10% fewer instructions
(callgrind, 5,000 spans: 341M instead of 381M beyond the imports). OTLP/JSON
spans are decoded in full first, so a bad value is reported wherever it is;
there the link saves only the analyzer's work (6%: 417M instead of 445M), and
is kept so that both formats hand the sink the same things.
Shortcuts for model spans (their place only) and tool spans (no record) were
measured too and left out: they saved nothing here.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, Protocol

from otel_stall.conventions import SpanRecord, is_role_span_name, looks_agent_like

__all__ = [
    "DecodeError",
    "OnError",
    "SpanSink",
    "any_value_to_python",
    "attributes_from_json",
    "attributes_from_proto",
    "decode_json",
    "decode_proto",
    "hex_id",
    "iter_json_scopes",
    "iter_json_spans",
    "json_any_value_to_python",
    "json_list",
    "record_from_proto_span",
    "span_from_json",
    "spans_from_json",
    "spans_from_proto",
]


class DecodeError(ValueError):
    """One span or message could not be decoded; ``where`` is its JSON-path-like position."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.reason = message


OnError = Callable[[DecodeError], None]
"""Called for each span that cannot be decoded; decoding goes on with the next span."""

_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8

_COMPOSITE: Final = frozenset({"array_value", "kvlist_value"})
_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_TRACE_KEYS: Final = frozenset({"resourceSpans", "resource_spans"})
"""The top-level keys of an OTLP/JSON traces object."""
_OTHER_SIGNALS: Final = frozenset({"resourceMetrics", "resourceLogs", "resourceProfiles"})
"""Other signals in the same file are not traces, and not errors either."""


class SpanSink(Protocol):
    """Where the decoder puts each span it reads."""

    def add(self, record: SpanRecord) -> None:
        """Take a whole span."""

    def add_link(self, trace_id: str, link: bytes) -> None:
        """Take a plain span as its 16-byte parent link (span id, then parent id).

        Only called when the caller gave the decoder ``plain_keys``.
        """


class _Records:
    """A sink that keeps every span as a :class:`SpanRecord` (no ``plain_keys``)."""

    def __init__(self) -> None:
        self.records: list[SpanRecord] = []

    def add(self, record: SpanRecord) -> None:
        self.records.append(record)

    def add_link(self, trace_id: str, link: bytes) -> None:
        raise AssertionError("a decoder without plain_keys hands over whole spans only")


def _raise(error: DecodeError) -> None:
    raise error


# -- protobuf ---------------------------------------------------------------


def any_value_to_python(value: Any) -> Any:
    """A protobuf ``AnyValue`` as plain Python (``None`` when it holds nothing)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [any_value_to_python(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: any_value_to_python(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which)


def attributes_from_proto(key_values: Any) -> dict[str, Any]:
    """Repeated ``KeyValue`` to a dict (the last of duplicate keys wins)."""
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            out[kv.key] = value.string_value
        elif which is None:
            out[kv.key] = None
        elif which in _COMPOSITE:
            out[kv.key] = any_value_to_python(value)
        else:
            out[kv.key] = getattr(value, which)
    return out


def record_from_proto_span(span: Any) -> SpanRecord:
    """One protobuf ``Span`` as a :class:`SpanRecord` (ids as lower-case hex)."""
    parent = span.parent_span_id
    status = span.status
    return SpanRecord(
        span.trace_id.hex(),
        span.span_id.hex(),
        parent.hex() if parent else None,
        span.name,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        attributes_from_proto(span.attributes),
        status.code,
        status.message,
        tuple((e.name, attributes_from_proto(e.attributes)) for e in span.events),
    )


def decode_proto(
    message: Any,
    sink: SpanSink,
    on_error: OnError,
    plain_keys: frozenset[str] | None = None,
) -> None:
    """Hand every span of a ``TracesData`` / ``ExportTraceServiceRequest`` to ``sink``.

    Each span entry either reaches the sink or is reported through
    ``on_error`` (an id of the wrong length), never both. With ``plain_keys``
    (the conventions' role keys), a plain span reaches it as its link alone.
    """
    for r, resource_spans in enumerate(message.resource_spans):
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            for i, span in enumerate(scope_spans.spans):
                if not _proto_ids_fit(span):
                    where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                    on_error(DecodeError(where, "trace or span id has the wrong length"))
                elif plain_keys is None or not _add_if_plain(span, sink, plain_keys):
                    sink.add(record_from_proto_span(span))


def _proto_ids_fit(span: Any) -> bool:
    """Whether each id of a protobuf ``Span`` is empty or has its proper length."""
    trace_id = span.trace_id
    span_id = span.span_id
    parent = span.parent_span_id
    return not (
        (trace_id and len(trace_id) != _TRACE_ID_BYTES)
        or (span_id and len(span_id) != _SPAN_ID_BYTES)
        or (parent and len(parent) != _SPAN_ID_BYTES)
    )


def _add_if_plain(span: Any, sink: SpanSink, plain_keys: frozenset[str]) -> bool:
    """Hand a plain span over as its link, reading nothing else of it; False if not plain.

    Plain: every id set, a parent, no agent span name and no key of ``plain_keys``.
    """
    parent = span.parent_span_id
    trace_id = span.trace_id
    span_id = span.span_id
    name = span.name
    if not (parent and trace_id and span_id) or is_role_span_name(name) or looks_agent_like(name):
        return False  # an agent-like name is kept whole: the replay lists unrecognised ones
    for kv in span.attributes:
        if kv.key in plain_keys:
            return False
    sink.add_link(trace_id.hex(), span_id + parent)
    return True


def spans_from_proto(message: Any, on_error: OnError | None = None) -> Iterator[SpanRecord]:
    """Every span of a ``TracesData`` or ``ExportTraceServiceRequest`` message.

    Ids are lower-case hex; an empty id stays ``""`` (a parent id becomes ``None``).
    A span whose id has the wrong length is reported through ``on_error`` (or
    raised as :class:`DecodeError` when no handler is given) and skipped.
    """
    return _collected(lambda records: decode_proto(message, records, on_error or _raise))


# -- OTLP/JSON ---------------------------------------------------------------


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def hex_id(value: Any, size: int, name: str) -> str:
    """A hex id as lower-case hex; ``""`` for empty or missing. Never base64."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise DecodeError(name, f"expected a hex string, got {type(value).__name__}")
    text = value.lower()
    if len(text) != size * 2:
        raise DecodeError(name, f"expected {size * 2} hex digits, got {len(text)} ({value!r})")
    try:
        bytes.fromhex(text)
    except ValueError:
        raise DecodeError(name, f"not hex: {value!r}") from None
    return text


def _int64(value: Any, name: str) -> int:
    if type(value) is int:
        return value
    if value is None:
        return 0
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise DecodeError(name, f"expected an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DecodeError(name, f"expected an integer, got {type(value).__name__} {value!r}")


def _double(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        special = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(value)
        if special is not None:
            return special
        try:
            return float(value)
        except ValueError:
            pass
    raise DecodeError("doubleValue", f"expected a number, got {value!r}")


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise DecodeError("stringValue", f"expected a string, got {type(value).__name__}")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise DecodeError("boolValue", f"expected true or false, got {value!r}")


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        raise DecodeError("bytesValue", f"expected a base64 string, got {type(value).__name__}")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=False)
    except (binascii.Error, ValueError):
        raise DecodeError("bytesValue", f"not base64: {value[:40]!r}") from None


def _values(value: Any, name: str) -> list[Any]:
    if not isinstance(value, dict):
        raise DecodeError(name, f"expected an object, got {type(value).__name__}")
    values = value.get("values", [])
    if not isinstance(values, list):
        raise DecodeError(name, f"values: expected a list, got {type(values).__name__}")
    return values


def _array(value: Any) -> list[Any]:
    return [json_any_value_to_python(v) for v in _values(value, "arrayValue")]


def _kvlist(value: Any) -> dict[str, Any]:
    return attributes_from_json(_values(value, "kvlistValue"))


_JSON_KINDS: Final[dict[str, Callable[[Any], Any]]] = {
    "stringValue": _string,
    "boolValue": _bool,
    "intValue": lambda v: _int64(v, "intValue"),
    "doubleValue": _double,
    "arrayValue": _array,
    "kvlistValue": _kvlist,
    "bytesValue": _bytes,
    "string_value": _string,
    "bool_value": _bool,
    "int_value": lambda v: _int64(v, "int_value"),
    "double_value": _double,
    "array_value": _array,
    "kvlist_value": _kvlist,
    "bytes_value": _bytes,
}


def json_any_value_to_python(value: Any) -> Any:
    """An OTLP/JSON ``AnyValue`` object as plain Python (``None`` when empty)."""
    if not isinstance(value, dict):
        if value is None:
            return None
        raise DecodeError("value", f"expected an AnyValue object, got {type(value).__name__}")
    text = value.get("stringValue")
    if text is not None and type(text) is str:
        return text
    for key, item in value.items():
        kind = _JSON_KINDS.get(key)
        if kind is not None and item is not None:
            return kind(item)
    return None


def attributes_from_json(key_values: Any) -> dict[str, Any]:
    """An OTLP/JSON ``attributes`` list to a dict (the last of duplicate keys wins)."""
    if key_values is None:
        return {}
    if not isinstance(key_values, list):
        raise DecodeError("attributes", f"expected a list, got {type(key_values).__name__}")
    out: dict[str, Any] = {}
    for kv in key_values:
        if not isinstance(kv, dict):
            raise DecodeError("attributes", f"expected key/value objects, got {kv!r:.40}")
        key = kv.get("key")
        if not isinstance(key, str):
            raise DecodeError("attributes", f"key: expected a string, got {key!r:.40}")
        value = kv.get("value")
        if type(value) is dict:
            text = value.get("stringValue")
            if type(text) is str:
                out[key] = text
                continue
        try:
            out[key] = json_any_value_to_python(value)
        except DecodeError as exc:
            raise DecodeError(f"attributes[{key!r}].{exc.where}", exc.reason) from None
    return out


def json_list(obj: Mapping[str, Any], camel: str, snake: str, where: str) -> list[Any]:
    """A list field under either spelling; missing is empty, anything else is an error."""
    value = _get(obj, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DecodeError(f"{where}{camel}", f"expected a list, got {type(value).__name__}")
    return value


def _status(span: Mapping[str, Any]) -> tuple[int, str]:
    status = span.get("status")
    if not status:
        return 0, ""
    if not isinstance(status, dict):
        raise DecodeError("status", f"expected an object, got {type(status).__name__}")
    code = status.get("code", 0)
    if type(code) is not int:
        if isinstance(code, str) and code in _STATUS_NAMES:
            code = _STATUS_NAMES[code]
        else:
            code = _int64(code, "status.code")
    message = status.get("message") or ""
    if not isinstance(message, str):
        raise DecodeError("status.message", f"expected a string, got {type(message).__name__}")
    return code, message


def fast_json_attributes(key_values: list[Any]) -> dict[str, Any]:
    """The common case, well-typed camelCase attributes; anything odd raises for the slow path."""
    out: dict[str, Any] = {}
    for kv in key_values:
        value = kv["value"]
        text = value.get("stringValue")
        if type(text) is str:
            out[kv["key"]] = text
        else:
            out[kv["key"]] = json_any_value_to_python(value)
    for key in out:
        if type(key) is not str:
            raise TypeError(key)
    return out


def span_from_json(span: Any) -> SpanRecord:
    """One OTLP/JSON span object as a :class:`SpanRecord`; raises :class:`DecodeError`.

    A fast path takes well-formed camelCase spans (what exporters write); any
    surprise falls back to the checked path, which names the bad field.
    """
    if type(span) is dict:
        try:
            trace_id = span["traceId"]
            span_id = span["spanId"]
            if len(trace_id) == 32 and len(span_id) == 16:
                parent = span.get("parentSpanId") or None
                if parent is not None and len(parent) != 16:
                    raise ValueError(parent)
                bytes.fromhex(trace_id + span_id + (parent or ""))
                status = span.get("status")
                code = status.get("code", 0) if status else 0
                name = span.get("name", "")
                attributes = span.get("attributes")
                message = (status.get("message") or "") if status else ""
                if type(code) is int and type(name) is str and type(message) is str:
                    return SpanRecord(
                        trace_id.lower(),
                        span_id.lower(),
                        parent.lower() if parent else None,
                        name,
                        int(span["startTimeUnixNano"]),
                        int(span["endTimeUnixNano"]),
                        fast_json_attributes(attributes) if attributes else {},
                        code,
                        message,
                        _json_events(span.get("events")),
                    )
        except (KeyError, TypeError, ValueError, AttributeError, DecodeError):
            pass
    return _checked_span_from_json(span)


def _checked_span_from_json(span: Any) -> SpanRecord:
    if type(span) is not dict:
        raise DecodeError("", f"expected a span object, got {type(span).__name__}")
    name = span.get("name", "")
    if not isinstance(name, str):
        raise DecodeError("name", f"expected a string, got {type(name).__name__}")
    parent = hex_id(_get(span, "parentSpanId", "parent_span_id"), _SPAN_ID_BYTES, "parentSpanId")
    code, message = _status(span)
    return SpanRecord(
        hex_id(_get(span, "traceId", "trace_id"), _TRACE_ID_BYTES, "traceId"),
        hex_id(_get(span, "spanId", "span_id"), _SPAN_ID_BYTES, "spanId"),
        parent or None,
        name,
        _int64(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano"),
        _int64(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano"),
        attributes_from_json(span.get("attributes")),
        code,
        message,
        _json_events(span.get("events")),
    )


def _json_events(events: Any) -> tuple[tuple[str, dict[str, Any]], ...]:
    """A span's events as (name, attributes): some frameworks put tool content there."""
    if not events:
        return ()
    if not isinstance(events, list):
        raise DecodeError("events", f"expected a list, got {type(events).__name__}")
    out = []
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise DecodeError(f"events[{i}]", f"expected an object, got {type(event).__name__}")
        name = event.get("name", "")
        if not isinstance(name, str):
            raise DecodeError(f"events[{i}].name", f"expected a string, got {type(name).__name__}")
        try:
            out.append((name, attributes_from_json(event.get("attributes"))))
        except DecodeError as exc:
            raise DecodeError(f"events[{i}].{exc.where}", exc.reason) from None
    return tuple(out)


def iter_json_spans(obj: Any) -> Iterator[tuple[str, Any]]:
    """``(position, raw span object)`` for every span in an OTLP/JSON traces document."""
    for where_s, spans in iter_json_scopes(obj):
        for i, span in enumerate(spans):
            yield f"{where_s}.spans[{i}]", span


def iter_json_scopes(obj: Any) -> Iterator[tuple[str, list[Any]]]:
    """``(position, span list)`` for every scope in an OTLP/JSON traces document.

    Structure errors are raised when the walk reaches them, so the spans of
    earlier scopes have been handed out already.
    """
    if not isinstance(obj, dict):
        raise DecodeError("", f"expected an object with resourceSpans, got {type(obj).__name__}")
    for r, resource_spans in enumerate(json_list(obj, "resourceSpans", "resource_spans", "")):
        where_r = f"resourceSpans[{r}]"
        if not isinstance(resource_spans, dict):
            raise DecodeError(where_r, f"expected an object, got {type(resource_spans).__name__}")
        scopes = json_list(resource_spans, "scopeSpans", "scope_spans", where_r + ".")
        if not scopes:
            scopes = json_list(
                resource_spans,
                "instrumentationLibrarySpans",
                "instrumentation_library_spans",
                where_r + ".",
            )
        for s, scope_spans in enumerate(scopes):
            where_s = f"{where_r}.scopeSpans[{s}]"
            if not isinstance(scope_spans, dict):
                raise DecodeError(where_s, f"expected an object, got {type(scope_spans).__name__}")
            yield where_s, json_list(scope_spans, "spans", "spans", where_s + ".")


def decode_json(
    obj: Any,
    sink: SpanSink,
    on_error: OnError,
    plain_keys: frozenset[str] | None = None,
) -> None:
    """Hand every span of an OTLP/JSON ``TracesData`` / ``ExportTraceServiceRequest`` to ``sink``.

    A span that cannot be decoded is reported through ``on_error`` and skipped;
    a broken document structure is raised as :class:`DecodeError` (the spans
    before it have reached the sink), and so is an object that holds no
    traces. Another signal (metrics, logs, profiles) holds no spans: nothing
    happens. With ``plain_keys``, a plain span reaches the sink as its link alone.
    """
    if isinstance(obj, dict) and obj and not (_TRACE_KEYS & obj.keys()):
        if _OTHER_SIGNALS & obj.keys():
            return
        raise DecodeError("", "not an OTLP/JSON traces object (no resourceSpans)")
    for where, span in iter_json_spans(obj):
        record = _json_record(where, span, on_error)
        if record is None:
            continue
        parent = record.parent_span_id
        if (
            plain_keys is not None
            and parent
            and record.trace_id
            and record.span_id
            and plain_keys.isdisjoint(record.attributes)
            and not is_role_span_name(record.name)
            and not looks_agent_like(record.name)
        ):
            sink.add_link(record.trace_id, bytes.fromhex(record.span_id + parent))
        else:
            sink.add(record)


def _json_record(where: str, span: Any, on_error: OnError) -> SpanRecord | None:
    """One span entry as a record, or ``None`` once its error is reported."""
    try:
        return span_from_json(span)
    except DecodeError as exc:
        on_error(DecodeError(f"{where}.{exc.where}" if exc.where else where, exc.reason))
    except RecursionError:
        on_error(DecodeError(where, "attribute values nested too deeply"))
    return None


def spans_from_json(obj: Any, on_error: OnError | None = None) -> Iterator[SpanRecord]:
    """Every span of an OTLP/JSON ``TracesData`` / ``ExportTraceServiceRequest`` dict.

    A span that cannot be decoded is reported through ``on_error`` (or raised
    as :class:`DecodeError` when no handler is given) and skipped; a broken
    document structure is always raised, after the spans before it.
    """
    return _collected(lambda records: decode_json(obj, records, on_error or _raise))


def _collected(decode: Callable[[_Records], None]) -> Iterator[SpanRecord]:
    """The records a decoder hands over, then the error that stopped it, if any."""
    records = _Records()
    try:
        decode(records)
    except DecodeError:
        yield from records.records
        raise
    yield from records.records
