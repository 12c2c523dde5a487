"""Bounded memory: runs end with their span, or by TTL and max_runs; ancestry is bounded."""

from __future__ import annotations

from contextlib import ExitStack

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from stall_pipeline import STYLES, Agent, Call, data_points, make_pipeline, stall

from otel_stall import ProcessorSettings, StallSpanProcessor
from otel_stall.semconv import StallAttributes as S

GENAI = STYLES[0]


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_run_is_evicted_after_ttl() -> None:
    """A run idle past the TTL is finished (metrics recorded) when other work arrives."""
    clock = Clock()
    pipe = make_pipeline(run_ttl=10.0, clock=clock)
    stale = Agent(pipe.tracer, GENAI, "stale")
    with stale.run():
        stale.round(Call("search", {"q": 1}, {"r": 1}))
        assert pipe.processor.stats().active_runs == 1
        clock.now += 11
        fresh = Agent(pipe.tracer, GENAI, "fresh")
        with trace.use_span(trace.INVALID_SPAN), fresh.run():  # a separate trace
            fresh.round(Call("search", {"q": 2}, {"r": 2}))
            stats = pipe.processor.stats()
            assert (stats.active_runs, stats.evicted_runs) == (1, 1)
        assert pipe.metric_total("stall.runs") == 2
        stale.round(Call("search", {"q": 3}, {"r": 3}))  # after eviction: passes through
    late = pipe.named("execute_tool search")[-1]
    assert stall(late) == {}
    # The evicted run's report still lands on its span when that span finally ends.
    assert stall(pipe.one("invoke_agent stale"))[S.TOOL_CALLS] == 1
    assert pipe.metric_total("stall.runs") == 2  # not counted twice
    assert pipe.processor.stats().active_runs == 0


def test_active_run_is_not_evicted_by_ttl() -> None:
    """TTL counts from the last activity, so a long but busy run survives."""
    clock = Clock()
    pipe = make_pipeline(run_ttl=10.0, clock=clock)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        for i in range(5):
            clock.now += 8
            agent.round(Call("search", {"q": i}, {"r": i}))
            assert pipe.processor.evict_expired() == 0
    assert stall(pipe.one("invoke_agent researcher"))[S.TOOL_CALLS] == 5


def test_evict_expired_drops_runs_whose_span_never_ends() -> None:
    """Runs of traces that never end go away with evict_expired() once idle past the TTL."""
    clock = Clock()
    pipe = make_pipeline(run_ttl=5.0, clock=clock)
    spans = []
    for i in range(20):
        agent = Agent(pipe.tracer, GENAI, f"a{i}")
        with trace.use_span(trace.INVALID_SPAN):
            span = pipe.tracer.start_span("invoke_agent", attributes=GENAI.agent("x")[1])
        spans.append(span)
        with trace.use_span(span):
            agent.round(Call("search", {"q": i}, {"r": i}))
    assert pipe.processor.active_runs == 20
    clock.now += 6
    assert pipe.processor.evict_expired() == 20
    assert pipe.processor.active_runs == 0
    assert pipe.metrics()[("stall.runs", frozenset({("stall.verdict", "ok")}))] == 20


def test_max_runs_evicts_least_recently_active() -> None:
    """Beyond max_runs the least recently active run is finished first."""
    pipe = make_pipeline(max_runs=3)
    agents = [Agent(pipe.tracer, GENAI, f"a{i}") for i in range(5)]
    with ExitStack() as stack:
        for agent in agents:
            stack.enter_context(trace.use_span(trace.INVALID_SPAN))
            stack.enter_context(agent.run())
            agent.round(Call("search", {"q": agent.name}, {"r": 1}))
            assert pipe.processor.active_runs <= 3
        assert pipe.processor.stats().evicted_runs == 2
    assert pipe.processor.stats().active_runs == 0
    assert pipe.processor.stats().finished_runs == 3
    for agent in agents:
        assert stall(pipe.one(f"invoke_agent {agent.name}"))[S.TOOL_CALLS] == 1


def test_ancestry_is_bounded_for_spans_that_never_end() -> None:
    """Open spans beyond max_tracked_spans are forgotten oldest first; nothing leaks."""
    pipe = make_pipeline(settings=ProcessorSettings(max_tracked_spans=50))
    for i in range(200):
        pipe.tracer.start_span(f"leaked-{i}")
    stats = pipe.processor.stats()
    assert stats.tracked_spans <= 50
    assert stats.forgotten_spans >= 150
    assert stats.active_runs == 0


def test_state_is_empty_after_runs_end() -> None:
    """After agent traces end, no run and no span is tracked."""
    pipe = make_pipeline()
    for i in range(10):
        agent = Agent(pipe.tracer, GENAI, f"a{i}")
        with agent.run():
            agent.round(Call("search", {"q": i}, {"r": i}))
    stats = pipe.processor.stats()
    assert (stats.active_runs, stats.tracked_spans, stats.finished_runs) == (0, 0, 10)


def test_a_root_agents_forgotten_entry_leaves_its_spans_in_its_run() -> None:
    """Past max_tracked_spans, a root agent's calls still count in its run; none is left open."""
    pipe = make_pipeline(settings=ProcessorSettings(max_tracked_spans=8))
    agent = Agent(pipe.tracer, GENAI)
    loop = Call("search", {"q": "same"}, {"hits": [1]})
    with agent.run():
        agent.round(loop)
        with ExitStack() as nested:  # deep enough that the agent's own entry is trimmed
            for i in range(12):
                nested.enter_context(pipe.tracer.start_as_current_span(f"step {i}"))
        assert pipe.processor.stats().forgotten_spans > 0
        agent.round(loop)  # its model and tool spans' parent is no longer known
    assert [stall(s)[S.SEQ] for s in pipe.named("execute_tool search")] == [1, 2]
    run = stall(pipe.one("invoke_agent researcher"))
    assert (run[S.TOOL_CALLS], run[S.ROUNDS]) == (2, 2)
    stats = pipe.processor.stats()
    assert (stats.active_runs, stats.finished_runs) == (0, 1)


class Keep(SpanProcessor):
    """Keeps every span it is handed, whatever its state."""

    def __init__(self) -> None:
        self.ended: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)


def test_after_shutdown_spans_pass_through_and_open_no_run() -> None:
    """Spans that end after shutdown are forwarded unchanged; no run is opened or counted."""
    kept, reader = Keep(), InMemoryMetricReader()
    processor = StallSpanProcessor(kept, meter_provider=MeterProvider([reader]))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    agent = Agent(provider.get_tracer("agent"), GENAI)
    loop = Call("search", {"q": "same"}, {"hits": [1]})
    with agent.run():
        agent.round(loop)
        processor.shutdown()  # finishes the open run
        ended = len(kept.ended)
        for _ in range(3):
            agent.round(loop)
    late = kept.ended[ended:]
    assert [s.name for s in late][-1] == "invoke_agent researcher"
    assert all(stall(s) == {} for s in late)
    assert processor.stats().active_runs == 0
    runs = [point.value for name, point in data_points(reader) if name == "stall.runs"]
    assert runs == [1]
