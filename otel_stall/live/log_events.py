"""Findings as log-based events: ``stall.detected`` through the OpenTelemetry Logs API.

OpenTelemetry is deprecating the Span Event API (OTEP 4430): new code should
emit events as log records with an event name, correlated with a span through
their context. The live processor adds ``stall.detected`` to the run span as a
span event (what trace views show today), and can also, or instead, emit each
finding as a log record, with the opt-in the semantic conventions use for the
same move (``OTEL_SEMCONV_EXCEPTION_SIGNAL_OPT_IN``):

============  ==================================
``span``      span events only (the default)
``logs``      log-based events only
``logs/dup``  both, for a phased move
============  ==================================

A log record carries the span event's attributes and time, the run span's
trace and span id, and a severity from the finding's action, so a backend can
alert on ``event_name = "stall.detected"`` without reading traces at all.

The Logs API's keyword ``emit`` (with ``event_name`` and ``context``) arrived
in opentelemetry-api 1.39. On an older API, log-based events cannot be emitted:
the processor then keeps span events, so no finding is lost, and says so once.
"""

from __future__ import annotations

import inspect
import time
from typing import Final, Literal

from opentelemetry import _logs as logs_api
from opentelemetry._logs import LoggerProvider, SeverityNumber
from opentelemetry.context import Context

from otel_stall._version import __version__
from otel_stall.core.records import Action, Finding
from otel_stall.core.stall_attributes import finding_event_attributes, is_escalation
from otel_stall.semconv import StallEventAttributes

EventSignal = Literal["span", "logs", "logs/dup"]
SIGNALS: Final[tuple[EventSignal, ...]] = ("span", "logs", "logs/dup")
"""Where ``stall.detected`` goes: span events, log records, or both."""

API_EMITS_EVENTS: Final = "event_name" in inspect.signature(logs_api.Logger.emit).parameters
"""Whether this Logs API can emit a named event with a context (opentelemetry-api 1.39 on)."""

_SEVERITY: Final = {
    Action.CONTINUE: (SeverityNumber.INFO, "INFO"),
    Action.WARN: (SeverityNumber.WARN, "WARN"),
    Action.REFUSE: (SeverityNumber.WARN, "WARN"),
    Action.ESCALATE: (SeverityNumber.ERROR, "ERROR"),
    Action.BREAK: (SeverityNumber.ERROR, "ERROR"),
}
"""What the agent is told to do, as a log severity: stopping it is an error."""


def parse_signal(text: str) -> EventSignal:
    """``span``, ``logs`` or ``logs/dup`` (case and spaces aside)."""
    value = text.strip().lower()
    for signal in SIGNALS:
        if value == signal:
            return signal
    raise ValueError(f"{text!r} is not one of {', '.join(SIGNALS)}")


class FindingEvents:
    """Emits each finding as a ``stall.detected`` log record, in the run span's context."""

    def __init__(self, logger_provider: LoggerProvider | None = None) -> None:
        # Through the global provider's proxy unless one is given: a provider set
        # later (as auto-instrumentation does, after building the processors) still gets them.
        self._logger = logs_api.get_logger("otel_stall", __version__, logger_provider)

    def emit(self, finding: Finding, run_span: Context, when: int) -> None:
        """One log record for an escalation, at the time it fired, in the run span's context.

        A refusal gets none, as it gets no span event (:func:`is_escalation`).
        """
        if not is_escalation(finding):
            return
        severity, text = _SEVERITY[finding.action]
        self._logger.emit(
            timestamp=when,
            observed_timestamp=time.time_ns(),
            context=run_span,
            severity_number=severity,
            severity_text=text,
            attributes=finding_event_attributes(finding),
            event_name=StallEventAttributes.EVENT_NAME,
        )


__all__ = ["API_EMITS_EVENTS", "SIGNALS", "EventSignal", "FindingEvents", "parse_signal"]
