"""Gateway parts: replay equivalence, per-trace buffering, settings, Prometheus text, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from otlp_sink import OtlpSink
from test_gateway_support import agent_spans, export, parse_prometheus, wait_until

from otel_stall.cli import build_parser as cli_parser
from otel_stall.core.config import ConfigError
from otel_stall.gateway import Gateway, GatewayConfig
from otel_stall.gateway.buffer import TOOL, TRACE_BYTES, Entry, Group, TraceBuffer
from otel_stall.gateway.flags import build_parser, config_from_args
from otel_stall.gateway.prometheus import render
from otel_stall.offline.replay import replay
from otel_stall.otlp.encode import proto_to_json


def _issue_19_spans() -> list[Any]:
    """Runs for each of issue #19's rules (failure loops, monologue, cycle), with tokens."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from test_equivalence import issue_19_agents

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    issue_19_agents(provider.get_tracer("issue-19"))
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.mark.parametrize("rules", ["repeat", "issue-19"])
def test_gateway_enriches_exactly_like_a_replay(rules: str, tmp_path: Path, sink: OtlpSink) -> None:
    """Every span leaves the gateway with the stall attributes and events a replay computes."""
    spans = agent_spans(loops=2, progresses=2) if rules == "repeat" else _issue_19_spans()
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(proto_to_json(encode_spans(spans))) + "\n")
    replayed = replay([str(path)])
    assert replayed.errors == []
    config = GatewayConfig(grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint)
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        # Children first, root last, in separate requests: the order a collector may use.
        ordered = sorted(spans, key=lambda s: s.parent is None)
        for start in range(0, len(ordered), 7):
            assert export(gateway.grpc_endpoint, ordered[start : start + 7]) == len(
                ordered[start : start + 7]
            )
        assert wait_until(lambda: sink.count == len(spans))
    expected_attrs: dict[str, dict[str, Any]] = {}
    expected_events: dict[str, tuple[str, ...]] = {}
    for result in replayed.traces.values():
        expected_attrs.update(result.attributes)
        for span_id, events in result.events.items():
            expected_events[span_id] = tuple(e.name for e in events)
    assert any(a.get("stall.verdict") == "break" for a in expected_attrs.values())
    for span_id, got in sink.spans.items():
        assert got.stall == expected_attrs.get(span_id, {}), got.name
        assert got.events == expected_events.get(span_id, ()), got.name


def test_trace_without_root_is_flushed_after_decision_wait(sink: OtlpSink) -> None:
    """A trace whose root never arrives is still detected and forwarded after decision_wait."""
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint, decision_wait=0.3
    )
    spans = [s for s in agent_spans(loops=1, progresses=0) if s.parent is not None]
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        assert export(gateway.grpc_endpoint, spans) == len(spans)
        assert wait_until(lambda: sink.count == len(spans))
    actions = {s.stall.get("stall.action") for s in sink.spans.values()}
    assert "break" in actions


def group(spans: int = 1, *, root: bool = False, size: int = 10) -> Group:
    """A request's spans of one trace, as held entries of ``size`` bytes each."""
    entries = [Entry(TOOL, bytes(8), bytes(8), 0, 0) for _ in range(spans)]
    return Group(entries=entries, spans=spans, has_root=root, size=size * spans)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_buffer_holds_until_root_or_decision_wait() -> None:
    """A trace waits for its root; without one it leaves after decision_wait, oldest first."""
    clock = Clock()
    buffer = TraceBuffer(
        decision_wait=5, max_traces=10, max_spans=100, max_bytes=10_000, clock=clock
    )
    intake = buffer.add({b"a": group(2), b"b": group(1)})
    assert (intake.ready, intake.overflow, intake.late) == ([], [], [])
    assert (buffer.traces, buffer.spans, buffer.size) == (2, 3, 30 + 2 * TRACE_BYTES)
    clock.now = 2
    intake = buffer.add({b"b": group(1, root=True)})
    assert [(r.trace_id, len(r.entries)) for r in intake.ready] == [(b"b", 2)]
    assert buffer.expired() == []
    clock.now = 5
    assert [r.trace_id for r in buffer.expired()] == [b"a"]
    assert (buffer.traces, buffer.spans, buffer.size) == (0, 0, 0)


def test_buffer_sends_late_spans_and_overflow_on_unenriched() -> None:
    """Spans of decided traces come back as late; spans that do not fit come back as overflow."""
    buffer = TraceBuffer(decision_wait=5, max_traces=2, max_spans=4, max_bytes=10_000)
    buffer.add({b"done": group(1, root=True)})
    intake = buffer.add({b"done": group(1)})
    assert len(intake.late) == 1
    intake = buffer.add({b"x": group(3), b"y": group(2)})
    assert [g.spans for g in intake.overflow] == [2]
    intake = buffer.add({b"z": group(1), b"w": group(1)})
    assert [g.spans for g in intake.overflow] == [1]
    assert (buffer.traces, buffer.spans) == (2, 4)
    tight = TraceBuffer(decision_wait=5, max_traces=5, max_spans=100, max_bytes=TRACE_BYTES + 25)
    assert [g.spans for g in tight.add({b"big": group(2, size=20)}).overflow] == [2]


def test_settings_come_from_flags_then_environment() -> None:
    """A flag beats OTEL_STALL_GATEWAY_*, which beats the default; bad values name the fix."""
    env = {"OTEL_STALL_GATEWAY_UPSTREAM": "collector:4317", "OTEL_STALL_GATEWAY_MAX_SPANS": "7"}
    config = GatewayConfig.from_env(env, max_spans=9)
    assert (config.upstream, config.max_spans) == ("collector:4317", 9)
    assert GatewayConfig.from_env(env).max_spans == 7
    with pytest.raises(ConfigError, match="OTEL_STALL_GATEWAY_DECISION_WAIT"):
        GatewayConfig.from_env({"OTEL_STALL_GATEWAY_DECISION_WAIT": "soon"})
    with pytest.raises(ConfigError, match="tls_key"):
        GatewayConfig(tls_cert="cert.pem")
    args = build_parser().parse_args(["--decision-wait", "250ms", "--no-detect", "--http", "off"])
    parsed = config_from_args(args)
    assert (parsed.decision_wait, parsed.detect, parsed.http_address) == (0.25, False, None)


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--listen-all", "--upstream=otel-return:4317"],
        ["demo", "--export-otlp", "http://otel-collector:4318/v1/traces"],
    ],
)
def test_compose_commands_parse_with_the_real_cli(argv: list[str]) -> None:
    """The otel-stall subcommands docker-compose runs exist with these flags."""
    args = cli_parser().parse_args(argv)
    assert callable(args.handler)


def test_prometheus_text_names_types_and_escaping() -> None:
    """Counters get _total, up-down counters are gauges, histograms get buckets; values escape."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("test")
    meter.create_counter("stall.findings", description="x").add(
        2, {"gen_ai.tool.name": 'we"ird\\tool\n', "stall.repeat": True}
    )
    meter.create_up_down_counter("queue.spans").add(-3)
    meter.create_histogram("call.duration").record(0.3)
    text = render(reader.get_metrics_data())
    provider.shutdown()
    assert "# TYPE stall_findings_total counter" in text
    assert "# TYPE queue_spans gauge" in text
    assert "# TYPE call_duration histogram" in text
    samples = parse_prometheus(text)
    labels = (("gen_ai_tool_name", 'we\\"ird\\\\tool\\n'), ("stall_repeat", "true"))
    assert samples[("stall_findings_total", labels)] == 2
    assert samples[("queue_spans", ())] == -3
    assert samples[("call_duration_count", ())] == 1
    assert samples[("call_duration_bucket", (("le", "+Inf"),))] == 1
    assert render(None) == ""


def test_demo_through_the_gateway_keeps_one_set_of_events(
    sink: OtlpSink, capsys: pytest.CaptureFixture[str]
) -> None:
    """Live-enriched spans (`otel-stall demo`) through the gateway get no duplicate events."""
    from otel_stall.cli import main

    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="off", upstream=sink.endpoint
    )
    with Gateway(config) as gateway:
        assert gateway.http_endpoint is not None
        assert gateway.grpc_endpoint is not None
        # The same looping agent without a live processor: the gateway adds the events.
        plain = agent_spans(loops=1, progresses=0)
        assert export(gateway.grpc_endpoint, plain) == len(plain)
        assert wait_until(lambda: sink.count == len(plain))
        (bare,) = [s for s in sink.spans.values() if s.name == "invoke_agent researcher"]
        assert main(["demo", "--format", "json", "--export-otlp", gateway.http_endpoint]) == 0
        assert wait_until(lambda: sink.count == gateway.pipeline.received > len(plain))
    capsys.readouterr()
    runs = [s for s in sink.spans.values() if s.name == "invoke_agent researcher"]
    (live,) = [s for s in runs if s.span_id != bare.span_id]
    assert bare.events.count("stall.detected") > 0
    assert live.events == bare.events
    # Two separate runs of the same agent: all alike but the wall time their loop took.
    timing = "stall.wasted.seconds"
    assert live.stall.pop(timing) > 0
    assert bare.stall.pop(timing) > 0
    assert live.stall == bare.stall
