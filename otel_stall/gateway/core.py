"""The gateway's pipeline: ingest a request, buffer per trace, detect, enrich, forward.

Receivers (gRPC and HTTP) call :meth:`Pipeline.ingest` with a decoded
``ExportTraceServiceRequest``. Complete traces are analysed right there, in
the receiving thread, so a slow gateway slows its clients instead of growing
without bound; traces that wait for ``decision_wait`` are flushed by a
sweeper thread. Detection uses :class:`~otel_stall.offline.analysis.TraceAnalyzer`,
the replay's code, so a complete trace gets the same verdicts and ``stall.*``
attributes as a replay of it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_stall.conventions import Conventions
from otel_stall.core.policy import StallPolicy
from otel_stall.gateway.buffer import Held, TraceBuffer
from otel_stall.gateway.config import GatewayConfig
from otel_stall.gateway.prometheus import render
from otel_stall.gateway.telemetry import GatewayMetrics
from otel_stall.gateway.upstream import Sender, Upstream, make_sender
from otel_stall.metrics import StallMetrics
from otel_stall.offline.analysis import TraceAnalyzer, TraceResult
from otel_stall.otlp.decode import record_from_proto_span
from otel_stall.otlp.encode import enrich_proto_span
from otel_stall.semconv import StallEventAttributes

__all__ = ["Pipeline"]

logger = logging.getLogger("otel_stall.gateway")

_EVENT = StallEventAttributes.EVENT_NAME
_TRACE_ID_BYTES = 16
_SPAN_ID_BYTES = 8


def _valid_ids(span: Any) -> bool:
    parent = span.parent_span_id
    return (
        len(span.trace_id) == _TRACE_ID_BYTES
        and len(span.span_id) == _SPAN_ID_BYTES
        and (not parent or len(parent) == _SPAN_ID_BYTES)
    )


def _group_by_trace(
    request: Any,
) -> tuple[dict[bytes, tuple[list[Held], bool]], list[Held], int]:
    """Spans by trace id, each with whether its root came; then bad-id spans, and the count.

    The buffer decides per trace, so a request is split by trace first.
    """
    groups: dict[bytes, tuple[list[Held], bool]] = {}
    invalid: list[Held] = []
    count = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                count += 1
                held = Held(span, rs, ss, span.ByteSize())
                if not _valid_ids(span):
                    invalid.append(held)
                    continue
                trace_id = span.trace_id
                group = groups.get(trace_id)
                is_root = not span.parent_span_id
                if group is None:
                    groups[trace_id] = ([held], is_root)
                else:
                    group[0].append(held)
                    if is_root:
                        groups[trace_id] = (group[0], True)
    return groups, invalid, count


def encode(spans: Iterable[Held]) -> tuple[bytes, int]:
    """Regroup held spans under their resource and scope; one serialized request."""
    request = ExportTraceServiceRequest()
    groups: dict[tuple[int, int], Any] = {}
    resources: dict[int, Any] = {}
    count = 0
    for held in spans:
        rs, ss = held.resource_spans, held.scope_spans
        key = (id(rs), id(ss))
        out_ss = groups.get(key)
        if out_ss is None:
            out_rs = resources.get(id(rs))
            if out_rs is None:
                out_rs = resources[id(rs)] = request.resource_spans.add()
                out_rs.resource.CopyFrom(rs.resource)
                out_rs.schema_url = rs.schema_url
            out_ss = groups[key] = out_rs.scope_spans.add()
            out_ss.scope.CopyFrom(ss.scope)
            out_ss.schema_url = ss.schema_url
        out_ss.spans.append(held.span)
        count += 1
    return request.SerializeToString(), count


class Pipeline:
    """Everything between the receivers and the upstream, plus the metrics it keeps."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
        sender: Sender | None = None,
    ) -> None:
        self.config = config
        self.policy = policy or StallPolicy.from_env()
        self.conventions = conventions or Conventions.from_env()
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.stall_metrics = StallMetrics(self.meter_provider)
        self.buffer = TraceBuffer(
            decision_wait=config.decision_wait,
            max_traces=config.max_traces,
            max_spans=config.max_spans,
            max_bytes=config.max_bytes,
        )
        if sender is None and config.upstream:
            sender = make_sender(config.upstream, insecure=config.upstream_insecure)
        self.upstream = Upstream(
            sender,
            max_spans=config.queue_spans,
            batch_spans=config.batch_spans,
            timeout=config.export_timeout,
            retry_initial=config.retry_initial,
            retry_max=config.retry_max,
            on_forwarded=self._forwarded,
            on_undelivered=self._undelivered,
        )
        self.metrics = GatewayMetrics(
            self.meter_provider,
            queue_spans=lambda: self.upstream.queued_spans,
            buffer_spans=lambda: self.buffer.spans,
            buffer_traces=lambda: self.buffer.traces,
        )
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._logged: set[str] = set()
        self._counts_lock = threading.Lock()
        self.received = 0
        self.forwarded = 0
        self.undelivered = 0

    # -- counters kept in Python too, for logs and tests ------------------------------

    def _forwarded(self, spans: int) -> None:
        with self._counts_lock:
            self.forwarded += spans
        self.metrics.forwarded(spans)

    def _undelivered(self, spans: int, reason: str) -> None:
        with self._counts_lock:
            self.undelivered += spans
        self.metrics.undelivered(spans, reason)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start the upstream sender and the ``decision_wait`` sweeper."""
        self.upstream.start()
        if self.config.detect:
            self._sweeper = threading.Thread(
                target=self._sweep, name="otel-stall-sweeper", daemon=True
            )
            self._sweeper.start()

    def close(self, timeout: float | None = None) -> int:
        """Detect and forward everything held, then drain the upstream; spans left undelivered."""
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join()
        self._flush(self.buffer.expired(everything=True))
        left = self.upstream.close(self.config.shutdown_timeout if timeout is None else timeout)
        self.meter_provider.shutdown()
        return left

    def metrics_text(self) -> str:
        """``/metrics``: the ``stall.*`` counters and the gateway's own, as Prometheus text."""
        return render(self.reader.get_metrics_data())

    # -- intake -------------------------------------------------------------------------

    def ingest(self, request: Any) -> int:
        """Take one decoded request; returns how many spans it held."""
        if not self.config.detect:
            count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
            self._received(count)
            self.upstream.put(request.SerializeToString(), count)
            return count
        groups, invalid, count = _group_by_trace(request)
        self._received(count)
        intake = self.buffer.add(groups)
        out: list[Held] = []
        for reason, spans in (
            ("invalid_id", invalid),
            ("buffer_full", intake.overflow),
            ("late", intake.late),
        ):
            if spans:
                self.metrics.unenriched(len(spans), reason)
                out.extend(spans)
        for trace_id, spans in intake.ready:
            out.extend(self._detect(trace_id, spans))
        self._send(out)
        return count

    def _received(self, count: int) -> None:
        with self._counts_lock:
            self.received += count
        self.metrics.received(count)

    # -- detection -----------------------------------------------------------------------

    def _detect(self, trace_id: bytes, spans: list[Held]) -> list[Held]:
        """Analyse one trace and enrich its spans in place; on a bug, forward as they are."""
        try:
            analyzer = TraceAnalyzer(trace_id.hex(), self.policy, self.conventions)
            for held in spans:
                analyzer.add(record_from_proto_span(held.span))
            result = analyzer.analyse()
            self._enrich(result, spans)
            self._count(result)
        except Exception as exc:
            self.metrics.unenriched(len(spans), "error")
            kind = type(exc).__name__
            if kind not in self._logged:
                self._logged.add(kind)
                logger.exception("stall detection failed on a trace; forwarding it as it came")
            if os.environ.get("PYTEST_CURRENT_TEST"):
                self._send(spans)
                raise
        return spans

    @staticmethod
    def _enrich(result: TraceResult, spans: list[Held]) -> None:
        attributes, events = result.attributes, result.events
        if not attributes and not events:
            return
        for held in spans:
            span_id = held.span.span_id.hex()
            attrs = attributes.get(span_id)
            span_events = events.get(span_id)
            if span_events and any(e.name == _EVENT for e in held.span.events):
                # Already enriched upstream (a live StallSpanProcessor): keep its events.
                span_events = None
            if attrs or span_events:
                enrich_proto_span(held.span, attrs or {}, span_events or ())

    def _count(self, result: TraceResult) -> None:
        metrics = self.stall_metrics
        for report in result.reports:
            metrics.record_report(report)

    # -- output ---------------------------------------------------------------------------

    def _send(self, spans: list[Held]) -> None:
        if not spans:
            return
        payload, count = encode(spans)
        self.upstream.put(payload, count)

    def _flush(self, traces: list[tuple[bytes, list[Held]]]) -> None:
        out: list[Held] = []
        for trace_id, spans in traces:
            out.extend(self._detect(trace_id, spans))
            if len(out) >= self.config.batch_spans:
                self._send(out)
                out = []
        self._send(out)

    def _sweep(self) -> None:
        interval = self.config.flush_interval
        while not self._stop.wait(interval):
            try:
                self._flush(self.buffer.expired())
            except Exception:
                logger.exception("flushing expired traces failed")
                if os.environ.get("PYTEST_CURRENT_TEST"):
                    raise
