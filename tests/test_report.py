"""The people-facing report: findings condensed, nothing lost from JSON."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from otel_stall.core.detector import detect
from otel_stall.core.records import Kind, ModelCall, ToolCall
from otel_stall.offline.report import condensed


@pytest.mark.parametrize("stem", ["loop", "reworded_queries", "failures", "refused_rounds"])
def test_condensed_keeps_one_line_per_kind_action_and_signature(
    stem: str, trace_events: Callable[[str], list[ToolCall | ModelCall]]
) -> None:
    """Each (kind, action, signature) appears once, as its latest finding, with its count."""
    (report,) = detect(trace_events(stem))
    lines = condensed(report.findings)
    keys = [(f.kind, f.action, f.signature) for f, _ in lines]
    assert len(keys) == len(set(keys))
    assert sum(times for _, times in lines) == len(report.findings)
    for finding, _ in lines:
        same = [
            f
            for f in report.findings
            if (f.kind, f.action, f.signature) == (finding.kind, finding.action, finding.signature)
        ]
        assert finding is same[-1]


def test_a_looping_call_is_one_refusal_line(
    trace_events: Callable[[str], list[ToolCall | ModelCall]],
) -> None:
    """The reference loop's repeated refusals of one call collapse into a single line."""
    (report,) = detect(trace_events("loop"))
    refusals = [f for f in report.findings if f.kind is Kind.DUPLICATE_CALL]
    assert len(refusals) > 1
    lines = [(f, n) for f, n in condensed(report.findings) if f.kind is Kind.DUPLICATE_CALL]
    assert len({f.signature for f in refusals}) == len(lines)
