"""The live gate: the agent's own code asks before it runs a tool.

Spans reach the processor after a call has run, so the processor alone can
only stop the *next* round. :class:`StallGuard` reads the same run state to
refuse a duplicate call before it runs, and to let the agent loop stop as
soon as its run reaches ``break``. The run is found from the current span
context, so the guard needs no run id: call it inside the agent's span (or a
tool span under it).

A refused call never ran. Record it as a tool span with ``stall.refused=true``
(:data:`otel_stall.semconv.StallAttributes.REFUSED`) so the
``refused_rounds`` rule can see it, and give the model :attr:`Refusal.message`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from otel_stall.core.detector import gate_digests
from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, RunReport, Verdict
from otel_stall.live.run_table import Run


@dataclass(frozen=True, slots=True)
class Refusal:
    """Do not run this call; tell the model :attr:`message` instead."""

    tool: str
    message: str
    """Guidance written for the model: the earlier result is already in the conversation."""
    finding: Finding
    """The finding behind the refusal: ``duplicate_call``, or ``failure_loop`` for the next
    try of a call that keeps failing the same way."""

    def __str__(self) -> str:
        return self.message


class RunStatus(NamedTuple):
    """The current run's verdict and report (``None`` when the run has no state yet)."""

    verdict: Verdict
    report: RunReport | None


class StallDetected(RuntimeError):
    """Raised by :meth:`StallGuard.raise_if_stalled`: the run should stop now."""

    def __init__(self, report: RunReport, finding: Finding | None = None) -> None:
        self.report = report
        self.finding = finding if finding is not None else worst_finding(report.findings)
        message = (
            self.finding.message
            if self.finding is not None
            else f"run stalled (verdict {report.verdict.value})"
        )
        super().__init__(message)


def worst_finding(findings: Iterable[Finding]) -> Finding | None:
    """The most severe finding, the latest one among equals."""
    best: Finding | None = None
    for finding in findings:
        if best is None or ACTION_SEVERITY[finding.action] >= ACTION_SEVERITY[best.action]:
            best = finding
    return best


class RunState(Protocol):
    """What a guard needs of the live processor, and all it may touch.

    :class:`~otel_stall.live.processor.StallSpanProcessor` is one; the guard
    depends on these two methods rather than on the processor, so neither
    module imports the other.
    """

    def run_for(self, ctx: SpanContext) -> Run | None:
        """The run a call made inside the span ``ctx`` belongs to, if it has state."""
        ...

    def report_error(self, where: str, exc: Exception) -> Exception | None:
        """Count and log an internal error; the error itself when it should surface."""
        ...


class StallGuard:
    """Asks the processor's run state about the run of the current span."""

    def __init__(self, runs: RunState) -> None:
        self._runs = runs

    def _run(self) -> Run | None:
        ctx = trace.get_current_span().get_span_context()
        if not ctx.is_valid:
            return None
        return self._runs.run_for(ctx)

    def before_call(self, tool: str, args: Any, *, exempt: bool = False) -> Refusal | None:
        """A :class:`Refusal` if ``tool(args)`` already ran in this run, else ``None``.

        Follows the policy's ``duplicate_call`` mode. Changes no state: the call
        is recorded when its span ends. Never raises: on an internal error the
        call is allowed (fail open).
        """
        try:
            run = self._run()
            detector = None if run is None else run.detector  # set once, never replaced
            if run is None or detector is None:  # no call recorded yet: nothing to repeat
                return None
            # Signed before the lock is taken: signing reads the caller's objects (a
            # Mapping's items(), say), which is the caller's code, and that must never
            # run under a lock that every span of the run needs. check_call then reads
            # several fields that must agree with each other, under the lock.
            digests = gate_digests(detector.policy, tool, args, exempt=exempt)
            if digests is None:  # a call the gate never refuses
                return None
            with run.lock:
                if run.closed:
                    return None
                finding = detector.check_call(tool, args, digests=digests)
        except Exception as exc:
            failure = self._runs.report_error("guard.before_call", exc)
            if failure is not None:
                raise
            return None
        if finding is None or finding.action is not Action.REFUSE:
            return None
        return Refusal(tool, finding.message, finding)

    def verdict(self) -> RunStatus:
        """The current run's verdict so far and a snapshot of its report."""
        run = self._run()
        if run is None:
            return RunStatus(Verdict.OK, None)
        with run.lock:
            if run.report is not None:
                report = run.report
            elif run.detector is not None:
                report = run.detector.report()
            else:
                return RunStatus(Verdict.OK, None)
        return RunStatus(report.verdict, report)

    def raise_if_stalled(self, at: Verdict = Verdict.BREAK) -> None:
        """Raise :class:`StallDetected` once the run's verdict reaches ``at`` (``break``)."""
        verdict, report = self.verdict()
        if report is not None and verdict.severity >= at.severity:
            raise StallDetected(report)


__all__ = ["Refusal", "RunState", "RunStatus", "StallDetected", "StallGuard", "worst_finding"]
