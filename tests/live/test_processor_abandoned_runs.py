"""Runs whose span never ends: evicted by max_runs, the TTL or the byte bound, they leave nothing.

The attack of issue #21 (item 6): agent spans that start, make calls, and are then
dropped by their application without ever ending, far more of them than
``max_runs``. Everything goes through the real SDK: a ``TracerProvider``, the
``StallSpanProcessor`` and a downstream processor that counts what it is given.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stall_pipeline import STYLES, Agent, Call, stall

from otel_stall import ProcessorSettings, ProcessorStats, StallSpanProcessor
from otel_stall.semconv import StallAttributes as S

GENAI = STYLES[0]


class Count(SpanProcessor):
    """Counts the spans that end, and keeps none of them."""

    def __init__(self) -> None:
        self.ended = 0

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do at the start."""

    def on_end(self, span: ReadableSpan) -> None:
        """Count the span."""
        self.ended += 1


class Clock:
    """A hand-driven monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Attack:
    """Abandoned agent runs through the real SDK: each makes calls, then is dropped unended."""

    def __init__(self, settings: ProcessorSettings, nested: bool, clock: Clock | None = None):
        self.count = Count()
        self.processor = StallSpanProcessor(self.count, settings=settings, clock=clock)
        provider = TracerProvider()
        provider.add_span_processor(self.processor)
        self.tracer = provider.get_tracer("attack")
        self.nested = nested
        """Each agent span is inside a plain request span that never ends either."""
        self.ended = 0
        """Spans ended by the application: each must reach downstream."""

    def run(self, i: int, calls: int = 1) -> trace.Span:
        """One abandoned run: an agent span (in a new trace) with a round of ``calls`` calls."""
        agent = Agent(self.tracer, GENAI, f"agent-{i}")
        name, attributes = GENAI.agent(agent.name)
        with trace.use_span(trace.INVALID_SPAN):
            parent = self.tracer.start_span("request") if self.nested else trace.INVALID_SPAN
            with trace.use_span(parent):
                span = self.tracer.start_span(name, attributes=attributes)
        with trace.use_span(span):
            agent.round(*(Call("search", {"page": c}, {"hits": [c]}) for c in range(calls)))
        self.ended += 1 + calls
        return span  # the caller drops it: it never ends

    def runs(self, first: int, count: int, calls: int = 1) -> None:
        """``count`` abandoned runs, none of them kept."""
        for i in range(first, first + count):
            self.run(i, calls)

    def stats(self) -> ProcessorStats:
        return self.processor.stats()


@pytest.mark.parametrize("nested", [False, True], ids=["agent-root", "under-open-root"])
def test_evicted_abandoned_runs_leave_no_entries(nested: bool) -> None:
    """Far more abandoned runs than max_runs: only the tracked runs hold entries and bytes."""
    max_runs = 40
    attack = Attack(ProcessorSettings(max_runs=max_runs), nested)
    attack.runs(0, max_runs)
    full = attack.stats()
    attack.runs(max_runs, 25 * max_runs)
    stats = attack.stats()
    assert stats.active_runs == max_runs
    assert stats.evicted_runs == 25 * max_runs
    # Each tracked run: its agent span's entry and its trace root's, as before any eviction.
    assert stats.tracked_spans == full.tracked_spans == 2 * max_runs
    assert stats.forgotten_spans == 0  # no entry had to be dropped by the span bound
    assert stats.bytes_held == full.bytes_held
    assert attack.count.ended == attack.ended  # every span that ended went downstream
    assert stats.errors == 0


def _kept_per_run(attack: Attack, warm: int, window: int) -> float:
    """Traced bytes each further abandoned run adds once every bound is reached.

    The first traced window replaces state made before tracing started; of the
    next two the lesser counts (a leak grows every window, one-off churn lands
    in one).
    """
    attack.runs(0, warm)
    gc.collect()
    tracemalloc.start()
    try:
        attack.runs(warm, window)
        growth: list[float] = []
        for first in (warm + window, warm + 2 * window):
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            attack.runs(first, window)
            gc.collect()
            growth.append((tracemalloc.get_traced_memory()[0] - before) / window)
        return min(growth)
    finally:
        tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize("nested", [False, True], ids=["agent-root", "under-open-root"])
def test_an_evicted_abandoned_run_keeps_well_under_a_kilobyte(nested: bool) -> None:
    """Memory kept per abandoned run after its eviction (about 6.6 KB before the fix)."""
    attack = Attack(ProcessorSettings(max_runs=50), nested)
    kept = _kept_per_run(attack, warm=200, window=200)
    assert attack.stats().evicted_runs == 750
    # Measured: under 150 bytes, all of it the bounded sets of ended ids filling up
    # (4096 ids each); about 1 KB when only the run's own state is let go.
    assert kept < 512


def test_the_ttl_evicts_abandoned_runs_and_their_entries() -> None:
    """Idle past the TTL, abandoned runs go with every entry; a span ending later has its report."""
    clock = Clock()
    attack = Attack(ProcessorSettings(run_ttl_seconds=60.0), nested=False, clock=clock)
    kept = attack.run(0)  # this one the application keeps, and ends after the TTL
    attack.runs(1, 30)
    assert attack.stats().active_runs == 31
    clock.now += 61
    assert attack.processor.evict_expired() == 31
    stats = attack.stats()
    assert (stats.active_runs, stats.tracked_spans, stats.bytes_held) == (0, 0, 0)
    exporter = InMemorySpanExporter()
    attack.processor.add_span_processor(SimpleSpanProcessor(exporter))
    kept.end()
    (ended,) = exporter.get_finished_spans()
    assert stall(ended)[S.TOOL_CALLS] == 1
    assert attack.stats().active_runs == 0


def test_a_late_span_of_an_evicted_run_passes_through() -> None:
    """A call made under an agent span after its run was evicted opens no run and is exported."""
    attack = Attack(ProcessorSettings(max_runs=1), nested=False)
    stale = attack.run(0)
    attack.run(1)  # evicts the first
    with trace.use_span(stale):
        Agent(attack.tracer, GENAI).round(Call("search", {"q": "late"}, {"hits": []}))
    stats = attack.stats()
    assert (stats.active_runs, stats.evicted_runs) == (1, 1)
    assert attack.count.ended == attack.ended + 2


@pytest.mark.parametrize("calls", [1, 10, 100])
def test_bytes_held_is_an_honest_estimate(calls: int) -> None:
    """The bytes stats() reports for open runs are close to, and not under, what they hold."""
    attack = Attack(ProcessorSettings(), nested=False)
    attack.runs(0, 2, calls)  # the signer's caches learn these payloads
    gc.collect()
    before = attack.stats().bytes_held
    tracemalloc.start()
    try:
        attack.runs(2, 20, calls)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    estimate = attack.stats().bytes_held - before
    assert attack.stats().active_runs == 22
    assert traced <= estimate * 1.25
    assert estimate <= traced * 2.5


def test_the_byte_bound_evicts_runs_before_max_runs() -> None:
    """Runs that make many calls are finished early to keep the bytes held under the bound."""
    bound = 1 << 20
    attack = Attack(ProcessorSettings(max_state_bytes=bound), nested=False)
    held: list[int] = []
    for i in range(40):
        attack.run(i, calls=100)
        held.append(attack.stats().bytes_held)
    stats = attack.stats()
    assert max(held) <= bound
    assert stats.evicted_runs > 0
    assert stats.active_runs + stats.evicted_runs == 40
    assert stats.active_runs < 40
    assert attack.count.ended == attack.ended


def test_the_byte_bound_limits_tracked_spans() -> None:
    """Open spans get at most a quarter of the byte bound: the oldest are forgotten beyond it."""
    bound = 1 << 20
    pipe = StallSpanProcessor(settings=ProcessorSettings(max_state_bytes=bound))
    provider = TracerProvider()
    provider.add_span_processor(pipe)
    tracer = provider.get_tracer("leak")
    name, attributes = GENAI.agent("a")
    opened = [tracer.start_span(name, attributes=attributes) for _ in range(2000)]
    stats = pipe.stats()
    assert stats.bytes_held <= bound // 4
    assert stats.tracked_spans < len(opened)
    assert stats.forgotten_spans > 0


def test_a_byte_bound_under_a_mebibyte_is_refused() -> None:
    """A byte bound under a mebibyte is refused as a configuration error."""
    with pytest.raises(ValueError, match="max_state_bytes"):
        ProcessorSettings(max_state_bytes=1000)
