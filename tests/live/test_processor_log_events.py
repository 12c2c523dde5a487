"""stall.detected as log-based events: the Logs API, beside or instead of span events."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.trace import Tracer
from stall_pipeline import STYLES, Agent, Call, Pipeline, events, make_pipeline

from otel_stall import ProcessorSettings
from otel_stall.core.stall_attributes import is_escalation
from otel_stall.live.log_events import API_EMITS_EVENTS, EventSignal
from otel_stall.semconv import StallEventAttributes as E

try:  # the name since SDK 1.39; the older one warns there
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter as InMemoryLogs
except ImportError:
    from opentelemetry.sdk._logs.export import InMemoryLogExporter as InMemoryLogs

GENAI = STYLES[0]
needs_event_api = pytest.mark.skipif(
    not API_EMITS_EVENTS, reason="this Logs API cannot emit named events (before 1.39)"
)
Record = tuple[str, int, int]
"""A finding as (kind, seq, timestamp)."""
Work = Callable[[Tracer], None]
"""What an agent does with a tracer."""


def _looping_agent(tracer: Tracer) -> None:
    """Rounds that repeat one search until the run breaks; the last round closes at its end."""
    agent = Agent(tracer, GENAI)
    with agent.run():
        agent.round(Call("fetch", {"u": 1}, None, error=True))
        for _ in range(7):
            agent.round(Call("search", {"q": 1}, {"r": 1}))


def _stale_to_the_end(tracer: Tracer) -> None:
    """One round that learns something, then five that do not: the fifth closes at the end."""
    agent = Agent(tracer, GENAI)
    with agent.run():
        for _ in range(6):
            agent.round(Call("search", {"q": 1}, {"r": 1}))


def _trace_run(tracer: Tracer) -> None:
    """Repeated tool calls under a plain root: the trace is the run, its root the run span."""
    with tracer.start_as_current_span("POST /ask"):
        for _ in range(5):
            Agent(tracer, GENAI).tool(Call("search", {"q": 1}, {"r": 1}))


def _run(signal: EventSignal, work: Work = _looping_agent) -> tuple[Pipeline, list[Any]]:
    """A pipeline with a logger provider, after ``work``; its log records."""
    exporter = InMemoryLogs()  # type: ignore[no-untyped-call]
    logs = LoggerProvider()
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    pipe = make_pipeline(settings=ProcessorSettings(event_signal=signal), logger_provider=logs)
    work(pipe.tracer)
    return pipe, [r.log_record for r in exporter.get_finished_logs()]


def _span_events(pipe: Pipeline, run_span_name: str) -> Counter[Record]:
    """The run span's stall.detected events, as (kind, seq, time)."""
    found = events(pipe.one(run_span_name))
    times = [e.timestamp for e in pipe.one(run_span_name).events if e.name == E.EVENT_NAME]
    return Counter((str(a[E.KIND]), int(a[E.SEQ]), t) for a, t in zip(found, times, strict=True))


def _log_events(records: list[Any]) -> Counter[Record]:
    """The log records, as (kind, seq, time)."""
    return Counter((r.attributes[E.KIND], r.attributes[E.SEQ], r.timestamp) for r in records)


@needs_event_api
@pytest.mark.parametrize(
    ("work", "run_span"),
    [
        (_looping_agent, "invoke_agent researcher"),
        (_stale_to_the_end, "invoke_agent researcher"),
        (_trace_run, "POST /ask"),
    ],
    ids=["agent run", "stale to the end", "trace run"],
)
def test_logs_dup_emits_each_span_event_as_a_log_record(work: Work, run_span: str) -> None:
    """With logs/dup, the log records are the run span's events: same findings, same times."""
    pipe, records = _run("logs/dup", work)
    on_span = _span_events(pipe, run_span)
    assert on_span, "no finding fired: the test would prove nothing"
    assert _log_events(records) == on_span
    delivered = Counter((f.kind.value, f.seq) for f in pipe.findings if is_escalation(f))
    assert Counter((kind, seq) for kind, seq, _ in on_span.elements()) == delivered


@needs_event_api
def test_findings_at_the_run_end_are_logged_too() -> None:
    """A finding that fires as the last round closes is logged at the run span's end time."""
    pipe, records = _run("logs", _stale_to_the_end)
    end = pipe.one("invoke_agent researcher").end_time
    assert [r.attributes[E.KIND] for r in records if r.timestamp == end] == ["no_new_facts"]


@needs_event_api
def test_logs_alone_leave_the_run_span_without_events() -> None:
    """With logs, every escalation is a log record (a refusal is none) and none is a span event."""
    pipe, records = _run("logs")
    assert events(pipe.one("invoke_agent researcher")) == []
    assert any(not is_escalation(f) for f in pipe.findings)  # or this would prove nothing
    assert Counter((k, s) for k, s, _ in _log_events(records).elements()) == Counter(
        (f.kind.value, f.seq) for f in pipe.findings if is_escalation(f)
    )


def test_span_alone_emits_no_log_record() -> None:
    """The default keeps stall.detected as span events only."""
    pipe, records = _run("span")
    assert records == []
    assert events(pipe.one("invoke_agent researcher"))


@needs_event_api
@pytest.mark.parametrize(
    ("work", "run_span"),
    [(_looping_agent, "invoke_agent researcher"), (_trace_run, "POST /ask")],
    ids=["agent run", "trace run"],
)
def test_a_log_record_is_a_named_event_in_the_run_spans_context(work: Work, run_span: str) -> None:
    """Each record names the event and carries the run span's trace and span id."""
    pipe, records = _run("logs", work)
    context = pipe.one(run_span).context
    assert records
    for record in records:
        assert record.event_name == E.EVENT_NAME
        assert (record.trace_id, record.span_id) == (context.trace_id, context.span_id)


@needs_event_api
def test_severity_follows_the_action() -> None:
    """Stopping the agent is an error; warning or refusing one call is a warning."""
    _, records = _run("logs")
    severity = {
        "warn": SeverityNumber.WARN,
        "refuse": SeverityNumber.WARN,
        "break": SeverityNumber.ERROR,
        "escalate": SeverityNumber.ERROR,
    }
    seen = {(r.attributes[E.ACTION], r.severity_number) for r in records}
    assert seen == {(action, severity[action]) for action, _ in seen}
    assert {action for action, _ in seen} >= {"warn", "break"}


@pytest.mark.skipif(API_EMITS_EVENTS, reason="this Logs API emits named events")
@pytest.mark.parametrize("signal", ["logs", "logs/dup"])
def test_an_old_logs_api_keeps_span_events_and_says_why(
    signal: EventSignal, caplog: pytest.LogCaptureFixture
) -> None:
    """Before opentelemetry-api 1.39, logs cannot be had: span events stay, with an error."""
    with caplog.at_level(logging.ERROR, logger="otel_stall"):
        pipe, records = _run(signal)
    assert records == []
    assert events(pipe.one("invoke_agent researcher"))
    assert pipe.processor.settings.event_signal == "span"
    assert "needs opentelemetry-api 1.39 or later" in caplog.text
