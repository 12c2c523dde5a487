"""OTLP trace requests as bytes: read, spliced, cut into per-span pieces, packed into payloads.

A held span keeps only its own encoding and a shared :class:`Envelope` (its
resource and scope, encoded once per ``ScopeSpans`` of a request), never the
request it came in: a parsed sub-message would keep the whole request alive.
Packing writes the protobuf framing by hand (a tag, a varint length, the
bytes), which is all a ``ResourceSpans``/``ScopeSpans`` wrapper is, so pieces
are joined without parsing them again.

Every payload :func:`pack` returns stays under the upstream's message limit;
a span that alone is over it is handed back to be counted, never sent.

Reading goes the other way, on the request as it came: :func:`scope_ranges`
finds each ``ScopeSpans``' bytes without parsing them, and :func:`spliced`
copies the scopes nothing changed in from those bytes, re-encoding only the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

__all__ = [
    "Envelope",
    "Packed",
    "Piece",
    "envelope_of",
    "pack",
    "pieces_of",
    "read_varint",
    "scope_ranges",
    "spliced",
    "trace_id_of",
    "varint",
]

_RESOURCE_SPANS: Final = b"\x0a"
"""Field 1 (``resource_spans``, length-delimited) of the request."""
_SCOPE_SPANS: Final = b"\x12"
"""``ResourceSpans.scope_spans`` (field 2, length-delimited)."""
_FIELD1: Final = b"\x0a"
_FIELD2: Final = b"\x12"
_FIELD3: Final = b"\x1a"
_FRAME: Final = 16
"""Bytes allowed per framed span and per wrapper for tags and lengths (a varint is at most 10)."""


def varint(value: int) -> bytes:
    """Protobuf's base-128 varint for a non-negative int."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


@dataclass(frozen=True, slots=True, eq=False)
class Envelope:
    """A span's resource and scope, encoded as the fields around its spans; shared, never copied."""

    resource: bytes
    """``ResourceSpans`` fields other than ``scope_spans``: resource and schema URL."""
    scope: bytes
    """``ScopeSpans`` fields other than ``spans``: scope and schema URL."""
    size: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", len(self.resource) + len(self.scope) + 2 * _FRAME)


def envelope_of(resource_spans: Any, scope_spans: Any) -> Envelope:
    """The envelope of spans in ``scope_spans`` (inside ``resource_spans``), as bytes."""
    resource = b""
    if resource_spans.HasField("resource"):
        resource = _field(_FIELD1, resource_spans.resource.SerializeToString())
    if resource_spans.schema_url:
        resource += _field(_FIELD3, resource_spans.schema_url.encode())
    scope = b""
    if scope_spans.HasField("scope"):
        scope = _field(_FIELD1, scope_spans.scope.SerializeToString())
    if scope_spans.schema_url:
        scope += _field(_FIELD3, scope_spans.schema_url.encode())
    return Envelope(resource, scope)


Piece = tuple[Envelope, bytes]
"""One span's encoding with its envelope."""


@dataclass(slots=True)
class Packed:
    """What :func:`pack` made: payloads with their span counts, and spans too large to send."""

    payloads: list[tuple[bytes, int]] = field(default_factory=list)
    oversized: list[bytes] = field(default_factory=list)
    """Encodings of single spans that are over the limit even alone."""


def pack(pieces: Iterable[Piece], limit: int) -> Packed:
    """Group pieces by envelope into requests of at most ``limit`` bytes each."""
    out = Packed()
    groups: dict[int, tuple[Envelope, list[bytes]]] = {}
    for envelope, span in pieces:
        group = groups.get(id(envelope))
        if group is None:
            groups[id(envelope)] = (envelope, [span])
        else:
            group[1].append(span)
    parts: list[bytes] = []
    size = 0
    count = 0
    for envelope, spans in groups.values():
        for chunk, chunk_count in _chunks(envelope, spans, limit, out.oversized):
            if parts and size + len(chunk) > limit:
                out.payloads.append((b"".join(parts), count))
                parts, size, count = [], 0, 0
            parts.append(chunk)
            size += len(chunk)
            count += chunk_count
    if parts:
        out.payloads.append((b"".join(parts), count))
    return out


def _chunks(
    envelope: Envelope, spans: list[bytes], limit: int, oversized: list[bytes]
) -> Iterator[tuple[bytes, int]]:
    """``resource_spans`` entries of one envelope, each at most ``limit`` bytes framed."""
    room = limit - envelope.size - _FRAME
    framed: list[bytes] = []
    size = 0
    for span in spans:
        if len(span) + _FRAME > room:
            oversized.append(span)
            continue
        if framed and size + len(span) + _FRAME > room:
            yield _wrap(envelope, framed), len(framed)
            framed, size = [], 0
        framed.append(_field(_FIELD2, span))
        size += len(span) + _FRAME
    if framed:
        yield _wrap(envelope, framed), len(framed)


def _wrap(envelope: Envelope, framed: list[bytes]) -> bytes:
    scope_spans = envelope.scope + b"".join(framed)
    resource_spans = envelope.resource + _field(_FIELD2, scope_spans)
    return _field(_RESOURCE_SPANS, resource_spans)


def pieces_of(payload: bytes) -> list[Piece]:
    """Cut a serialized request back into pieces (to split a batch the upstream refused)."""
    request = ExportTraceServiceRequest.FromString(payload)
    out: list[Piece] = []
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            envelope = envelope_of(rs, ss)
            out.extend((envelope, span.SerializeToString()) for span in ss.spans)
    return out


# -- reading a request's bytes: scope ranges and splicing --------------------------------


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``data[pos]`` and the position after it (the reverse of :func:`varint`)."""
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _raw_fields(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """``(number, wire type, tag start, value start, end)`` of each field in ``data[start:end]``."""
    pos = start
    while pos < end:
        begin = pos
        key, pos = read_varint(data, pos)
        wire = key & 7
        value = pos
        if wire == 2:
            length, value = read_varint(data, pos)
            pos = value + length
        elif wire == 0:
            _, pos = read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"wire type {wire}")
        if pos > end:
            raise ValueError("field runs past its message")
        yield key >> 3, wire, begin, value, pos


def _fields(data: bytes, start: int, end: int) -> Iterable[tuple[int, int, int]]:
    """``(field number, start, end)`` of each length-delimited field in ``data[start:end]``."""
    for number, wire, _, value, stop in _raw_fields(data, start, end):
        if wire == 2:
            yield number, value, stop


def scope_ranges(body: bytes) -> list[list[tuple[int, int]]] | None:
    """Byte ranges of each ``ScopeSpans``, per ``ResourceSpans``, or ``None`` if unreadable."""
    try:
        return [
            [(s, e) for field, s, e in _fields(body, rs_start, rs_end) if field == 2]
            for field, rs_start, rs_end in _fields(body, 0, len(body))
            if field == 1
        ]
    except (IndexError, ValueError):
        return None


def spliced(request: Any, body: bytes | None, touched: list[Any]) -> bytes | None:
    """The request's bytes after cuts and in-place enrichment, re-encoding only what changed.

    Each ``ScopeSpans`` nothing was cut from or enriched in is copied from the
    bytes it came in; only the others are encoded again. On the mixed
    benchmark (bench_gateway ``mix``: every request holds agent traces, in
    their own scope) that is a quarter of the spans instead of all of them.
    ``None`` (encode it all) when there are no bytes or they do not line up.
    """
    if body is None:
        return None
    layout = _layout(body)
    if layout is None or len(layout) != len(request.resource_spans):
        return None
    changed = {id(ss) for ss in touched}
    out: list[bytes] = []
    for (head, scopes), rs in zip(layout, request.resource_spans, strict=True):
        if len(scopes) != len(rs.scope_spans):
            return None
        parts = [head]
        for (start, end), ss in zip(scopes, rs.scope_spans, strict=True):
            data = ss.SerializeToString() if id(ss) in changed else body[start:end]
            parts += (_SCOPE_SPANS, varint(len(data)), data)
        inner = b"".join(parts)
        out += (_RESOURCE_SPANS, varint(len(inner)), inner)
    return b"".join(out)


def _layout(body: bytes) -> list[tuple[bytes, list[tuple[int, int]]]] | None:
    """Per ``ResourceSpans``: its fields but ``scope_spans`` as bytes, and its scopes' ranges.

    ``None`` if unreadable, or if the request holds anything but ``resource_spans``.
    """
    out: list[tuple[bytes, list[tuple[int, int]]]] = []
    try:
        for field, wire, _, rs_start, rs_end in _raw_fields(body, 0, len(body)):
            if field != 1 or wire != 2:
                return None
            head: list[bytes] = []
            scopes: list[tuple[int, int]] = []
            for inner, kind, begin, value, end in _raw_fields(body, rs_start, rs_end):
                if inner == 2 and kind == 2:
                    scopes.append((value, end))
                else:
                    head.append(body[begin:end])
            out.append((b"".join(head), scopes))
    except (IndexError, ValueError):
        return None
    return out


def trace_id_of(span: bytes) -> str:
    """A span's trace id in hex, from its encoding, for naming what was lost."""
    try:
        return bytes(Span.FromString(span).trace_id).hex() or "(none)"
    except Exception:
        return "(unreadable)"
