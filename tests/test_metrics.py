"""The ``stall.*`` counters: per-row and whole-report recording agree."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from stall_pipeline import STYLES, Agent, Call, data_points, make_pipeline

from otel_stall import ModelCall, RunReport, ToolCall, detect
from otel_stall.metrics import StallMetrics

Points = dict[tuple[str, frozenset[tuple[str, object]]], int]


def _points(reader: InMemoryMetricReader) -> Points:
    data = reader.get_metrics_data()
    assert data is not None
    out: Points = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    key = (metric.name, frozenset((point.attributes or {}).items()))
                    out[key] = int(point.value)  # type: ignore[union-attr]
    return out


def _recorded(record: Callable[[StallMetrics, RunReport], None], report: RunReport) -> Points:
    reader = InMemoryMetricReader()
    record(StallMetrics(MeterProvider(metric_readers=[reader])), report)
    return _points(reader)


def _per_row(metrics: StallMetrics, report: RunReport) -> None:
    for row in report.ledger:
        metrics.record_row(row)
    for finding in report.findings:
        metrics.record_finding(finding)
    metrics.record_run(report)


@pytest.mark.parametrize("stem", ["loop", "progress", "poll_idempotent", "failures"])
def test_record_report_matches_per_row_recording(
    stem: str, trace_events: Callable[[str], list[ToolCall | ModelCall]]
) -> None:
    """Counting a finished run at once gives the same series and values as row by row."""
    (report,) = detect(trace_events(stem))
    batched = _recorded(StallMetrics.record_report, report)
    assert batched == _recorded(_per_row, report)
    calls = sum(v for (name, _), v in batched.items() if name == "stall.tool_calls")
    assert calls == report.tool_calls


def test_record_reports_adds_up_several_runs(
    trace_events: Callable[[str], list[ToolCall | ModelCall]],
) -> None:
    """Counting several finished runs at once gives the series and values of one by one."""
    reports = [r for stem in ("loop", "progress", "loop") for r in detect(trace_events(stem))]
    reader = InMemoryMetricReader()
    StallMetrics(MeterProvider(metric_readers=[reader])).record_reports(reports)
    one_by_one = InMemoryMetricReader()
    metrics = StallMetrics(MeterProvider(metric_readers=[one_by_one]))
    for report in reports:
        _per_row(metrics, report)
    assert _points(reader) == _points(one_by_one)
    assert sum(v for (name, _), v in _points(reader).items() if name == "stall.runs") == 3


@pytest.mark.parametrize("nested", [False, True], ids=["under the agent", "under a step"])
def test_exemplars_point_at_the_run_span(nested: bool) -> None:
    """Findings and finished runs are counted in the run span's context, wherever they fire."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    step = pipe.tracer.start_as_current_span("step") if nested else nullcontext()
    with agent.run(), step:
        for _ in range(6):  # the fifth round that learns nothing closes as the run ends
            agent.round(Call("search", {"q": 1}, {"hits": [1]}))
    run = pipe.one("invoke_agent researcher").context
    assert run is not None
    exemplars: dict[str, set[tuple[int, int]]] = {}
    for name, point in data_points(pipe.reader):
        found = exemplars.setdefault(name, set())
        found.update((e.trace_id, e.span_id) for e in point.exemplars)
    assert pipe.findings
    assert exemplars["stall.findings"] == {(run.trace_id, run.span_id)}
    assert exemplars["stall.runs"] == {(run.trace_id, run.span_id)}


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        pytest.param(
            100,
            # the stall began at the first repeat (tool call 2): model calls 3 to 6 follow
            {("stall.wasted.tokens", frozenset({("gen_ai.agent.name", "bot")})): 440},
            id="captured",
        ),
        pytest.param(None, {}, id="not-captured"),
    ],
)
def test_wasted_tokens_are_counted_by_agent(tokens: int | None, expected: Points) -> None:
    """Tokens after a stall's onset add to stall.wasted.tokens by agent; uncaptured add nothing."""
    events: list[ToolCall | ModelCall] = []
    for _ in range(6):
        events += [ModelCall(input_tokens=tokens, output_tokens=10 if tokens else None)]
        events += [ToolCall("s", {"q": 1}, {"r": 1})]
    (report,) = detect(events)
    report.attributes["agent"] = "bot"
    points = _recorded(StallMetrics.record_run, report)
    assert {k: v for k, v in points.items() if k[0] == "stall.wasted.tokens"} == expected
