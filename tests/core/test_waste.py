"""The waste's edge cases (:mod:`otel_stall.core.waste`).

A streak longer than the marks kept, and an onset at a model call or at a budget.
"""

from __future__ import annotations

from typing import Any

from otel_stall import Kind, ModelCall, StallPolicy, ToolCall, detect
from otel_stall.core.waste import MARKS


def test_a_streak_longer_than_the_marks_counts_its_tool_calls_exactly() -> None:
    """Five rounds of 30 stale calls: all 150 are wasted, though only the newest marks are kept."""
    events: list[Any] = [ModelCall(), ToolCall("search", {"q": "first"}, {"r": "doc"})]
    for n in range(5):
        events.append(ModelCall(input_tokens=10, output_tokens=0))
        events += [ToolCall("search", {"q": f"{n}-{m}"}, {"r": "doc"}) for m in range(30)]
    (report,) = detect(events)
    assert [f.kind for f in report.findings if f.action.value == "break"] == [Kind.NO_NEW_FACTS]
    assert (report.onset_seq, report.wasted_calls) == (2, 150)
    # model calls and tokens from the oldest mark kept (call 151 - MARKS + 1 = 88, in the
    # fourth round of stale calls): the two model calls after it, not the four after call 2
    assert MARKS == 64
    assert (report.wasted_model_calls, report.wasted_tokens) == (2, 20)


def test_a_monologue_begins_at_the_model_call_it_fired_on() -> None:
    """A model-side finding: that model call and those after it are wasted, and no tool call."""
    said = ModelCall(output="same", input_tokens=5, output_tokens=5, start_ns=10, end_ns=20)
    events: list[Any] = [ToolCall("search", {"q": 1}, {"r": 1}), said, said, said]
    (report,) = detect(events)
    assert [f.kind for f in report.findings] == [Kind.MONOLOGUE]
    assert (report.onset_seq, report.wasted_calls, report.wasted_model_calls) == (2, 0, 1)
    assert report.wasted_tokens == 10


def test_a_budget_begins_at_the_call_that_overspends_it() -> None:
    """``max_tool_calls`` 3: the fourth call breaks, and it and the fifth are wasted."""
    events = [ToolCall("search", {"q": n}, {"r": n}) for n in range(5)]
    (report,) = detect(events, StallPolicy(max_tool_calls=3))
    assert (report.onset_seq, report.wasted_calls) == (4, 2)
