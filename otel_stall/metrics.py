"""The ``stall.*`` counters, through the OpenTelemetry Metrics API.

Counters, not gauges, so Prometheus can alert on ``increase()`` over a window
and several processes (or gateways) add up. Findings and finished runs are
recorded in the run span's context when the caller has it, so the SDK's
exemplars point from a spike in ``stall.findings`` to the stalled run's trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from opentelemetry import metrics
from opentelemetry.context import Context

from otel_stall._version import __version__
from otel_stall.core.records import Finding, LedgerRow, RunReport
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import StallAttributes as Stall
from otel_stall.semconv import StallEventAttributes as Event
from otel_stall.semconv import StallMetricNames as Names


class StallMetrics:
    """Creates the instruments once and records rows, findings and finished runs."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = metrics.get_meter("otel_stall", __version__, meter_provider)
        self._findings = meter.create_counter(
            Names.FINDINGS, unit="{finding}", description="Stall findings by rule and action."
        )
        self._tool_calls = meter.create_counter(
            Names.TOOL_CALLS,
            unit="{call}",
            description="Tool calls seen, by tool, repeat and new-fact.",
        )
        self._runs = meter.create_counter(
            Names.RUNS, unit="{run}", description="Finished agent runs by verdict."
        )
        self._wasted_tokens = meter.create_counter(
            Names.WASTED_TOKENS,
            unit="{token}",
            description="Model tokens spent after a stall's onset, by agent.",
        )

    def record_row(self, row: LedgerRow) -> None:
        """Count one tool call."""
        self._tool_calls.add(1, _row_attributes(*_row_key(row)))

    def record_finding(self, finding: Finding, context: Context | None = None) -> None:
        """Count one finding, in ``context`` (the run span's) if given, else the current one."""
        self._findings.add(1, _finding_attributes(*_finding_key(finding)), context)

    def record_run(self, report: RunReport, context: Context | None = None) -> None:
        """Count one finished run, in the run span's ``context`` if given, and its wasted tokens."""
        self._runs.add(1, {Stall.VERDICT: report.verdict.value}, context)
        if report.wasted_tokens is not None:  # not captured adds nothing, not 0
            self._wasted_tokens.add(report.wasted_tokens, _agent_attributes(report), context)

    def record_report(self, report: RunReport) -> None:
        """Count a whole finished run at once: its rows, findings and verdict."""
        self.record_reports((report,))

    def record_reports(self, reports: Iterable[RunReport]) -> None:
        """Count finished runs at once: one add per series, however many rows and runs.

        Each add costs the SDK about 10 us (attribute hashing, a lock), and
        the gateway decides a few dozen traces per request: adding per
        finding and per run was a fifth of its CPU on agent traffic
        (bench_gateway ``agent``). The counts are the same as adding one by one.
        """
        rows: Counter[tuple[str, bool, bool]] = Counter()
        findings: Counter[tuple[str, str, str]] = Counter()
        runs: Counter[str] = Counter()
        wasted: Counter[str] = Counter()
        for report in reports:
            rows.update(_row_key(row) for row in report.ledger)
            findings.update(_finding_key(finding) for finding in report.findings)
            runs[report.verdict.value] += 1
            if report.wasted_tokens is not None:
                wasted[_agent(report)] += report.wasted_tokens
        for row_key, count in rows.items():
            self._tool_calls.add(count, _row_attributes(*row_key))
        for finding_key, count in findings.items():
            self._findings.add(count, _finding_attributes(*finding_key))
        for verdict, count in runs.items():
            self._runs.add(count, {Stall.VERDICT: verdict})
        for agent, tokens in wasted.items():
            self._wasted_tokens.add(tokens, {GenAI.AGENT_NAME: agent})


# One series key per instrument, shared by the one-by-one and the batched paths, so
# both count the same series.


def _row_key(row: LedgerRow) -> tuple[str, bool, bool]:
    return row.tool, row.repeat_of is not None, row.new_fact


def _row_attributes(tool: str, repeat: bool, new_fact: bool) -> dict[str, str | bool]:
    return {GenAI.TOOL_NAME: tool, Names.REPEAT: repeat, Stall.NEW_FACT: new_fact}


def _finding_key(finding: Finding) -> tuple[str, str, str]:
    return finding.kind.value, finding.action.value, finding.tool


def _finding_attributes(kind: str, action: str, tool: str) -> dict[str, str]:
    return {Event.KIND: kind, Event.ACTION: action, GenAI.TOOL_NAME: tool}


def _agent(report: RunReport) -> str:
    return str(report.attributes.get("agent") or "")


def _agent_attributes(report: RunReport) -> dict[str, str]:
    return {GenAI.AGENT_NAME: _agent(report)}
