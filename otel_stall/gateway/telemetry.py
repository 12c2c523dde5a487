"""The gateway's own metrics, next to the ``stall.*`` counters on ``/metrics``.

Together they account for every span: received = forwarded + undelivered +
held (trace buffer and upstream queue); a span refused to its client as a
partial success is counted undelivered with reason ``invalid_id``.
Un-enriched spans are forwarded too; they are counted separately so a full
buffer never hides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation

from otel_stall._version import __version__

__all__ = ["GatewayMetricNames", "GatewayMetrics"]


class GatewayMetricNames:
    """Instrument names (Prometheus: dots become underscores, counters get ``_total``)."""

    RECEIVED: Final = "otel_stall.gateway.spans.received"
    """Counter: spans accepted by a receiver."""
    FORWARDED: Final = "otel_stall.gateway.spans.forwarded"
    """Counter: spans the upstream acknowledged."""
    UNENRICHED: Final = "otel_stall.gateway.spans.unenriched"
    """Counter by ``reason`` (``buffer_full``, ``late``, ``error``, ``too_complex``):
    sent on without ``stall.*``."""
    UNDELIVERED: Final = "otel_stall.gateway.spans.undelivered"
    """Counter by ``reason``: ``queue_full``, ``rejected``, ``too_large``, ``invalid_id``
    (refused to the client as a partial success), ``error``, ``shutdown``, ``no_upstream``."""
    REJECTED: Final = "otel_stall.gateway.requests.rejected"
    """Counter by ``transport`` and ``reason``: requests refused (malformed, too large, auth)."""
    QUEUE: Final = "otel_stall.gateway.queue.spans"
    """Gauge: spans waiting for the upstream."""
    QUEUE_BYTES: Final = "otel_stall.gateway.queue.bytes"
    """Gauge: bytes waiting for the upstream."""
    BUFFER_BYTES: Final = "otel_stall.gateway.buffer.bytes"
    """Gauge: bytes held while traces complete (allowances for their objects included)."""
    BUFFER_SPANS: Final = "otel_stall.gateway.buffer.spans"
    """Gauge: spans held while their trace completes."""
    BUFFER_TRACES: Final = "otel_stall.gateway.buffer.traces"
    """Gauge: traces held while they complete."""
    REASON: Final = "reason"
    """Metric attribute: why a span or request took the side path."""
    TRANSPORT: Final = "transport"
    """Metric attribute: ``grpc`` or ``http``."""


Names = GatewayMetricNames

UNENRICHED_REASONS: Final = ("buffer_full", "late", "error", "too_complex")
"""Why a span went on without ``stall.*``: each series exists from the start, at zero."""


class GatewayMetrics:
    """Counters and gauges for the gateway; the gauges read live sizes when scraped."""

    def __init__(
        self,
        meter_provider: MeterProvider,
        *,
        queue_spans: Callable[[], int],
        buffer_spans: Callable[[], int],
        buffer_traces: Callable[[], int],
        queue_bytes: Callable[[], int] = lambda: 0,
        buffer_bytes: Callable[[], int] = lambda: 0,
    ) -> None:
        meter = meter_provider.get_meter("otel_stall.gateway", __version__)
        self._received = meter.create_counter(
            Names.RECEIVED, unit="{span}", description="Spans accepted by the gateway."
        )
        self._forwarded = meter.create_counter(
            Names.FORWARDED, unit="{span}", description="Spans the upstream acknowledged."
        )
        self._unenriched = meter.create_counter(
            Names.UNENRICHED,
            unit="{span}",
            description="Spans forwarded without stall attributes, by reason.",
        )
        self._undelivered = meter.create_counter(
            Names.UNDELIVERED,
            unit="{span}",
            description="Spans that could not be delivered upstream, by reason.",
        )
        self._rejected = meter.create_counter(
            Names.REJECTED,
            unit="{request}",
            description="Requests refused by a receiver, by transport and reason.",
        )

        # Present from the first scrape, so rate() has a zero to start from.
        self._received.add(0)
        self._forwarded.add(0)
        for reason in UNENRICHED_REASONS:
            self._unenriched.add(0, {Names.REASON: reason})

        def gauge(read: Callable[[], int]) -> Callable[[CallbackOptions], Iterable[Observation]]:
            def callback(_options: CallbackOptions) -> Iterable[Observation]:
                return [Observation(read())]

            return callback

        meter.create_observable_gauge(
            Names.QUEUE,
            [gauge(queue_spans)],
            unit="{span}",
            description="Spans waiting for the upstream.",
        )
        meter.create_observable_gauge(
            Names.BUFFER_SPANS,
            [gauge(buffer_spans)],
            unit="{span}",
            description="Spans held until their trace completes.",
        )
        meter.create_observable_gauge(
            Names.QUEUE_BYTES,
            [gauge(queue_bytes)],
            unit="By",
            description="Bytes waiting for the upstream.",
        )
        meter.create_observable_gauge(
            Names.BUFFER_BYTES,
            [gauge(buffer_bytes)],
            unit="By",
            description="Bytes held until traces complete.",
        )
        meter.create_observable_gauge(
            Names.BUFFER_TRACES,
            [gauge(buffer_traces)],
            unit="{trace}",
            description="Traces held until they complete.",
        )

    def received(self, spans: int) -> None:
        """Spans accepted by a receiver."""
        self._received.add(spans)

    def forwarded(self, spans: int) -> None:
        """Spans acknowledged by the upstream."""
        self._forwarded.add(spans)

    def unenriched(self, spans: int, reason: str) -> None:
        """Spans sent on without ``stall.*`` attributes."""
        self._unenriched.add(spans, {Names.REASON: reason})

    def undelivered(self, spans: int, reason: str) -> None:
        """Spans given up on."""
        self._undelivered.add(spans, {Names.REASON: reason})

    def rejected(self, transport: str, reason: str) -> None:
        """One refused request."""
        self._rejected.add(1, {Names.TRANSPORT: transport, Names.REASON: reason})
