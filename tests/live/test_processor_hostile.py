"""Hostile attribute values are forwarded intact and never raise."""

from __future__ import annotations

import math
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import StallSpanProcessor


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        node["a"] = {}
        node = node["a"]
    return root


HOSTILE: dict[str, Any] = {
    "invalid-json": '{"query": "unterminated',
    "ten-mb": "x" * 10_000_000,
    "ten-mb-json": '{"q": "' + "y" * 10_000_000 + '"}',
    "deep-json-text": "[" * 10_000 + "]" * 10_000,
    "non-utf8": b"\xff\xfe\xc3\x28",
    "nan": float("nan"),
    "inf": float("inf"),
    "deep-structured": _nested(400),
    "lone-surrogate": "\ud800",
}


def _deep_structured_accepted() -> bool:
    span = TracerProvider().get_tracer("probe").start_span("probe")
    try:
        span.set_attribute("deep", _nested(10_000))
    except RecursionError:
        return False
    return True


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("slot", ["gen_ai.tool.call.arguments", "gen_ai.tool.call.result"])
def test_hostile_payload_is_forwarded_intact(name: str, slot: str) -> None:
    """The tool span reaches downstream with the value the SDK stored, and stall.* added."""
    plain, enriched = InMemorySpanExporter(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(plain))
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(enriched)))
    tracer = provider.get_tracer("hostile")
    with tracer.start_as_current_span(
        "invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        for _ in range(2):
            with tracer.start_as_current_span(
                "execute_tool t",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "t",
                    slot: HOSTILE[name],
                },
            ):
                pass
    assert len(plain.get_finished_spans()) == len(enriched.get_finished_spans()) == 3
    for before, after in zip(
        plain.get_finished_spans(), enriched.get_finished_spans(), strict=True
    ):
        kept = {k: v for k, v in after.attributes.items() if not k.startswith("stall.")}  # type: ignore[union-attr]
        assert kept.keys() == dict(before.attributes or {}).keys()
        for key, value in (before.attributes or {}).items():
            got = kept[key]
            if isinstance(value, float) and math.isnan(value):
                assert isinstance(got, float)
                assert math.isnan(got)
            else:
                assert got is value  # the very same object, not a re-encoded copy
    tools = [s for s in enriched.get_finished_spans() if s.name == "execute_tool t"]
    assert all(s.attributes["stall.seq"] for s in tools)  # type: ignore[index]


def test_ten_thousand_deep_structured_value() -> None:
    """A 10,000-deep map is either refused by the SDK itself or forwarded intact."""
    if not _deep_structured_accepted():
        pytest.skip(
            "this SDK refuses 10,000-deep attribute values (RecursionError in set_attribute)"
        )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(exporter)))
    value = _nested(10_000)
    with provider.get_tracer("t").start_as_current_span(
        "execute_tool t",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": value},
    ):
        pass
    (span,) = exporter.get_finished_spans()
    assert "stall.seq" in span.attributes  # type: ignore[operator]
