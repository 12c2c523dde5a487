"""What a live run's span carries, the processor's settings for its runs, its counts.

The run span's copy gets the run's report as attributes and the findings that
could not go on it while open; an evicted run leaves them on the open span; log
records and exemplars point at the run span's context. Kept apart from
:mod:`otel_stall.live.processor`, which decides what each span is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, Span, SpanLimits
from opentelemetry.trace import NonRecordingSpan, SpanContext, set_span_in_context

from otel_stall.conventions import agent_name
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Finding, RunReport
from otel_stall.core.stall_attributes import (
    escalations,
    finding_event_attributes,
    run_span_attributes,
    with_defaults,
)
from otel_stall.live.enriched import bounded_event
from otel_stall.live.log_events import API_EMITS_EVENTS
from otel_stall.live.run_table import Run
from otel_stall.live.settings import ProcessorSettings
from otel_stall.semconv import StallEventAttributes

logger = logging.getLogger("otel_stall")


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
    bytes_held: int = 0
    """Estimated bytes of the tracked runs and spans, bounded by ``max_state_bytes``."""


def run_events(span: ReadableSpan, run: Run, limits: SpanLimits) -> tuple[list[Event], int]:
    """The span's events plus the run's findings that could not go on it while open.

    Within the SDK's event limit, as if they had been added live: the oldest
    make way, and are counted as dropped (with those ``pending`` had no room for).
    """
    events = list(span.events)
    with run.lock:
        pending = list(run.pending or ())
        dropped = run.pending_dropped
    if pending:
        present = {finding_key(e) for e in events if e.name == StallEventAttributes.EVENT_NAME}
        for when, finding in pending:
            if (when, finding.kind.value, finding.seq) not in present:
                attributes = finding_event_attributes(finding)
                event = bounded_event(StallEventAttributes.EVENT_NAME, attributes, when, limits)
                events.append(event)
    limit = limits.max_events
    if limit is not None and len(events) > limit:
        dropped += len(events) - limit
        del events[: len(events) - limit]
    return events, dropped


def resolved_settings(
    settings: ProcessorSettings | None, explicit: dict[str, Any]
) -> ProcessorSettings:
    """The settings given (or from the environment), with the explicit arguments on top.

    Log-based events need opentelemetry-api 1.39: on an older API findings stay span
    events, and the user is told why.
    """
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
    return settings


def leave_on_span(span: Span, run: Run, report: RunReport, full: bool) -> None:
    """An evicted run's report and waiting findings, on its open run span (as a copy has them).

    ``full``: the attributes at their defaults too (``ProcessorSettings.full_attributes``).
    """
    if not span.is_recording():
        return
    with run.lock:
        pending = list(run.pending or ())
    attributes = run_span_attributes(report)
    span.set_attributes(with_defaults(attributes) if full else attributes)
    for when, finding in pending:
        attributes = finding_event_attributes(finding)
        span.add_event(StallEventAttributes.EVENT_NAME, attributes, timestamp=when)


def call_cap(settings: ProcessorSettings, policy: StallPolicy) -> int | None:
    """Calls past which a run's memory stops growing: its report and remembered calls are full.

    The rules forget every ``max_remembered_calls`` calls, so they hold up to twice that.
    """
    memory = policy.max_remembered_calls
    return None if memory is None else max(settings.run_report_size, 2 * memory)


def run_context(run: Run) -> Context:
    """A context whose span is the run span: log records and exemplars point at the run.

    A trace run whose root was never seen here has only its trace id.
    """
    span_context = run.context or SpanContext(int(run.trace_id), int(run.span_id or 0), False)  # type: ignore[call-overload]
    return set_span_in_context(NonRecordingSpan(span_context))


def report_attributes(run: Run, span: ReadableSpan | None) -> dict[str, Any]:
    """What a finished run's report says about where it ran."""
    if run.session is not None:  # no span spans it, and its calls span many traces
        return {"trace_id": None, "run_span_id": None, "agent": None, "session": run.session}
    if run.owner is not None:  # a handoff's receiving agent: no span of its own
        return {"trace_id": run.run_key[0], "run_span_id": None, "agent": run.run_key[-1]}
    attributes = span.attributes if span is not None else None
    ctx = span.context if span is not None else None
    return {
        "trace_id": run.run_key[0],
        "run_span_id": None if ctx is None else format(ctx.span_id, "016x"),
        "agent": agent_name(attributes, span.name) if span is not None and run.span_id else None,
    }


def finding_key(event: Event) -> tuple[Any, ...]:
    """A ``stall.detected`` event's time, kind and sequence: what tells findings apart."""
    attributes = event.attributes or {}
    kind, seq = attributes.get(StallEventAttributes.KIND), attributes.get(StallEventAttributes.SEQ)
    return event.timestamp, kind, seq


def add_findings(
    run: Run, findings: Sequence[Finding], when: int, settings: ProcessorSettings
) -> None:
    """Under the run lock: add findings to the run span if open, else keep them for its copy."""
    if settings.event_signal == "logs" or run.spanless:
        return  # log-based events only (_deliver emits them), or no run span to carry them
    findings = escalations(findings)  # a refusal gets no event: see stall_attributes
    if not findings:
        return
    span = run.span
    if settings.live_events and span is not None and span.is_recording():
        for finding in findings:
            attributes = finding_event_attributes(finding)
            span.add_event(StallEventAttributes.EVENT_NAME, attributes, timestamp=when)
        if span.is_recording():
            return
        # The span ended on another thread meanwhile, and may have refused the
        # events: its copy gets those it lacks.
    for finding in findings:
        run.keep_pending(when, finding)


__all__ = [
    "ProcessorStats",
    "add_findings",
    "call_cap",
    "finding_key",
    "leave_on_span",
    "report_attributes",
    "resolved_settings",
    "run_context",
    "run_events",
]
