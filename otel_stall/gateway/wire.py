"""OTLP trace requests as bytes: cut into per-span pieces, packed into size-capped payloads.

A held span keeps only its own encoding and a shared :class:`Envelope` (its
resource and scope, encoded once per ``ScopeSpans`` of a request), never the
request it came in: a parsed sub-message would keep the whole request alive.
Packing writes the protobuf framing by hand (a tag, a varint length, the
bytes), which is all a ``ResourceSpans``/``ScopeSpans`` wrapper is, so pieces
are joined without parsing them again.

Every payload :func:`pack` returns stays under the upstream's message limit;
a span that alone is over it is handed back to be counted, never sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

__all__ = ["Envelope", "Packed", "Piece", "envelope_of", "pack", "pieces_of", "varint"]

_RESOURCE_SPANS: Final = b"\x0a"
"""Field 1 (``resource_spans``, length-delimited) of the request."""
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
