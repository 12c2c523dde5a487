"""The gateway's pipeline: ingest a request, buffer per trace, detect, enrich, forward.

Receivers (gRPC and HTTP) call :meth:`Pipeline.ingest` with a decoded
``ExportTraceServiceRequest`` (and its bytes, when they have them). Each span
is read for its ids only, and for its role attributes where its scope holds
any; then:

- a plain or model span is forwarded with the request at once (it is never
  enriched), leaving a parent link or its place with its trace;
- a tool or agent span of a trace still open is cut out of the request and
  held as its own bytes until the trace is decided;
- a span with malformed ids is refused back to the client (partial success),
  so it can never make the upstream refuse a batch shared with other clients.

A request without agent activity goes on as the bytes it came in; one with
some is spliced from those bytes, each ``ScopeSpans`` nothing was cut from or
enriched in copied as it came (ordinary HTTP, database and queue spans are
never encoded again), and a trace of plain spans only never reaches the
detector. Complete traces are analysed right there, in the receiving thread, so a slow gateway
slows its clients instead of growing without bound; traces that wait for
``decision_wait`` are flushed by a sweeper thread. Detection gives a complete
trace the same verdicts and ``stall.*`` attributes as a replay of it
(:mod:`otel_stall.gateway.detect`).

Every span ends forwarded, refused with a status to its client, or counted
as undelivered with a reason: also when something in here raises.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_stall.conventions import Conventions, Reading
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import RunReport
from otel_stall.gateway.buffer import (
    ENTRY_BYTES,
    FULL,
    LINK_BYTES,
    MODEL,
    ROOT,
    Entry,
    Group,
    Held,
    Ready,
    TraceBuffer,
)
from otel_stall.gateway.config import GatewayConfig
from otel_stall.gateway.detect import AGENT_NAME, MARK, Outcome, TraceDetector
from otel_stall.gateway.prometheus import LABEL_LIMIT, render, truncate
from otel_stall.gateway.telemetry import GatewayMetrics
from otel_stall.gateway.upstream import Sender, Upstream, make_sender
from otel_stall.gateway.wire import (
    Envelope,
    Piece,
    envelope_of,
    pack,
    pieces_of,
    scope_ranges,
    spliced,
    trace_id_of,
)
from otel_stall.metrics import StallMetrics

__all__ = ["Ingested", "Pipeline"]

logger = logging.getLogger("otel_stall.gateway")

_TRACE_ID_BYTES: Final = 16
_SPAN_ID_BYTES: Final = 8


@dataclass(frozen=True, slots=True)
class Ingested:
    """What happened to one request: spans taken, and spans refused with why."""

    accepted: int
    refused: int = 0
    message: str = ""


class _Tally:
    """Spans of one call not yet handed on (queued, held or counted): what an error must count."""

    __slots__ = ("open",)

    def __init__(self, spans: int) -> None:
        self.open = spans


def _should_raise(flag: bool | None) -> bool:
    """Internal errors surface under pytest (``None``: auto), after every span is accounted for."""
    return bool(os.environ.get("PYTEST_CURRENT_TEST")) if flag is None else flag


class Pipeline:
    """Everything between the receivers and the upstream, plus the metrics it keeps."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
        sender: Sender | None = None,
        raise_errors: bool | None = None,
    ) -> None:
        self.config = config
        self.policy = policy or StallPolicy.from_env()
        self.conventions = conventions or Conventions.from_env()
        self.raise_errors = raise_errors
        self.detector = TraceDetector(
            self.policy, self.conventions, full_attributes=config.full_attributes
        )
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
            max_bytes=config.queue_bytes,
            batch_spans=config.batch_spans,
            batch_bytes=config.upstream_max_bytes,
            timeout=config.export_timeout,
            retry_initial=config.retry_initial,
            retry_max=config.retry_max,
            on_forwarded=self._forwarded,
            on_undelivered=self._undelivered,
            on_oversized=self._oversized,
        )
        self.metrics = GatewayMetrics(
            self.meter_provider,
            queue_spans=lambda: self.upstream.queued_spans,
            queue_bytes=lambda: self.upstream.queued_bytes,
            buffer_spans=lambda: self.buffer.spans,
            buffer_traces=lambda: self.buffer.traces,
            buffer_bytes=lambda: self.buffer.size,
        )
        self._stop = threading.Event()
        self._sweeper: threading.Thread | None = None
        self._logged: set[str] = set()
        self._logged_lock = threading.Lock()
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

    def _received(self, count: int) -> None:
        with self._counts_lock:
            self.received += count
        self.metrics.received(count)

    def _once(self, key: str) -> bool:
        """True the first time ``key`` is seen: log a kind of problem once, not per span."""
        with self._logged_lock:
            if key in self._logged or len(self._logged) > 1000:
                return False
            self._logged.add(key)
            return True

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

    def health(self) -> tuple[bool, str]:
        """Healthy unless forwarding is stuck: the oldest queued batch waited too long."""
        limit = self.config.export_timeout * self.config.health_retries
        age = self.upstream.oldest_age()
        if age > limit:
            return False, (
                f"forwarding is stuck: the oldest queued batch has waited {age:.0f}s "
                f"(limit {limit:.0f}s: export timeout x {self.config.health_retries})"
            )
        return True, "ok"

    # -- intake -------------------------------------------------------------------------

    def ingest(self, request: Any, body: bytes | None = None) -> Ingested:
        """Take one decoded request (``body``: its protobuf bytes, if the receiver has them)."""
        total = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        self._received(total)
        tally = _Tally(total)
        try:
            if not self.config.detect:
                self._forward_request(request, body, total, tally)
                return Ingested(total)
            return self._ingest(request, body, total, tally)
        except Exception:
            self._lost(tally, "ingest")
            raise

    def _lost(self, tally: _Tally, where: str) -> None:
        """Count what an error left in hand; log the first error of its kind."""
        if tally.open > 0:
            self._undelivered(tally.open, "error")
            tally.open = 0
        if self._once(f"error:{where}"):
            logger.exception(
                "internal error in %s; the spans in hand are counted undelivered", where
            )

    def _ingest(self, request: Any, body: bytes | None, total: int, tally: _Tally) -> Ingested:
        groups, invalid = self._classify(request, body)
        self._hold(groups)
        intake = self.buffer.add(groups)
        cuts: list[tuple[Any, Any, int]] = list(invalid)
        in_request = total - len(invalid)
        for group in intake.stored:
            cuts.extend(group.cuts)
            in_request -= group.held
            tally.open -= group.held
        for reason, skipped in (("buffer_full", intake.overflow), ("late", intake.late)):
            if skipped:
                self.metrics.unenriched(sum(g.spans for g in skipped), reason)
        touched = [ss for _, ss, _ in cuts]
        reports: list[RunReport] = []
        try:
            for ready in intake.ready:
                touched.extend(self._decide(ready, tally, reports))
        finally:
            self._record(reports)
        refused = len(invalid)
        if refused:
            self._undelivered(refused, "invalid_id")
            tally.open -= refused
            if self._once("invalid_id"):
                logger.warning("refusing spans with malformed trace or span ids (partial success)")
        if touched:
            _cut(cuts)
            body = spliced(request, body, touched)
        self._forward_request(request, body, in_request, tally)
        message = f"{refused} spans have malformed ids (trace id 16 bytes, span ids 8)"
        return Ingested(total - refused, refused, message if refused else "")

    def _classify(
        self, request: Any, body: bytes | None
    ) -> tuple[dict[bytes, Group], list[tuple[Any, Any, int]]]:
        """Group spans by trace: entries for what detection reads, links for plain spans."""
        groups: dict[bytes, Group] = {}
        invalid: list[tuple[Any, Any, int]] = []
        detector = self.detector
        everything = detector.interest is None
        flags = _scope_flags(request, body, detector.interest_pattern)
        for r, rs in enumerate(request.resource_spans):
            for s, ss in enumerate(rs.scope_spans):
                roles, named, marked = flags[r][s] if flags is not None else (True, True, True)
                if everything or roles or named:
                    self._classify_scope(rs, ss, groups, invalid, (roles, named, marked))
                else:
                    _plain_scope(rs, ss, groups, invalid, marked)
        return groups, invalid

    def _classify_scope(
        self,
        rs: Any,
        ss: Any,
        groups: dict[bytes, Group],
        invalid: list[tuple[Any, Any, int]],
        flags: tuple[bool, bool, bool],
    ) -> None:
        """A scope that may hold tool, model or agent spans: each span is read for its role."""
        roles, named, marked = flags
        detector = self.detector
        everything = detector.interest is None
        kind_of, named_as_agent = detector.kind_of, detector.named_as_agent
        read_model = detector.read_model
        for i, span in enumerate(ss.spans):
            trace_id = span.trace_id
            span_id = span.span_id
            parent = span.parent_span_id
            if (
                len(trace_id) != _TRACE_ID_BYTES
                or len(span_id) != _SPAN_ID_BYTES
                or (parent and len(parent) != _SPAN_ID_BYTES)
            ):
                invalid.append((rs, ss, i))
                continue
            group = groups.get(trace_id)
            if group is None:
                group = groups[trace_id] = Group()
            group.spans += 1
            if everything or (named and named_as_agent(span)):
                kind = FULL
            elif roles:
                kind = kind_of(span)
            else:
                kind = 0
            if not kind and parent:
                group.links += span_id
                group.links += parent
                group.size += LINK_BYTES
                continue
            _enter(group, kind, span, span_id, parent, (rs, ss, i), marked, read_model)

    @staticmethod
    def _hold(groups: dict[bytes, Group]) -> None:
        """Give the spans a group would keep their own bytes, before the buffer may store them.

        A group with its root is decided in this call and keeps nothing.
        """
        envelopes: dict[int, Envelope] = {}
        for group in groups.values():
            if group.has_root or not group.cuts:
                continue
            seen: set[int] = set()
            entries = [e for e in group.entries if e.source is not None]
            for entry, (rs, ss, _) in zip(entries, group.cuts, strict=True):
                envelope = envelopes.get(id(ss))
                if envelope is None:
                    envelope = envelopes[id(ss)] = envelope_of(rs, ss)
                data = entry.source.SerializeToString()
                entry.source = Held(data, envelope)
                entry.scope = None
                entry.marked = MARK in data
                group.size += len(data)
                if id(envelope) not in seen:
                    seen.add(id(envelope))
                    group.size += envelope.size

    # -- detection -----------------------------------------------------------------------

    def _decide(self, ready: Ready, tally: _Tally, reports: list[RunReport]) -> list[Any]:
        """Detect on one trace and queue its held spans; the ``ScopeSpans`` enriched in place.

        Its runs' reports are added to ``reports``, for the caller to count at once.
        """
        if all(e.kind == ROOT for e in ready.entries):
            return []  # plain spans only, all forwarded already: nothing to read or send
        tally.open += ready.held  # taken back from the buffer: in hand again
        try:
            outcome = self.detector.detect(ready)
        except Exception:
            outcome = self._undetected(ready)
            if _should_raise(self.raise_errors):
                self._send(outcome.pieces, tally)
                raise
        self._count(outcome, ready, reports)
        self._send(outcome.pieces, tally)
        return outcome.changed

    def _undetected(self, ready: Ready) -> Outcome:
        """A bug in detection: forward the trace as it came, counted as un-enriched."""
        pieces = [
            (e.source.envelope, e.source.data) for e in ready.entries if isinstance(e.source, Held)
        ]
        self.metrics.unenriched(len(ready.entries) + len(ready.links) // LINK_BYTES, "error")
        if self._once("detect"):
            logger.exception("stall detection failed on a trace; forwarding it as it came")
        return Outcome(None, pieces)

    def _count(self, outcome: Outcome, ready: Ready, reports: list[RunReport]) -> None:
        if outcome.skipped:
            spans = len(ready.entries) + len(ready.links) // LINK_BYTES
            self.metrics.unenriched(spans, outcome.skipped)
            if self._once(outcome.skipped):
                logger.warning(
                    "a trace's parent chains are cyclic or too deep to walk; "
                    "forwarding it un-enriched (%s)", outcome.skipped,
                )  # fmt: skip
        if outcome.result is not None:
            reports.extend(outcome.result.reports)

    def _record(self, reports: list[RunReport]) -> None:
        """Count finished runs in the ``stall.*`` metrics: all of one request's at once."""
        if reports:
            self.stall_metrics.record_reports(_labels_bounded(r) for r in reports)

    # -- output ---------------------------------------------------------------------------

    def _forward_request(self, request: Any, body: bytes | None, spans: int, tally: _Tally) -> None:
        """The request as it stands now: its own bytes if nothing was cut or changed."""
        if spans <= 0:
            return
        payload = body if body is not None else request.SerializeToString()
        if len(payload) <= self.upstream.batch_bytes:
            self.upstream.put(payload, spans)
            tally.open -= spans
            return
        self._send(pieces_of(payload), tally)

    def _send(self, pieces: list[Piece], tally: _Tally) -> None:
        """Pack pieces under the upstream's message limit and queue them; count what cannot go."""
        if not pieces:
            return
        packed = pack(pieces, self.upstream.batch_bytes)
        for payload, count in packed.payloads:
            self.upstream.put(payload, count)
            tally.open -= count
        if packed.oversized:
            self._oversized(packed.oversized)
            tally.open -= len(packed.oversized)

    def _oversized(self, spans: list[bytes]) -> None:
        """Spans over the upstream's limit on their own: dropped, counted, logged once each."""
        self._undelivered(len(spans), "too_large")
        limit = self.upstream.batch_bytes
        for data in spans:
            trace_id = trace_id_of(data)
            if self._once(f"too_large:{trace_id}"):
                logger.error(
                    "dropping a span of %d bytes from trace %s: over the upstream's %d-byte "
                    "message limit (--upstream-max-bytes)", len(data), trace_id, limit,
                )  # fmt: skip

    def _flush(self, traces: list[Ready]) -> None:
        reports: list[RunReport] = []
        try:
            for ready in traces:
                tally = _Tally(0)
                try:
                    self._decide(ready, tally, reports)
                except Exception:
                    self._lost(tally, "flush")
                    if _should_raise(self.raise_errors):
                        raise
        finally:
            self._record(reports)

    def _sweep(self) -> None:
        interval = self.config.flush_interval
        while not self._stop.wait(interval):
            try:
                self._flush(self.buffer.expired())
            except Exception:
                logger.exception("flushing expired traces failed")
                if _should_raise(self.raise_errors):
                    raise


def _plain_scope(
    rs: Any,
    ss: Any,
    groups: dict[bytes, Group],
    invalid: list[tuple[Any, Any, int]],
    marked: bool,
) -> None:
    """A scope whose bytes hold no role key and no agent span name: ids only, no role reads.

    Most spans a collector tier sees are here (HTTP, database, queue), so the
    loop does only what a plain span needs: its ids, a parent link, a root's place.
    Its id checks and group lookup are those of the role-reading loop above,
    written inline rather than called: this loop is the mixed traffic's hot path.
    """
    for i, span in enumerate(ss.spans):
        trace_id = span.trace_id
        span_id = span.span_id
        parent = span.parent_span_id
        if (
            len(trace_id) != _TRACE_ID_BYTES
            or len(span_id) != _SPAN_ID_BYTES
            or (parent and len(parent) != _SPAN_ID_BYTES)
        ):
            invalid.append((rs, ss, i))
            continue
        group = groups.get(trace_id)
        if group is None:
            group = groups[trace_id] = Group()
        group.spans += 1
        if parent:
            group.links += span_id
            group.links += parent
            group.size += LINK_BYTES
        else:
            _enter(group, 0, span, span_id, parent, (rs, ss, i), marked)


def _enter(
    group: Group,
    kind: int,
    span: Any,
    span_id: bytes,
    parent: bytes,
    where: tuple[Any, Any, int],
    marked: bool,
    read_model: Callable[[Any], Reading] | None = None,
) -> None:
    """One span detection reads into its group: a root, a model's place, or a span to hold.

    A model span is read as it goes on (``read_model``): its reading is kept, not the span.
    """
    group.size += ENTRY_BYTES
    if not parent:
        group.has_root = True
    if not kind:
        start, end = span.start_time_unix_nano, span.end_time_unix_nano
        group.entries.append(Entry(ROOT, span_id, b"", start, end, span, marked, where[1]))
    elif kind == MODEL:
        start, end = span.start_time_unix_nano, span.end_time_unix_nano
        assert read_model is not None
        reading = read_model(span)
        chant = reading.model.chant if reading.model is not None else None
        if chant is not None:
            group.size += chant.nbytes  # the output's chunk hashes, kept in place of its text
        group.entries.append(Entry(MODEL, span_id, parent, start, end, None, outcome=reading))
    else:
        group.entries.append(Entry(kind, span_id, parent, 0, 0, span, marked, where[1]))
        group.cuts.append(where)
        group.held += 1


def _cut(cuts: Iterable[tuple[Any, Any, int]]) -> None:
    """Delete spans from their ``ScopeSpans``, last index first so the others stay put."""
    by_scope: dict[int, tuple[Any, list[int]]] = {}
    for _, ss, index in cuts:
        entry = by_scope.get(id(ss))
        if entry is None:
            by_scope[id(ss)] = (ss, [index])
        else:
            entry[1].append(index)
    for ss, indexes in by_scope.values():
        spans = ss.spans
        for index in sorted(indexes, reverse=True):
            del spans[index]


def _labels_bounded(report: RunReport) -> RunReport:
    """The report with tool names cut to :data:`LABEL_LIMIT` for metric labels (copied if so)."""
    long_rows = any(len(r.tool) > LABEL_LIMIT for r in report.ledger)
    long_findings = any(len(f.tool) > LABEL_LIMIT for f in report.findings)
    if not long_rows and not long_findings:
        return report
    return replace(
        report,
        ledger=tuple(replace(r, tool=truncate(r.tool)) for r in report.ledger),
        findings=tuple(replace(f, tool=truncate(f.tool)) for f in report.findings),
    )


# -- where the role keys are --------------------------------------------------------------


def _scope_flags(
    request: Any, body: bytes | None, keys: re.Pattern[bytes]
) -> list[list[tuple[bool, bool, bool]]] | None:
    """Per ``ScopeSpans``: (holds a role key, an agent span name, ``stall.``), from the raw bytes.

    ``None`` when there are no bytes to look at (OTLP/JSON) or they do not line
    up with the parsed request: every span is then read for its role.
    """
    if body is None:
        return None
    ranges = scope_ranges(body)
    if ranges is None or len(ranges) != len(request.resource_spans):
        return None
    out: list[list[tuple[bool, bool, bool]]] = []
    find, search = body.find, keys.search
    for scopes, rs in zip(ranges, request.resource_spans, strict=True):
        if len(scopes) != len(rs.scope_spans):
            return None
        out.append(
            [
                (
                    search(body, start, end) is not None,
                    find(AGENT_NAME, start, end) >= 0,
                    find(MARK, start, end) >= 0,
                )
                for start, end in scopes
            ]
        )
    return out
