"""Views and enriched copies of SDK spans, through the SDK's public API only.

Each property of a :class:`ReadableSpan` is a Python call (several build a new
proxy or tuple), so these helpers read every property at most once, and
:class:`EnrichedSpan` reads none until an exporter asks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import islice
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, SpanContext
from opentelemetry.util.types import Attributes

from otel_stall.conventions import SpanRecord
from otel_stall.core.stall_attributes import with_defaults


def attribute_dict(span: ReadableSpan) -> dict[str, Any]:
    """A new plain ``dict`` of the span's attributes, cheap to read and to extend.

    ``span.attributes`` is a read-only proxy over the SDK's ``BoundedAttributes``:
    ``dict(proxy)`` walks the ``Mapping`` protocol key by key, several times slower
    than the proxy's ``copy()``, which asks the underlying mapping for a dict copy.
    """
    attributes = span.attributes
    if attributes is None:  # not "not attributes": that is a Python-level __len__ call
        return {}
    try:
        copied = attributes.copy()  # type: ignore[attr-defined]
    except AttributeError:  # a ReadableSpan built on a mapping without copy()
        copied = None
    return copied if type(copied) is dict else dict(attributes)


def span_record(span: ReadableSpan, attributes: Mapping[str, Any] | None = None) -> SpanRecord:
    """The OpenTelemetry-free view of an SDK span that the conventions read.

    ``attributes`` may be a plain-dict copy of the span's attributes: lookups in
    a dict are much cheaper than in the SDK's locked mapping. Built once per tool
    span: ``to_bytes().hex()`` spells an id in under half the instructions of
    ``format()``.
    """
    ctx = span.context
    parent = span.parent
    status = span.status
    return SpanRecord(
        "" if ctx is None else ctx.trace_id.to_bytes(16, "big").hex(),
        "" if ctx is None else ctx.span_id.to_bytes(8, "big").hex(),
        None if parent is None else parent.span_id.to_bytes(8, "big").hex(),
        span.name,
        span.start_time or 0,
        span.end_time or 0,
        (span.attributes or {}) if attributes is None else attributes,
        status.status_code.value,
        status.description or "",
        _events(span),
    )


def _events(span: ReadableSpan) -> tuple[tuple[str, Any], ...]:
    """The span's events as the conventions read them (name, attributes); most spans have none."""
    events = span.events  # the SDK copies them on each read: once
    return tuple((e.name, e.attributes or {}) for e in events) if events else ()


def add_within_limits(
    attributes: dict[str, Any], extra: Mapping[str, Any], limits: SpanLimits
) -> int:
    """Add ``extra`` to a span's ``attributes`` as ``set_attribute`` would have on the live span.

    A copy must obey the span limits the SDK gave its source, or a pipeline that
    caps attributes (for cost, or a backend's limit) would get more than it
    asked for. So, as the SDK does: string values are cut to the span's value
    length limit, and past the count limit the oldest attributes make way.
    Returns how many were dropped, for the copy's ``dropped_attributes``.
    """
    length = limits.max_span_attribute_length
    if length is None:
        attributes.update(extra)
    else:
        attributes.update(
            (key, value[:length] if type(value) is str else value) for key, value in extra.items()
        )
    count = limits.max_span_attributes
    if count is None or len(attributes) <= count:
        return 0
    excess = len(attributes) - count
    for key in list(islice(attributes, excess)):  # dicts keep insertion order: oldest first
        del attributes[key]
    return excess


def redact(attributes: dict[str, Any], content_keys: frozenset[str]) -> None:
    """Strip raw payloads from a copy's attributes: the one place the live copy is redacted.

    ``content_keys`` are :attr:`Conventions.content_keys`, the keys replay strips too.
    """
    for key in content_keys.intersection(attributes):
        del attributes[key]


def redact_events(events: Sequence[Event], content_keys: frozenset[str]) -> list[Event]:
    """The events without those that carry payloads (their names are in ``content_keys``)."""
    return [event for event in events if event.name not in content_keys]


def enrich(
    span: ReadableSpan,
    attributes: dict[str, Any],
    extra: Mapping[str, Any],
    limits: SpanLimits,
    events: Sequence[Event] | None = None,
    dropped_events: int = 0,
    *,
    redacted: bool = False,
    full: bool = False,
) -> ReadableSpan:
    """What downstream gets for ``span``: ``attributes`` plus ``extra``, within ``limits``.

    ``full``: ``extra`` with its omitted defaults written out (:func:`with_defaults`).

    ``attributes`` is a plain-dict copy of the span's own (it is extended in place);
    ``events``, if given, replace the span's. A view (:class:`EnrichedSpan`) unless
    ``redacted``: the view would keep the ended span, raw payloads and all, reachable
    from what is exported (a pickling exporter would send them), so that is a full copy.
    """
    if full:
        extra = with_defaults(extra)
    dropped_attributes = add_within_limits(attributes, extra, limits)
    if redacted:
        return copy_span(span, attributes, events, dropped_events, dropped_attributes)
    return EnrichedSpan(span, attributes, events, dropped_events, dropped_attributes)


def bounded_event(name: str, attributes: Mapping[str, Any], when: int, limits: SpanLimits) -> Event:
    """An event as ``add_event`` would have made it on the live span: within the event limits."""
    bounded = BoundedAttributes(
        limits.max_event_attributes,
        attributes,
        immutable=True,
        max_value_len=limits.max_attribute_length,
    )
    return Event(name, bounded, when)


def copy_span(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    events: Sequence[Event] | None = None,
    dropped_events: int = 0,
    dropped_attributes: int = 0,
) -> ReadableSpan:
    """A new ended span equal to ``span`` but with other attributes (and events).

    A plain ``dict`` of attributes is used as is (not copied): do not change it
    afterwards. Built through the public constructor; dropped counts are carried over in the
    SDK's public bounded containers so exporters still report them. ``dropped_events``
    and ``dropped_attributes`` add to the span's own counts: what did not fit in the
    new ``events`` and ``attributes``.
    """
    fields = _copied_fields(span, attributes, events, dropped_events, dropped_attributes)
    return ReadableSpan(**fields)


def _copied_fields(
    span: ReadableSpan,
    attributes: Mapping[str, Any],
    events: Sequence[Event] | None,
    dropped_events: int,
    dropped_attributes: int,
) -> dict[str, Any]:
    """``ReadableSpan``'s constructor arguments for a copy of ``span`` with other content."""
    attrs: Attributes = attributes if type(attributes) is dict else dict(attributes)
    new_events: Sequence[Event] = span.events if events is None else events
    links = span.links
    dropped_events += span.dropped_events
    if dropped_events:
        bounded_events: BoundedList[Event] = BoundedList.from_seq(None, new_events)
        bounded_events.dropped = dropped_events
        new_events = bounded_events
    if span.dropped_links:
        bounded_links: BoundedList[Link] = BoundedList.from_seq(None, links)
        bounded_links.dropped = span.dropped_links
        links = bounded_links
    dropped_attributes += span.dropped_attributes
    if dropped_attributes:
        bounded = BoundedAttributes(None, attrs, immutable=True)
        bounded.dropped = dropped_attributes
        attrs = bounded
    return {
        "name": span.name,
        "context": span.context,
        "parent": span.parent,
        "resource": span.resource,
        "attributes": attrs,
        "events": new_events,
        "links": links,
        "kind": span.kind,
        "status": span.status,
        "start_time": span.start_time,
        "end_time": span.end_time,
        "instrumentation_scope": span.instrumentation_scope,
    }


def _read_through(name: str) -> Any:
    """A read-only property that returns the source span's property of the same name.

    Typed ``Any`` so that it may stand in for each of the base class's typed properties.
    """
    return property(attrgetter(f"_stall_source.{name}"), doc=f"The source span's ``{name}``.")


class EnrichedSpan(ReadableSpan):
    """An ended span as downstream sees it: ``source`` with other attributes (and events).

    What :func:`copy_span` returns, without the copy. Building one is four
    stores; the copy reads every property of the source (events and links are
    rebuilt as tuples on each read) and runs the constructor. Every public
    property reads through to the source instead, so an exporter sees the same
    values either way. The source stays reachable from the view, so redacted
    spans take the copy. Measured with callgrind on a tool span (CPython 3.11,
    SDK 1.45): the view costs ~2,400 instructions to build and the copy ~30,000;
    the OTLP encoder then reads the view for ~18,000 more than the copy, so the
    view saves ~10,000 per enriched span, about 1% of a tool span's cost in the
    OTLP/gRPC wiring; where nothing reads the span after (a no-op exporter) it
    saves ~28,000, a fifth of what otel-stall adds to a tool span there.

    Re-measured for what the OTLP encoder reads fastest (callgrind, CPython 3.11,
    SDK 1.45, one tool span with 5 ``stall.*`` attributes, build + ``encode_spans``):
    this view 10.3k + 573.9k; a real ``ReadableSpan`` made by copying the source's
    ``__dict__`` and giving it a plain-dict ``_attributes`` 14.8k + 567.3k (2k less
    in all, for reading private fields); the public-constructor copy 38.0k +
    555.0k (9k more). What the encoder costs is the attributes themselves, ~18k
    each (the source span alone encodes in 477.5k): so fewer of them
    (:mod:`otel_stall.core.stall_attributes` omits those at their default), and
    the view stays.

    ``ReadableSpan``'s own methods (``to_json``) and any code that reads its
    private fields get a full copy, made through the public constructor on the
    first such read: a ``_name`` that is missing here is never the source's.
    """

    def __init__(
        self,
        source: ReadableSpan,
        attributes: dict[str, Any],
        events: Sequence[Event] | None = None,
        dropped_events: int = 0,
        dropped_attributes: int = 0,
    ) -> None:
        # No super().__init__(): that is the copy this class exists to avoid.
        self._stall_source = source
        self._stall_attributes = attributes
        self._stall_events = None if events is None else tuple(events)
        self._stall_dropped_events = dropped_events
        """Events that did not fit in ``events``, on top of the source's own count."""
        self._stall_dropped_attributes = dropped_attributes
        """Attributes that did not fit in ``attributes``, on top of the source's own count."""
        self._stall_copied = False

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: a private field of the base class.
        if name.startswith(("__", "_stall_")) or not name.startswith("_") or self._stall_copied:
            raise AttributeError(name)  # not a private field, or the copy is made and lacks it
        fields = _copied_fields(
            self._stall_source,
            self._stall_attributes,
            self._stall_events,
            self._stall_dropped_events,
            self._stall_dropped_attributes,
        )
        ReadableSpan.__init__(self, **fields)
        self._stall_copied = True
        return object.__getattribute__(self, name)

    @property
    def attributes(self) -> Attributes:
        """The enriched attributes, read-only."""
        return MappingProxyType(self._stall_attributes)

    @property
    def events(self) -> Sequence[Event]:
        """The given events if any, else the source's."""
        events = self._stall_events
        return self._stall_source.events if events is None else events

    @property
    def dropped_events(self) -> int:
        """The source's dropped events, plus those that did not fit in the given events."""
        return self._stall_source.dropped_events + self._stall_dropped_events

    @property
    def dropped_attributes(self) -> int:
        """The source's dropped attributes, plus those that did not fit in the given ones."""
        return self._stall_source.dropped_attributes + self._stall_dropped_attributes

    def get_span_context(self) -> SpanContext | None:
        """The source's span context."""
        return self._stall_source.get_span_context()

    # Everything else is the source's, read through C-level getters (no Python frame).
    name = _read_through("name")
    context = _read_through("context")
    kind = _read_through("kind")
    parent = _read_through("parent")
    start_time = _read_through("start_time")
    end_time = _read_through("end_time")
    status = _read_through("status")
    links = _read_through("links")
    resource = _read_through("resource")
    instrumentation_info = _read_through("instrumentation_info")
    instrumentation_scope = _read_through("instrumentation_scope")
    dropped_links = _read_through("dropped_links")


__all__ = [
    "EnrichedSpan",
    "add_within_limits",
    "attribute_dict",
    "bounded_event",
    "copy_span",
    "enrich",
    "redact",
    "span_record",
]
