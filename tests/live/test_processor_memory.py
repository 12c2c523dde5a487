"""Bounded memory within a run: a run that never ends, and a run that has ended."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from stall_pipeline import STYLE_IDS, STYLES, Agent, Call, Pipeline, Style, events, make_pipeline

from otel_stall import (
    Action,
    Content,
    Digests,
    ProcessorSettings,
    RunDetector,
    StallPolicy,
    StallSpanProcessor,
    ToolCall,
)
from otel_stall.core.stall_attributes import escalations
from otel_stall.semconv import StallEventAttributes as E

GENAI = STYLES[0]


def _growth_per_call(call: Callable[[int], None], warm: int, window: int) -> float:
    """Bytes a call adds once every bound is reached: the least over two windows.

    A first traced window replaces the state made before tracing started (freeing
    untraced memory does not count), so it is not measured. Of the next two, the
    lesser counts: a leak grows every window, while CPython's own one-off churn
    (3.10 reallocates frames taken from its free list) lands in one, more or less
    of it depending on what earlier tests left behind.
    """
    for i in range(warm):
        call(i)
    tracemalloc.start()
    try:
        for i in range(warm, warm + window):
            call(i)
        growth: list[float] = []
        for first in (warm + window, warm + 2 * window):
            before = tracemalloc.get_traced_memory()[0]
            for i in range(first, first + window):
                call(i)
            growth.append((tracemalloc.get_traced_memory()[0] - before) / window)
        return min(growth)
    finally:
        tracemalloc.stop()


def test_a_looping_run_that_never_ends_holds_bounded_memory() -> None:
    """A run repeating one call forever stops adding memory (rows, findings, events)."""
    provider = TracerProvider()
    processor = StallSpanProcessor(settings=ProcessorSettings(run_report_size=50))
    provider.add_span_processor(processor)
    agent = Agent(provider.get_tracer("agent"), GENAI)
    with agent.run():
        # Past the report size and the SDK's event limit; ~860 bytes a call without them.
        growth = _growth_per_call(lambda i: agent.tool(Call("search", {}, {})), 300, 300)
        status = processor.guard.verdict()
    assert status.report is not None
    assert len(status.report.ledger) == 50
    assert len(status.report.findings) <= 50 + len(Action)  # and the latest of each action
    assert status.report.tool_calls == 1200
    assert growth < 40


def test_a_run_of_new_calls_that_never_ends_holds_bounded_memory() -> None:
    """A detector fed new calls forever forgets the oldest ones and stops growing."""
    detector = RunDetector(StallPolicy(max_remembered_calls=100), None, keep=50)

    def call(i: int) -> None:
        # Digests made here (not by the signer, whose own cache is bounded apart):
        # what the detector keeps of them is all that can stay traced.
        digest = f"{i:032x}"
        present = Content.PRESENT
        digests = Digests(digest[::-1], digest[1:] + "r", digest + "s", present, present)
        detector.tool_call(ToolCall("search", {"q": i}, {"hits": [i]}), digests)

    growth = _growth_per_call(call, 400, 400)
    assert detector.report().tool_calls == 1600
    assert growth < 40


@pytest.mark.parametrize("live_events", [True, False])
def test_run_span_copy_keeps_within_the_event_limit(live_events: bool) -> None:
    """More events than the SDK's limit: the copy keeps the newest, the rest count as dropped."""
    pipe = make_pipeline(settings=ProcessorSettings(live_events=live_events))
    agent = Agent(pipe.tracer, GENAI)
    limit = SpanLimits().max_events
    assert limit is not None
    own = limit + 10  # a refusal gets no event: the run's own events fill the limit
    with agent.run() as span:
        for i in range(own):
            span.add_event("agent.note", {"i": i})
        for _ in range(limit + 40):
            agent.tool(Call("search", {"q": 1}, {"hits": [1]}))  # a duplicate finding each
    run_span = pipe.one("invoke_agent researcher")
    escalated = escalations(pipe.findings)
    assert escalated
    assert len(pipe.findings) > limit
    assert len(run_span.events) == limit
    assert len(run_span.events) + run_span.dropped_events == own + len(escalated)
    assert events(run_span)[-1][E.SEQ] == escalated[-1].seq


def _agent_rounds(pipe: Pipeline, agent: Agent) -> None:
    """Rounds that loop until the run breaks, with a failure and a refusal on the way."""
    with agent.run():
        agent.round(Call("fetch", {"u": 1}, None, error=True))
        for _ in range(6):
            agent.round(Call("search", {"q": 1}, {"r": 1}))
        agent.round(Call("search", {"q": 1}, {"r": 1}, {"stall.refused": True}))


def _agent_without_model_calls(pipe: Pipeline, agent: Agent) -> None:
    """Tool calls straight under the agent span: each is its own round."""
    with agent.run():
        for i in range(6):
            agent.tool(Call("search", {"q": i % 2}, {"r": 1}))


def _nested(pipe: Pipeline, agent: Agent) -> None:
    """A tool span inside a tool span, plain spans below both, and a sub-agent."""
    sub = Agent(pipe.tracer, agent.style, "helper")
    with agent.run():
        agent.model()
        name, attrs = agent.style.tool("delegate", {"to": "helper"}, {"ok": True})
        with pipe.tracer.start_as_current_span(name, attributes=attrs):
            with pipe.tracer.start_as_current_span("http"):
                agent.tool(Call("search", {"q": 1}, {"r": 1}))
            with sub.run():
                sub.round(Call("search", {"q": 2}, {"r": 2}))


def _trace_run(pipe: Pipeline, agent: Agent) -> None:
    """Tool calls under a plain root span: the trace is the run."""
    with pipe.tracer.start_as_current_span("request"):
        for _ in range(4):
            agent.tool(Call("search", {"q": 1}, {"r": 1}))


@pytest.mark.slow
@pytest.mark.parametrize("shape", [_agent_rounds, _agent_without_model_calls, _nested, _trace_run])
@pytest.mark.parametrize("style", STYLES, ids=STYLE_IDS)
def test_ended_runs_are_freed_without_the_cycle_collector(
    style: Style, shape: Callable[[Pipeline, Agent], None]
) -> None:
    """Nothing otel-stall keeps for a run is left in a reference cycle once its spans end."""
    pipe = make_pipeline(conventions=style.conventions)
    gc.collect()
    gc.disable()
    try:
        shape(pipe, Agent(pipe.tracer, style))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = sorted({type(o).__qualname__ for o in gc.garbage if _ours(o)})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert pipe.processor.stats().active_runs == 0
    assert cyclic == []


def _ours(obj: object) -> bool:
    return type(obj).__module__.startswith("otel_stall")
