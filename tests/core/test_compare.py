"""Cross-run comparison: shared loops point at the prompt, lone loops at the model."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from otel_stall import (
    ABSENT,
    Comparison,
    Conclusion,
    DuplicateMode,
    ModelCall,
    RunReport,
    StallPolicy,
    ToolCall,
    compare_runs,
    detect,
)
from otel_stall.core.compare import Wasted, looping_signatures

Events = Callable[[str], list[ToolCall | ModelCall]]
NO_DUP = StallPolicy(duplicate_mode=DuplicateMode.OFF)


def report(*calls: ToolCall) -> RunReport:
    (only,) = detect(calls, NO_DUP)
    return only


def search(q: str = "x", result: object = "same hits") -> ToolCall:
    return ToolCall("search", {"q": q}, result)


LOOP_X = report(*[search("x")] * 5)
LOOP_Y = report(*[search("y")] * 5)
HEALTHY = report(*[search(str(i), result=i) for i in range(5)])


@pytest.mark.parametrize(
    ("a", "b", "conclusion", "shared", "only_a", "only_b"),
    [
        pytest.param(LOOP_X, LOOP_X, Conclusion.PROMPT_OR_SCHEMA, 1, 0, 0, id="same-loop"),
        pytest.param(LOOP_X, HEALTHY, Conclusion.MODEL, 0, 1, 0, id="only-a"),
        pytest.param(HEALTHY, LOOP_Y, Conclusion.MODEL, 0, 0, 1, id="only-b"),
        pytest.param(LOOP_X, LOOP_Y, Conclusion.DIFFERENT_LOOPS, 0, 1, 1, id="different"),
        pytest.param(HEALTHY, HEALTHY, Conclusion.NO_LOOP, 0, 0, 0, id="none"),
    ],
)
def test_conclusions(
    a: RunReport,
    b: RunReport,
    conclusion: Conclusion,
    shared: int,
    only_a: int,
    only_b: int,
) -> None:
    """The overlap of looping signatures decides the conclusion."""
    result = compare_runs(a, b)
    assert isinstance(result, Comparison)
    assert result.conclusion is conclusion
    assert (len(result.shared), len(result.only_a), len(result.only_b)) == (shared, only_a, only_b)
    assert result.explanation


def test_shared_loop_counts_both_runs() -> None:
    """A shared loop reports how often each run made the call."""
    longer = report(search("other", result=1), *[search("x")] * 7)
    (entry,) = compare_runs(LOOP_X, longer).shared
    assert (entry.tool, entry.count_a, entry.count_b) == ("search", 5, 7)
    assert "prompt or the tool schema" in compare_runs(LOOP_X, longer).explanation


def test_non_consecutive_repeats_loop_at_min_count() -> None:
    """Calls repeated min_count times anywhere in the run loop, back to back or not."""
    calls = (search(), search("a", 1), search(), search("b", 2), search())
    policy = StallPolicy(duplicate_mode=DuplicateMode.OFF, repeat_window=None)
    (spread,) = detect(calls, policy)  # no repeat finding: the ledger's counts alone
    assert looping_signatures(spread) != {}
    assert looping_signatures(spread, min_count=4) == {}


def test_repeat_finding_loops_below_min_count() -> None:
    """A signature named by a repeat finding loops even under min_count."""
    policy = StallPolicy(warn_at=2, break_at=2, duplicate_mode=DuplicateMode.OFF)
    (two,) = detect([search()] * 2, policy)
    assert list(looping_signatures(two, min_count=5).values()) == [2]


def test_runs_without_content_never_share_a_loop() -> None:
    """Calls without captured content cannot match, so they never make a shared loop."""
    blind = report(*[ToolCall("search", ABSENT, ABSENT)] * 6)
    assert compare_runs(blind, blind).conclusion is Conclusion.NO_LOOP


def test_min_count_must_mean_a_repeat() -> None:
    """A min_count below 2 would call every call a loop, so it is refused."""
    with pytest.raises(ValueError, match="at least 2"):
        compare_runs(LOOP_X, LOOP_X, min_count=1)


def test_fixtures_compare(trace_events: Events) -> None:
    """The loop fixture against itself shares its loop; against progress it loops alone."""
    (loop,) = detect(trace_events("loop"))
    (progress,) = detect(trace_events("progress"))
    assert compare_runs(loop, loop).conclusion is Conclusion.PROMPT_OR_SCHEMA
    result = compare_runs(loop, progress)
    assert result.conclusion is Conclusion.MODEL
    assert [s.tool for s in result.only_a] == ["search"]
    assert str(result.conclusion) == "model"


def test_compare_reports_what_each_loop_cost() -> None:
    """A run that stalled carries its wasted calls, tokens and seconds; a healthy one None.

    Six identical calls: the stall began at the first repeat (call 2, started at 1.5 s),
    so calls 2 to 6 and the 4.5 s to the last call's end are wasted.
    """
    looping = [
        ToolCall("s", {"q": 1}, {"r": 1}, start_ns=n * 10**9 - 5 * 10**8, end_ns=n * 10**9)
        for n in range(1, 7)
    ]
    healthy = [ToolCall("s", {"q": n}, {"r": n}, end_ns=n * 10**9) for n in range(1, 7)]
    (a,) = detect(looping)
    (b,) = detect(healthy)
    comparison = compare_runs(a, b)
    assert comparison.wasted_a == Wasted(5, None, 4.5, model_calls=0, from_seq=2)
    assert comparison.wasted_b is None
