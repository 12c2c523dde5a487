"""One onset and one waste, live and replayed, for five kinds of loop (issue 28 item 1).

A repeat, a reworded, a refused, a cycle and a failure loop each report the calls that
brought nothing as wasted.

Each loop runs through a real ``TracerProvider`` and :class:`StallSpanProcessor` (the
refused loop is the demo's own agent, asking the live gate), is captured as OTLP/JSON
lines and replayed: the run span's ``stall.wasted.*`` attributes, the replay's report,
its JSON, table, Markdown and HTML all give the same numbers.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console
from stall_pipeline import STYLES, Agent, Call

from otel_stall import OtlpJsonLinesSpanExporter, Replayer, StallSpanProcessor
from otel_stall.demo import run_looping_agent
from otel_stall.offline.html_report import render_html
from otel_stall.offline.report import render_json, render_markdown, render_table
from otel_stall.semconv import StallAttributes as S

DOCS = {"documents": ["spans.md", "traces.md"]}


@dataclass(frozen=True)
class Loop:
    """A scripted run, and what it wasted from the call it stalled at."""

    drive: Callable[[Any, StallSpanProcessor], None]
    onset: int
    calls: int
    model_calls: int


def _rounds(*calls: Call) -> Callable[[Any, StallSpanProcessor], None]:
    """A researcher that makes one model call, then one tool call, per round; a last answer."""

    def drive(tracer: Any, processor: StallSpanProcessor) -> None:
        agent = Agent(tracer, STYLES[0])
        with agent.run():
            for call in calls:
                agent.round(call)
            agent.model()

    return drive


def _refused(tracer: Any, processor: StallSpanProcessor) -> None:
    """The demo's researcher, guarded: the gate refuses its fetches from call 3 on."""
    run_looping_agent(tracer, 12, guard=processor.guard)


LOOPS = {
    # 1 original and 5 repeats: the first repeat (2) begins it; 4 model calls follow it
    # and the last answer: 5 model calls.
    "repeat": Loop(_rounds(*[Call("search", {"q": "spans"}, DOCS)] * 6), 2, 5, 5),
    # new words each time, the same documents back: calls 2 to 6 brought nothing
    "reworded": Loop(
        _rounds(*[Call("search", {"q": f"spans, take {n}"}, DOCS) for n in range(6)]), 2, 5, 5
    ),
    # refused from call 3 to call 7, then stopped at break before its next fetch
    "refused": Loop(_refused, 3, 5, 5),
    # get_weather, get_time three times over: the second period (call 3) begins it
    "cycle": Loop(
        _rounds(
            *[Call("get_weather", {"city": "Oslo"}, {"c": 4}), Call("get_time", {}, "09:00")] * 3
        ),
        3,
        4,
        4,
    ),
    # the same call failing the same way four times: the first repeated failure (2)
    "failure": Loop(
        _rounds(*[Call("deploy", {"env": "prod"}, "quota exceeded", error=True)] * 4), 2, 3, 3
    ),
}


def _run(loop: Loop, tmp_path: Path) -> tuple[dict[str, Any], Any]:
    """Run the loop live; its run span's stall attributes and the replay of its capture."""
    capture = tmp_path / "spans.jsonl"
    exported = InMemorySpanExporter()
    processor = StallSpanProcessor(
        SimpleSpanProcessor(exported), SimpleSpanProcessor(OtlpJsonLinesSpanExporter(str(capture)))
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    loop.drive(provider.get_tracer("loops"), processor)
    provider.shutdown()
    (run_span,) = [s for s in exported.get_finished_spans() if s.name.startswith("invoke_agent")]
    return dict(run_span.attributes or {}), Replayer().analyse([str(capture)])


@pytest.mark.parametrize("name", list(LOOPS))
def test_a_loop_wastes_the_calls_that_brought_nothing(name: str, tmp_path: Path) -> None:
    """Live span, replayed report, JSON, table, Markdown and HTML agree on onset and waste."""
    loop = LOOPS[name]
    live, replayed = _run(loop, tmp_path)
    assert live[S.WASTED_CALLS] == loop.calls
    assert live[S.WASTED_MODEL_CALLS] == loop.model_calls
    (report,) = replayed.reports
    assert (report.onset_seq, report.wasted_calls, report.wasted_model_calls) == (
        loop.onset,
        loop.calls,
        loop.model_calls,
    )
    assert report.wasted_calls == report.tool_calls - loop.onset + 1  # to the run's end
    (run,) = json.loads(render_json(replayed))["runs"]
    assert run["wasted"]["from_seq"] == loop.onset
    assert (run["wasted"]["calls"], run["wasted"]["model_calls"]) == (loop.calls, loop.model_calls)
    cost = f"{loop.calls} tool calls, {loop.model_calls} model calls"
    out = io.StringIO()
    render_table(replayed, Console(file=out, width=200, color_system=None))
    for text in (out.getvalue(), render_markdown(replayed), render_html(replayed)):
        assert f"stalled from seq {loop.onset}".lower() in text.lower()
        assert cost in text


def test_the_refused_loop_counts_its_refusals_in_the_score(tmp_path: Path) -> None:
    """The demo's refused calls 3 to 7 are repeats the gate stopped: 5 of 7 in the score."""
    _, replayed = _run(LOOPS["refused"], tmp_path)
    (report,) = replayed.reports
    out = io.StringIO()
    render_table(replayed, Console(file=out, width=200, color_system=None))
    assert "break, 5 of 7 tool calls repeated or refused" in out.getvalue()
    assert report.stall_score == pytest.approx((3 + 5 / 7) / 4)
    refusals = [f for f in report.findings if f.action.value == "refuse"]
    assert min(f.seq for f in refusals) == 3
    assert "duplicate_call fetch x6 seq 3..7" in out.getvalue()  # not 2..7: 2 ran


def test_a_cycle_is_labelled_with_every_tool_in_it(tmp_path: Path) -> None:
    """The get_weather/get_time cycle names both tools, in the cycle's order."""
    _, replayed = _run(LOOPS["cycle"], tmp_path)
    (report,) = replayed.reports
    (cycle,) = [f for f in report.findings if f.kind.value == "cycle"]
    assert cycle.tool == "get_weather, get_time"
    assert cycle.onset_seq == 3
