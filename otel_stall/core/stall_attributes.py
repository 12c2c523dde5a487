"""The ``stall.*`` attributes and events that go on exported spans.

One place builds them, so the live processor, the replay's re-export and the
gateway attach exactly the same names and types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from otel_stall.core.records import Action, Finding, Kind, LedgerRow, RunReport, Verdict
from otel_stall.semconv import StallAttributes as Stall
from otel_stall.semconv import StallEventAttributes as Event

AttributeValue = str | bool | int | float


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event to add to an exported span."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue]


# The enums' texts by look-up: ``member.value`` is a Python-level property (~0.2 us), and
# one is read for every tool span.
_ACTION_TEXT: Final = {action: action.value for action in Action}
_KIND_TEXT: Final = {kind: kind.value for kind in Kind}
_VERDICT_TEXT: Final = {verdict: verdict.value for verdict in Verdict}


def tool_span_attributes(row: LedgerRow) -> dict[str, AttributeValue]:
    """What a tool span carries after detection."""
    attrs: dict[str, AttributeValue] = {
        Stall.SEQ: row.seq,
        Stall.ROUND: row.round,
        Stall.REPEAT_COUNT: row.count,
        Stall.REPEAT_CONSECUTIVE: row.consecutive,
        Stall.SIGNATURE: row.signature,
        Stall.CALL_SIGNATURE: row.call_signature,
        Stall.NEW_FACT: row.new_fact,
        Stall.ACTION: _ACTION_TEXT[row.action],
    }
    if row.repeat_of is not None:
        attrs[Stall.REPEAT_OF] = row.repeat_of
    if row.result_digest is not None:
        attrs[Stall.RESULT_DIGEST] = row.result_digest
    return attrs


def run_span_attributes(report: RunReport) -> dict[str, AttributeValue]:
    """What a run span (agent span, or the trace's root) carries when the run ends.

    The wasted cost only for a run that stalled, and tokens only where captured.
    """
    attrs: dict[str, AttributeValue] = {
        Stall.VERDICT: _VERDICT_TEXT[report.verdict],
        Stall.DETECTED: report.detected,
        Stall.SCORE: float(report.stall_score),
        Stall.TOOL_CALLS: report.tool_calls,
        Stall.ROUNDS: report.rounds,
    }
    if report.wasted_calls is not None:
        attrs[Stall.WASTED_CALLS] = report.wasted_calls
    if report.wasted_seconds is not None:
        attrs[Stall.WASTED_SECONDS] = float(report.wasted_seconds)
    if report.wasted_tokens is not None:
        attrs[Stall.WASTED_TOKENS] = report.wasted_tokens
    return attrs


def finding_event_attributes(finding: Finding) -> dict[str, AttributeValue]:
    """Attributes of the ``stall.detected`` event for one finding."""
    return {
        Event.KIND: _KIND_TEXT[finding.kind],
        Event.ACTION: _ACTION_TEXT[finding.action],
        "gen_ai.tool.name": finding.tool,
        Event.SIGNATURE: finding.signature,
        Event.COUNT: finding.count,
        Event.FIRST_SEQ: finding.first_seq,
        Event.SEQ: finding.seq,
        Event.MESSAGE: finding.message,
    }
