"""The ``otel-stall serve`` flags: light to import, so the CLI can list them cheaply.

Each flag falls back to its ``OTEL_STALL_GATEWAY_*`` variable, then to the
default, through :meth:`GatewayConfig.from_env`.
"""

from __future__ import annotations

import argparse

from otel_stall.gateway.config import (
    DEFAULT_GRPC,
    DEFAULT_HTTP,
    DEFAULT_METRICS,
    GatewayConfig,
    parse_duration,
    parse_size,
)

__all__ = ["add_arguments", "build_parser", "config_from_args"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` flags; each one falls back to its ``OTEL_STALL_GATEWAY_*`` variable."""
    listen = parser.add_argument_group("listeners (loopback unless told otherwise)")
    listen.add_argument("--grpc", metavar="HOST:PORT", help=f"OTLP/gRPC (default {DEFAULT_GRPC})")
    listen.add_argument(
        "--http", metavar="HOST:PORT", help=f"OTLP/HTTP /v1/traces (default {DEFAULT_HTTP})"
    )
    listen.add_argument(
        "--metrics", metavar="HOST:PORT", help=f"Prometheus /metrics (default {DEFAULT_METRICS})"
    )
    listen.add_argument(
        "--listen-all",
        action="store_true",
        help="bind the listeners not given explicitly on 0.0.0.0 (containers)",
    )
    listen.add_argument("--bearer-token", help="require 'Authorization: Bearer TOKEN'")
    listen.add_argument(
        "--bearer-token-file",
        metavar="PATH",
        help="read the bearer token from a file (keeps it out of ps)",
    )
    listen.add_argument("--tls-cert", metavar="PEM", help="serve TLS with this certificate chain")
    listen.add_argument("--tls-key", metavar="PEM", help="private key for --tls-cert")
    listen.add_argument(
        "--max-request-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest request (default 16MiB)",
    )
    listen.add_argument(
        "--http-connections",
        type=int,
        metavar="N",
        help="open HTTP connections at most; past it, 503 (default 256)",
    )
    listen.add_argument(
        "--header-timeout",
        type=parse_duration,
        metavar="DURATION",
        help="longest wait for a TLS handshake and for request headers (default 10s)",
    )

    up = parser.add_argument_group("upstream")
    up.add_argument(
        "--upstream",
        metavar="ENDPOINT",
        help="where enriched spans go: HOST:PORT (OTLP/gRPC) or http(s)://HOST:PORT/v1/traces",
    )
    up.add_argument("--upstream-tls", action="store_true", help="use TLS for a gRPC upstream")
    up.add_argument("--queue-spans", type=int, help="upstream queue bound, in spans")
    up.add_argument(
        "--queue-bytes",
        type=parse_size,
        metavar="SIZE",
        help="upstream queue bound (default 128MiB)",
    )
    up.add_argument(
        "--upstream-max-bytes",
        type=parse_size,
        metavar="SIZE",
        help="largest message sent upstream; batches are split below it (default 4MiB)",
    )
    up.add_argument("--export-timeout", type=parse_duration, metavar="DURATION")
    up.add_argument("--shutdown-timeout", type=parse_duration, metavar="DURATION")

    buf = parser.add_argument_group("per-trace buffering")
    buf.add_argument(
        "--decision-wait",
        type=parse_duration,
        metavar="DURATION",
        help="longest wait for a trace's root span (default 10s)",
    )
    buf.add_argument("--max-traces", type=int)
    buf.add_argument("--max-spans", type=int)
    buf.add_argument(
        "--max-bytes", type=parse_size, metavar="SIZE", help="bytes held across traces"
    )
    buf.add_argument(
        "--no-detect",
        dest="detect",
        action="store_false",
        default=None,
        help="pass spans through without detection (a baseline)",
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")


def build_parser() -> argparse.ArgumentParser:
    """A parser with just the ``serve`` flags."""
    parser = argparse.ArgumentParser(
        prog="otel-stall serve",
        description="OTLP gateway: detect agents stuck in tool loops, forward enriched spans.",
    )
    add_arguments(parser)
    return parser


_FLAG_SETTINGS = (
    "grpc", "http", "metrics", "upstream", "bearer_token", "bearer_token_file", "tls_cert",
    "tls_key", "max_request_bytes", "http_connections", "header_timeout", "queue_spans",
    "queue_bytes", "upstream_max_bytes", "export_timeout", "shutdown_timeout",
    "decision_wait", "max_traces", "max_spans", "max_bytes", "detect",
)  # fmt: skip


def config_from_args(args: argparse.Namespace) -> GatewayConfig:
    """Flags first, then ``OTEL_STALL_GATEWAY_*``, then defaults."""
    explicit = {name: getattr(args, name, None) for name in _FLAG_SETTINGS}
    if getattr(args, "upstream_tls", False):
        explicit["upstream_insecure"] = False
    if getattr(args, "listen_all", False):
        for name, default in (
            ("grpc", DEFAULT_GRPC),
            ("http", DEFAULT_HTTP),
            ("metrics", DEFAULT_METRICS),
        ):
            if explicit[name] is None:
                explicit[name] = "0.0.0.0:" + default.rpartition(":")[2]
    return GatewayConfig.from_env(**explicit)
