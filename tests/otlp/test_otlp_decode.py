"""OTLP decoding and encoding: ids, int64, enums, key spellings, every AnyValue shape."""

from __future__ import annotations

import base64
import math
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from otel_stall.conventions import CONTENT_KEYS
from otel_stall.core.stall_attributes import SpanEvent
from otel_stall.otlp.decode import (
    DecodeError,
    any_value_to_python,
    json_any_value_to_python,
    spans_from_json,
    spans_from_proto,
)
from otel_stall.otlp.encode import (
    enrich_json_span,
    enrich_proto_span,
    proto_to_json,
    python_to_any_value,
    python_to_json_any_value,
    traces_from_json,
)

TRACE = "5B8EFFF798038103D269B633813FC60C"
SPAN = "EEE19B7EC3C1B174"


def doc(span: dict[str, Any], camel: bool = True) -> dict[str, Any]:
    if camel:
        return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    return {"resource_spans": [{"scope_spans": [{"spans": [span]}]}]}


@pytest.mark.parametrize(
    ("json_value", "python"),
    [
        ({"stringValue": "a"}, "a"),
        ({"boolValue": True}, True),
        ({"intValue": "9007199254740993"}, 9007199254740993),
        ({"intValue": 42}, 42),
        ({"doubleValue": 1.5}, 1.5),
        ({"doubleValue": 2}, 2.0),
        ({"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "x"}]}}, [1, "x"]),
        (
            {"kvlistValue": {"values": [{"key": "k", "value": {"boolValue": False}}]}},
            {"k": False},
        ),
        ({"bytesValue": base64.b64encode(b"\x00\xff").decode()}, b"\x00\xff"),
        ({"string_value": "snake"}, "snake"),
        ({"kvlist_value": {"values": [{"key": "n", "value": {"int_value": 3}}]}}, {"n": 3}),
        ({}, None),
        ({"arrayValue": {}}, []),
    ],
)
def test_json_any_value_shapes(json_value: dict[str, Any], python: Any) -> None:
    """Every OTLP/JSON AnyValue shape decodes to the matching Python value."""
    assert json_any_value_to_python(json_value) == python


@pytest.mark.parametrize("special", ["NaN", "Infinity", "-Infinity"])
def test_json_special_doubles(special: str) -> None:
    """Non-finite doubles spelled as strings decode, and encode back the same way."""
    value = json_any_value_to_python({"doubleValue": special})
    assert isinstance(value, float)
    assert not math.isfinite(value)
    assert python_to_json_any_value(value) == {"doubleValue": special}


@pytest.mark.parametrize(
    "value",
    ["text", True, 7, -(1 << 63), 2.25, b"\x01\x02", [1, "a", [True]], {"a": {"b": [1.5]}}],
)
def test_any_value_round_trips(value: Any) -> None:
    """Python -> AnyValue -> Python is the identity, for protobuf and for OTLP/JSON."""
    assert any_value_to_python(python_to_any_value(value)) == value
    assert json_any_value_to_python(python_to_json_any_value(value)) == value


def test_huge_ints_become_strings() -> None:
    """An int outside int64 cannot be an intValue; it is kept as its decimal text."""
    assert any_value_to_python(python_to_any_value(1 << 70)) == str(1 << 70)


@pytest.mark.parametrize("camel", [True, False])
def test_json_span_ids_are_hex_any_case_never_base64(camel: bool) -> None:
    """Upper-case hex ids decode to lower-case hex (json_format would base64-decode them)."""
    keys = (
        ("traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano")
        if camel
        else ("trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano")
    )
    span = dict(zip(keys, (TRACE, SPAN, SPAN.lower(), "10", 20), strict=True))
    span.update(name="s", kind=3, status={"code": 2, "message": "boom"}, unknownField={"x": 1})
    (record,) = spans_from_json(doc(span, camel))
    assert record.trace_id == TRACE.lower()
    assert record.span_id == SPAN.lower()
    assert record.parent_span_id == SPAN.lower()
    assert (record.start_ns, record.end_ns) == (10, 20)
    assert (record.status_code, record.status_message) == (2, "boom")


def test_empty_ids_stay_empty() -> None:
    """Empty ids are allowed: the trace and span ids are "", the parent is None."""
    (record,) = spans_from_json(doc({"traceId": "", "spanId": "", "parentSpanId": ""}))
    assert (record.trace_id, record.span_id, record.parent_span_id) == ("", "", None)


@pytest.mark.parametrize(
    ("span", "where"),
    [
        ({"traceId": "xyz"}, "traceId"),
        ({"traceId": TRACE[:-2]}, "traceId"),
        ({"spanId": 12}, "spanId"),
        ({"startTimeUnixNano": "soon"}, "startTimeUnixNano"),
        ({"attributes": {"k": "v"}}, "attributes"),
        ({"attributes": [{"key": "k", "value": {"intValue": "x"}}]}, "intValue"),
        ({"status": {"code": "bad"}}, "status.code"),
    ],
)
def test_bad_spans_are_reported_and_skipped(span: dict[str, Any], where: str) -> None:
    """A span with a wrong type is reported with its position; the next span still decodes."""
    good = {"traceId": TRACE, "spanId": SPAN, "name": "good"}
    obj = {"resourceSpans": [{"scopeSpans": [{"spans": [span, good]}]}]}
    errors: list[DecodeError] = []
    records = list(spans_from_json(obj, errors.append))
    assert [r.name for r in records] == ["good"]
    assert len(errors) == 1
    assert "resourceSpans[0].scopeSpans[0].spans[0]" in str(errors[0])
    assert where in str(errors[0])


def test_bad_span_raises_without_handler() -> None:
    """With no error handler, decoding raises DecodeError naming the position."""
    with pytest.raises(DecodeError, match=r"spans\[0\]\.traceId"):
        list(spans_from_json(doc({"traceId": "nothex"})))


@pytest.mark.parametrize("message_type", [TracesData, ExportTraceServiceRequest])
def test_proto_and_json_decode_alike(message_type: Any) -> None:
    """The same message decodes to the same records from protobuf and from OTLP/JSON."""
    message = message_type()
    span = (
        message.resource_spans.add()
        .scope_spans.add()
        .spans.add(
            trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN), name="execute_tool x"
        )
    )
    span.start_time_unix_nano = 5
    span.status.code = 1
    for key, value in {"s": "v", "i": 3, "l": [1, 2], "m": {"k": "v"}, "b": b"\x00"}.items():
        python_to_any_value(value, span.attributes.add(key=key).value)
    from_proto = list(spans_from_proto(message))
    from_json = list(spans_from_json(proto_to_json(message)))
    assert from_proto == from_json
    assert from_proto[0].attributes == {
        "s": "v",
        "i": 3,
        "l": [1, 2],
        "m": {"k": "v"},
        "b": b"\x00",
    }


def test_proto_json_round_trip_keeps_hex_ids() -> None:
    """proto_to_json writes hex ids and traces_from_json reads them back as the same bytes."""
    data = TracesData()
    data.resource_spans.add().scope_spans.add().spans.add(
        trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN), name="n"
    )
    obj = proto_to_json(data)
    assert obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == TRACE.lower()
    assert traces_from_json(obj) == data


def test_enrich_proto_span_overwrites_and_appends() -> None:
    """Enrichment replaces an existing key, adds new ones, appends events, and can redact."""
    span = Span(name="t")
    python_to_any_value("old", span.attributes.add(key="stall.action").value)
    python_to_any_value('{"q": 1}', span.attributes.add(key="gen_ai.tool.call.arguments").value)
    event = SpanEvent("stall.detected", 9, {"stall.kind": "repeat", "stall.count": 3})
    enrich_proto_span(span, {"stall.action": "warn", "stall.seq": 2}, [event], redact=CONTENT_KEYS)
    attrs = {kv.key: any_value_to_python(kv.value) for kv in span.attributes}
    assert attrs == {"stall.action": "warn", "stall.seq": 2}
    assert span.events[0].name == "stall.detected"
    assert span.events[0].time_unix_nano == 9
    assert {kv.key: any_value_to_python(kv.value) for kv in span.events[0].attributes} == {
        "stall.kind": "repeat",
        "stall.count": 3,
    }


def test_enrich_json_span_matches_proto() -> None:
    """Enriching the JSON form gives what enriching the protobuf form gives."""
    data = TracesData()
    pb = (
        data.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN), name="t")
    )
    python_to_any_value("raw", pb.attributes.add(key="gen_ai.tool.call.result").value)
    obj = proto_to_json(data)
    attrs = {"stall.new_fact": True, "stall.score": 0.5}
    events = [SpanEvent("stall.detected", 7, {"stall.kind": "repeat"})]
    enrich_proto_span(pb, attrs, events, redact=CONTENT_KEYS)
    enrich_json_span(
        obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0], attrs, events, redact=CONTENT_KEYS
    )
    assert traces_from_json(obj) == data


def test_fast_span_encoder_is_lossless() -> None:
    """Every Span field survives proto -> OTLP/JSON -> proto (links, events, flags, counts)."""
    data = TracesData()
    rs = data.resource_spans.add(schema_url="https://opentelemetry.io/schemas/1.26.0")
    rs.resource.dropped_attributes_count = 1
    ss = rs.scope_spans.add(schema_url="s")
    ss.scope.name, ss.scope.version = "scope", "1"
    span = ss.spans.add(
        trace_id=bytes.fromhex(TRACE),
        span_id=bytes.fromhex(SPAN),
        parent_span_id=bytes.fromhex(SPAN[::-1]),
        trace_state="k=v",
        flags=257,
        name="n",
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        dropped_attributes_count=3,
        dropped_events_count=4,
        dropped_links_count=5,
    )
    python_to_any_value(math.inf, span.attributes.add(key="inf").value)
    python_to_any_value({"a": [b"\x00", 1.5]}, span.attributes.add(key="nested").value)
    event = span.events.add(time_unix_nano=7, name="e", dropped_attributes_count=1)
    python_to_any_value("x", event.attributes.add(key="k").value)
    link = span.links.add(
        trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex(SPAN), trace_state="a=b", flags=1
    )
    python_to_any_value(2, link.attributes.add(key="n").value)
    span.status.code = 2
    span.status.message = "m"
    assert traces_from_json(proto_to_json(data)) == data
