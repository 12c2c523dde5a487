"""Python values to OTLP ``AnyValue`` (protobuf and OTLP/JSON), and span enrichment.

The replay's re-export and the gateway add ``stall.*`` attributes and
``stall.detected`` events to spans that are already encoded, in place, so
everything else about the span (resource, links, unknown fields) passes
through untouched.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from typing import Any, Final

from google.protobuf import json_format
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from otel_stall.core.stall_attributes import SpanEvent
from otel_stall.otlp.decode import DecodeError, hex_id, json_list

__all__ = [
    "any_value_to_json",
    "enrich_json_span",
    "enrich_proto_span",
    "proto_to_json",
    "python_to_any_value",
    "python_to_json_any_value",
    "redact_json_span",
    "redact_proto_span",
    "span_to_json",
    "span_to_proto",
    "traces_from_json",
]

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_ID_FIELDS: Final = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))
_ID_SNAKE: Final = {"traceId": "trace_id", "spanId": "span_id", "parentSpanId": "parent_span_id"}


def python_to_any_value(value: Any, out: Any = None) -> Any:
    """Fill (or create) a protobuf ``AnyValue`` from a plain Python value."""
    target = AnyValue() if out is None else out
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            target.int_value = value
        else:
            target.string_value = str(value)
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, bytes | bytearray | memoryview):
        target.bytes_value = bytes(value)
    elif isinstance(value, Mapping):
        kvlist = target.kvlist_value
        kvlist.SetInParent()
        for k, v in value.items():
            python_to_any_value(v, kvlist.values.add(key=str(k)).value)
    elif isinstance(value, list | tuple):
        array = target.array_value
        array.SetInParent()
        for v in value:
            python_to_any_value(v, array.values.add())
    elif value is not None:
        target.string_value = str(value)
    return target


def python_to_json_any_value(value: Any) -> dict[str, Any]:
    """A plain Python value as an OTLP/JSON ``AnyValue`` object."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"intValue": str(value)}
        return {"stringValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        special = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return {"doubleValue": special}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytesValue": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, Mapping):
        return {
            "kvlistValue": {
                "values": [
                    {"key": str(k), "value": python_to_json_any_value(v)} for k, v in value.items()
                ]
            }
        }
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [python_to_json_any_value(v) for v in value]}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


# -- protobuf spans ------------------------------------------------------------


def redact_proto_span(span: Any, keys: frozenset[str]) -> None:
    """Strip the raw-content attributes and events ``keys`` (``Conventions.content_keys``)."""
    attributes = span.attributes
    for i in range(len(attributes) - 1, -1, -1):
        if attributes[i].key in keys:
            del attributes[i]
    events = span.events
    for i in range(len(events) - 1, -1, -1):
        if events[i].name in keys:
            del events[i]


def enrich_proto_span(
    span: Any,
    attributes: Mapping[str, Any],
    events: Iterable[SpanEvent] = (),
    *,
    redact: frozenset[str] = frozenset(),
) -> None:
    """Add (or overwrite) attributes and append events on a protobuf ``Span``, in place."""
    if redact:  # the raw-content keys to strip first
        redact_proto_span(span, redact)
    existing = span.attributes
    if attributes:
        pending = dict(attributes)
        for kv in existing:
            if kv.key in pending:
                kv.value.Clear()
                python_to_any_value(pending.pop(kv.key), kv.value)
        for key, value in pending.items():
            python_to_any_value(value, existing.add(key=key).value)
    for event in events:
        pb = span.events.add(time_unix_nano=event.time_ns, name=event.name)
        for key, value in event.attributes.items():
            python_to_any_value(value, pb.attributes.add(key=key).value)


# -- OTLP/JSON spans -------------------------------------------------------------


def redact_json_span(span: dict[str, Any], keys: frozenset[str]) -> None:
    """Strip the raw-content attributes and events ``keys`` from an OTLP/JSON span."""
    for field, name in (("attributes", "key"), ("events", "name")):
        items = span.get(field)
        if isinstance(items, list):
            span[field] = [
                item for item in items if not (isinstance(item, dict) and item.get(name) in keys)
            ]


def enrich_json_span(
    span: dict[str, Any],
    attributes: Mapping[str, Any],
    events: Iterable[SpanEvent] = (),
    *,
    redact: frozenset[str] = frozenset(),
) -> None:
    """Add (or overwrite) attributes and append events on an OTLP/JSON span dict, in place."""
    if redact:  # the raw-content keys to strip first
        redact_json_span(span, redact)
    if attributes:
        existing = span.get("attributes")
        if not isinstance(existing, list):
            existing = span["attributes"] = []
        pending = dict(attributes)
        for kv in existing:
            if isinstance(kv, dict) and kv.get("key") in pending:
                kv["value"] = python_to_json_any_value(pending.pop(kv["key"]))
        existing.extend(
            {"key": k, "value": python_to_json_any_value(v)} for k, v in pending.items()
        )
    new_events = [
        {
            "timeUnixNano": str(e.time_ns),
            "name": e.name,
            "attributes": [
                {"key": k, "value": python_to_json_any_value(v)} for k, v in e.attributes.items()
            ],
        }
        for e in events
    ]
    if new_events:
        current = span.get("events")
        if isinstance(current, list):
            current.extend(new_events)
        else:
            span["events"] = new_events


# -- whole messages ----------------------------------------------------------------


def _b64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex() if value else ""


def _double_json(value: float) -> Any:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def any_value_to_json(value: Any) -> dict[str, Any]:
    """A protobuf ``AnyValue`` as an OTLP/JSON object, without a ``json_format`` round trip."""
    which = value.WhichOneof("value")
    if which == "string_value":
        return {"stringValue": value.string_value}
    if which == "int_value":
        return {"intValue": str(value.int_value)}
    if which == "bool_value":
        return {"boolValue": value.bool_value}
    if which == "double_value":
        return {"doubleValue": _double_json(value.double_value)}
    if which == "array_value":
        return {"arrayValue": {"values": [any_value_to_json(v) for v in value.array_value.values]}}
    if which == "kvlist_value":
        return {"kvlistValue": {"values": _key_values_json(value.kvlist_value.values)}}
    if which == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode("ascii")}
    return {}


def _key_values_json(key_values: Any) -> list[dict[str, Any]]:
    return [{"key": kv.key, "value": any_value_to_json(kv.value)} for kv in key_values]


_SPAN_FIELDS: Final = frozenset(
    {
        "trace_id",
        "span_id",
        "trace_state",
        "parent_span_id",
        "flags",
        "name",
        "kind",
        "start_time_unix_nano",
        "end_time_unix_nano",
        "attributes",
        "dropped_attributes_count",
        "events",
        "dropped_events_count",
        "links",
        "dropped_links_count",
        "status",
    }
)


def span_to_json(span: Any) -> dict[str, Any]:
    """One protobuf ``Span`` as OTLP/JSON (hex ids, int64 as strings, enums as integers).

    Written out field by field, which is several times faster than
    ``json_format``; a span with a field this code does not know (a newer
    proto) goes through ``json_format`` so that nothing is lost.
    """
    if not {f.name for f, _ in span.ListFields()} <= _SPAN_FIELDS:
        return _span_to_json_by_json_format(span)
    out: dict[str, Any] = {"traceId": span.trace_id.hex(), "spanId": span.span_id.hex()}
    if span.trace_state:
        out["traceState"] = span.trace_state
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id.hex()
    if span.flags:
        out["flags"] = span.flags
    out["name"] = span.name
    if span.kind:
        out["kind"] = span.kind
    out["startTimeUnixNano"] = str(span.start_time_unix_nano)
    out["endTimeUnixNano"] = str(span.end_time_unix_nano)
    _put_attributes(out, span)
    if span.events:
        out["events"] = [_event_to_json(e) for e in span.events]
    if span.dropped_events_count:
        out["droppedEventsCount"] = span.dropped_events_count
    if span.links:
        out["links"] = [_link_to_json(link) for link in span.links]
    if span.dropped_links_count:
        out["droppedLinksCount"] = span.dropped_links_count
    if span.HasField("status"):
        out["status"] = _status_to_json(span.status)
    return out


def _span_to_json_by_json_format(span: Any) -> dict[str, Any]:
    """A span with fields this module does not know, through ``json_format`` (ids made hex)."""
    obj: dict[str, Any] = json_format.MessageToDict(span, use_integers_for_enums=True)
    for key in ("traceId", "spanId", "parentSpanId"):
        if key in obj:
            obj[key] = _b64_to_hex(obj[key])
    for link in obj.get("links", ()):
        for key in ("traceId", "spanId"):
            if key in link:
                link[key] = _b64_to_hex(link[key])
    return obj


def _put_attributes(out: dict[str, Any], item: Any) -> None:
    """``attributes`` and ``droppedAttributesCount`` of a span, event or link, when set."""
    if item.attributes:
        out["attributes"] = _key_values_json(item.attributes)
    if item.dropped_attributes_count:
        out["droppedAttributesCount"] = item.dropped_attributes_count


def _event_to_json(event: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"timeUnixNano": str(event.time_unix_nano), "name": event.name}
    _put_attributes(out, event)
    return out


def _link_to_json(link: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"traceId": link.trace_id.hex(), "spanId": link.span_id.hex()}
    if link.trace_state:
        out["traceState"] = link.trace_state
    _put_attributes(out, link)
    if link.flags:
        out["flags"] = link.flags
    return out


def _status_to_json(status: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if status.message:
        out["message"] = status.message
    if status.code:
        out["code"] = status.code
    return out


def proto_to_json(message: Any) -> dict[str, Any]:
    """A ``TracesData`` / ``ExportTraceServiceRequest`` as OTLP/JSON, with hex ids.

    Resources and scopes (one per group) go through ``json_format``, which
    gives the standard camelCase names; spans are written by :func:`span_to_json`.
    """
    resource_spans = []
    for rs in message.resource_spans:
        head: dict[str, Any] = {}
        if rs.HasField("resource"):
            head["resource"] = json_format.MessageToDict(rs.resource, use_integers_for_enums=True)
        scopes = []
        for ss in rs.scope_spans:
            scope: dict[str, Any] = {}
            if ss.HasField("scope"):
                scope["scope"] = json_format.MessageToDict(ss.scope, use_integers_for_enums=True)
            scope["spans"] = [span_to_json(span) for span in ss.spans]
            if ss.schema_url:
                scope["schemaUrl"] = ss.schema_url
            scopes.append(scope)
        head["scopeSpans"] = scopes
        if rs.schema_url:
            head["schemaUrl"] = rs.schema_url
        resource_spans.append(head)
    return {"resourceSpans": resource_spans}


def _ids_to_b64(obj: dict[str, Any], fields: Iterable[tuple[str, int]]) -> None:
    for camel, size in fields:
        for key in (camel, _ID_SNAKE[camel]):
            if key in obj:
                text = hex_id(obj.pop(key), size, camel)
                obj[camel] = base64.b64encode(bytes.fromhex(text)).decode("ascii")


def span_to_proto(span: Mapping[str, Any], out: Any = None) -> Any:
    """One OTLP/JSON span dict as a protobuf ``Span``; raises :class:`DecodeError`."""
    fixed = dict(span)
    _ids_to_b64(fixed, _ID_FIELDS)
    links = fixed.get("links")
    if isinstance(links, list):
        fixed["links"] = [dict(link) if isinstance(link, dict) else link for link in links]
        for link in fixed["links"]:
            if isinstance(link, dict):
                _ids_to_b64(link, _ID_FIELDS[:2])
    target = Span() if out is None else out
    try:
        json_format.ParseDict(fixed, target, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise DecodeError("", str(exc)) from None
    return target


def traces_from_json(obj: Any, on_error: Any = None) -> Any:
    """An OTLP/JSON traces dict as a protobuf ``TracesData``, with hex ids read as hex.

    Spans that cannot be converted are reported through ``on_error(DecodeError)``
    (raised when no handler is given) and left out.
    """
    if not isinstance(obj, dict):
        raise DecodeError("", "expected an object with resourceSpans")
    data = TracesData()
    for r, rs in enumerate(json_list(obj, "resourceSpans", "resource_spans", "")):
        if not isinstance(rs, dict):
            raise DecodeError(f"resourceSpans[{r}]", "expected an object")
        rs_pb = data.resource_spans.add()
        head = {k: v for k, v in rs.items() if k not in ("scopeSpans", "scope_spans")}
        try:
            json_format.ParseDict(head, rs_pb, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            raise DecodeError(f"resourceSpans[{r}]", str(exc)) from None
        for s, ss in enumerate(json_list(rs, "scopeSpans", "scope_spans", f"resourceSpans[{r}].")):
            where = f"resourceSpans[{r}].scopeSpans[{s}]"
            if not isinstance(ss, dict):
                raise DecodeError(where, "expected an object")
            ss_pb = rs_pb.scope_spans.add()
            try:
                json_format.ParseDict(
                    {k: v for k, v in ss.items() if k != "spans"}, ss_pb, ignore_unknown_fields=True
                )
            except json_format.ParseError as exc:
                raise DecodeError(where, str(exc)) from None
            for i, span in enumerate(json_list(ss, "spans", "spans", where + ".")):
                if not isinstance(span, dict):
                    error = DecodeError(f"{where}.spans[{i}]", "expected a span object")
                else:
                    try:
                        span_to_proto(span, ss_pb.spans.add())
                        continue
                    except DecodeError as exc:
                        del ss_pb.spans[-1]
                        error = DecodeError(f"{where}.spans[{i}]", exc.reason)
                if on_error is None:
                    raise error
                on_error(error)
    return data
