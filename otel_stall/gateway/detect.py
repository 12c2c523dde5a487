"""Classify spans as they arrive, and detect on a decided trace: all the gateway asks the decoder.

Every call into ``otel_stall.otlp`` and ``otel_stall.offline`` the gateway
makes is here, so a rename there is one edit here.

Classification reads a span's role attributes only
(:attr:`Conventions.role_keys`, all that :meth:`Conventions.role` reads), and
only in a ``ScopeSpans`` whose bytes hold one of those keys at all: ordinary
HTTP, database and queue spans are never decoded past their ids. Detection
feeds :class:`~otel_stall.offline.analysis.TraceAnalyzer` in arrival order, as
the replay's intake does, so a trace gets the replay's verdicts and attributes.

A trace whose parent chains would cost too much to walk (a cycle, or a very
deep chain under many tool and model spans) is forwarded un-enriched instead
of being analysed: one trace must not hold an Export call or the sweeper.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_stall.conventions import (
    OUTPUT_EVENTS,
    PLAIN,
    Conventions,
    Reading,
    Role,
    SpanRecord,
    is_role_span_name,
)
from otel_stall.core.policy import StallPolicy
from otel_stall.core.stall_attributes import SpanEvent, all_with_defaults
from otel_stall.gateway.buffer import AGENT, FULL, MODEL, ROOT, TOOL, Entry, Held, Ready
from otel_stall.gateway.wire import Piece, varint
from otel_stall.offline.analysis import TraceAnalyzer, TraceResult
from otel_stall.otlp.decode import (
    any_value_to_python,
    record_from_proto_span,
)
from otel_stall.otlp.encode import enrich_proto_span, python_to_any_value
from otel_stall.semconv import (
    GenAIOperation,
    StallEventAttributes,
)

__all__ = [
    "AGENT_NAME",
    "ANCESTRY_BUDGET",
    "MARK",
    "Outcome",
    "TraceDetector",
    "ancestry_cost",
    "encoded_additions",
]

AGENT_NAME: Final = GenAIOperation.INVOKE_AGENT.encode()
"""Bytes every span named as an agent span holds (``invoke_agent …``)."""
ANCESTRY_BUDGET: Final = 250_000
"""Most parent hops one trace's analysis may walk (about a tenth of a second)."""
MAX_HOPS: Final = 10_000
"""The analysis stops a walk after this many hops (``offline.analysis``)."""
_EVENT: Final = StallEventAttributes.EVENT_NAME
_KINDS: Final = {Role.TOOL: TOOL, Role.MODEL: MODEL, Role.AGENT: AGENT}
_KEY_TAG: Final = b"\x0a"
"""``KeyValue.key`` (field 1, length-delimited) on the wire."""
_ATTRIBUTE_FIELD: Final = b"\x4a"
"""``Span.attributes`` (field 9, length-delimited) on the wire."""
_EVENT_FIELD: Final = b"\x5a"
"""``Span.events`` (field 11, length-delimited)."""
_EVENT_TIME: Final = b"\x09"
"""``Span.Event.time_unix_nano`` (field 1, fixed64)."""
_FIXED64: Final = struct.Struct("<Q")
_EVENT_NAME: Final = b"\x12"
"""``Span.Event.name`` (field 2, length-delimited)."""
_EVENT_ATTRIBUTE_FIELD: Final = b"\x1a"
"""``Span.Event.attributes`` (field 3, length-delimited)."""
MARK: Final = b"stall."
"""Bytes every ``stall.*`` key and ``stall.detected`` event holds: without them, a span is clean."""
_STALL_PREFIX: Final = "stall."
_CACHE_MAX: Final = 50_000


def key_pattern(keys: Iterable[str]) -> re.Pattern[bytes]:
    """A pattern that finds any of ``keys`` encoded as a ``KeyValue.key`` (tag, length, key).

    One regex pass over a scope's bytes instead of one ``find`` per key: the
    tag byte anchors it, so the engine skips ahead with a byte search and
    tries the keys only at each attribute's start (bench_gateway, ``plain``: the
    scope test from 1.40 to 0.79 us a span, with 10 built-in role keys). A key
    written with a non-minimal length varint (no encoder does) is not found:
    its span is then forwarded un-enriched.
    """
    encoded = sorted((k.encode() for k in keys), key=len, reverse=True)
    if not encoded:
        return re.compile(b"(?!)")  # matches nothing
    heads = (varint(len(k)) + k for k in encoded)
    return re.compile(_KEY_TAG + b"(?:" + b"|".join(re.escape(h) for h in heads) + b")")


class _Encodings:
    """Encoded ``stall.*`` attributes and events, to append to a span as bytes.

    :func:`enrich_proto_span` adds each attribute and event through upb's
    Python API, and the checks for an upstream enrichment walked every
    attribute and event of the span: together a fifth of the gateway's CPU on
    agent traffic (bench_gateway, ``agent``). Protobuf merges concatenated
    encodings (repeated fields append), so a span's additions are encoded
    once as bytes and appended: to a held span's bytes with no parse at all,
    to a live span with one ``MergeFromString``. Attribute values repeat
    (actions, counts, statuses), so each key and value is encoded once, by
    that same :func:`python_to_any_value`. The result parses to the message
    :func:`enrich_proto_span` makes; a span whose bytes hold ``stall.``
    (maybe enriched upstream) still goes through it, to overwrite in place.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[bytes, str, type, Any], bytes] = {}

    def blob(self, attributes: Mapping[str, Any], tag: bytes = _ATTRIBUTE_FIELD) -> bytes:
        """``attributes`` as repeated ``KeyValue`` fields numbered by ``tag``."""
        cache = self._cache
        parts: list[bytes] = []
        for key, value in attributes.items():
            index = (tag, key, type(value), tuple(value) if type(value) is list else value)
            encoded = cache.get(index)
            if encoded is None:
                encoded = self._encode(index, key, value)
            parts.append(encoded)
        return b"".join(parts)

    def _encode(self, index: tuple[bytes, str, type, Any], key: str, value: Any) -> bytes:
        kv = KeyValue(key=key)
        python_to_any_value(value, kv.value)
        data = bytes(kv.SerializeToString())
        encoded = index[0] + varint(len(data)) + data
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[index] = encoded
        return encoded

    def event(self, event: SpanEvent) -> bytes:
        """One ``Span.events`` field: its time and name, then its attributes."""
        name = event.name.encode()
        time = _EVENT_TIME + _FIXED64.pack(event.time_ns) if event.time_ns else b""
        data = time + (_EVENT_NAME + varint(len(name)) + name if name else b"")
        data += self.blob(event.attributes, _EVENT_ATTRIBUTE_FIELD)
        return _EVENT_FIELD + varint(len(data)) + data

    def additions(self, attributes: Mapping[str, Any] | None, events: Iterable[SpanEvent]) -> bytes:
        """What one span gets: its ``stall.*`` attributes, then its events."""
        head = self.blob(attributes) if attributes else b""
        return head + b"".join(self.event(e) for e in events)


_ENCODINGS: Final = _Encodings()


def encoded_additions(attributes: Mapping[str, Any] | None, events: Iterable[SpanEvent]) -> bytes:
    """``stall.*`` attributes and events as span fields: append them to a clean span's bytes."""
    return _ENCODINGS.additions(attributes, events)


@dataclass(slots=True)
class Outcome:
    """What detection made of one trace."""

    result: TraceResult | None
    """``None`` when the trace was not analysed (nothing to detect, or too costly)."""
    pieces: list[Piece]
    """Its held spans, enriched where detection says, ready to pack."""
    changed: list[Any] = field(default_factory=list)
    """The ``ScopeSpans`` of the current request holding a span enriched in place."""
    skipped: str = ""
    """Why it was not analysed, when that is worth counting (``too_complex``)."""


class TraceDetector:
    """Span classification and per-trace detection for one pipeline."""

    def __init__(
        self, policy: StallPolicy, conventions: Conventions, *, full_attributes: bool = False
    ) -> None:
        self.policy = policy
        self.conventions = conventions
        self.full_attributes = full_attributes
        """Write the ``stall.*`` attributes at their defaults too (``all_with_defaults``)."""
        interest = conventions.role_keys
        self.interest = interest
        """Role attribute keys, or ``None``: a custom ``role`` reads anything, decode every span."""
        self.interest_pattern = key_pattern(interest or ())
        """Finds a role key as an attribute's key on the wire: one pass over a scope's bytes."""
        self._model_keys, self._output_prefixes = conventions.model_reading_keys
        self._output_events = frozenset(name for name, _ in OUTPUT_EVENTS)

    def read_model(self, span: Any) -> Reading:
        """A model span's reading, as it is forwarded: its outcome, usage and output hashes.

        Only the attributes the reading takes are decoded (not the input messages),
        and only the output events; the span itself is not kept, its reading is:
        the output's digest and chanting scan stand for its text (hashes only; a
        scan holds at most two windows of chunk hashes, see :mod:`otel_stall.core.chanting`).
        """
        keys, prefixes = self._model_keys, self._output_prefixes
        attrs = {
            kv.key: any_value_to_python(kv.value)
            for kv in span.attributes
            if kv.key in keys or kv.key.startswith(prefixes)
        }
        wanted = self._output_events
        events = tuple(
            (e.name, {kv.key: any_value_to_python(kv.value) for kv in e.attributes})
            for e in span.events
            if e.name in wanted
        )
        status = span.status
        record = SpanRecord(
            "",
            span.span_id.hex(),
            None,
            span.name,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            attrs,
            status.code,
            status.message,
            events,
        )
        return self.conventions.read(record, Role.MODEL)

    def kind_of(self, span: Any) -> int:
        """``TOOL``, ``MODEL``, ``AGENT`` or 0, from the role attributes alone."""
        interest = self.interest
        assert interest is not None
        found: dict[str, Any] | None = None
        for kv in span.attributes:
            key = kv.key
            if key in interest:
                if found is None:
                    found = {}
                found[key] = any_value_to_python(kv.value)
        if found is None:
            return 0
        return _KINDS.get(self.conventions.role(found), 0)

    @staticmethod
    def named_as_agent(span: Any) -> bool:
        """Whether the span's name gives it a role (the full decoder then decides its role)."""
        return is_role_span_name(span.name)

    # -- a decided trace ------------------------------------------------------------------

    def detect(self, ready: Ready) -> Outcome:
        """Analyse one trace and enrich its spans; held spans come back as pieces."""
        entries = ready.entries
        active = sum(1 for e in entries if e.kind in (TOOL, MODEL, FULL))
        if not active:
            # No tool or model span: the analysis would find no run (and cost nothing).
            return Outcome(None, _as_is(entries))
        if active * MAX_HOPS > ANCESTRY_BUDGET and (
            ancestry_cost(entries, ready.links) > ANCESTRY_BUDGET
        ):
            return Outcome(None, _as_is(entries), skipped="too_complex")
        messages: dict[int, Any] = {}
        analyzer = self._analyzer(ready, messages)
        result = analyzer.analyse()
        pieces: list[Piece] = []
        changed: list[Any] = []
        attributes, events = result.attributes, result.events
        if self.full_attributes:
            attributes = all_with_defaults(attributes)
        for index, entry in enumerate(entries):
            source = entry.source
            if source is None:
                continue
            if isinstance(source, Held):
                data = source.data
                if attributes or events:
                    data = _enriched_bytes(entry, source, messages.get(index), attributes, events)
                pieces.append((source.envelope, data))
            elif (attributes or events) and _enrich_live(entry, source, attributes, events):
                changed.append(entry.scope)
        return Outcome(result, pieces, changed)

    def _analyzer(self, ready: Ready, messages: dict[int, Any]) -> TraceAnalyzer:
        """A :class:`TraceAnalyzer` fed the trace in arrival order, as the replay feeds it.

        Model spans and plain roots were forwarded already; their entries keep
        what the analysis reads of them (ids and times), given as bare records.
        """
        trace_id = ready.trace_id.hex()
        analyzer = TraceAnalyzer(trace_id, self.policy, self.conventions)
        links = bytes(ready.links)
        for i in range(0, len(links), 16):
            analyzer.add_link(links[i : i + 16])
        for index, entry in enumerate(ready.entries):
            if entry.kind in (MODEL, ROOT):
                parent = entry.parent.hex() if entry.parent else None
                span_id = entry.span_id.hex()
                bare = SpanRecord(trace_id, span_id, parent, "", entry.start_ns, entry.end_ns, {})
                analyzer.add(bare, reading=entry.outcome or PLAIN)  # read as it was forwarded
                continue
            span = entry.source
            if isinstance(span, Held):
                span = messages[index] = Span.FromString(span.data)
            analyzer.add(record_from_proto_span(span))
        return analyzer


def _enriched_bytes(
    entry: Entry,
    held: Held,
    parsed: Any,
    attributes: dict[str, Any],
    events: dict[str, Any],
) -> bytes:
    """A held span's bytes with its ``stall.*`` additions (its own bytes when it gets none)."""
    span_id = entry.span_id.hex()
    attrs = attributes.get(span_id)
    span_events = events.get(span_id)
    if not attrs and not span_events:
        return held.data
    if not entry.marked:
        return held.data + _ENCODINGS.additions(attrs, span_events or ())
    span = parsed if parsed is not None else Span.FromString(held.data)
    return span.SerializeToString() if _enrich(span, attrs, span_events) else held.data


def _enrich_live(
    entry: Entry, span: Any, attributes: dict[str, Any], events: dict[str, Any]
) -> bool:
    """Enrich a span still in its request, in place; whether it changed."""
    span_id = entry.span_id.hex()
    attrs = attributes.get(span_id)
    span_events = events.get(span_id)
    if not attrs and not span_events:
        return False
    if not entry.marked:
        span.MergeFromString(_ENCODINGS.additions(attrs, span_events or ()))
        return True
    return _enrich(span, attrs, span_events)


def _enrich(span: Any, attrs: dict[str, Any] | None, span_events: Any) -> bool:
    """The careful path, for a span that may be enriched already (upstream): no duplicates."""
    if span_events and any(e.name == _EVENT for e in span.events):
        # Already enriched upstream (a live StallSpanProcessor): keep its events.
        span_events = None
    if not attrs and not span_events:
        return False
    if attrs and not any(kv.key.startswith(_STALL_PREFIX) for kv in span.attributes):
        span.MergeFromString(_ENCODINGS.blob(attrs))
        attrs = None
    enrich_proto_span(span, attrs or {}, span_events or ())
    return True


def _as_is(entries: list[Entry]) -> list[Piece]:
    return [(e.source.envelope, e.source.data) for e in entries if isinstance(e.source, Held)]


def ancestry_cost(entries: list[Entry], links: bytearray) -> int:
    """An upper bound on the parent hops the analysis walks for this trace.

    Each tool and model span walks up to its run; the walk ends at an agent
    span, at a parent not in the trace, or after :data:`MAX_HOPS`. Depths are
    memoised and a cycle counts as :data:`MAX_HOPS`, so this costs one pass.
    """
    data = bytes(links)
    parents: dict[bytes, bytes] = {
        data[i : i + 8]: data[i + 8 : i + 16] for i in range(0, len(data), 16)
    }
    stops: set[bytes] = set()
    for entry in entries:
        parents[entry.span_id] = entry.parent
        if entry.kind == AGENT:
            stops.add(entry.span_id)
    depth: dict[bytes, int] = {}
    total = 0
    for entry in entries:
        if entry.kind in (TOOL, MODEL, FULL) and entry.parent:
            total += _depth(entry.parent, parents, stops, depth)
    return total


def _depth(
    start: bytes, parents: dict[bytes, bytes], stops: set[bytes], memo: dict[bytes, int]
) -> int:
    """Hops from ``start`` up to a stop, memoised; a cycle or a too-long chain is ``MAX_HOPS``."""
    path: list[bytes] = []
    seen: set[bytes] = set()
    node = start
    while True:
        known = memo.get(node)
        if known is not None:
            hops = known
            break
        if node in stops or node not in parents:
            hops = 1
            break
        if node in seen:
            hops = MAX_HOPS
            break
        seen.add(node)
        path.append(node)
        parent = parents[node]
        if not parent:
            hops = 1
            break
        node = parent
    for node in reversed(path):
        hops = min(hops + 1, MAX_HOPS)
        memo[node] = hops
    return hops
