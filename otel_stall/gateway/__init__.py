"""``otel-stall serve``: an OTLP gateway behind the collector.

It receives OTLP (gRPC and HTTP), holds each trace until its root span
arrives or ``decision_wait`` passes, runs the same detector as the live
processor and the replay, and forwards every span, enriched with ``stall.*``
attributes, to an upstream OTLP endpoint. Scale it out with the collector's
``loadbalancing`` exporter (``routing_key: traceID``); see
``collector-config/loadbalancing.yaml``.

Names load lazily: the CLI imports the flags without pulling in grpcio.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from otel_stall.gateway.config import GatewayConfig
    from otel_stall.gateway.flags import add_arguments, config_from_args
    from otel_stall.gateway.pipeline import Pipeline
    from otel_stall.gateway.server import Gateway, run, serve_main
    from otel_stall.gateway.telemetry import GatewayMetricNames

__all__ = [
    "Gateway",
    "GatewayConfig",
    "GatewayMetricNames",
    "Pipeline",
    "add_arguments",
    "config_from_args",
    "run",
    "serve_main",
]

_HOMES = {
    "Gateway": "server",
    "GatewayConfig": "config",
    "GatewayMetricNames": "telemetry",
    "Pipeline": "pipeline",
    "add_arguments": "flags",
    "config_from_args": "flags",
    "run": "server",
    "serve_main": "server",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'otel_stall.gateway' has no attribute {name!r}")
    return getattr(importlib.import_module(f"otel_stall.gateway.{home}"), name)
