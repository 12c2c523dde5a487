"""End to end: real exporters -> `otel-stall serve` -> loopback upstream, and a real Prometheus.

The alert test starts Debian's `prometheus` on loopback with the project's
own rule file, scraping a real gateway that received a looping agent's trace
from the SDK's OTLP exporter, and asks Prometheus' HTTP API whether
AgentStalled fires.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gateway_support import (
    agent_spans,
    export,
    free_port,
    prometheus,
    scrape,
    value,
    wait_until,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.trace.export import SpanExportResult
from otlp_sink import OtlpSink

from otel_stall.gateway import Gateway, GatewayConfig
from otel_stall.otlp.encode import proto_to_json

ROOT = Path(__file__).resolve().parent.parent.parent
RULES = ROOT / "deploy" / "prometheus" / "rules" / "otel-stall.rules.yml"

pytestmark = pytest.mark.e2e


@pytest.fixture
def gateway(sink: OtlpSink) -> Iterator[Gateway]:
    config = GatewayConfig(
        grpc="127.0.0.1:0",
        http="127.0.0.1:0",
        metrics="127.0.0.1:0",
        upstream=sink.endpoint,
        decision_wait=2.0,
    )
    with Gateway(config) as running:
        yield running


def run_spans(sink: OtlpSink) -> dict[str, dict[str, Any]]:
    """The stall attributes of the run (agent) spans that reached the upstream, by agent."""
    return {
        s.name.removeprefix("invoke_agent "): s.stall
        for s in sink.spans.values()
        if s.name.startswith("invoke_agent")
    }


def alerts(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(base + "/api/v1/alerts", timeout=5) as response:
        body = json.loads(response.read())
    result: list[dict[str, Any]] = body["data"]["alerts"]
    return result


def query(base: str, promql: str) -> list[dict[str, Any]]:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as response:
        body = json.loads(response.read())
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def test_agent_stalled_fires_in_a_real_prometheus(
    tmp_path: Path, sink: OtlpSink, gateway: Gateway
) -> None:
    """A healthy run raises no alert; a looping run makes AgentStalled fire in Prometheus."""
    assert gateway.grpc_endpoint is not None
    assert gateway.metrics_endpoint is not None
    target = urllib.parse.urlsplit(gateway.metrics_endpoint).netloc
    with prometheus(tmp_path, target, [RULES]) as (base, _process):
        healthy = agent_spans(loops=0, progresses=1)
        assert export(gateway.grpc_endpoint, healthy) == len(healthy)
        assert wait_until(lambda: query(base, 'stall_runs_total{stall_verdict="ok"}'), 60)
        # Two more evaluations with the healthy series in place: still quiet.
        assert wait_until(lambda: query(base, "count_over_time(stall_runs_total[1m]) >= 3"), 60)
        assert [a for a in alerts(base) if a["labels"]["alertname"] == "AgentStalled"] == []

        looping = agent_spans(loops=1, progresses=0)
        assert export(gateway.grpc_endpoint, looping) == len(looping)

        def stalled() -> list[dict[str, Any]]:
            return [
                a
                for a in alerts(base)
                if a["labels"]["alertname"] == "AgentStalled" and a["state"] == "firing"
            ]

        assert wait_until(stalled, timeout=90, interval=0.5), alerts(base)
        firing = stalled()
        assert "repeat" in {a["labels"]["stall_kind"] for a in firing}
        assert {a["labels"]["gen_ai_tool_name"] for a in firing} == {"fetch"}
        assert {a["labels"]["severity"] for a in firing} == {"page"}
    assert run_spans(sink)["researcher"]["stall.verdict"] == "break"
    assert run_spans(sink)["planner"]["stall.verdict"] == "ok"


def test_http_protobuf_and_json_are_enriched_like_grpc(sink: OtlpSink, gateway: Gateway) -> None:
    """Spans sent over OTLP/HTTP protobuf and OTLP/JSON reach the upstream enriched."""
    assert gateway.http_endpoint is not None
    spans = agent_spans(loops=1, progresses=0, service="http")
    exporter = HttpSpanExporter(endpoint=gateway.http_endpoint, timeout=30)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]
    assert wait_until(lambda: sink.count >= len(spans))

    # The same kind of trace as OTLP/JSON (hex ids), posted by hand.
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    more = agent_spans(loops=0, progresses=1, service="json")
    body = json.dumps(proto_to_json(encode_spans(more))).encode()
    request = urllib.request.Request(
        gateway.http_endpoint, data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
        assert json.loads(response.read()) == {}
    assert wait_until(lambda: sink.count >= len(spans) + len(more))
    assert sink.count == len(spans) + len(more)
    runs = run_spans(sink)
    assert runs["researcher"]["stall.verdict"] == "break"
    assert runs["researcher"]["stall.detected"] is True
    assert runs["planner"]["stall.verdict"] == "ok"
    assert "stall.detected" not in runs["planner"]  # absent: false
    tools = [s for s in sink.spans.values() if s.name == "execute_tool fetch"]
    assert max(s.stall.get("stall.repeat.count", 1) for s in tools) == len(tools)  # absent: 1
    assert {s.stall["stall.action"] for s in tools} >= {"warn", "break"}
    assert gateway.metrics_endpoint is not None
    assert wait_until(lambda: gateway.pipeline.forwarded == sink.count)
    samples = scrape(gateway.metrics_endpoint)
    assert value(samples, "otel_stall_gateway_spans_received_total") == sink.count
    assert value(samples, "otel_stall_gateway_spans_forwarded_total") == sink.count


def test_sigterm_flushes_held_traces(tmp_path: Path, sink: OtlpSink) -> None:
    """On SIGTERM the gateway detects and forwards traces still waiting, then exits 0."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("PYTEST_CURRENT_TEST", None)
    log = (tmp_path / "gateway.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "otel_stall.gateway",
            f"--grpc=127.0.0.1:{port}", "--http=off", "--metrics=off",
            f"--upstream={sink.endpoint}", "--decision-wait=10m",
        ],
        stdout=log, stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip
    try:
        looping = agent_spans(loops=1, progresses=0)
        # Without its root span the trace waits (decision wait: 10 minutes).
        held = [s for s in looping if s.parent is not None]
        assert wait_until(lambda: export(f"127.0.0.1:{port}", held[:1]) == 1, 30)
        assert export(f"127.0.0.1:{port}", held[1:]) == len(held) - 1
        # Plain and model spans go on at once (nothing is ever added to them);
        # the tool spans wait with their trace.
        assert not [s for s in sink.spans.values() if s.name.startswith("execute_tool")]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    output = (tmp_path / "gateway.log").read_text()
    assert sink.count == len(held), output
    assert f"{len(held)} spans received, {len(held)} forwarded, 0 undelivered" in output
    tools = [s for s in sink.spans.values() if s.name == "execute_tool fetch"]
    assert {s.stall["stall.action"] for s in tools} >= {"warn", "break"}
