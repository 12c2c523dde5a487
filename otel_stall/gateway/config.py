"""The gateway's settings: one frozen value, from flags, ``OTEL_STALL_GATEWAY_*`` or defaults.

Listeners default to loopback; binding wider is an explicit choice
(``--listen-all`` or a ``0.0.0.0:PORT`` address), as for the collector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from otel_stall.core.config import (
    ConfigError,
    check,
    env_field,
    parse_bool,
    parse_float,
    parse_int,
    resolve,
)

__all__ = [
    "DEFAULT_GRPC",
    "DEFAULT_HTTP",
    "DEFAULT_METRICS",
    "GatewayConfig",
    "parse_address",
    "parse_duration",
    "parse_size",
]

DEFAULT_GRPC = "127.0.0.1:4317"
"""OTLP/gRPC, the port every OTLP exporter uses by default."""
DEFAULT_HTTP = "127.0.0.1:4318"
"""OTLP/HTTP (protobuf and JSON) on ``/v1/traces``."""
DEFAULT_METRICS = "127.0.0.1:9464"
"""Prometheus ``/metrics``: the OpenTelemetry Prometheus exporter's usual port."""


def parse_address(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (or ``[v6]:PORT``) to a pair; empty or ``off`` disables the listener."""
    text = text.strip()
    if text.lower() in ("", "off", "none"):
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def parse_duration(text: str) -> float:
    """Seconds, as ``2.5``, ``250ms``, ``10s`` or ``1m``."""
    text = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


_SIZES = (
    ("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30),
    ("kb", 1000), ("mb", 1000**2), ("gb", 1000**3), ("k", 1 << 10), ("m", 1 << 20),
    ("g", 1 << 30), ("b", 1),
)  # fmt: skip


def parse_size(text: str) -> int:
    """Bytes, as ``4194304``, ``4MiB``, ``512KiB``, ``4MB`` or ``4m``."""
    text = text.strip().lower().replace(" ", "")
    for suffix, scale in _SIZES:
        if text.endswith(suffix) and text[: -len(suffix)]:
            return int(float(text[: -len(suffix)]) * scale)
    return int(text)


def _optional_text(text: str) -> str | None:
    return text.strip() or None


def _token(text: str) -> str:
    """A bearer token as given: an empty one is kept, so that it is refused, never ignored."""
    return text.strip()


def _read_token(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except OSError as exc:
        raise ConfigError(f"bearer_token_file: cannot read {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # issue 27: a traceback before
        raise ConfigError(
            f"bearer_token_file: {path!r} is not UTF-8 text (byte {exc.start}); "
            "write the token in it as plain text"
        ) from None


@dataclass(frozen=True)
class GatewayConfig:
    """Everything ``otel-stall serve`` can be told; see :meth:`from_env`."""

    grpc: str = env_field(DEFAULT_GRPC, "GATEWAY_GRPC", str, "HOST:PORT, or off")
    """OTLP/gRPC listen address, ``off`` to disable."""
    http: str = env_field(DEFAULT_HTTP, "GATEWAY_HTTP", str, "HOST:PORT, or off")
    """OTLP/HTTP listen address (``/v1/traces``, protobuf and JSON), ``off`` to disable."""
    metrics: str = env_field(DEFAULT_METRICS, "GATEWAY_METRICS", str, "HOST:PORT, or off")
    """Prometheus ``/metrics`` listen address, ``off`` to disable."""
    upstream: str | None = env_field(
        None, "GATEWAY_UPSTREAM", _optional_text, "HOST:PORT (gRPC) or http(s)://HOST/v1/traces"
    )
    """Where enriched spans go: ``host:port`` for OTLP/gRPC, ``http(s)://…/v1/traces`` for HTTP.

    Without one the gateway only detects and serves metrics.
    """
    upstream_insecure: bool = env_field(
        True, "GATEWAY_UPSTREAM_INSECURE", parse_bool, "true or false"
    )
    """Plain-text gRPC to the upstream (TLS when false, or for ``https://``)."""
    detect: bool = env_field(True, "GATEWAY_DETECT", parse_bool, "true or false")
    """Detection on; off makes a pass-through (the benchmark's baseline)."""
    full_attributes: bool = env_field(False, "GATEWAY_FULL_ATTRIBUTES", parse_bool, "true or false")
    """Write every ``stall.*`` attribute, those at their default too (omitted by default)."""
    decision_wait: float = env_field(10.0, "GATEWAY_DECISION_WAIT", parse_duration, "e.g. 10s")
    """Longest a trace is held waiting for its root span, in seconds."""
    max_traces: int = env_field(20_000, "GATEWAY_MAX_TRACES", parse_int, "a whole number")
    """Traces held at once; beyond it new traces pass un-enriched."""
    max_spans: int = env_field(500_000, "GATEWAY_MAX_SPANS", parse_int, "a whole number")
    """Spans held at once across traces."""
    max_bytes: int = env_field(256 << 20, "GATEWAY_MAX_BYTES", parse_size, "a number of bytes")
    """Encoded span bytes held at once across traces."""
    queue_spans: int = env_field(200_000, "GATEWAY_QUEUE_SPANS", parse_int, "a whole number")
    """Spans waiting for the upstream; beyond it batches are dropped and counted."""
    queue_bytes: int = env_field(128 << 20, "GATEWAY_QUEUE_BYTES", parse_size, "a number of bytes")
    """Bytes waiting for the upstream; beyond it batches are dropped and counted."""
    upstream_max_bytes: int = env_field(
        4 << 20, "GATEWAY_UPSTREAM_MAX_BYTES", parse_size, "a number of bytes"
    )
    """Largest message sent upstream (the collector's default receive limit is 4 MiB).

    Batches are packed below it; a span larger on its own is dropped and counted.
    """
    export_timeout: float = env_field(10.0, "GATEWAY_EXPORT_TIMEOUT", parse_duration, "e.g. 10s")
    """Timeout of one upstream export call."""
    retry_initial: float = env_field(0.2, "GATEWAY_RETRY_INITIAL", parse_duration, "e.g. 200ms")
    """First backoff after a retryable upstream failure; it doubles up to ``retry_max``."""
    retry_max: float = env_field(5.0, "GATEWAY_RETRY_MAX", parse_duration, "e.g. 5s")
    """Longest backoff between upstream attempts."""
    shutdown_timeout: float = env_field(
        15.0, "GATEWAY_SHUTDOWN_TIMEOUT", parse_duration, "e.g. 15s"
    )
    """On SIGTERM, how long to keep trying to deliver what is held."""
    batch_spans: int = env_field(2048, "GATEWAY_BATCH_SPANS", parse_int, "a whole number")
    """Spans per merged upstream request, at most (one request's spans are not split for it)."""
    health_retries: int = env_field(3, "GATEWAY_HEALTH_RETRIES", parse_int, "a whole number")
    """``/healthz`` fails once the oldest queued batch is older than export timeout x this."""
    max_request_bytes: int = env_field(
        16 << 20, "GATEWAY_MAX_REQUEST_BYTES", parse_size, "a number of bytes"
    )
    """Largest accepted request, after decompression; larger ones get an OTLP error."""
    bearer_token: str | None = env_field(None, "GATEWAY_BEARER_TOKEN", _token, "a token string")
    """When set, requests must carry ``Authorization: Bearer <token>``; empty is an error."""
    bearer_token_file: str | None = env_field(
        None, "GATEWAY_BEARER_TOKEN_FILE", _optional_text, "a file holding the token"
    )
    """Read the token from this file (it stays out of ``ps``); empty is an error."""
    tls_cert: str | None = env_field(None, "GATEWAY_TLS_CERT", _optional_text, "a PEM file")
    """Serve both receivers over TLS with this certificate chain (needs ``tls_key``)."""
    tls_key: str | None = env_field(None, "GATEWAY_TLS_KEY", _optional_text, "a PEM file")
    """Private key for ``tls_cert``."""
    workers: int = env_field(8, "GATEWAY_WORKERS", parse_int, "a whole number")
    """gRPC server threads, and threads handling complete HTTP requests."""
    http_connections: int = env_field(256, "GATEWAY_HTTP_CONNECTIONS", parse_int, "a whole number")
    """Open HTTP connections at most; past it a new connection gets 503 and is closed."""
    header_timeout: float = env_field(10.0, "GATEWAY_HEADER_TIMEOUT", parse_duration, "e.g. 10s")
    """Longest wait for a TLS handshake, and then for a request's headers, on a connection."""
    body_timeout: float = env_field(60.0, "GATEWAY_BODY_TIMEOUT", parse_duration, "e.g. 60s")
    """Longest wait for a whole request body once its headers are in."""
    min_body_rate: int = env_field(
        16 << 10, "GATEWAY_MIN_BODY_RATE", parse_size, "bytes per second, e.g. 16KiB"
    )
    """Slowest a request body may arrive, in bytes a second, after ``body_grace``.

    A body trickled slower is cut off (issue 27: slow bodies held every body slot). The
    default, 16 KiB/s, lets a 4 MiB export take four minutes; ``body_timeout`` caps it first.
    """
    body_grace: float = env_field(2.0, "GATEWAY_BODY_GRACE", parse_duration, "e.g. 2s")
    """Seconds a request body may take before ``min_body_rate`` applies."""
    flush_interval: float = env_field(0.1, "GATEWAY_FLUSH_INTERVAL", parse_float, "seconds")
    """How often held traces are checked against ``decision_wait``."""

    def __post_init__(self) -> None:
        for name in ("grpc", "http", "metrics"):
            try:
                parse_address(getattr(self, name))
            except ValueError as exc:
                raise ConfigError(f"{name}: {exc}; use HOST:PORT or off") from None
        check(self.decision_wait > 0, "decision_wait", "must be above 0 seconds")
        for name in (
            "max_traces", "max_spans", "max_bytes", "queue_spans", "queue_bytes", "batch_spans",
            "health_retries", "http_connections", "header_timeout", "body_timeout",
            "min_body_rate", "body_grace",
        ):  # fmt: skip
            check(getattr(self, name) > 0, name, "must be above 0")
        check(self.upstream_max_bytes >= 1024, "upstream_max_bytes", "must be at least 1024")
        check(self.max_request_bytes >= 1024, "max_request_bytes", "must be at least 1024")
        check(self.workers >= 1, "workers", "must be at least 1")
        check(
            0 < self.retry_initial <= self.retry_max, "retry_initial", "must be in (0, retry_max]"
        )
        check(
            (self.tls_cert is None) == (self.tls_key is None),
            "tls_cert",
            "TLS needs both tls_cert and tls_key",
        )
        self._resolve_token()

    def _resolve_token(self) -> None:
        """An empty token would accept ``Bearer `` with nothing after it: refuse to start."""
        if self.bearer_token_file is not None:
            check(
                self.bearer_token is None,
                "bearer_token",
                "give bearer_token or bearer_token_file, not both",
            )
            object.__setattr__(self, "bearer_token", _read_token(self.bearer_token_file))
            check(bool(self.bearer_token), "bearer_token_file", "the file holds no token")
        if self.bearer_token is not None:
            object.__setattr__(self, "bearer_token", self.bearer_token.strip())
            check(
                bool(self.bearer_token),
                "bearer_token",
                "is empty: set a token, or unset it to turn authentication off",
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> GatewayConfig:
        """Resolve each setting from ``explicit``, then ``OTEL_STALL_GATEWAY_*``, then defaults."""
        return resolve(cls, explicit, environ)

    @property
    def grpc_address(self) -> tuple[str, int] | None:
        """The gRPC listener, or ``None`` when off."""
        return parse_address(self.grpc)

    @property
    def http_address(self) -> tuple[str, int] | None:
        """The HTTP listener, or ``None`` when off."""
        return parse_address(self.http)

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """The ``/metrics`` listener, or ``None`` when off."""
        return parse_address(self.metrics)
