"""Views and enriched copies of SDK spans, through the SDK's public API only.

Each property of a :class:`ReadableSpan` is a Python call (several build a new
proxy or tuple), so these helpers read every property at most once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link
from opentelemetry.util.types import Attributes

from otel_stall.conventions import SpanRecord


def attribute_dict(span: ReadableSpan) -> dict[str, Any]:
    """A new plain ``dict`` of the span's attributes, cheap to read and to extend.

    ``span.attributes`` is a read-only proxy over the SDK's ``BoundedAttributes``:
    ``dict(proxy)`` walks the ``Mapping`` protocol key by key, several times slower
    than the proxy's ``copy()``, which asks the underlying mapping for a dict copy.
    """
    attributes = span.attributes
    if not attributes:
        return {}
    try:
        copied = attributes.copy()  # type: ignore[attr-defined]
    except AttributeError:  # a ReadableSpan built on a mapping without copy()
        copied = None
    return copied if type(copied) is dict else dict(attributes)


def span_record(span: ReadableSpan, attributes: Mapping[str, Any] | None = None) -> SpanRecord:
    """The OpenTelemetry-free view of an SDK span that the conventions read.

    ``attributes`` may be a plain-dict copy of the span's attributes: lookups in
    a dict are much cheaper than in the SDK's locked mapping.
    """
    ctx = span.context
    parent = span.parent
    status = span.status
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x") if ctx else "",
        span_id=format(ctx.span_id, "016x") if ctx else "",
        parent_span_id=None if parent is None else format(parent.span_id, "016x"),
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=(span.attributes or {}) if attributes is None else attributes,
        status_code=int(status.status_code.value),
        status_message=status.description or "",
    )


def copy_span(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    events: Sequence[Event] | None = None,
) -> ReadableSpan:
    """A new ended span equal to ``span`` but with other attributes (and events).

    A plain ``dict`` of attributes is used as is (not copied): do not change it
    afterwards. Built through the public constructor; dropped counts are carried over in the
    SDK's public bounded containers so exporters still report them.
    """
    attrs: Attributes = attributes if type(attributes) is dict else dict(attributes)
    new_events: Sequence[Event] = span.events if events is None else events
    links = span.links
    if span.dropped_events:
        bounded_events: BoundedList[Event] = BoundedList.from_seq(None, new_events)
        bounded_events.dropped = span.dropped_events
        new_events = bounded_events
    if span.dropped_links:
        bounded_links: BoundedList[Link] = BoundedList.from_seq(None, links)
        bounded_links.dropped = span.dropped_links
        links = bounded_links
    if span.dropped_attributes:
        bounded = BoundedAttributes(None, attrs, immutable=True)
        bounded.dropped = span.dropped_attributes
        attrs = bounded
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attrs,
        events=new_events,
        links=links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


__all__ = ["attribute_dict", "copy_span", "span_record"]
