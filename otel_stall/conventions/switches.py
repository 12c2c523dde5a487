"""Which framework wrote a span, for the "content not captured" hint: its own switch.

A span whose tool calls carry no content is flagged with the switch that
turns capture on. Many frameworks write the OTel GenAI keys, so the convention
that names the span's role is often not the framework: the framework's own
marks (keys only it writes, or a key prefix of its own, in
:mod:`~otel_stall.conventions.mappings`) are looked for first. Only spans
without content are asked, so the cost is off the hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from otel_stall.conventions.mappings import SpanConvention


def _marked(conv: SpanConvention, attributes: Mapping[str, Any]) -> bool:
    """Whether the span holds a key only this convention's framework writes."""
    if any(key in attributes for key in conv.markers):
        return True
    if any(attributes.get(key) == value for key, value in conv.marker_values):
        return True
    prefixes = conv.marker_prefixes
    return bool(prefixes) and any(
        type(key) is str and key.startswith(prefixes) for key in attributes
    )


def content_switch(
    conventions: Iterable[SpanConvention], attributes: Mapping[str, Any]
) -> str | None:
    """How to turn content capture on for the framework that wrote this span.

    In order: a framework's own marks, then the convention whose content keys
    the span holds (a placeholder value), then whose role keys it holds.
    """
    having = [c for c in conventions if c.content_switch]
    tests: list[Callable[[SpanConvention], bool]] = [
        lambda c: _marked(c, attributes),
        lambda c: any(key in attributes for key in (*c.arguments_keys, *c.result_keys)),
        lambda c: any(key in attributes for key in c.roles),
        lambda c: any(key in attributes for key, _ in c.present),
    ]
    for test in tests:
        for conv in having:
            if test(conv):
                return conv.content_switch
    return None


__all__ = ["content_switch"]
