"""A run's stall in words: its onset, its cost, its score and its findings' ranges.

One wording for every people-facing report (the table, Markdown, HTML, the
demo and ``compare``), from the detector's one definition of the onset
(:attr:`~otel_stall.core.records.RunReport.onset_seq`) and the wasted cost
(:class:`~otel_stall.core.records.RunReport`'s ``wasted_*`` fields).
"""

from __future__ import annotations

from otel_stall.core.detector import stall_score
from otel_stall.core.records import Action, Finding, RunReport, Status

__all__ = [
    "call_counts",
    "evidence_start",
    "plural",
    "score_explanation",
    "stall_onset",
    "wasted",
    "wasted_text",
]


def plural(count: int, noun: str) -> str:
    """``1 call``, ``5 calls``, ``1,000 calls``."""
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


_n = plural


def score_explanation(report: RunReport) -> str:
    """The stall score and, in a few words, why it is what it is for this run.

    The definition is ``RunDetector.stall_score``'s: the verdict's quarter of
    [0, 1), placed in it by the share of tool calls that repeated an earlier call
    and its result or were refused (a repeat the gate stopped). If the ledger the
    report kept does not give the same number (a ledger cut short), the counts are
    left out rather than explained wrongly.
    """
    rows = report.ledger
    repeats = sum(1 for row in rows if row.repeat_of is not None)
    refused = sum(1 for row in rows if row.repeat_of is None and row.status is Status.REFUSED)
    text = f"stall score {report.stall_score:.2f}"
    if rows and abs(stall_score(rows, report.verdict) - report.stall_score) < 1e-9:
        how = "repeated or refused" if refused else "repeated (same call, same result)"
        return (
            f"{text}: {report.verdict.value}, {repeats + refused} of "
            f"{_n(len(rows), 'tool call')} {how}"
        )
    if not rows and report.stall_score == 0:
        return f"{text}: no tool calls"
    return (
        f"{text} (the verdict's quarter of [0, 1), placed by the share of repeated or "
        "refused calls)"
    )


def stall_onset(report: RunReport) -> int | None:
    """The seq the run stalled from: :attr:`RunReport.onset_seq`, the detector's one onset.

    The first call that brought nothing new in the evidence of the finding that
    first raised the verdict to ``warn`` or above; ``None`` for a run that never
    stalled, and for a stall that began at a model call after the last tool call.
    """
    onset = report.onset_seq
    return onset if onset is not None and onset <= report.tool_calls else None


def evidence_start(finding: Finding) -> int:
    """The first call of a finding's evidence: a refusal's is the refused call itself.

    A repeat's evidence is every identical call (the first included), a streak's its
    first call; a refusal names the earlier call it refers to, which was not refused.
    """
    return finding.seq if finding.action is Action.REFUSE else finding.first_seq


def wasted_text(calls: int, model_calls: int, tokens: str, seconds: float) -> str:
    """``5 tool calls, 5 model calls, 1,200 tokens, 3.1 s``: the one wording of a stall's cost.

    Model calls are left out when there were none (a run without model spans): the
    tool calls are always named as such, never summed with them.
    """
    models = f", {_n(model_calls, 'model call')}" if model_calls else ""
    return f"{_n(calls, 'tool call')}{models}, {tokens}, {seconds:.1f} s"


def call_counts(report: RunReport) -> str:
    """Tool calls, rounds, and the seq the run stalled from."""
    onset = stall_onset(report)
    text = f"tool calls {report.tool_calls:,}, rounds {report.rounds:,}"
    if onset is None and report.onset_seq is not None:
        return text + ", stalled after its last tool call"
    return text + (f", stalled from seq {onset}" if onset is not None else "")


def wasted(report: RunReport) -> str:
    """Tool calls, model calls, tokens (when captured) and seconds from the onset on."""
    tokens = (
        "tokens not captured"
        if report.wasted_tokens is None
        else f"{report.wasted_tokens:,} tokens"
    )
    return wasted_text(
        report.wasted_calls or 0,
        report.wasted_model_calls or 0,
        tokens,
        report.wasted_seconds or 0.0,
    )
