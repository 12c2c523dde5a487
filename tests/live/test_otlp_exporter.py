"""The capture exporter writes collector-style OTLP/JSON lines; every field that matters lives."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_stall import OtlpJsonLinesSpanExporter
from otel_stall.otlp.decode import any_value_to_python, spans_from_json
from otel_stall.otlp.encode import traces_from_json


def _record(target: Any) -> list[Any]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "capture-test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesSpanExporter(target)))
    tracer = provider.get_tracer("capture.scope", "2.0")
    with tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
        link = Link(parent.get_span_context(), {"link.kind": "follows"})
        with tracer.start_as_current_span(
            "child",
            kind=SpanKind.CLIENT,
            links=[link],
            attributes={"s": "v", "i": 7, "f": 0.25, "b": True, "seq": ("a", "b"), "ints": (1, 2)},
        ) as child:
            child.add_event("retry", {"attempt": 2})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    """Ids, parent, kind, times, attributes, events, links, status, resource and scope survive."""
    path = tmp_path / "capture.jsonl"
    spans = _record(path)
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(spans)  # SimpleSpanProcessor exports one span per call
    decoded = [traces_from_json(orjson.loads(line)) for line in lines]
    by_id = {}
    for data in decoded:
        (rs,) = data.resource_spans
        resource = {kv.key: any_value_to_python(kv.value) for kv in rs.resource.attributes}
        assert resource["service.name"] == "capture-test"
        (ss,) = rs.scope_spans
        assert (ss.scope.name, ss.scope.version) == ("capture.scope", "2.0")
        for pb in ss.spans:
            by_id[pb.span_id] = pb
    for span in spans:
        ctx = span.get_span_context()
        assert ctx is not None
        pb = by_id[ctx.span_id.to_bytes(8, "big")]
        assert pb.trace_id == ctx.trace_id.to_bytes(16, "big")
        assert pb.name == span.name
        assert pb.kind == span.kind.value + 1  # OTLP numbers kinds from 1 (INTERNAL)
        assert (pb.start_time_unix_nano, pb.end_time_unix_nano) == (span.start_time, span.end_time)
        parent = span.parent.span_id.to_bytes(8, "big") if span.parent else b""
        assert pb.parent_span_id == parent
        attrs = {kv.key: any_value_to_python(kv.value) for kv in pb.attributes}
        expected = {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}
        assert attrs == expected
        assert [(e.name, e.time_unix_nano) for e in pb.events] == [
            (e.name, e.timestamp) for e in span.events
        ]
        assert [
            {kv.key: any_value_to_python(kv.value) for kv in link.attributes} for link in pb.links
        ] == [dict(link.attributes or {}) for link in span.links]
        assert (
            pb.status.code
            == {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}[span.status.status_code]
        )
        assert pb.status.message == (span.status.description or "")


def test_lines_use_hex_ids_and_otlp_json_spelling(tmp_path: Path) -> None:
    """Each line is one resourceSpans object with hex ids, int64 strings and integer enums."""
    path = tmp_path / "capture.jsonl"
    spans = _record(path)
    obj = orjson.loads(path.read_bytes().splitlines()[0])
    span = obj["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    ctx = spans[0].get_span_context()
    assert ctx is not None
    assert span["traceId"] == f"{ctx.trace_id:032x}"
    assert span["spanId"] == f"{ctx.span_id:016x}"
    assert isinstance(span["startTimeUnixNano"], str)
    assert isinstance(span["kind"], int)
    assert [r.span_id for r in spans_from_json(obj)] == [f"{ctx.span_id:016x}"]


def test_text_and_binary_streams(tmp_path: Path) -> None:
    """The exporter writes to an open text stream or binary stream as well as to a path."""
    text, binary = io.StringIO(), io.BytesIO()
    _record(text)
    _record(binary)
    assert len(text.getvalue().splitlines()) == 2
    assert len(binary.getvalue().splitlines()) == 2
