"""The scope test on raw bytes: a role key is found as an attribute's key, at any length."""

from __future__ import annotations

from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from otel_stall.gateway.detect import key_pattern


def _span(key: str, value: str = "x") -> bytes:
    span = Span(name="work")
    span.attributes.append(KeyValue(key=key))
    span.attributes[0].value.string_value = value
    return bytes(span.SerializeToString())


def test_a_role_key_is_found_as_a_key_at_any_length() -> None:
    """Short built-in keys and a custom key of 200 bytes (a two-byte length) are both found."""
    long_key = "acme." + "k" * 195
    pattern = key_pattern(["gen_ai.operation.name", long_key])
    assert pattern.search(_span("gen_ai.operation.name")) is not None
    assert pattern.search(_span(long_key)) is not None
    assert pattern.search(_span("http.request.method")) is None


def test_a_key_named_only_in_a_value_or_as_a_longer_key_is_not_a_role_key() -> None:
    """``gen_ai.operation.name`` inside a text value, or as a prefix of another key, is not one.

    (A string value that is exactly the key is encoded as the key is: it counts,
    which only costs the scope a closer look.)
    """
    pattern = key_pattern(["gen_ai.operation.name"])
    assert pattern.search(_span("note", "see gen_ai.operation.name here")) is None
    assert pattern.search(_span("gen_ai.operation.name.extra")) is None
    assert key_pattern([]).search(_span("gen_ai.operation.name")) is None
