"""Render the SDK's collected metrics as Prometheus text, for ``/metrics``.

The gateway records through the OpenTelemetry Metrics API like the live
processor, so both emit the same instruments; this module only translates
names the way Prometheus' OTLP conventions do (dots to underscores, counters
get ``_total``). It avoids a dependency on ``prometheus_client`` for one page.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    HistogramDataPoint,
    MetricsData,
    NumberDataPoint,
    Sum,
)

__all__ = ["CONTENT_TYPE", "LABEL_LIMIT", "label_name", "metric_name", "render", "truncate"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Prometheus text exposition format."""

LABEL_LIMIT: Final = 256
"""Longest label value shown, in characters: a tool name is the client's to choose."""
_ELLIPSIS: Final = "..."

_INVALID = re.compile(r"[^a-zA-Z0-9_:]")
_INVALID_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def metric_name(name: str, *, counter: bool = False) -> str:
    """``stall.findings`` (a counter) -> ``stall_findings_total``."""
    out = _INVALID.sub("_", name)
    if out[:1].isdigit():
        out = "_" + out
    if counter and not out.endswith("_total"):
        out += "_total"
    return out


def label_name(key: str) -> str:
    """``gen_ai.tool.name`` -> ``gen_ai_tool_name``."""
    out = _INVALID_LABEL.sub("_", key)
    return "_" + out if out[:1].isdigit() else out


def truncate(text: str, limit: int = LABEL_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with ``...`` when it was longer."""
    if len(text) <= limit:
        return text
    return text[: limit - len(_ELLIPSIS)] + _ELLIPSIS


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list | tuple):
        text = ",".join(_label_value(v) for v in value)
    else:
        text = str(value)
    return truncate(text).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(attributes: Mapping[str, Any], extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = [f'{label_name(k)}="{_label_value(v)}"' for k, v in sorted(attributes.items())]
    pairs += [f'{k}="{v}"' for k, v in extra]
    return "{" + ",".join(pairs) + "}" if pairs else ""


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def render(data: MetricsData | None) -> str:
    """The exposition text for everything ``data`` holds, one family per metric name."""
    families: dict[str, tuple[str, str, list[str]]] = {}
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                _family(metric.name, metric.description or "", metric.data, families)
    out: list[str] = []
    for name, (kind, description, lines) in families.items():
        if description:
            out.append(f"# HELP {name} {_help(description)}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(lines)
    return "\n".join(out) + "\n" if out else ""


def _family(
    otel_name: str,
    description: str,
    data: Any,
    families: dict[str, tuple[str, str, list[str]]],
) -> None:
    if isinstance(data, Sum):
        counter = data.is_monotonic
        name = metric_name(otel_name, counter=counter)
        kind = "counter" if counter else "gauge"
        lines = families.setdefault(name, (kind, description, []))[2]
        lines.extend(_numbers(name, data.data_points))
    elif isinstance(data, Gauge):
        name = metric_name(otel_name)
        lines = families.setdefault(name, ("gauge", description, []))[2]
        lines.extend(_numbers(name, data.data_points))
    elif isinstance(data, Histogram):
        name = metric_name(otel_name)
        lines = families.setdefault(name, ("histogram", description, []))[2]
        for point in data.data_points:
            lines.extend(_histogram(name, point))


def _numbers(name: str, points: Iterable[NumberDataPoint]) -> list[str]:
    return [f"{name}{_labels(p.attributes or {})} {_number(p.value)}" for p in points]


def _histogram(name: str, point: HistogramDataPoint) -> list[str]:
    attrs = point.attributes or {}
    lines: list[str] = []
    cumulative = 0
    for bound, count in zip(point.explicit_bounds, point.bucket_counts, strict=False):
        cumulative += count
        lines.append(f"{name}_bucket{_labels(attrs, (('le', _number(bound)),))} {cumulative}")
    lines.append(f"{name}_bucket{_labels(attrs, (('le', '+Inf'),))} {point.count}")
    lines.append(f"{name}_sum{_labels(attrs)} {_number(point.sum)}")
    lines.append(f"{name}_count{_labels(attrs)} {point.count}")
    return lines
