"""End to end: enriched spans leave through the real OTLP exporters and arrive intact."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from otlp_receiver import GrpcReceiver, HttpReceiver, OtlpReceiver, ReceivedSpan
from stall_pipeline import STYLES, Agent, Call

from otel_stall import StallSpanProcessor
from otel_stall.core.stall_attributes import with_defaults

pytestmark = pytest.mark.e2e


def _send(exporter: SpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(StallSpanProcessor(BatchSpanProcessor(exporter)))
    agent = Agent(provider.get_tracer("e2e"), STYLES[0])
    with agent.run():
        for _ in range(5):
            agent.round(Call("search", {"query": "x"}, {"hits": ["a"]}))
    provider.force_flush()
    provider.shutdown()


def _check(receiver: OtlpReceiver) -> None:
    spans = receiver.wait_for(11)
    assert len(spans) == 11
    by_name: dict[str, list[ReceivedSpan]] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    tools = sorted(by_name["execute_tool search"], key=lambda s: s.attributes["stall.seq"])
    assert [t.attributes["stall.seq"] for t in tools] == [1, 2, 3, 4, 5]
    assert [t.attributes["stall.action"] for t in tools] == [
        "continue",
        "refuse",
        "warn",
        "warn",
        "break",
    ]
    # A first call's defaults are not sent: absent means a new fact, once, not a repeat.
    assert not {"stall.new_fact", "stall.repeat.count", "stall.repeat.of"} & set(
        tools[0].attributes
    )
    assert with_defaults(tools[0].attributes)["stall.new_fact"] is True
    assert tools[1].attributes["stall.new_fact"] is False  # a real OTLP bool
    assert tools[1].attributes["stall.repeat.of"] == 1
    assert tools[0].attributes["gen_ai.tool.call.arguments"] == '{"query": "x"}'
    (run,) = by_name["invoke_agent researcher"]
    assert run.attributes["stall.verdict"] == "break"
    assert run.attributes["stall.detected"] is True  # a real OTLP bool
    assert run.attributes["stall.score"] == pytest.approx(0.95)  # break: (3 + 0.8) / 4
    assert isinstance(run.attributes["stall.score"], float)
    assert (run.attributes["stall.tool_calls"], run.attributes["stall.rounds"]) == (5, 5)
    assert run.attributes["stall.refusals"] == 4  # duplicate_call at calls 2 to 5
    detected = [e.attributes for e in run.events if e.name == "stall.detected"]
    assert [(e["stall.kind"], e["stall.action"]) for e in detected] == [
        ("repeat", "warn"),
        ("repeat", "break"),
    ]


def test_grpc_exporter_delivers_stall_attributes() -> None:
    """The real OTLP/gRPC exporter carries stall.* attributes and events to a loopback receiver."""
    with GrpcReceiver() as receiver:
        _send(GrpcExporter(endpoint=receiver.endpoint, insecure=True))
        _check(receiver)


def test_http_exporter_delivers_stall_attributes() -> None:
    """The real OTLP/HTTP exporter carries them too."""
    with HttpReceiver() as receiver:
        _send(HttpExporter(endpoint=receiver.traces_url))
        _check(receiver)
