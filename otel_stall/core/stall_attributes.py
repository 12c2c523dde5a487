"""The ``stall.*`` attributes and events that go on exported spans.

One place builds them, so the live processor, the replay's re-export and the
gateway attach exactly the same names and types, and one place decides what is
left out:

* **Defaults are omitted.** Each encoded attribute costs the OTLP exporter
  about 16k instructions (callgrind, SDK 1.45), and most tool calls are first
  calls with nothing to report. An attribute at its default is not written;
  absent means the value in :data:`TOOL_SPAN_DEFAULTS` (on a span that has
  ``stall.seq``) or :data:`RUN_SPAN_DEFAULTS` (on a span that has
  ``stall.verdict``). :func:`with_defaults` puts them back: the full output
  (``full_attributes``) is exactly that.
* **One event per escalation.** A ``stall.detected`` event (span event or log
  record) is written for a finding that tells the agent to warn, break off or
  escalate (:func:`escalations`). A refusal is the gate doing its job on one
  call, and a loop has one on every repeated call: it shows on that tool span's
  ``stall.action`` and in the run span's ``stall.refusals``, and still reaches
  metrics and ``on_finding``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
_REFUSE: Final = Action.REFUSE
_ESCALATIONS: Final = frozenset((Action.WARN, Action.BREAK, Action.ESCALATE))

TOOL_SPAN_DEFAULTS: Final[Mapping[str, AttributeValue]] = {
    Stall.REPEAT_COUNT: 1,
    Stall.REPEAT_CONSECUTIVE: 1,
    Stall.NEW_FACT: True,
}
"""What an omitted tool-span attribute means (a first call that brought something new).

``stall.repeat.of`` and ``stall.result.digest`` have no default: absent, the call is
a first occurrence, or its result was not captured. ``stall.action`` is always
written, ``continue`` too: it is what the shipped pipeline groups tool spans by
(the ``spanmetrics`` dimension in ``collector-config/gateway-return.yaml``), and a
dimension default there would stamp ``continue`` on every span that is no tool call."""

RUN_SPAN_DEFAULTS: Final[Mapping[str, AttributeValue]] = {
    Stall.DETECTED: False,
    Stall.SCORE: 0.0,
    Stall.REFUSALS: 0,
}
"""What an omitted run-span attribute means (nothing fired, nothing refused).

The ``stall.wasted.*`` attributes have no default: absent, the run never stalled
(or, for tokens, none were captured)."""


def tool_span_attributes(row: LedgerRow) -> dict[str, AttributeValue]:
    """What a tool span carries after detection: only what differs from its default."""
    attrs: dict[str, AttributeValue] = {
        Stall.SEQ: row.seq,
        Stall.ROUND: row.round,
        Stall.SIGNATURE: row.signature,
        Stall.CALL_SIGNATURE: row.call_signature,
    }
    if row.result_digest is not None:
        attrs[Stall.RESULT_DIGEST] = row.result_digest
    if row.count != 1:
        attrs[Stall.REPEAT_COUNT] = row.count
    if row.repeat_of is not None:
        attrs[Stall.REPEAT_OF] = row.repeat_of
    if row.consecutive != 1:
        attrs[Stall.REPEAT_CONSECUTIVE] = row.consecutive
    if not row.new_fact:
        attrs[Stall.NEW_FACT] = False
    attrs[Stall.ACTION] = _ACTION_TEXT[row.action]  # last: under a count limit, it stays
    return attrs


def run_span_attributes(report: RunReport) -> dict[str, AttributeValue]:
    """What a run span (agent span, or the trace's root) carries when the run ends.

    Only what differs from its default; the wasted cost only for a run that
    stalled, and tokens only where captured. ``stall.refusals`` counts the
    refusals among the report's findings: all of them in replay and the gateway,
    the newest ``run_report_size`` (and the latest refusal) live.
    """
    attrs: dict[str, AttributeValue] = {
        Stall.VERDICT: _VERDICT_TEXT[report.verdict],
        Stall.TOOL_CALLS: report.tool_calls,
        Stall.ROUNDS: report.rounds,
    }
    findings = report.findings
    if findings:
        attrs[Stall.DETECTED] = True
    score = float(report.stall_score)
    if score:
        attrs[Stall.SCORE] = score
    refusals = sum(1 for f in findings if f.action is _REFUSE)
    if refusals:
        attrs[Stall.REFUSALS] = refusals
    if report.wasted_calls is not None:
        attrs[Stall.WASTED_CALLS] = report.wasted_calls
    if report.wasted_model_calls is not None:
        attrs[Stall.WASTED_MODEL_CALLS] = report.wasted_model_calls
    if report.wasted_seconds is not None:
        attrs[Stall.WASTED_SECONDS] = float(report.wasted_seconds)
    if report.wasted_tokens is not None:
        attrs[Stall.WASTED_TOKENS] = report.wasted_tokens
    return attrs


def with_defaults(attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    """``attributes`` with every omitted default written out: the full output.

    A tool span's defaults where ``stall.seq`` is present, a run span's where
    ``stall.verdict`` is (a span can be both: an agent used as a tool). Values
    present win; other keys are kept as they are.
    """
    full: dict[str, AttributeValue] = {}
    if Stall.SEQ in attributes:
        full.update(TOOL_SPAN_DEFAULTS)
    if Stall.VERDICT in attributes:
        full.update(RUN_SPAN_DEFAULTS)
    full.update(attributes)
    return full


def all_with_defaults(
    by_span: Mapping[str, Mapping[str, AttributeValue]],
) -> dict[str, dict[str, AttributeValue]]:
    """:func:`with_defaults` of each span's attributes: the full output of a replay or gateway."""
    return {span_id: with_defaults(attributes) for span_id, attributes in by_span.items()}


def is_escalation(finding: Finding) -> bool:
    """Whether a finding gets a ``stall.detected`` event: it warns, breaks or escalates.

    A refusal does not (see the module's docstring); on_finding, metrics and the
    report still get every finding.
    """
    return finding.action in _ESCALATIONS


def escalations(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that get a ``stall.detected`` event, in order (:func:`is_escalation`)."""
    return [f for f in findings if f.action in _ESCALATIONS]


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
