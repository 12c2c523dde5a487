"""install() on a provider that already exports: it wraps those processors (issue 29).

A plain SDK provider, set up as the tools that configure tracing leave it: the
processors already there export the enriched spans, each span once, and with
nothing to wrap nor asked for, install() says once what to pass.
"""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stall_pipeline import STYLES, Agent, Call

from otel_stall import StallSpanProcessor, install
from otel_stall.live import install as install_module

SEARCH = Call("search", {"q": 1}, {"r": 1})


def loop(provider: TracerProvider, rounds: int = 8) -> None:
    """A run that calls one tool with one argument ``rounds`` times."""
    agent = Agent(provider.get_tracer("t"), STYLES[0])
    with agent.run():
        for _ in range(rounds):
            agent.round(SEARCH)


def test_the_providers_own_processors_export_the_enriched_spans_once() -> None:
    """Two exporters already on the provider: each gets every span once, enriched, in order."""
    provider = TracerProvider()
    first, second = InMemorySpanExporter(), InMemorySpanExporter()
    processors = [SimpleSpanProcessor(first), SimpleSpanProcessor(second)]
    for processor in processors:
        provider.add_span_processor(processor)
    stall = install(provider, environ={})
    assert stall.downstream == tuple(processors)
    assert provider._active_span_processor._span_processors == (stall,)
    loop(provider)
    for exporter in (first, second):
        spans = exporter.get_finished_spans()
        assert len({s.context.span_id for s in spans}) == len(spans)  # once each
        run = next(s for s in spans if s.name.startswith("invoke_agent"))
        assert run.attributes["stall.verdict"] == "break"  # type: ignore[index]
        tools = [s for s in spans if s.name == "execute_tool search"]
        assert len(tools) == 8
        assert all("stall.signature" in (s.attributes or {}) for s in tools)


def test_an_explicit_exporter_leaves_the_providers_processors_alone() -> None:
    """``exporter=`` is what the user chose: the processors already there stay as they were."""
    provider = TracerProvider()
    mine, theirs = InMemorySpanExporter(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(theirs))
    stall = install(provider, exporter=mine, environ={})
    assert len(provider._active_span_processor._span_processors) == 2
    loop(provider, 2)
    stall.force_flush()
    tool = "execute_tool search"
    assert all(
        "stall.signature" in (s.attributes or {})
        for s in mine.get_finished_spans()
        if s.name == tool
    )
    assert not any("stall.signature" in (s.attributes or {}) for s in theirs.get_finished_spans())
    assert any(s.name == tool for s in theirs.get_finished_spans())


def test_nowhere_to_go_is_said_once_with_what_to_pass(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No processor, no exporter: one warning naming exporter= and downstream=; it still works."""
    monkeypatch.setattr(install_module, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="otel_stall"):
        for _ in range(2):
            provider = TracerProvider()
            processor = install(provider, environ={})
            assert isinstance(processor, StallSpanProcessor)
            assert processor.downstream == ()
            loop(provider, 2)
    warned = [r.getMessage() for r in caplog.records if "exported nowhere" in r.getMessage()]
    assert len(warned) == 1
    assert "exporter=OTLPSpanExporter(endpoint=...)" in warned[0]
    assert "downstream=[BatchSpanProcessor(...)]" in warned[0]
