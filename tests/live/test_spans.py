"""The enriched span downstream sees equals a full copy of the ended span, field for field."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_stall.live.enriched import EnrichedSpan, copy_span

PROPERTIES = [
    "name",
    "context",
    "kind",
    "parent",
    "start_time",
    "end_time",
    "status",
    "events",
    "links",
    "resource",
    "instrumentation_scope",
    "dropped_attributes",
    "dropped_events",
    "dropped_links",
]


class _Keep(SpanProcessor):
    """Keeps what ``on_end`` receives: the SDK's own ended spans."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def _ended(dropping: bool) -> ReadableSpan:
    """An ended child span with attributes, events, links and an error status (and drops)."""
    limits = SpanLimits(max_span_attributes=2, max_events=1, max_links=1) if dropping else None
    keep = _Keep()
    provider = TracerProvider(resource=Resource.create({"service.name": "svc"}), span_limits=limits)
    provider.add_span_processor(keep)
    tracer = provider.get_tracer("scope", "1.2")
    with tracer.start_as_current_span("parent") as parent:
        link = Link(parent.get_span_context(), {"why": "retry"})
        with tracer.start_as_current_span(
            "execute_tool search",
            kind=SpanKind.CLIENT,
            links=[link, link],
            attributes={"gen_ai.tool.name": "search", "a": 1, "b": 2},
        ) as span:
            span.add_event("first", {"n": 1})
            span.add_event("second", {"n": 2})
            span.add_event("third", {"n": 3})  # dropped events (2) and links (1) differ
            span.set_status(Status(StatusCode.ERROR, "boom"))
    return keep.ended[0]


def _extra(source: ReadableSpan) -> dict[str, Any]:
    attrs = dict(source.attributes or {})
    attrs["stall.seq"] = 3
    return attrs


@pytest.mark.parametrize("more_dropped", [0, 4])
@pytest.mark.parametrize("dropping", [False, True], ids=["within limits", "over limits"])
@pytest.mark.parametrize("events", [None, [Event("stall.detected", {"stall.kind": "repeat"}, 5)]])
@pytest.mark.parametrize("prop", PROPERTIES)
def test_every_public_property_matches_a_full_copy(
    prop: str, events: list[Event] | None, dropping: bool, more_dropped: int
) -> None:
    """Each public property of the view equals the same property of copy_span's copy."""
    source = _ended(dropping)
    view = EnrichedSpan(source, _extra(source), events, more_dropped, 2 * more_dropped)
    copied = copy_span(source, _extra(source), events, more_dropped, 2 * more_dropped)
    assert getattr(view, prop) == getattr(copied, prop)


@pytest.mark.parametrize("dropping", [False, True], ids=["within limits", "over limits"])
def test_what_was_left_out_adds_to_the_dropped_counts(dropping: bool) -> None:
    """Events and attributes that did not fit in the given ones count as dropped, on top."""
    source = _ended(dropping)
    for span in (
        EnrichedSpan(source, _extra(source), [], 3, 5),
        copy_span(source, _extra(source), [], 3, 5),
    ):
        assert span.dropped_events == source.dropped_events + 3
        assert span.dropped_attributes == source.dropped_attributes + 5


@pytest.mark.parametrize("dropping", [False, True], ids=["within limits", "over limits"])
def test_attributes_are_the_enriched_ones(dropping: bool) -> None:
    """The view's attributes are the given ones (read-only), not the source's."""
    source = _ended(dropping)
    view = EnrichedSpan(source, _extra(source))
    assert dict(view.attributes or {}) == _extra(source)
    assert "stall.seq" not in (source.attributes or {})
    with pytest.raises(TypeError):
        view.attributes["stall.seq"] = 4  # type: ignore[index]


@pytest.mark.parametrize("more_dropped", [0, 4])
@pytest.mark.parametrize("dropping", [False, True], ids=["within limits", "over limits"])
def test_otlp_encoding_is_byte_for_byte_a_copy(dropping: bool, more_dropped: int) -> None:
    """An OTLP exporter encodes the view exactly as it encodes a full copy."""
    source = _ended(dropping)
    events = [Event("stall.detected", {"stall.kind": "repeat"}, 5)]
    view = EnrichedSpan(source, _extra(source), events, more_dropped, more_dropped)
    copied = copy_span(source, _extra(source), events, more_dropped, more_dropped)
    assert encode_spans([view]).SerializeToString() == encode_spans([copied]).SerializeToString()


def test_private_readers_get_a_full_copy() -> None:
    """ReadableSpan's own to_json, which reads private fields, sees the enriched span."""
    source = _ended(True)
    view = EnrichedSpan(source, _extra(source), None, 2)
    assert view.to_json() == copy_span(source, _extra(source), None, 2).to_json()
    assert '"stall.seq": 3' in view.to_json()


def test_unknown_names_still_raise() -> None:
    """A name no ReadableSpan has is an AttributeError, not a copy or a recursion."""
    source = _ended(False)
    view = EnrichedSpan(source, _extra(source))
    assert isinstance(view, ReadableSpan)
    for name in ("no_such_field", "__no_such_dunder__", "_stall_missing", "_no_such_private"):
        with pytest.raises(AttributeError):
            getattr(view, name)
