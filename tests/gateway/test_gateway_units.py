"""Gateway parts: replay equivalence, per-trace buffering, settings, Prometheus text, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gateway_support import agent_spans, export, parse_prometheus, wait_until
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_sink import OtlpSink

from otel_stall import ConfigError, replay
from otel_stall.cli import build_parser as cli_parser
from otel_stall.core.stall_attributes import SpanEvent, all_with_defaults
from otel_stall.demo import run_looping_agent
from otel_stall.gateway import Gateway, GatewayConfig, Pipeline, config_from_args
from otel_stall.gateway.buffer import TOOL, TRACE_BYTES, Entry, Group, TraceBuffer
from otel_stall.gateway.detect import encoded_additions
from otel_stall.gateway.flags import build_parser
from otel_stall.gateway.prometheus import render
from otel_stall.gateway.receivers import decode_request
from otel_stall.gateway.upstream import Delivery
from otel_stall.otlp.decode import any_value_to_python
from otel_stall.otlp.encode import enrich_proto_span, proto_to_json


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
@pytest.mark.parametrize("per_request", [7, 1000], ids=["held", "in-request"])
@pytest.mark.parametrize("full", [False, True], ids=["compact", "full"])
def test_gateway_enriches_exactly_like_a_replay(
    rules: str, per_request: int, full: bool, tmp_path: Path, sink: OtlpSink
) -> None:
    """Every span leaves the gateway with the attributes and events a replay computes.

    Held across requests (children first) or decided within one request; with
    ``full_attributes``, the attributes at their defaults too (``with_defaults``).
    """
    spans = agent_spans(loops=2, progresses=2) if rules == "repeat" else _issue_19_spans()
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(proto_to_json(encode_spans(spans))) + "\n")
    replayed = replay([str(path)])
    assert replayed.errors == []
    config = GatewayConfig(
        grpc="127.0.0.1:0",
        http="off",
        metrics="off",
        upstream=sink.endpoint,
        full_attributes=full,
    )
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        # Children first, root last, in separate requests: the order a collector may use.
        ordered = sorted(spans, key=lambda s: s.parent is None)
        for start in range(0, len(ordered), per_request):
            chunk = ordered[start : start + per_request]
            assert export(gateway.grpc_endpoint, chunk) == len(chunk)
        assert wait_until(lambda: sink.count == len(spans))
    expected_attrs: dict[str, dict[str, Any]] = {}
    expected_events: dict[str, tuple[str, ...]] = {}
    for result in replayed.traces.values():
        expected_attrs.update(all_with_defaults(result.attributes) if full else result.attributes)
        for span_id, events in result.events.items():
            expected_events[span_id] = tuple(e.name for e in events)
    assert any(a.get("stall.verdict") == "break" for a in expected_attrs.values())
    for span_id, got in sink.spans.items():
        assert got.stall == expected_attrs.get(span_id, {}), got.name
        added = tuple(name for name in got.events if name != "gen_ai.choice")  # the span's own
        assert added == expected_events.get(span_id, ()), got.name


_VALUES: list[Any] = ["loop", "", True, False, 0, -3, 1 << 70, 2.5, [1, 2], ["a", "b"], None]


@pytest.mark.parametrize("value", _VALUES, ids=[repr(v)[:12] for v in _VALUES])
@pytest.mark.parametrize("time_ns", [0, 1_700_000_000_123_456_789])
def test_appended_additions_parse_as_enrich_proto_span_makes(value: Any, time_ns: int) -> None:
    """Encoded stall additions appended to a span's bytes parse as enrich_proto_span's result."""
    span = Span(trace_id=bytes(16), span_id=bytes(8), name="execute_tool search")
    span.attributes.add(key="gen_ai.tool.name").value.string_value = "search"
    span.events.add(name="exception", time_unix_nano=5)
    attributes = {"stall.verdict": "break", "stall.value": value, "stall.seq": 3}
    events = [SpanEvent("stall.detected", time_ns, {"stall.kind": "repeat", "stall.v": value})]
    expected = Span.FromString(span.SerializeToString())
    enrich_proto_span(expected, attributes, events)
    got = Span.FromString(span.SerializeToString() + encoded_additions(attributes, events))
    assert got == expected


class _Recorder:
    """An upstream that keeps what it is sent."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []

    def send(self, payload: bytes, timeout: float) -> Delivery:
        self.payloads.append(payload)
        return Delivery(True)

    def close(self) -> None:
        pass


def _service_spans(tracer: Any, requests: int) -> None:
    for i in range(requests):
        with (
            tracer.start_as_current_span("GET /api/orders", attributes={"http.route": "/o"}),
            tracer.start_as_current_span("SELECT", attributes={"db.query.text": f"q{i}"}),
        ):
            pass


@pytest.mark.parametrize("stored", [False, True], ids=["one-request", "children-held-first"])
def test_plain_spans_beside_agent_traces_leave_as_they_came(tmp_path: Path, stored: bool) -> None:
    """Service spans beside agent traces in a request leave byte for byte; agent spans enriched."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    agent = provider.get_tracer("opentelemetry.instrumentation.openai_agents")
    http = provider.get_tracer("opentelemetry.instrumentation.flask")
    _service_spans(http, 3)
    run_looping_agent(agent)
    _service_spans(http, 3)
    spans = list(memory.get_finished_spans())
    path = tmp_path / "spans.jsonl"
    path.write_text(json.dumps(proto_to_json(encode_spans(spans))) + "\n")
    expected = {k: v for r in replay([str(path)]).traces.values() for k, v in r.attributes.items()}
    root = next(s for s in spans if s.parent is None and s.name.startswith("invoke_agent"))
    batches = [[s for s in spans if s is not root], [root]] if stored else [spans]
    recorder = _Recorder()
    pipeline = Pipeline(GatewayConfig(flush_interval=1000.0), sender=recorder)
    pipeline.start()
    for batch in batches:
        body = bytes(encode_spans(batch).SerializeToString())
        request, _ = decode_request(body, json=False)
        assert pipeline.ingest(request, body).accepted == len(batch)
    pipeline.close()
    assert pipeline.forwarded == len(spans)
    got = {
        span.span_id.hex(): span
        for payload in recorder.payloads
        for rs in ExportTraceServiceRequest.FromString(payload).resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    }
    assert len(got) == len(spans)
    originals = {s.span_id.hex(): s for b in batches for s in _proto_spans(b)}
    for span_id, span in got.items():
        stall = {kv.key: any_value_to_python(kv.value) for kv in span.attributes}
        stall = {k: v for k, v in stall.items() if k.startswith("stall.")}
        assert stall == expected.get(span_id, {}), span.name
        if not stall and not span.events:
            assert span.SerializeToString() == originals[span_id].SerializeToString()


def _proto_spans(spans: list[Any]) -> list[Span]:
    request = encode_spans(spans)
    return [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]


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
    sink: OtlpSink, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Live-enriched spans (`otel-stall demo`) through the gateway get no duplicate events."""
    from otel_stall.cli import main

    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="off", upstream=sink.endpoint
    )
    capture = tmp_path / "demo.jsonl"
    with Gateway(config) as gateway:
        assert gateway.http_endpoint is not None
        assert gateway.grpc_endpoint is not None
        # A looping agent without a live processor: the gateway adds the events.
        plain = agent_spans(loops=1, progresses=0)
        assert export(gateway.grpc_endpoint, plain) == len(plain)
        assert wait_until(lambda: sink.count == len(plain))
        (bare,) = [s for s in sink.spans.values() if s.name == "invoke_agent researcher"]
        argv = ["demo", "--format", "json", "--capture", str(capture)]
        assert main([*argv, "--export-otlp", gateway.http_endpoint]) == 0
        assert wait_until(lambda: sink.count == gateway.pipeline.received > len(plain))
    capsys.readouterr()
    runs = [s for s in sink.spans.values() if s.name == "invoke_agent researcher"]
    (live,) = [s for s in runs if s.span_id != bare.span_id]
    assert bare.events.count("stall.detected") > 0
    assert live.events.count("stall.detected") > 0
    assert live.events == _captured_events(capture, live.span_id)


def _captured_events(capture: Path, span_id: str) -> tuple[str, ...]:
    """The event names the live processor gave a span, from the demo's own capture."""
    for line in capture.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["spanId"] == span_id:
                        return tuple(e["name"] for e in span.get("events", []))
    raise AssertionError(f"span {span_id} is not in {capture}")
