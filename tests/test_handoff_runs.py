"""Handoffs without an agent span: the receiving agent's calls are a run of their own.

LlamaIndex's AgentWorkflow goes on with the receiving agent under the same root
span and the same step spans; only its ``handoff`` tool call (``to_agent``)
shows the switch. The calls after that call are the receiving agent's run, live
and in replay alike; that run has no span of its own and ends with the run it
was handed from.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from gateway_support import export, wait_until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer
from otlp_sink import OtlpSink
from stall_pipeline import make_pipeline, stall

from otel_stall import analyse_spans
from otel_stall.gateway import Gateway, GatewayConfig
from otel_stall.live.processor import span_record
from otel_stall.semconv import StallAttributes as S

KIND = "openinference.span.kind"


def _llm(tracer: Tracer) -> None:
    with tracer.start_as_current_span("OpenAI.achat", attributes={KIND: "LLM"}):
        pass


def _tool(tracer: Tracer, name: str, arguments: Any, result: str) -> None:
    attributes = {
        KIND: "TOOL",
        "tool.name": name,
        "input.value": json.dumps(arguments),
        "output.value": result,
    }
    with tracer.start_as_current_span("FunctionTool.acall", attributes=attributes):
        pass


def _handoff(tracer: Tracer, to: str | None) -> None:
    arguments = {"kwargs": {"reason": "needs research", **({"to_agent": to} if to else {})}}
    _tool(tracer, "handoff", arguments, f"Agent {to} is now handling the request")


def _workflow(tracer: Tracer, script: list[tuple[str, str | None]]) -> None:
    """One AgentWorkflow.run: per step a model call, then a fetch or a handoff."""
    with tracer.start_as_current_span("AgentWorkflow.run", attributes={KIND: "CHAIN"}):
        for what, value in script:
            _llm(tracer)
            if what == "handoff":
                _handoff(tracer, value)
            else:
                _tool(tracer, "fetch_page", {"kwargs": {"page": value}}, f"page {value}")


def _reports(spans: Any) -> set[tuple[Any, int]]:
    """The replayed runs: agent name (``None``: the workflow's own run) and tool calls."""
    results = analyse_spans(span_record(s) for s in spans)
    return {(r.attributes["agent"], r.tool_calls) for t in results.values() for r in t.reports}


@pytest.mark.parametrize(
    ("script", "runs"),
    [
        (
            [("fetch", "1"), ("handoff", "researcher"), ("fetch", "2"), ("fetch", "2")],
            [(None, 2), ("researcher", 2)],
        ),
        (
            [("handoff", "researcher"), ("fetch", "1"), ("handoff", "main"), ("fetch", "2")],
            [(None, 1), ("main", 1), ("researcher", 2)],
        ),
        ([("handoff", None), ("fetch", "1"), ("fetch", "1")], [("", 2), (None, 1)]),
    ],
    ids=["handoff", "handoff-to-main", "content-off"],
)
def test_live_and_replay_split_a_run_at_its_handoffs(
    script: list[tuple[str, str | None]], runs: list[tuple[Any, int]]
) -> None:
    """Live and replay make the same runs of a workflow and give its spans the same stall.*."""
    pipe = make_pipeline()
    _workflow(pipe.tracer, script)
    spans = pipe.spans()
    results = analyse_spans(span_record(s) for s in spans)
    for span in spans:
        assert span.context is not None
        trace = results[format(span.context.trace_id, "032x")]
        assert stall(span) == trace.attributes.get(format(span.context.span_id, "016x"), {})
    assert _reports(spans) == set(runs)
    assert pipe.metric_total("stall.runs") == len(runs)


def test_the_receiving_agent_is_its_own_run() -> None:
    """The handoff call is the giver's; the receiver's repeats are its own, and so is its run."""
    pipe = make_pipeline()
    script: list[tuple[str, str | None]] = [("handoff", "researcher"), *[("fetch", "1")] * 3]
    _workflow(pipe.tracer, script)
    root = stall(pipe.one("AgentWorkflow.run"))
    assert (root[S.TOOL_CALLS], root[S.VERDICT]) == (1, "ok")
    tools = pipe.named("FunctionTool.acall")
    assert [stall(s)[S.SEQ] for s in tools] == [1, 1, 2, 3]  # the handoff, then the fetches
    assert {(f.kind.value, f.tool) for f in pipe.findings} >= {("repeat", "fetch_page")}
    assert _reports(pipe.spans()) == {(None, 1), ("researcher", 3)}
    assert pipe.processor.stats().active_runs == 0
    assert pipe.metric_total("stall.runs") == 2


def test_a_handoff_back_continues_the_agents_earlier_run() -> None:
    """A handoff to an agent that had the run before goes on with that agent's run."""
    pipe = make_pipeline()
    script: list[tuple[str, str | None]] = [
        ("handoff", "researcher"),
        ("fetch", "1"),
        ("handoff", "writer"),
        ("fetch", "2"),
        ("handoff", "researcher"),
        ("fetch", "3"),
    ]
    _workflow(pipe.tracer, script)
    assert _reports(pipe.spans()) == {(None, 1), ("researcher", 3), ("writer", 2)}


def test_the_gateway_splits_a_run_at_its_handoff(sink: OtlpSink) -> None:
    """The gateway gives the workflow's spans the live processor's stall.* attributes."""
    pipe = make_pipeline()
    memory = InMemorySpanExporter()
    plain = TracerProvider()
    plain.add_span_processor(SimpleSpanProcessor(memory))
    script: list[tuple[str, str | None]] = [("handoff", "researcher"), *[("fetch", "1")] * 3]
    _workflow(plain.get_tracer("app"), script)
    _workflow(pipe.tracer, script)
    spans = list(memory.get_finished_spans())
    config = GatewayConfig(grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint)
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        assert export(gateway.grpc_endpoint, spans) == len(spans)
        assert wait_until(lambda: sink.count == len(spans))
    by_gateway = sorted((s.name, sorted(s.stall.items())) for s in sink.spans.values())
    live = sorted((s.name, sorted(stall(s).items())) for s in pipe.spans())
    assert by_gateway == live
