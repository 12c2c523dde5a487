"""A run's memory is bounded: the report keeps the newest rows, the rules the newest calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from otel_stall import (
    Action,
    Kind,
    ModelCall,
    RunDetector,
    RunReport,
    StallDetected,
    StallPolicy,
    ToolCall,
    Verdict,
    detect,
)

Events = Callable[[str], list[ToolCall | ModelCall]]
FIXTURES = [
    "approval",
    "empty_results",
    "failures",
    "loop",
    "overloaded",
    "poll_idempotent",
    "progress",
    "refused_rounds",
    "reworded_queries",
]


def _looping(n: int) -> list[ToolCall | ModelCall]:
    """A run that repeats one call: a duplicate finding on every call after the first."""
    return [ToolCall("search", {"q": "x"}, {"hits": [1]}) for _ in range(n)]


def _finish(events: Sequence[ToolCall | ModelCall], keep: int | None) -> RunReport:
    detector = RunDetector(StallPolicy(), events[0].run_key, keep)
    for event in events:
        detector.feed(event)
    return detector.finish()


def _whole(report: RunReport) -> tuple[Any, ...]:
    return (report.verdict, report.stall_score, report.tool_calls, report.rounds, report.detected)


@pytest.mark.parametrize("keep", [1, 4, 50])
@pytest.mark.parametrize("stem", [*FIXTURES, "looping-30"])
def test_report_keeps_the_newest_rows_and_findings(
    trace_events: Events, stem: str, keep: int
) -> None:
    """With ``keep``, the report holds the newest rows and findings; its counts cover the run."""
    events = _looping(30) if stem == "looping-30" else trace_events(stem)
    full = _finish(events, None)
    kept = _finish(events, keep)
    assert kept.ledger == full.ledger[-keep:]
    older = kept.findings[:-keep]
    assert kept.findings[len(older) :] == full.findings[-keep:]
    assert all(f in full.findings[:-keep] for f in older)  # only older ones, in order
    assert _whole(kept) == _whole(full)
    assert StallDetected(kept).finding == StallDetected(full).finding


def test_latest_finding_of_each_action_outlives_the_window() -> None:
    """A run that broke early and then refused for long still reports its warning and break."""
    kept = _finish(_looping(40), 3)
    assert kept.verdict is Verdict.BREAK
    assert [f.action for f in kept.findings[-3:]] == [Action.REFUSE] * 3
    older = kept.findings[:-3]
    assert [f.action for f in older] == [Action.WARN, Action.BREAK]
    assert StallDetected(kept).finding is older[-1]


def _gap(gap: int) -> list[ToolCall | ModelCall]:
    """A call, ``gap`` different calls with different results, then the first call again."""
    again = ToolCall("search", {"q": "first"}, {"hits": ["first"]})
    others = [ToolCall("search", {"q": i}, {"hits": [i]}) for i in range(gap)]
    return [again, *others, again]


@pytest.mark.parametrize(
    ("gap", "memory", "remembered"),
    [
        pytest.param(3, 4, True, id="within-the-memory"),
        pytest.param(10, 4, False, id="forgotten"),
        pytest.param(10, 100, True, id="large-memory"),
        pytest.param(10, None, True, id="remember-everything"),
    ],
)
def test_calls_older_than_the_memory_are_forgotten(
    gap: int, memory: int | None, remembered: bool
) -> None:
    """A call made again after ``max_remembered_calls`` others counts as new for every rule."""
    report = detect(_gap(gap), StallPolicy(max_remembered_calls=memory))[0]
    last = report.ledger[-1]
    duplicates = [f for f in report.findings if f.kind is Kind.DUPLICATE_CALL]
    assert (last.repeat_of is not None, not last.new_fact, bool(duplicates)) == (remembered,) * 3
    assert last.count == (2 if remembered else 1)


@pytest.mark.parametrize("stem", FIXTURES)
def test_memory_above_the_run_length_changes_nothing(trace_events: Events, stem: str) -> None:
    """A run shorter than the memory is detected exactly as with no bound."""
    events = trace_events(stem)
    bounded = StallPolicy(max_remembered_calls=len(events))
    assert detect(events, bounded) == detect(events, StallPolicy(max_remembered_calls=None))
