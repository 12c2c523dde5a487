"""Wrapped processors see every hook exactly as if they were registered directly."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import StallSpanProcessor


class Recording(SpanProcessor):
    """A downstream processor that uses all three hooks, like a tail sampler might."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.calls.append(("start", span.name))

    def _on_ending(self, span: Span) -> None:
        self.calls.append(("ending", span.name))

    def on_end(self, span: ReadableSpan) -> None:
        self.calls.append(("end", span.name))


def _trace(processor: SpanProcessor) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("GET /"), tracer.start_as_current_span("SELECT"):
        pass


@pytest.mark.parametrize("extra", [0, 1], ids=["alone", "beside an SDK processor"])
def test_every_hook_is_relayed_in_order(extra: int) -> None:
    """A wrapped processor gets the very hooks, in the order, that it gets registered directly.

    on_start, _on_ending (SDK 1.40 on) and on_end, whichever this SDK calls.
    """
    direct = Recording()
    _trace(direct)
    recording = Recording()
    exporter = InMemorySpanExporter()
    others = [SimpleSpanProcessor(exporter)] * extra
    _trace(StallSpanProcessor(*others, recording))
    assert recording.calls == direct.calls
    assert [kind for kind, name in direct.calls if name == "SELECT"] == (
        ["start", "ending", "end"] if hasattr(SpanProcessor, "_on_ending") else ["start", "end"]
    )
    assert len(exporter.get_finished_spans()) == 2 * extra


class Flushing(SpanProcessor):
    """Records the flush timeout it was given; takes ``takes`` seconds and returns ``result``."""

    def __init__(self, takes: float = 0.0, result: bool = True) -> None:
        self.takes = takes
        self.result = result
        self.given: list[int] = []
        self.shut = False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.given.append(timeout_millis)
        time.sleep(self.takes)
        return self.result

    def shutdown(self) -> None:
        self.shut = True


def test_force_flush_shares_one_timeout_among_downstreams() -> None:
    """The second processor gets what the first left of the timeout, not the whole of it."""
    slow, after = Flushing(takes=0.05), Flushing()
    assert StallSpanProcessor(slow, after).force_flush(10_000) is True
    (first,), (second,) = slow.given, after.given
    assert 0 < first <= 10_000
    assert second <= first - 50


@pytest.mark.parametrize(
    ("timeout", "results", "expected", "flushed"),
    [
        (10_000, (True, False, True), False, 3),
        (10_000, (True, True, True), True, 3),
        (0, (True, True, True), False, 0),
    ],
    ids=["one fails, the rest still flush", "all flush", "no time at all"],
)
def test_force_flush_result(
    timeout: int, results: tuple[bool, ...], expected: bool, flushed: int
) -> None:
    """True only if every downstream flushed; a spent timeout skips the rest."""
    downstream = [Flushing(result=r) for r in results]
    assert StallSpanProcessor(*downstream).force_flush(timeout) is expected
    assert sum(len(d.given) for d in downstream) == flushed


class FailingShutdown(Flushing):
    """A processor whose shutdown raises."""

    def shutdown(self) -> None:
        raise RuntimeError("exporter gone")


def test_shutdown_reaches_every_downstream_even_if_one_raises() -> None:
    """One failing shutdown does not leave the others running; its error still surfaces."""
    before, after = Flushing(), Flushing()
    processor = StallSpanProcessor(before, FailingShutdown(), after)
    with pytest.raises(RuntimeError, match="exporter gone"):
        processor.shutdown()
    assert before.shut
    assert after.shut


@pytest.mark.parametrize("first", [0, 1], ids=["no downstream yet", "after one"])
def test_an_added_processor_gets_every_hook_from_then_on(first: int) -> None:
    """add_span_processor: an added processor is relayed like one given at construction."""
    exporter = InMemorySpanExporter()
    processor = StallSpanProcessor(*[SimpleSpanProcessor(exporter)] * first)
    _trace(processor)
    direct, added = Recording(), Recording()
    _trace(direct)
    processor.add_span_processor(added)
    _trace(processor)
    assert added.calls == direct.calls
    assert processor.downstream[first] is added
    assert len(exporter.get_finished_spans()) == 4 * first  # the first one still gets all


def test_adding_processors_while_spans_end_loses_none_for_those_already_there() -> None:
    """Spans ending on other threads during add_span_processor all reach the first processor."""
    exporter = InMemorySpanExporter()
    processor = StallSpanProcessor(SimpleSpanProcessor(exporter))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    added = [Recording() for _ in range(20)]
    started = threading.Barrier(5)

    def spans() -> None:
        started.wait()
        for _ in range(300):
            with tracer.start_as_current_span("GET /"):
                pass

    threads = [threading.Thread(target=spans) for _ in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    for recording in added:
        processor.add_span_processor(recording)
    for thread in threads:
        thread.join()
    assert len(exporter.get_finished_spans()) == 4 * 300
    assert processor.downstream[1:] == tuple(added)
