"""OTLP decoding, encoding, file reading and the capture exporter.

The replay and the gateway both read OTLP here, so a span gets the same
:class:`~otel_stall.conventions.SpanRecord` whether it came from a file,
gRPC or HTTP, as protobuf or as OTLP/JSON.
"""

from __future__ import annotations

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
    python_to_any_value,
    python_to_json_any_value,
)

__all__ = [
    "DecodeError",
    "any_value_to_python",
    "enrich_json_span",
    "enrich_proto_span",
    "json_any_value_to_python",
    "python_to_any_value",
    "python_to_json_any_value",
    "spans_from_json",
    "spans_from_proto",
]
