"""The live face of otel-stall: a span processor that wraps the user's own processors.

In the SDK, ``on_end`` receives a :class:`ReadableSpan` whose attributes are
already frozen, so a processor cannot add ``stall.*`` attributes to the span it
is given. :class:`StallSpanProcessor` therefore *wraps* the downstream
processors (a ``BatchSpanProcessor`` with an exporter, typically): it forwards
``on_start`` unchanged, and on ``on_end`` hands them an enriched span for each
tool span and run span: an :class:`~otel_stall.live.enriched.EnrichedSpan`, which
reads through to the ended span's public properties and carries its own
attributes and events. Every other span is forwarded as the very same object
after one role lookup. A copy obeys the provider's span limits, as if its
``stall.*`` attributes and events had been set on the live span.

Semantics match :mod:`otel_stall.offline.analysis` (the batch analysis used by replay and
the gateway), so a complete trace gets the same verdicts and attributes live
and after the fact:

* a run is the nearest ancestor agent span, else the trace, whose root span
  then plays the run span;
* a tool span nested inside another tool span is the same call seen twice:
  only the outermost one counts;
* model calls open a round when they start, tool calls are fed when they end;
* findings fired while the run span is open become ``stall.detected`` events
  on it; findings fired when the last round closes at run end go on its copy
  (and each can be a log record instead, or as well: :mod:`otel_stall.live.log_events`).

Ancestry is tracked from ``on_start`` using the attributes a span has when it
starts (the GenAI conventions ask instrumentations to set
``gen_ai.operation.name`` at creation for this reason). Only spans that can
matter are remembered: agent, tool and model spans and the descendants of
agent and tool spans. A span with none of those above it belongs to the trace
run, which is created only when a tool or model span needs it; so a trace with
no agent activity costs one set test per span at start and at end, and one
small dict entry for its root.

Where a span belongs (open runs, ancestry, trace roots, and the TTL, run and
span bounds) lives in :mod:`otel_stall.live.run_table`; this module decides what a span
means and what downstream sees. The table's hot members are bound as
attributes here, so the split adds no call on the hot path.

Concurrency: the run table's lock is held only for dict operations; each run
has its own lock that serialises its detector. Hashing, downstream calls and
user callbacks run outside every lock.
"""

from __future__ import annotations

import dis
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits, SpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, set_span_in_context

from otel_stall.conventions import (
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    Conventions,
    Role,
    SpanRecord,
    agent_name,
    is_agent_span_name,
)
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Finding, RunReport
from otel_stall.core.stall_attributes import (
    finding_event_attributes,
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.live.enriched import (
    EnrichedSpan,
    add_within_limits,
    attribute_dict,
    bounded_event,
    copy_span,
    span_record,
)
from otel_stall.live.log_events import API_EMITS_EVENTS, FindingEvents
from otel_stall.live.run_table import Node, Run, RunTable
from otel_stall.live.settings import ProcessorSettings
from otel_stall.metrics import StallMetrics
from otel_stall.semconv import StallEventAttributes

if TYPE_CHECKING:
    from otel_stall.live.guard import StallGuard

logger = logging.getLogger("otel_stall")

_EVENT: Final = StallEventAttributes.EVENT_NAME
_KIND: Final = StallEventAttributes.KIND
_SEQ: Final = StallEventAttributes.SEQ
_OTHER: Final = Role.OTHER
_TOOL: Final = Role.TOOL
_MODEL: Final = Role.MODEL
_AGENT: Final = Role.AGENT
_AGENT_NAME: Final = "invoke_agent"


@dataclass(frozen=True, slots=True)
class ProcessorStats:
    """A snapshot of the processor's state, for health checks and tests."""

    active_runs: int
    """Runs currently tracked (with at least one tool or model call)."""
    tracked_spans: int
    """Open spans whose ancestry is remembered (open trace roots included)."""
    finished_runs: int
    """Runs finished because their run span ended."""
    evicted_runs: int
    """Runs finished early by the TTL or the ``max_runs`` bound."""
    forgotten_spans: int
    """Open spans dropped from the ancestry map by the ``max_tracked_spans`` bound."""
    errors: int
    """Internal errors caught (the processor failed open)."""


class StallSpanProcessor(SpanProcessor):
    """Detects stalled agents from their spans and enriches what downstream exports.

    ``StallSpanProcessor(BatchSpanProcessor(OTLPSpanExporter()))`` replaces the
    plain ``BatchSpanProcessor`` in an existing pipeline. With no downstream it
    still adds live events, records metrics and calls ``on_finding``.
    """

    def __init__(
        self,
        *downstream: SpanProcessor,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
        meter_provider: MeterProvider | None = None,
        on_finding: Callable[[Finding], None] | None = None,
        redact: bool | None = None,
        max_runs: int | None = None,
        run_ttl: float | None = None,
        settings: ProcessorSettings | None = None,
        clock: Callable[[], float] | None = None,
        raise_errors: bool | None = None,
        span_limits: SpanLimits | None = None,
        logger_provider: LoggerProvider | None = None,
    ) -> None:
        explicit: dict[str, Any] = {
            "redact": redact,
            "max_runs": max_runs,
            "run_ttl_seconds": run_ttl,
            "raise_errors": raise_errors,
        }
        if settings is None:
            settings = ProcessorSettings.from_env(None, **explicit)
        else:
            given = {k: v for k, v in explicit.items() if v is not None}
            settings = replace(settings, **given) if given else settings
        if settings.event_signal != "span" and not API_EMITS_EVENTS:
            logger.error(
                "otel-stall: event_signal=%r needs opentelemetry-api 1.39 or later (its Logs "
                "API emits named events), so stall.detected stays a span event. Upgrade "
                "opentelemetry-api and opentelemetry-sdk, or leave OTEL_STALL_EVENT_SIGNAL unset.",
                settings.event_signal,
            )
            settings = replace(settings, event_signal="span")
        self.settings: Final = settings
        self.policy: Final = policy or StallPolicy.from_env()
        self.conventions: Final = conventions or Conventions.from_env()
        self.on_finding = on_finding
        self._downstream: tuple[SpanProcessor, ...] = ()
        self._single: SpanProcessor | None = None
        """The one downstream processor, when there is one: the common case skips a loop."""
        self._starting: tuple[SpanProcessor, ...] = ()
        self._ending: tuple[SpanProcessor, ...] = ()
        """Downstream hooks that do something. The SDK's batch and simple processors
        implement both as ``pass``: relaying those costs as much as the role check.
        SDKs before 1.40 have no ``_on_ending`` hook at all (nor call ours)."""
        self._wrap(tuple(downstream))
        self._metrics = StallMetrics(meter_provider)
        self._enabled = settings.enabled
        self._redact = settings.redact
        self._live_events = settings.live_events
        self._log_events = (
            None if settings.event_signal == "span" else FindingEvents(logger_provider)
        )
        self._limits = span_limits or SpanLimits()
        """The provider's span limits (by default the SDK's, from ``OTEL_*_LIMIT``): the
        attributes and events a copy gets obey them, as they would on the live span."""
        self._role = self.conventions.role
        # Tool calls straight from the span's parts, unless a subclass makes them its own way.
        self._tool_call = (
            self.conventions.tool_call_from if self.conventions.builds_calls_from_parts else None
        )
        role_keys = self.conventions.role_keys
        self._role_keys = _EveryKey() if role_keys is None else role_keys
        self._signer = self.policy.signer
        self._content_keys = self.conventions.content_keys
        table = RunTable(
            max_runs=settings.max_runs,
            ttl=float(settings.run_ttl_seconds),
            max_spans=settings.max_tracked_spans,
            clock=clock or time.monotonic,
            on_evict=self._finish_evicted,
        )
        self._table: Final = table
        """The run state; its hot members are bound below so the hot path calls them directly."""
        self._spans: Final = table.spans
        self._track: Final = table.track
        self._root_started: Final = table.root_started
        self._root_ended: Final = table.root_ended
        self._use: Final = table.use
        self._error_lock = threading.Lock()
        self._errors = 0
        self._error_kinds: set[str] = set()
        self._guard: StallGuard | None = None
        _LIVE.add(self)  # reset in a forked child: see _after_fork_in_child
        # 28 attributes. At 30, CPython 3.11 stops sharing instance dict keys: each
        # instance dict grows fivefold and hot-path reads slow down. Keep new state elsewhere.

    # -- public --------------------------------------------------------------

    @property
    def downstream(self) -> tuple[SpanProcessor, ...]:
        """The wrapped processors, in call order."""
        return self._downstream

    def add_span_processor(self, processor: SpanProcessor) -> None:
        """Wrap one more processor, after the others: it gets the spans that end from now on.

        For pipelines built in steps, such as one batch processor per exporter
        named in ``OTEL_TRACES_EXPORTER``: all of them share this processor's
        detection, so findings are counted and added to run spans once. As with
        the SDK's own ``add_span_processor``, a span that ends while this runs
        may reach only the processors that were there before.
        """
        with _WRAPPING:
            self._wrap((*self._downstream, processor))

    def _wrap(self, downstream: tuple[SpanProcessor, ...]) -> None:
        """Set the wrapped processors, and the hooks of theirs worth relaying.

        Each store replaces a whole value, so a span ending meanwhile on another
        thread reaches the old processors or the new ones, never none.
        """
        self._starting = tuple(p for p in downstream if not _is_noop(type(p).on_start))
        self._ending = tuple(
            p for p in downstream if not _is_noop(getattr(type(p), "_on_ending", None))
        )
        self._downstream = downstream
        self._single = downstream[0] if len(downstream) == 1 else None

    @property
    def guard(self) -> StallGuard:
        """The live gate that shares this processor's run state."""
        if self._guard is None:
            from otel_stall.live.guard import StallGuard

            self._guard = StallGuard(self)
        return self._guard

    @property
    def active_runs(self) -> int:
        """Runs currently tracked."""
        return self._table.active_runs

    def stats(self) -> ProcessorStats:
        """Counts of tracked state, finished and evicted runs, and caught errors."""
        active, tracked, finished, evicted, forgotten = self._table.counts()
        with self._error_lock:
            errors = self._errors
        return ProcessorStats(
            active_runs=active,
            tracked_spans=tracked,
            finished_runs=finished,
            evicted_runs=evicted,
            forgotten_spans=forgotten,
            errors=errors,
        )

    def evict_expired(self) -> int:
        """Finish runs idle for longer than the TTL now; returns how many."""
        return self._table.evict_expired()

    # -- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Record the span's ancestry (and open a round for a model span), then forward."""
        failure: Exception | None = None
        if self._enabled:
            # The hot path, inlined: most spans are plain spans outside any agent.
            try:
                parent = span.parent
                inherit: Node | None = None
                if parent is None:
                    self._root_started(span)
                elif self._spans:
                    node = self._spans.get(parent.span_id)
                    if node is not None:
                        inherit = node if node.shared else node.child
                # A dict copy: iterating the SDK's still-mutable attribute mapping takes
                # its lock and copies its keys, which costs more than this copy.
                attributes = span.attributes
                try:  # noqa: SIM105 (suppress() costs a context manager on the hot path)
                    attributes = attributes.copy()  # type: ignore[union-attr]
                except AttributeError:  # not the SDK's mapping: iterate it as it is
                    pass
                if not self._role_keys.isdisjoint(attributes):  # type: ignore[arg-type]
                    self._classified_start(span, attributes, inherit)  # type: ignore[arg-type]
                elif span.name.startswith(_AGENT_NAME) and is_agent_span_name(span.name):
                    self._classified_start(span, attributes, inherit, _AGENT)  # type: ignore[arg-type]
                elif inherit is not None:
                    self._track(span.get_span_context().span_id, inherit)
            except Exception as exc:
                failure = self._error("on_start", exc)
        for processor in self._starting:  # empty for the SDK's own processors
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:
                self._error("downstream on_start", exc, reraise=False)
        if failure is not None:
            raise failure

    def _on_ending(self, span: Span) -> None:
        # The SDK calls this hook on every registered processor; relay it so the
        # wrapped processors behave exactly as if they were registered directly.
        for processor in self._ending:  # empty for the SDK's own processors
            try:
                processor._on_ending(span)
            except Exception as exc:
                self._error("downstream _on_ending", exc, reraise=False)

    def on_end(self, span: ReadableSpan) -> None:
        """Detect, then hand downstream an enriched span (tool and run spans) or the span."""
        out = span
        failure: Exception | None = None
        if self._enabled:
            # The hot path, inlined: an untracked plain span that is not a root leaves
            # after one set test.
            try:
                node = None
                if self._spans:
                    ctx = span.context
                    if ctx is not None:
                        node = self._spans.pop(ctx.span_id, None)
                if node is not None:
                    # A plain span under an agent or tool (its node is shared with its
                    # parent's children) leaves as cheaply as an untracked one.
                    if not node.shared or not self._role_keys.isdisjoint(
                        span.attributes  # type: ignore[arg-type]
                    ):
                        out = self._end(span, node, ctx)
                elif not self._role_keys.isdisjoint(span.attributes):  # type: ignore[arg-type]
                    out = self._end(span, None, span.context)
                elif span.parent is None:
                    out = self._plain_root_end(span)
            except Exception as exc:
                failure = self._error("on_end", exc)
        single = self._single
        if single is not None:
            try:
                single.on_end(out)
            except Exception as exc:
                self._error("downstream on_end", exc, reraise=False)
        else:
            for processor in self._downstream:
                try:
                    processor.on_end(out)
                except Exception as exc:
                    self._error("downstream on_end", exc, reraise=False)
        if failure is not None:
            raise failure

    def shutdown(self) -> None:
        """Finish every tracked run (so their metrics are recorded), then shut downstream.

        From now on spans are only forwarded: a span that ends later would otherwise
        open a new run that nothing finishes, and count it twice.
        """
        self._enabled = False
        try:
            runs = self._table.clear()
            for run in runs:
                self._finish_evicted(run)
        except Exception as exc:
            self._error("shutdown", exc, reraise=False)
        first: Exception | None = None
        for processor in self._downstream:
            try:
                processor.shutdown()
            except Exception as exc:  # the others still shut down (and stop their threads)
                first = first or exc
        if first is not None:
            raise first

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush every downstream processor within ``timeout_millis`` in all, as the SDK does.

        Each gets what is left of the time; once it is spent the rest are
        skipped and the result is false. True only if all of them flushed.
        """
        deadline = time.monotonic_ns() + timeout_millis * 1_000_000
        ok = True
        for processor in self._downstream:
            left = deadline - time.monotonic_ns()
            if left <= 0:
                return False
            if processor.force_flush(left // 1_000_000) is False:
                ok = False
        return ok

    def _after_fork(self) -> None:
        """In a forked child: forget the parent's runs and take new locks.

        A lock held by another of the parent's threads at the fork would never
        be released in the child, and the first span to need it would hang.
        The parent's runs are not the child's to finish: the parent does.
        """
        try:
            self._table.reset_after_fork()
            self._error_lock = threading.Lock()
            self._errors = 0
            self._error_kinds = set()
        except Exception:  # an at-fork hook must not fail the fork's caller
            logger.exception("otel-stall: resetting after fork failed")

    # -- start ---------------------------------------------------------------

    def _classified_start(
        self,
        span: Span,
        attributes: Mapping[str, Any],
        inherit: Node | None,
        role: Role | None = None,
    ) -> None:
        """A span that holds a role attribute (or an agent's name) at its start: track it."""
        if role is None:
            role = self._role(attributes)
            if role is _OTHER and is_agent_span_name(span.name):
                role = _AGENT
        if role is _OTHER:
            if inherit is not None:
                self._track(span.get_span_context().span_id, inherit)
            return
        ctx = span.get_span_context()
        run, nested = (None, False) if inherit is None else (inherit.run, inherit.nested)
        if role is _TOOL:
            child = inherit if inherit is not None and nested else Node(run, True)
            self._track(ctx.span_id, Node(run, nested, role, None, child))
        elif role is _AGENT:
            agent = Run(ctx.trace_id, ctx.span_id, span)
            self._track(ctx.span_id, Node(run, nested, role, agent, Node(agent, False)))
            if span.parent is None:
                self._table.agent_root(ctx.trace_id, agent)
        else:
            self._track(ctx.span_id, Node(run, nested, role, None, inherit))
            self._model(span, run, ctx.trace_id)

    def _model(self, span: ReadableSpan, run: Run | None, trace_id: int) -> None:
        """A model call opens a round at its start, as the batch analysis orders it."""
        run = self._use(run, trace_id) if run is not None else self._use_by_parent(span, trace_id)
        if run is None:
            return
        call = self.conventions.model_call(span_record(span), run.run_key)
        when = span.start_time or 0
        with run.lock:
            if run.closed:
                return
            detector = run.detector or self._detector(run)
            findings = detector.model_call(call)
            if findings:
                self._fired(run, findings, when)
        if findings:
            self._deliver(findings, run, when)

    # -- end -----------------------------------------------------------------

    def _end(self, span: ReadableSpan, node: Node | None, ctx: SpanContext | None) -> ReadableSpan:
        """A tracked or classified span ended: detect, and enrich it if needed.

        ``ctx`` is ``span.context``, which the caller has read already.
        """
        if ctx is None:
            return span
        parent = span.parent
        if node is None:
            start_role = _OTHER
            owned = None
            run, nested = None, False
            if parent is not None:
                # Ancestry for a span whose start was not tracked (or was forgotten).
                parent_node = self._spans.get(parent.span_id)
                inherit = None if parent_node is None else parent_node.inherited()
                if inherit is not None:
                    run, nested = inherit.run, inherit.nested
        else:
            start_role, owned, run, nested = node.role, node.owned, node.run, node.nested
        # One plain copy: cheap lookups (the SDK mapping's get() goes through the
        # Mapping protocol), then the exported attributes.
        attrs = attribute_dict(span)
        if start_role is not _OTHER or not self._role_keys.isdisjoint(attrs):
            role = self._role(attrs)
        else:
            role = _OTHER
        if role is _OTHER and start_role is _OTHER and owned is None and parent is not None:
            return span  # a plain span: not a span otel-stall reads
        extra: dict[str, Any] = {}
        if role is _TOOL:
            if not nested:  # a nested tool span is the outer call seen again
                row_attrs = self._tool(span, ctx, attrs, run)
                if row_attrs:
                    extra = row_attrs
        elif role is _MODEL and start_role is not _MODEL:
            # Classified only at its end: open its round now, at its start time.
            self._model(span, run, ctx.trace_id)
        if parent is None:
            trace_run = self._root_ended(ctx.trace_id)
            if owned is None:
                owned = trace_run
        events: list[Event] | None = None
        dropped = 0
        if owned is not None:
            ended = self._run_ended(span, owned, extra)
            if ended is not None:
                events, dropped = ended
        redact = self._redact and (role is not _OTHER or start_role is not _OTHER)
        if not extra and events is None and not redact:
            return span
        if redact:
            for key in self._content_keys.intersection(attrs):
                del attrs[key]
        over = add_within_limits(attrs, extra, self._limits)
        if redact:
            # A full copy: the view would keep the ended span, raw payloads and all,
            # reachable from what is exported (a pickling exporter would send them).
            return copy_span(span, attrs, events, dropped, over)
        return EnrichedSpan(span, attrs, events, dropped, over)

    def _plain_root_end(self, span: ReadableSpan) -> ReadableSpan:
        """A trace root without role attributes ended: close its trace run if it has one."""
        ctx = span.context
        if ctx is None:
            return span
        run = self._root_ended(ctx.trace_id)
        if run is None:
            return span  # no tool or model call in the trace: the common case
        extra: dict[str, Any] = {}
        ended = self._run_ended(span, run, extra)
        if ended is None:
            return span  # never used, or nothing to report: extra is empty too
        attrs = attribute_dict(span)  # a plain span: nothing to redact
        over = add_within_limits(attrs, extra, self._limits)
        return EnrichedSpan(span, attrs, *ended, over)

    def _tool(
        self,
        span: ReadableSpan,
        ctx: SpanContext,
        attributes: dict[str, Any],
        run: Run | None,
    ) -> dict[str, Any] | None:
        """Feed one ended tool span to its run; the ``stall.*`` attributes for its copy."""
        trace_id = ctx.trace_id
        run = self._use(run, trace_id) if run is not None else self._use_by_parent(span, trace_id)
        if run is None:
            return None
        status = span.status
        name, span_id = span.name, format(ctx.span_id, "016x")
        start, end = span.start_time or 0, span.end_time or 0
        code = _status_code(status.status_code)
        if self._tool_call is not None:
            call = self._tool_call(attributes, name, span_id, start, end, code, run.run_key)
        else:  # a Conventions subclass with its own tool_call: it gets the SpanRecord
            parent = span.parent
            parent_id = None if parent is None else format(parent.span_id, "016x")
            record = SpanRecord(
                run.run_key[0],
                span_id,
                parent_id,
                name,
                start,
                end,
                attributes,
                code,
                status.description or "",
            )
            call = self.conventions.tool_call(record, run.run_key)
        digests = self._signer.sign(call.tool, call.arguments, call.result, call.status)
        with run.lock:
            if run.closed:
                return None
            detector = run.detector or self._detector(run)
            observation = detector.tool_call(call, digests)
            findings = observation.findings
            if findings:
                self._fired(run, findings, call.end_ns)
        row = observation.row
        self._metrics.record_row(row)
        if findings:
            self._deliver(findings, run, call.end_ns)
        return tool_span_attributes(row)

    def _use_by_parent(self, span: ReadableSpan, trace_id: int) -> Run | None:
        """The run of a span with no known run: none if begun under an ended agent span."""
        parent = span.parent
        return self._use(None, trace_id, None if parent is None else parent.span_id)

    def _run_ended(
        self, span: ReadableSpan, owned: Run, extra: dict[str, Any]
    ) -> tuple[list[Event], int] | None:
        """Close the run whose run span this is, if it was used.

        Returns the copy's events, and how many more events were dropped.
        """
        run = owned
        if not self._table.end_run(run):
            return None  # never used: an agent span with no tool or model call
        when = span.end_time or 0
        report, new = self._close(run, span, when)
        run.span = None
        if report is None:
            return None
        extra.update(run_span_attributes(report))
        if new:
            self._deliver(new, run, when)
        return self._run_events(span, run)

    def _run_events(self, span: ReadableSpan, run: Run) -> tuple[list[Event], int]:
        """The span's events plus the run's findings that could not go on it while open.

        Within the SDK's event limit, as if they had been added live: the oldest
        make way, and are counted as dropped (with those ``pending`` had no room for).
        """
        events = list(span.events)
        with run.lock:
            pending = list(run.pending or ())
            dropped = run.pending_dropped
        if pending:
            present = {
                (e.timestamp, (e.attributes or {}).get(_KIND), (e.attributes or {}).get(_SEQ))
                for e in events
                if e.name == _EVENT
            }
            for when, finding in pending:
                if (when, finding.kind.value, finding.seq) not in present:
                    attributes = finding_event_attributes(finding)
                    events.append(bounded_event(_EVENT, attributes, when, self._limits))
        limit = self._limits.max_events
        if limit is not None and len(events) > limit:
            dropped += len(events) - limit
            del events[: len(events) - limit]
        return events, dropped

    # -- detection -----------------------------------------------------------

    def _finish_evicted(self, run: Run) -> None:
        """Finish a run whose span did not end in time; its events go on the open span."""
        span = run.span
        now = span.end_time if span is not None and span.end_time else time.time_ns()
        _, new = self._close(run, span, now)
        if new:
            self._deliver(new, run, now)

    def _close(
        self, run: Run, span: ReadableSpan | None, when: int
    ) -> tuple[RunReport | None, tuple[Finding, ...]]:
        """Finish the detector once; the report and the findings fired by finishing."""
        with run.lock:
            if run.closed:
                return run.report, ()
            run.closed = True
            detector = run.detector
            if detector is None:
                return None, ()
            before = detector.finding_count
            report = detector.finish()
            fired = detector.finding_count - before
            new = report.findings[max(0, len(report.findings) - fired) :] if fired else ()
            if new:
                self._fired(run, new, when)
            attributes = span.attributes if span is not None else None
            report = replace(
                report,
                attributes={
                    "trace_id": run.run_key[0],
                    "run_span_id": _span_hex(span),
                    "agent": agent_name(attributes) if attributes and run.span_id else None,
                },
            )
            run.report = report
        self._metrics.record_run(report, _run_context(run))
        return report, new

    def _detector(self, run: Run) -> RunDetector:
        """Under the run lock: the run's detector, created on first use."""
        detector = run.detector = RunDetector(
            self.policy, run.run_key, self.settings.run_report_size
        )
        return detector

    def _fired(self, run: Run, findings: Sequence[Finding], when: int) -> None:
        """Under the run lock: add findings to the run span if open, else keep them for its copy."""
        if self.settings.event_signal == "logs":
            return  # log-based events only: _deliver emits them
        span = run.span
        if self._live_events and span is not None and span.is_recording():
            for finding in findings:
                span.add_event(_EVENT, finding_event_attributes(finding), timestamp=when)
            if span.is_recording():
                return
            # The span ended on another thread meanwhile, and may have refused the
            # events: its copy gets those it lacks.
        for finding in findings:
            run.keep_pending(when, finding)

    def _deliver(self, findings: Iterable[Finding], run: Run, when: int) -> None:
        """Outside every lock: log-based events, metrics and the user's callback."""
        callback = self.on_finding
        log_events = self._log_events
        context = _run_context(run)
        for finding in findings:
            if log_events is not None:
                try:
                    log_events.emit(finding, context, when)
                except Exception as exc:
                    failure = self._error("log-based event", exc)
                    if failure is not None:
                        raise failure from None
            self._metrics.record_finding(finding, context)
            if callback is not None:
                try:
                    callback(finding)
                except Exception as exc:
                    failure = self._error("on_finding callback", exc)
                    if failure is not None:
                        raise failure from None

    # -- errors --------------------------------------------------------------

    def _error(self, where: str, exc: Exception, *, reraise: bool = True) -> Exception | None:
        """Log once per kind and fail open; returns the error when it should surface."""
        kind = f"{where}: {type(exc).__name__}"
        with self._error_lock:
            self._errors += 1
            first = kind not in self._error_kinds
            self._error_kinds.add(kind)
        if first:
            logger.error(
                "otel-stall: %s failed; the span is still forwarded (logged once per kind)",
                where,
                exc_info=exc,
            )
        if reraise and self.settings.should_raise:
            return exc
        return None


_WRAPPING: Final = threading.Lock()
"""Serialises :meth:`StallSpanProcessor.add_span_processor` (rare: a module lock will do)."""

_LIVE: Final[weakref.WeakSet[StallSpanProcessor]] = weakref.WeakSet()
"""Every processor not yet garbage: one at-fork hook resets them all in a child.

One hook for the module rather than one per processor, because a hook can never
be unregistered: a process that builds many processors would keep a dead one
for each of them."""


def _after_fork_in_child() -> None:
    """The at-fork hook: every live processor starts the child clean."""
    for processor in list(_LIVE):
        processor._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _empty_hook(self: object, span: object, parent_context: object = None) -> None:
    pass


def _steps(code: Any) -> list[tuple[str, Any]]:
    """A function's instructions, without the ones that do nothing."""
    return [
        (i.opname, i.argval)
        for i in dis.get_instructions(code)
        if i.opname not in ("RESUME", "NOP", "CACHE")
    ]


_EMPTY_STEPS: Final = _steps(_empty_hook.__code__)


class _EveryKey(frozenset[str]):
    """The role keys of a :class:`Conventions` whose ``role()`` is its own: it may read any key.

    The hot path asks ``keys.isdisjoint(attributes)`` to skip plain spans; for
    such a subclass no span is plain until ``role()`` says so, as in replay.
    """

    def isdisjoint(self, other: object) -> bool:
        """Never disjoint: every span goes to ``role()``."""
        return False


def _is_noop(hook: Callable[..., Any] | None) -> bool:
    """Whether a processor hook is missing or its body is empty (``pass`` or a docstring only).

    Compared by instructions, which this interpreter compiled for both functions,
    so a processor that does anything in the hook, whatever its class, is relayed.
    """
    if hook is None:
        return True
    code = getattr(hook, "__code__", None)
    return code is not None and _steps(code) == _EMPTY_STEPS


def _run_context(run: Run) -> Context:
    """A context whose span is the run span: log records and exemplars point at the run.

    A trace run whose root was never seen here has only its trace id.
    """
    span_context = run.context or SpanContext(run.trace_id, run.span_id or 0, False)
    return set_span_in_context(NonRecordingSpan(span_context))


def _status_code(code: StatusCode) -> int:
    """OTLP's status number, by identity (cheaper than the enum's ``value`` property)."""
    if code is StatusCode.ERROR:
        return STATUS_ERROR
    return STATUS_OK if code is StatusCode.OK else STATUS_UNSET


def _span_hex(span: ReadableSpan | None) -> str | None:
    ctx = span.context if span is not None else None
    return None if ctx is None else format(ctx.span_id, "016x")


__all__ = ["ProcessorStats", "StallSpanProcessor", "copy_span", "span_record"]
