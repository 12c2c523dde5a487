"""The live face of otel-stall: a span processor that wraps the user's own processors.

In the SDK, ``on_end`` receives a :class:`ReadableSpan` whose attributes are already frozen,
so a processor cannot add ``stall.*`` attributes to the span it is given.
:class:`StallSpanProcessor` therefore *wraps* the downstream processors (a
``BatchSpanProcessor`` with an exporter, typically): it relays ``on_start`` and
``_on_ending`` unchanged, and on ``on_end`` hands them an enriched span for each tool span
and run span: an :class:`~otel_stall.live.enriched.EnrichedSpan`, which reads through to the
ended span's public properties and carries its own attributes and events. A copy obeys the
provider's span limits, as if its ``stall.*`` attributes and events had been set on the live
span.

One span's way through ``on_end``: a plain span (no role attribute, not a
run's root) is forwarded as the very same object after one set test;
otherwise it is classified, a tool span is fed to its run's detector, a run
span closes its run, and downstream gets the enriched copy.

Which run a call feeds is decided by the one run model, :mod:`otel_stall.core.runs`
(its rules are listed there), which replay and the gateway drive too, so a complete
trace gets the same verdicts and attributes live and after the fact. Model calls
open a round when they start, tool calls are fed when they end. Findings fired while
the run span is open become ``stall.detected`` events on it; those fired as the run
ends go on its copy (or are log records: :mod:`otel_stall.live.log_events`). Ancestry
is tracked from ``on_start`` with the attributes a span has when it starts (the GenAI
conventions ask for ``gen_ai.operation.name`` at creation for this reason).

Concurrency: the run table's lock is held only for dict operations; each run
has its own lock that serialises its detector. Hashing, downstream calls and
user callbacks run outside every lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Final

from opentelemetry._logs import LoggerProvider
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits, SpanProcessor
from opentelemetry.trace import SpanContext

from otel_stall.conventions import Conventions, Reading, Role
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Finding, ModelCall, RunReport, Status, Verdict
from otel_stall.core.stall_attributes import (
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.live.enriched import (
    attribute_dict,
    copy_span,
    enrich,
    redact,
    redact_events,
    span_record,
)
from otel_stall.live.fork import reset_in_child
from otel_stall.live.guard import StallGuard
from otel_stall.live.log_events import FindingEvents
from otel_stall.live.run_span import (
    ProcessorStats,
    add_findings,
    call_cap,
    leave_on_span,
    report_attributes,
    resolved_settings,
    run_context,
    run_events,
)
from otel_stall.live.run_table import Node, Run, RunTable
from otel_stall.live.settings import ProcessorSettings
from otel_stall.metrics import StallMetrics

logger = logging.getLogger("otel_stall")


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
        explicit = {
            "redact": redact,
            "max_runs": max_runs,
            "run_ttl_seconds": run_ttl,
            "raise_errors": raise_errors,
        }
        settings = resolved_settings(settings, explicit)
        self.settings: Final = settings
        self.policy: Final = policy or StallPolicy.from_env()
        self.conventions: Final = conventions or Conventions.from_env()
        self.on_finding = on_finding
        self._downstream = downstream
        self._metrics = StallMetrics(meter_provider)
        self._enabled = settings.enabled
        self._log_events = (
            None if settings.event_signal == "span" else FindingEvents(logger_provider)
        )
        self._limits = span_limits or SpanLimits()
        """The provider's span limits (by default the SDK's, from ``OTEL_*_LIMIT``): the
        attributes and events a copy gets obey them, as they would on the live span."""
        self._content_keys = self.conventions.content_keys
        role_keys = self.conventions.role_keys
        if settings.redact and role_keys is not None:  # a payload on any span must go
            role_keys = role_keys | self._content_keys
        self._role_keys = role_keys
        """The keys that make a span worth a look (``role()``, or redaction); ``None``: all."""
        self._role_prefixes, self._role_names = self.conventions.role_name_patterns
        """Span-name prefixes and names that give a span a role before its attributes do."""
        self._table: Final = RunTable(
            max_runs=settings.max_runs,
            ttl=float(settings.run_ttl_seconds),
            max_spans=settings.max_tracked_spans,
            clock=clock or time.monotonic,
            on_evict=self._finish_evicted,
            max_bytes=settings.max_state_bytes,
            call_cap=call_cap(settings, self.policy),
        )
        self._error_lock = threading.Lock()
        self._errors = 0
        self._error_kinds: set[str] = set()
        self._guard: StallGuard | None = None
        self._wrapping = threading.Lock()
        """Serialises :meth:`add_span_processor` (rare)."""
        reset_in_child(self)

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
        with self._wrapping:
            # One store of a whole tuple: a span ending meanwhile on another thread
            # reaches the old processors or the new ones, never none.
            self._downstream = (*self._downstream, processor)

    @property
    def guard(self) -> StallGuard:
        """The live gate that shares this processor's run state."""
        if self._guard is None:
            self._guard = StallGuard(self)
        return self._guard

    @property
    def active_runs(self) -> int:
        """Runs currently tracked."""
        return self._table.active_runs

    def stats(self) -> ProcessorStats:
        """Counts of tracked state, finished and evicted runs, and caught errors."""
        active, tracked, finished, evicted, forgotten, held = self._table.counts()
        with self._error_lock:
            errors = self._errors
        return ProcessorStats(
            active_runs=active,
            tracked_spans=tracked,
            finished_runs=finished,
            evicted_runs=evicted,
            forgotten_spans=forgotten,
            errors=errors,
            bytes_held=held,
        )

    def evict_expired(self) -> int:
        """Finish runs idle for longer than the TTL now; returns how many."""
        return self._table.evict_expired()

    def end_session(self, session: str) -> RunReport | None:
        """Finish a session's run now; its report, or ``None`` if it has none open.

        For instrumentations whose runs no span spans (gemini-cli: a trace per
        model call and per tool round, tied by ``gen_ai.conversation.id``): no
        span's end can close such a run, so it ends here, when idle for
        ``run_ttl_seconds``, when the ``max_runs`` or byte bound evicts it, or at
        shutdown. A later call of the session opens a new run.
        """
        run = self._table.end_session(session)
        if run is None:
            return None
        report = self._finish_early(run)
        run.release()
        return report

    def run_for(self, ctx: SpanContext) -> Run | None:
        """The run a call made inside the span ``ctx`` belongs to, if it has state (the guard's)."""
        return self._table.run_for(ctx.trace_id, ctx.span_id)

    def report_error(self, where: str, exc: Exception, *, surface: bool = True) -> Exception | None:
        """Count an internal error and log it once per kind: the processor fails open.

        Returns the error when it should surface instead (``settings.should_raise``,
        under pytest by default); never a downstream processor's (``surface`` false).
        """
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
        if surface and self.settings.should_raise:
            return exc
        return None

    # -- SpanProcessor -------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Remember where the span belongs, then relay it.

        A span with no role key, not named ``invoke_agent...``, is plain: it is
        remembered only inside a run (its children are in the run too). Any other
        span is classified by :meth:`_classified_start`.
        """
        failure: Exception | None = None
        if self._enabled:
            try:
                inherit = self._started(span)
                # The SDK's live span: a read-only proxy of its still-mutable attributes,
                # whose copy() is a plain dict (cheap to test and to read).
                attributes = span.attributes.copy()  # type: ignore[union-attr]
                keys = self._role_keys  # None: the conventions' own role() may read any key
                if (
                    keys is None
                    or not keys.isdisjoint(attributes)
                    or span.name.startswith(self._role_prefixes)
                    or span.name in self._role_names
                ):
                    self._classified_start(span, attributes, inherit)
                elif inherit is not None:
                    self._table.track(span.context.span_id, inherit)
            except Exception as exc:
                failure = self.report_error("on_start", exc)
        for processor in self._downstream:
            try:
                processor.on_start(span, parent_context=parent_context)
            except Exception as exc:
                self.report_error("downstream on_start", exc, surface=False)
        if failure is not None:
            raise failure

    def _on_ending(self, span: Span) -> None:
        # The SDK (1.40 on) calls this hook on every registered processor; relay it so
        # the wrapped processors behave exactly as if they were registered directly.
        for processor in self._downstream:
            try:
                processor._on_ending(span)
            except Exception as exc:
                self.report_error("downstream _on_ending", exc, surface=False)

    def on_end(self, span: ReadableSpan) -> None:
        """Hand downstream the span itself, or its enriched copy if otel-stall reads it."""
        out = span
        failure: Exception | None = None
        if self._enabled:
            try:
                node = self._forget(span)
                keys = self._role_keys  # None: the conventions' own role() may read any key
                if (
                    (node is not None and not node.shared)  # an agent, tool or model span at start
                    or keys is None
                    or not keys.isdisjoint(span.attributes)  # type: ignore[arg-type]
                ):
                    out = self._classified_end(span, node)
                elif span.parent is None:  # a plain root: it may close its trace's run
                    out = self._root_end(span)
            except Exception as exc:
                failure = self.report_error("on_end", exc)
        for processor in self._downstream:
            try:
                processor.on_end(out)
            except Exception as exc:
                self.report_error("downstream on_end", exc, surface=False)
        if failure is not None:
            raise failure

    def shutdown(self) -> None:
        """Finish every tracked run (so their metrics are recorded), then shut downstream.

        From now on spans are only forwarded: a span that ends later would otherwise
        open a new run that nothing finishes, and count it twice.
        """
        self._enabled = False
        try:
            for run in self._table.clear():
                self._finish_early(run)  # spans ending from now on are forwarded untouched
        except Exception as exc:
            self.report_error("shutdown", exc, surface=False)
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
            self._wrapping = threading.Lock()
            self._error_lock = threading.Lock()
            self._errors = 0
            self._error_kinds = set()
        except Exception:  # an at-fork hook must not fail the fork's caller
            logger.exception("otel-stall: resetting after fork failed")

    # -- start ---------------------------------------------------------------

    def _started(self, span: Span) -> Node | None:
        """What a starting span inherits from its tracked parent; a root is remembered."""
        parent = span.parent
        table = self._table
        if parent is None:
            ctx = span.context
            if ctx is not None:
                table.root_started(ctx.trace_id, span, ctx)
            return None
        if not table.spans:
            return None  # no agent activity in flight: no parent to look up (reading an id costs)
        return table.inherit(parent.span_id)

    def _forget(self, span: ReadableSpan) -> Node | None:
        """Forget an ended span's ancestry; its node, if it was tracked."""
        table = self._table
        if not table.spans:
            return None  # no agent activity in flight: nothing to forget (reading an id costs)
        ctx = span.context
        return None if ctx is None else table.span_ended(ctx.span_id)

    def _classified_start(
        self, span: Span, attributes: dict[str, Any], inherit: Node | None
    ) -> None:
        """A span with a role key or an agent's name started: the run model tracks it."""
        # By its name if no attribute says: Google ADK sets them just after the start.
        role = self.conventions.classify(span.name, attributes)
        ctx = span.get_span_context()
        opens, run = self._table.start(
            role, ctx.trace_id, ctx.span_id, inherit, span, ctx, span.parent is None
        )
        if opens:  # a model call's round opens now
            session = None if run is not None else self.conventions.session(attributes)
            self._model(span, run, ctx.trace_id, session)

    # -- end -----------------------------------------------------------------

    def _classified_end(self, span: ReadableSpan, node: Node | None) -> ReadableSpan:
        """A span that may be a tool, model or run span ended: detect, then enrich if needed.

        ``node`` is where it was tracked from its start, if it was.
        """
        ctx = span.context
        if ctx is None:
            return span
        parent = span.parent
        if node is None:
            node = self._table.untracked(None if parent is None else parent.span_id)
        attributes = attribute_dict(span)  # a plain dict: cheap lookups, then the copy's
        # A model span at its start is one at its end: classified once (its attributes are
        # read once, for its call's record, below).
        role = (
            node.role
            if node.role is Role.MODEL
            else self.conventions.span_role(span.name, attributes)
        )
        if node.shared and parent is not None and role is Role.OTHER and not self.settings.redact:
            return span  # role keys, but no role: a plain span after all
        extra = self._detect(span, ctx, role, node, attributes)
        run = self._table.closing(node, ctx.trace_id, ctx.span_id, parent is None)
        events, dropped = (None, 0) if run is None else self._run_ended(span, run, extra)
        if run is not None and parent is not None and run.report is not None:
            self._delegate_ended(run.report, node, ctx.trace_id, span.end_time or 0)
        redacting = self.settings.redact
        if redacting:
            redact(attributes, self._content_keys)
            events = redact_events(span.events if events is None else events, self._content_keys)
        elif not extra and events is None:
            return span
        full = self.settings.full_attributes
        return enrich(
            span, attributes, extra, self._limits, events, dropped, redacted=redacting, full=full
        )

    def _root_end(self, span: ReadableSpan) -> ReadableSpan:
        """A plain trace root ended: its trace's run, if one was made, ends with it."""
        ctx = span.context
        if ctx is None:
            return span
        run = self._table.root_ended(ctx.trace_id)
        if run is None:
            return span  # no tool or model call in the trace: the common case
        extra: dict[str, Any] = {}
        events, dropped = self._run_ended(span, run, extra)
        if events is None:
            return span  # never used, or nothing to report: extra is empty too
        full = self.settings.full_attributes
        return enrich(span, attribute_dict(span), extra, self._limits, events, dropped, full=full)

    def _detect(
        self,
        span: ReadableSpan,
        ctx: SpanContext,
        role: Role,
        node: Node,
        attributes: dict[str, Any],
    ) -> dict[str, Any]:
        """Feed the span's run; a tool span's ``stall.*`` attributes, for its copy.

        The span is read once, here, into one record. A model span that was not
        one at its start opens its round now.
        """
        if role is Role.TOOL:
            reading = self.conventions.read(span_record(span, attributes), role)
            if not node.nested:
                return self._tool(span, ctx, reading, node)
            child = node.child  # the outer call again: only its failure counts (MCP's server)
            status = reading.tool.status if reading.tool is not None else Status.OK
            if child is not None and child.inner_failure is None and status is not Status.OK:
                child.inner_failure = status
            return {}
        if role is Role.MODEL and not node.in_model:  # a nested model span is the same call
            run = node.run
            # A run whose scan budget is spent: its outputs are not read (the detector drops
            # them anyway, so replay, which cannot know the run yet, agrees).
            detector = None if run is None else run.detector
            scan = detector is None or detector.scanned_bytes < self.policy.run_scan_bytes
            reading = self.conventions.read(span_record(span, attributes), role, output=scan)
            if node.role is not Role.MODEL:
                # Classified only at its end: open its round now, at its start time; inside
                # a tool span, it makes that tool an agent used as a tool now.
                self._table.adopt(node)
                self._model(span, node.run, ctx.trace_id, reading.session)
            self._model_ended(span, node.run, ctx.trace_id, reading)
        return {}

    def _use(
        self, run: Run | None, trace_id: int, span: ReadableSpan, session: str | None
    ) -> Run | None:
        """The run a tool or model call feeds (see :meth:`RunTable.use`).

        Outside every agent span (``run`` unknown), a call that names a session
        feeds the session's run.
        """
        parent = span.parent
        return self._table.use(run, trace_id, None if parent is None else parent.span_id, session)

    def _tool(
        self, span: ReadableSpan, ctx: SpanContext, reading: Reading, node: Node
    ) -> dict[str, Any]:
        """Feed one ended tool span to its run; the ``stall.*`` attributes for its copy."""
        run = self._use(node.run, ctx.trace_id, span, reading.session)
        call = reading.tool
        if run is None or call is None:
            return {}
        call.run_key = run.run_key
        digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        inner = node.child.inner_failure if node.child is not None else None
        if inner is not None and call.status is Status.OK:
            call.status = inner  # signed as the span says, failed as the nested span says
        with run.lock:
            if run.closed:
                return {}
            observation = self._detector(run).tool_call(call, digests)
            run.calls += 1
            if observation.findings:
                add_findings(run, observation.findings, call.end_ns, self.settings)
        self._metrics.record_row(observation.row)
        if observation.findings:
            self._deliver(observation.findings, run, call.end_ns)
        if reading.handoff is not None:  # the run's later calls are the receiving agent's
            self._table.hand_over(run, reading.handoff)
        return tool_span_attributes(observation.row)

    def _model(
        self, span: ReadableSpan, run: Run | None, trace_id: int, session: str | None
    ) -> None:
        """A model call opens a round at its start, as the batch analysis orders it."""
        run = self._use(run, trace_id, span, session)
        if run is None:
            return
        when = span.start_time or 0
        # A round opens at the call's start, and the detector reads only when: the call's
        # outcome, usage and output are read once, from the one record made at its end
        # (callgrind, a chat span with usage through this processor, no downstream: 471k
        # instructions a span with a record and a reading at each end, 318k with one).
        call = ModelCall(run.run_key, None, when)
        with run.lock:
            if run.closed:
                return
            findings = self._detector(run).model_call(call)
            run.calls += 1
            if findings:
                add_findings(run, findings, when, self.settings)
        if findings:
            self._deliver(findings, run, when)

    def _model_ended(
        self, span: ReadableSpan, run: Run | None, trace_id: int, reading: Reading
    ) -> None:
        """A model call's outcome, once it ended: failure loops and wasted tokens read it."""
        run = self._use(run, trace_id, span, reading.session)
        call = reading.model
        if run is None or call is None:
            return
        call.run_key = run.run_key
        with run.lock:
            if run.closed:
                return
            findings = self._detector(run).model_ended(call)
            if findings:
                add_findings(run, findings, call.end_ns, self.settings)
        if findings:
            self._deliver(findings, run, call.end_ns)

    def _run_ended(
        self, span: ReadableSpan, run: Run, extra: dict[str, Any]
    ) -> tuple[list[Event] | None, int]:
        """Close the run whose run span this is, if it was used; ``extra`` gets its attributes.

        Returns the copy's events, and how many more events were dropped.
        """
        when = span.end_time or 0
        receivers, used = self._table.close(run)
        for receiver in receivers:  # the runs its handoffs gave away end with it
            self._finish_receiver(receiver, when)
        if not used:
            return None, 0  # never used: an agent span with no tool or model call
        report, new = self._close(run, span, when)
        run.span = None
        if report is None:
            return None, 0
        extra.update(run_span_attributes(report))
        if new:
            self._deliver(new, run, when)
        return run_events(span, run, self._limits)

    def _delegate_ended(self, report: RunReport, node: Node, trace_id: int, when: int) -> None:
        """A sub-agent run ended: the run its agent span sits in learns if it stalled.

        Only a parent run that has started (has a detector) and is still open, as
        the batch analysis feeds it.
        """
        if report.verdict is Verdict.OK:
            return
        up = self._table.delegate_parent(node, trace_id)
        if up is None:
            return
        agent = report.attributes.get("agent")
        with up.lock:
            detector = up.detector
            if up.closed or detector is None:
                return
            findings = detector.delegate_ended(agent, report.verdict, when)
            if findings:
                add_findings(up, findings, when, self.settings)
        if findings:
            self._deliver(findings, up, when)

    def _finish_receiver(self, run: Run, when: int) -> None:
        """Finish the run a handoff gave away, as its giver's span ends; then let go of it."""
        _, new = self._close(run, None, when)
        if new:
            self._deliver(new, run, when)
        run.release()

    # -- detection -----------------------------------------------------------

    def _finish_evicted(self, run: Run) -> None:
        """Finish a run whose span did not end in time, then let go of all of it.

        The table no longer knows the run span, so no copy of it will carry the
        run's report: its attributes and the findings waiting for the copy go on
        the span itself while it is open (it may never end: then they go nowhere).
        """
        span = run.span
        report = self._finish_early(run)
        if span is not None and report is not None:
            leave_on_span(span, run, report, self.settings.full_attributes)
        run.release()

    def _finish_early(self, run: Run) -> RunReport | None:
        """Finish a run before its span ended; its new events go on the open span."""
        span = run.span
        now = span.end_time if span is not None and span.end_time else time.time_ns()
        report, new = self._close(run, span, now)
        if new:
            self._deliver(new, run, now)
        return report

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
                add_findings(run, new, when, self.settings)
            run.report = report = replace(report, attributes=report_attributes(run, span))
        self._metrics.record_run(report, run_context(run))
        return report, new

    def _detector(self, run: Run) -> RunDetector:
        """Under the run lock: the run's detector, created on first use."""
        if run.detector is None:
            run.detector = RunDetector(self.policy, run.run_key, self.settings.run_report_size)
        return run.detector

    def _deliver(self, findings: Iterable[Finding], run: Run, when: int) -> None:
        """Outside every lock: log-based events, metrics and the user's callback."""
        context = run_context(run)
        for finding in findings:
            if self._log_events is not None:
                self._guarded("log-based event", self._log_events.emit, finding, context, when)
            self._metrics.record_finding(finding, context)
            if self.on_finding is not None:
                self._guarded("on_finding callback", self.on_finding, finding)

    def _guarded(self, where: str, call: Callable[..., None], *args: Any) -> None:
        """Call the user's code (a callback, a log provider): its errors fail open too."""
        try:
            call(*args)
        except Exception as exc:
            failure = self.report_error(where, exc)
            if failure is not None:
                raise failure from None


__all__ = ["ProcessorStats", "StallSpanProcessor", "copy_span", "span_record"]
