"""Detector properties from issue #19: no false alarms on distinct calls, bounded state."""

from __future__ import annotations

import random
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from otel_stall import Content, Digests, ModelCall, RunDetector, Status, ToolCall, Verdict, detect

TOOLS = st.sampled_from(["search", "fetch", "ls", "cat", "run"])


@st.composite
def distinct_runs(draw: st.DrawFn) -> list[Any]:
    """Tool calls whose arguments and results are all different, model calls between some."""
    size = draw(st.integers(min_value=1, max_value=60))
    tools = draw(st.lists(TOOLS, min_size=size, max_size=size))
    models = draw(st.lists(st.booleans(), min_size=size, max_size=size))
    events: list[Any] = []
    for n, (tool, model) in enumerate(zip(tools, models, strict=True)):
        if model:
            events.append(ModelCall(input_tokens=n, output_tokens=1))
        events.append(ToolCall(tool, {"arg": n}, {"value": f"result {n}"}))
    return events


@given(distinct_runs())
def test_a_run_with_no_repeated_signature_never_warns(events: list[Any]) -> None:
    """Every call different, every result new: the verdict stays ok whatever the mix."""
    (report,) = detect(events)
    assert report.verdict is Verdict.OK
    assert report.wasted_calls is None


@given(distinct_runs(), st.randoms(use_true_random=False))
def test_shuffling_a_healthy_runs_distinct_calls_never_breaks(
    events: list[Any], rng: random.Random
) -> None:
    """Any order of a healthy run's distinct calls is still no loop."""
    shuffled = list(events)
    rng.shuffle(shuffled)
    (report,) = detect(shuffled)
    assert report.verdict is not Verdict.BREAK


def _digests(n: int) -> Digests:
    """Synthetic digests: mostly new calls, with loops, cycles and failures mixed in."""
    phase = n % 1000
    key = n % 3 if phase < 100 else (n % 4 if phase < 200 else n)
    text = f"{key:016x}"
    return Digests(text, text, text, Content.PRESENT, Content.PRESENT, (text, f"{n:016x}"))


POOL = [_digests(n) for n in range(50_000)]
"""Reused in turn: each is forgotten (max_remembered_calls) long before it comes back."""


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_detector_state_stays_bounded_on_half_a_million_calls() -> None:
    """A 500k-call run holds no more memory at the end than after its first 100k calls."""
    detector = RunDetector(keep=100)
    call = ToolCall("search", status=Status.OK, end_ns=1)
    failing = ToolCall("run", status=Status.ERROR, error="E", end_ns=1)
    model = ModelCall(input_tokens=10, output_tokens=1, end_ns=1)
    tracemalloc.start()
    try:
        sizes = []
        for n in range(1, 500_001):
            if n % 4 == 0:
                detector.model_call(model)
                detector.model_ended(model)
            detector.tool_call(failing if n % 500 < 4 else call, POOL[n % 50_000])
            if n in (100_000, 500_000):
                sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    report = detector.finish()
    assert report.tool_calls == 500_000
    assert len(report.ledger) == 100
    assert sizes[1] <= sizes[0] * 1.1 + 64_000
