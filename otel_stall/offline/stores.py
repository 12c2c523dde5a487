"""What trace stores hand out, read as the OTLP/JSON the one decoder reads.

A user's spans are often in a store, not in a collector's file: they come as
Jaeger's JSON (the UI's "Download JSON" and the query API's
``{"data": [{"traceID", "spans", "processes"}]}``), Tempo's ``/api/traces/<id>``
(``{"batches": [...]}``, OTLP/JSON with base64 ids), OTLP wrapped in
``{"trace": ...}`` (Tempo's v2 API) or ``{"result": ...}`` (Jaeger's v3 API),
and Phoenix's span export (``{"data": [spans]}`` with ``context.trace_id``, or
OTLP/JSON spans from its ``/spans/otlpv1``).

Each is turned into an OTLP/JSON traces object here, one span entry for one
span entry, so the rest of the replay is unchanged: the same decoder, the
same enrichment, and ``--out`` writes as many spans as came in. A value that
cannot be converted (an id that is neither hex nor base64, a time that does
not parse) is passed on as it was, so the decoder reports that span with its
reason and counts it, like any other bad span.

Deliberate decisions:

- Ids are hex or base64, decided once per file from the first trace id that
  settles it (32 or fewer hex digits, or base64 of 16 bytes; the lengths never
  overlap), so a base64 file gives no error per span, and a file that mixes
  the two reports only the spans that differ from its first.
- Jaeger's ids drop leading zeros' padding in some versions (a 64-bit trace
  id is 16 digits): they are padded back to OTLP's width.
- A Jaeger span's parent is its first ``CHILD_OF`` reference, else its first
  ``FOLLOWS_FROM``; the other references become links. ``span.kind``,
  ``otel.status_code``/``otel.status_description``, ``error`` and
  ``otel.scope.*`` (``otel.library.*``) are read back into the fields Jaeger's
  own OTLP translator took them from, as that translator reverses them.
- Phoenix stores attributes nested (``{"llm": {"model_name": ...}}``):
  nested objects, and lists of objects, are flattened back to dotted keys.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import re
from collections.abc import Iterable
from typing import IO, Any, Final

import orjson

__all__ = [
    "JAEGER",
    "PHOENIX",
    "STORES_READ",
    "TEMPO",
    "WRAPPED",
    "Ids",
    "describe",
    "from_store",
    "normalise",
    "read_store",
]

JAEGER: Final = "jaeger-json"
TEMPO: Final = "tempo-json"
PHOENIX: Final = "phoenix-json"
WRAPPED: Final = "otlp-json-wrapped"
STORES_READ: Final = (
    "trace-store exports: Jaeger JSON (UI download or query API), Tempo's /api/traces "
    "(batches), OTLP/JSON wrapped in trace or result, and Phoenix's span export"
)
"""The store shapes read, for messages that must say so."""

_TRACE_KEYS: Final = ("resourceSpans", "resource_spans")
_WRAPPERS: Final = ("trace", "result")
_MAX_WRAP: Final = 4
_TRACE_HEX: Final = 32
_SPAN_HEX: Final = 16
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_KINDS: Final = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_STATUS: Final = {"OK": 1, "ERROR": 2, "UNSET": 0}
_ISO: Final = re.compile(r"^(.+?[T ]\d\d:\d\d(?::\d\d)?)(?:[.,](\d+))?(Z|z|[+-]\d\d:?\d\d)?$")
_SCOPE_NAME: Final = ("otel.scope.name", "otel.library.name")
_SCOPE_VERSION: Final = ("otel.scope.version", "otel.library.version")
_JAEGER_FIELDS: Final = frozenset(
    {"span.kind", "otel.status_code", "otel.status_description", *_SCOPE_NAME, *_SCOPE_VERSION}
)


class Ids:
    """One file's id encoding, decided once: hex (``False``) or base64 (``True``)."""

    __slots__ = ("base64",)

    def __init__(self) -> None:
        self.base64: bool | None = None

    def convert(self, value: Any, hex_digits: int) -> Any:
        """An id as padded lower-case hex; a value that does not fit is returned as it was."""
        if not isinstance(value, str) or not value:
            return value
        if self.base64 is None and hex_digits == _TRACE_HEX:
            self._decide(value)
        if self.base64:
            raw = _unbase64(value)
            return raw.hex() if raw is not None and len(raw) * 2 == hex_digits else value
        if len(value) <= hex_digits and _HEX.issuperset(value):
            return value.lower().rjust(hex_digits, "0")
        return value

    def _decide(self, value: str) -> None:
        if len(value) <= _TRACE_HEX and _HEX.issuperset(value):
            self.base64 = False
        else:
            raw = _unbase64(value)
            if raw is not None and len(raw) * 2 == _TRACE_HEX:
                self.base64 = True

    def is_hex(self) -> bool:
        """Whether the file's ids were found to be hex (nothing to convert)."""
        return self.base64 is False

    def otlp(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An OTLP/JSON traces object with its ids in hex (in place); hex files are left alone."""
        if self.base64 is False:
            return obj
        for span in _otlp_spans(obj):
            for camel, snake, digits in (
                ("traceId", "trace_id", _TRACE_HEX),
                ("spanId", "span_id", _SPAN_HEX),
                ("parentSpanId", "parent_span_id", _SPAN_HEX),
            ):
                key = camel if camel in span else snake
                if key in span:
                    span[key] = self.convert(span[key], digits)
            if self.is_hex():
                return obj  # decided on this span: hex, nothing more to convert
        return obj


def _unbase64(value: str) -> bytes | None:
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        return None


def _otlp_spans(obj: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """Every span dict of an OTLP/JSON object, skipping whatever is malformed (the decoder says)."""
    resources = obj.get("resourceSpans", obj.get("resource_spans"))
    for rs in resources if isinstance(resources, list) else ():
        if not isinstance(rs, dict):
            continue
        scopes = (
            rs.get("scopeSpans") or rs.get("scope_spans") or rs.get("instrumentationLibrarySpans")
        )
        for ss in scopes if isinstance(scopes, list) else ():
            spans = ss.get("spans") if isinstance(ss, dict) else None
            for span in spans if isinstance(spans, list) else ():
                if isinstance(span, dict):
                    yield span


def normalise(obj: Any, ids: Ids, fmt: str) -> tuple[str, Any]:
    """A JSON unit that names ``resourceSpans`` somewhere: unwrapped, its ids in hex.

    ``fmt`` is what the sniffer called it; a store shape is named instead.
    Anything else is returned as it was, for the decoder to judge.
    """
    if type(obj) is dict and ("resourceSpans" in obj or "resource_spans" in obj):
        return fmt, obj if ids.base64 is False else ids.otlp(obj)
    found = from_store(obj, ids)
    return (fmt, obj) if found is None else found


def from_store(obj: Any, ids: Ids) -> tuple[str, dict[str, Any]] | None:
    """``(format, OTLP/JSON traces object)`` for a store's shape, or ``None``."""
    for _ in range(_MAX_WRAP):
        if isinstance(obj, list):
            obj = {"data": obj}
        if not isinstance(obj, dict):
            return None
        if any(key in obj for key in _TRACE_KEYS):
            return WRAPPED, ids.otlp(obj)
        if isinstance(obj.get("batches"), list):
            return TEMPO, ids.otlp({"resourceSpans": obj["batches"]})
        if "spans" in obj and isinstance(obj["spans"], list):
            return JAEGER, _jaeger([obj], ids)
        data = obj.get("data")
        if isinstance(data, list):
            return _data(data, ids)
        inner = next((obj[key] for key in _WRAPPERS if isinstance(obj.get(key), dict | list)), None)
        if inner is None:
            return None
        obj = inner
    return None


def _data(data: list[Any], ids: Ids) -> tuple[str, dict[str, Any]] | None:
    """A ``data`` list: Jaeger traces or Phoenix spans (an empty list is an empty Jaeger reply)."""
    first = next((item for item in data if isinstance(item, dict)), None)
    if first is None:
        return (JAEGER, {"resourceSpans": []}) if not data else None
    if "spans" in first:
        return JAEGER, _jaeger(data, ids)
    if "context" in first:
        return PHOENIX, _phoenix(data, ids)
    if any(key in first for key in ("span_id", "spanId")):
        # Phoenix's .../spans/otlpv1: the spans are OTLP/JSON already (snake_case keys).
        return PHOENIX, ids.otlp(
            {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": data}]}]}
        )
    return None


def describe(obj: Any) -> str:
    """What a JSON document that is not a span file holds, for the error message."""
    if isinstance(obj, dict):
        errors = obj.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return f"an error response ({errors[0].get('msg') or errors[0].get('message')!r})"
        keys = ", ".join(repr(k) for k in list(obj)[:10]) + (", ..." if len(obj) > 10 else "")
        text = f"a JSON object with keys {keys}" if obj else "an empty JSON object"
        data = obj.get("data")
        if isinstance(data, list) and data and isinstance(data[0], dict):
            inner = ", ".join(repr(k) for k in list(data[0])[:10])
            text += f" (its 'data' items have keys {inner})"
        return text
    if isinstance(obj, list):
        return f"a JSON array of {len(obj)} items"
    return f"a JSON {type(obj).__name__}"


# -- values ------------------------------------------------------------------


def _any_value(value: Any) -> dict[str, Any]:
    """Plain JSON as an OTLP/JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": _key_values(value.items())}}
    return {}


def _key_values(items: Iterable[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"key": str(key), "value": _any_value(value)} for key, value in items]


def _typed(tag: Any) -> tuple[str, Any] | None:
    """A Jaeger tag (``{"key", "type", "value"}``) as a key and a plain value."""
    if not isinstance(tag, dict) or not isinstance(tag.get("key"), str):
        return None
    value = tag.get("value")
    kind = str(tag.get("type", "")).lower()
    if kind == "binary" and isinstance(value, str):
        return tag["key"], {"bytesValue": value}
    if kind == "int64" and isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    elif kind == "float64" and isinstance(value, int | str) and not isinstance(value, bool):
        with contextlib.suppress(ValueError):
            value = float(value)
    elif kind == "bool" and isinstance(value, str):
        value = value.lower() == "true"
    return tag["key"], value


def _tags(tags: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in tags if isinstance(tags, list) else ():
        pair = _typed(tag)
        if pair is not None:
            out[pair[0]] = pair[1]
    return out


def _attributes(values: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        if isinstance(value, dict) and set(value) == {"bytesValue"}:
            out.append({"key": key, "value": value})
        else:
            out.append({"key": key, "value": _any_value(value)})
    return out


def _nanos_from_micros(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(int(value * 1000))
    return value


def _nanos_from_iso(value: Any) -> Any:
    """An ISO 8601 time (any number of fraction digits, ``Z`` or an offset) in nanoseconds."""
    if not isinstance(value, str):
        return value
    match = _ISO.match(value.strip())
    if match is None:
        return value
    base, fraction, zone = match.groups()
    zone = "+00:00" if zone in (None, "Z", "z") else zone
    try:
        when = dt.datetime.fromisoformat(base.replace(" ", "T") + zone)
    except ValueError:
        return value
    seconds = int(when.timestamp())
    return str(seconds * 1_000_000_000 + int((fraction or "0")[:9].ljust(9, "0")))


# -- Jaeger --------------------------------------------------------------------


def _jaeger(traces: list[Any], ids: Ids) -> dict[str, Any]:
    """Jaeger traces as OTLP/JSON: one resource per process and scope."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    out: list[Any] = []
    for trace in traces:
        if not isinstance(trace, dict):
            continue
        processes = _object(trace.get("processes"))
        for span in trace.get("spans") or ():
            if not isinstance(span, dict):
                out.append({"resource": {}, "scopeSpans": [{"spans": [span]}]})
                continue  # the decoder reports it, and counts it
            process = span.get("process") or processes.get(str(span.get("processID")), {})
            tags = _tags(span.get("tags"))
            scope = (_first(tags, _SCOPE_NAME), _first(tags, _SCOPE_VERSION))
            key = (id(trace), span.get("processID"), id(span.get("process")), scope)
            group = groups.get(key)
            if group is None:
                group = groups[key] = {"scope": _scope(scope), "spans": list[Any]()}
                out.append({"resource": _resource(process), "scopeSpans": [group]})
            group["spans"].append(_jaeger_span(span, tags, ids))
    return {"resourceSpans": out}


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _first(tags: dict[str, Any], keys: tuple[str, ...]) -> Any:
    return next((tags[key] for key in keys if key in tags), None)


def _scope(scope: tuple[Any, Any]) -> dict[str, Any]:
    name, version = scope
    out = {"name": str(name)} if name is not None else {}
    if version is not None:
        out["version"] = str(version)
    return out


def _resource(process: Any) -> dict[str, Any]:
    if not isinstance(process, dict):
        return {}
    attributes = {"service.name": process.get("serviceName", "")} | _tags(process.get("tags"))
    return {"attributes": _attributes(attributes)}


def _jaeger_span(span: dict[str, Any], tags: dict[str, Any], ids: Ids) -> dict[str, Any]:
    trace_id = ids.convert(span.get("traceID"), _TRACE_HEX)
    parent, links = _references(span, trace_id, ids)
    start = span.get("startTime")
    duration = span.get("duration", 0)
    end = start + duration if isinstance(start, int) and isinstance(duration, int) else start
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": ids.convert(span.get("spanID"), _SPAN_HEX),
        "name": span.get("operationName", ""),
        "startTimeUnixNano": _nanos_from_micros(start),
        "endTimeUnixNano": _nanos_from_micros(end),
        "status": _jaeger_status(tags),
        "attributes": _attributes({k: v for k, v in tags.items() if k not in _JAEGER_FIELDS}),
        "events": [_jaeger_log(log) for log in span.get("logs") or () if isinstance(log, dict)],
    }
    if parent:
        out["parentSpanId"] = parent
    if links:
        out["links"] = links
    kind = _KINDS.get(str(tags.get("span.kind", "")).lower())
    if kind:
        out["kind"] = kind
    return out


def _references(span: dict[str, Any], trace_id: Any, ids: Ids) -> tuple[Any, list[Any]]:
    """The parent (first CHILD_OF, else FOLLOWS_FROM, else ``parentSpanID``) and the links."""
    refs = [r for r in span.get("references") or () if isinstance(r, dict)]
    parent_ref = next((r for r in refs if r.get("refType") == "CHILD_OF"), None)
    parent_ref = parent_ref or next((r for r in refs if r.get("refType") == "FOLLOWS_FROM"), None)
    if parent_ref is not None and ids.convert(parent_ref.get("traceID"), _TRACE_HEX) != trace_id:
        parent_ref = None  # a parent in another trace is a link
    parent = ids.convert(parent_ref.get("spanID"), _SPAN_HEX) if parent_ref else None
    if parent is None:
        parent = ids.convert(span.get("parentSpanID"), _SPAN_HEX) or None
    links = [
        {
            "traceId": ids.convert(r.get("traceID"), _TRACE_HEX),
            "spanId": ids.convert(r.get("spanID"), _SPAN_HEX),
        }
        for r in refs
        if r is not parent_ref
    ]
    return parent, links


def _jaeger_status(tags: dict[str, Any]) -> dict[str, Any]:
    code = _STATUS.get(str(tags.get("otel.status_code", "")).upper(), 0)
    if not code and tags.get("error") in (True, "true"):
        code = 2
        tags.pop("error")
    message = tags.get("otel.status_description")
    return {"code": code, "message": message} if isinstance(message, str) else {"code": code}


def _jaeger_log(log: dict[str, Any]) -> dict[str, Any]:
    fields = _tags(log.get("fields"))
    name = fields.pop("event", "")
    return {
        "timeUnixNano": _nanos_from_micros(log.get("timestamp")),
        "name": name if isinstance(name, str) else str(name),
        "attributes": _attributes(fields),
    }


# -- Phoenix -------------------------------------------------------------------


def _phoenix(spans: list[Any], ids: Ids) -> dict[str, Any]:
    """Phoenix's spans as OTLP/JSON: one resource (the export names none)."""
    out = [_phoenix_span(span, ids) if isinstance(span, dict) else span for span in spans]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": out}]}]}


def _phoenix_span(span: dict[str, Any], ids: Ids) -> dict[str, Any]:
    context = _object(span.get("context"))
    attributes = _flat(span.get("attributes"))
    kind = span.get("span_kind")
    if isinstance(kind, str) and kind.upper() != "UNKNOWN":
        attributes.setdefault("openinference.span.kind", kind.upper())
    status = {"code": _STATUS.get(str(span.get("status_code", "")).upper(), 0)}
    if isinstance(span.get("status_message"), str):
        status["message"] = span["status_message"]
    out: dict[str, Any] = {
        "traceId": ids.convert(context.get("trace_id"), _TRACE_HEX),
        "spanId": ids.convert(context.get("span_id"), _SPAN_HEX),
        "name": span.get("name", ""),
        "startTimeUnixNano": _nanos_from_iso(span.get("start_time")),
        "endTimeUnixNano": _nanos_from_iso(span.get("end_time")),
        "attributes": _attributes(attributes),
        "status": status,
        "events": [
            {
                "name": event.get("name", ""),
                "timeUnixNano": _nanos_from_iso(event.get("timestamp")),
                "attributes": _attributes(_flat(event.get("attributes"))),
            }
            for event in span.get("events") or ()
            if isinstance(event, dict)
        ],
    }
    parent = ids.convert(span.get("parent_id"), _SPAN_HEX)
    if parent:
        out["parentSpanId"] = parent
    return out


def _flat(value: Any, prefix: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Nested attributes (objects, lists of objects) back to OpenInference's dotted keys."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for key, item in value.items():
            _flat(item, f"{prefix}{key}.", out)
    elif isinstance(value, list) and any(isinstance(item, dict) for item in value):
        for index, item in enumerate(value):
            _flat(item, f"{prefix}{index}.", out)
    elif prefix:
        out[prefix[:-1]] = value
    return out


def read_store(body: IO[bytes], cap: int, ids: Ids) -> tuple[str | None, Any, str]:
    """A JSON file the sniffer did not place: ``(format, OTLP/JSON, "")`` for a store's shape.

    Otherwise ``(None, None, what was found)``: the file is not a span file,
    and the reason names its top-level keys.
    """
    data = body.read(cap + 1)
    if len(data) > cap:
        return None, None, f"a JSON document of more than {cap} bytes"
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, None, "JSON that is not one document, nor lines of OTLP/JSON"
    found = from_store(obj, ids)
    if found is None:
        return None, None, describe(obj)
    return found[0], found[1], ""
