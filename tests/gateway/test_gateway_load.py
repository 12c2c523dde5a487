"""Load and upstream faults: count in == count out, and verdicts stay right.

Spans are real SDK spans from the demo's agents, sent by concurrent OTLP/gRPC
exporters to a real gateway, which forwards them to a loopback OTLP sink.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from gateway_support import agent_spans, export, scrape, value, wait_until
from otlp_sink import OtlpSink

from otel_stall.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.e2e

TOTAL_SPANS = 100_000
EXPORTERS = 4
LOOP_SPANS = len(agent_spans(loops=1, progresses=0))
PROGRESS_SPANS = len(agent_spans(loops=0, progresses=1))


def verdicts(sink: OtlpSink) -> Counter[tuple[str, str]]:
    return Counter(
        (s.name, str(s.stall.get("stall.verdict")))
        for s in sink.spans.values()
        if s.name.startswith("invoke_agent")
    )


@pytest.mark.slow
def test_100k_spans_from_concurrent_exporters_all_arrive_with_right_verdicts(
    sink: OtlpSink,
) -> None:
    """100k spans from 4 concurrent exporters: every span arrives once, every verdict is right."""
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="127.0.0.1:0", upstream=sink.endpoint
    )
    pairs_per_chunk = 10
    chunk = pairs_per_chunk * (LOOP_SPANS + PROGRESS_SPANS)
    chunks = -(-TOTAL_SPANS // chunk)
    sent = [0] * EXPORTERS
    with Gateway(config) as gateway:
        endpoint = gateway.grpc_endpoint
        assert endpoint is not None

        def exporter(index: int) -> None:
            for _ in range(index, chunks, EXPORTERS):
                spans = agent_spans(loops=pairs_per_chunk, progresses=pairs_per_chunk)
                sent[index] += export(endpoint, spans)

        threads = [threading.Thread(target=exporter, args=(i,)) for i in range(EXPORTERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = sum(sent)
        assert total == chunks * chunk >= TOTAL_SPANS
        assert wait_until(lambda: sink.count >= total, timeout=120)
        # The sink counts on receipt; the gateway counts once the reply is back.
        assert wait_until(lambda: gateway.pipeline.forwarded >= total)
        assert gateway.metrics_endpoint is not None
        samples = scrape(gateway.metrics_endpoint)
    assert sink.count == total
    assert sink.duplicates == 0
    assert len(sink.spans) == total
    runs = chunks * pairs_per_chunk
    assert verdicts(sink) == {
        ("invoke_agent researcher", "break"): runs,
        ("invoke_agent planner", "ok"): runs,
    }
    assert value(samples, "otel_stall_gateway_spans_received_total") == total
    assert value(samples, "otel_stall_gateway_spans_forwarded_total") == total
    assert value(samples, "otel_stall_gateway_spans_unenriched_total") == 0
    assert value(samples, "stall_runs_total", stall_verdict="break") == runs
    assert value(samples, "stall_runs_total", stall_verdict="ok") == runs


def test_upstream_outage_loses_nothing_within_the_queue_bound(sink: OtlpSink) -> None:
    """Upstream down mid-stream: held spans are delivered once it is back; nothing is lost."""
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint,
        retry_initial=0.05, retry_max=0.2, queue_spans=100_000,
    )  # fmt: skip
    before = agent_spans(loops=5, progresses=5)
    during = agent_spans(loops=20, progresses=20)
    after = agent_spans(loops=5, progresses=5)
    with Gateway(config) as gateway:
        endpoint = gateway.grpc_endpoint
        assert endpoint is not None
        assert export(endpoint, before) == len(before)
        assert wait_until(lambda: sink.count == len(before))
        # The sink counts on receipt, the gateway once the reply is back: stopping the
        # sink in between would fail a delivery that did arrive, and it would be sent again.
        assert wait_until(lambda: gateway.pipeline.forwarded == len(before))
        sink.stop()
        assert export(endpoint, during) == len(during)
        assert wait_until(lambda: gateway.pipeline.upstream.queued_spans == len(during))
        sink.start()
        assert export(endpoint, after) == len(after)
        total = len(before) + len(during) + len(after)
        assert wait_until(lambda: sink.count >= total, timeout=60)
    assert sink.count == total
    assert sink.duplicates == 0
    assert gateway.pipeline.undelivered == 0
    assert verdicts(sink) == {
        ("invoke_agent researcher", "break"): 30,
        ("invoke_agent planner", "ok"): 30,
    }


def test_overflow_during_an_outage_is_counted(sink: OtlpSink) -> None:
    """Upstream down, small queue: overflow is counted; received == forwarded + undelivered."""
    queue = 3 * LOOP_SPANS
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="127.0.0.1:0", upstream=sink.endpoint,
        retry_initial=0.05, retry_max=0.2, queue_spans=queue,
    )  # fmt: skip
    sink.stop()
    with Gateway(config) as gateway:
        endpoint = gateway.grpc_endpoint
        assert endpoint is not None
        traces = 10
        spans = agent_spans(loops=traces, progresses=0)
        # One trace per request, so each becomes one batch on the queue.
        for start in range(0, len(spans), LOOP_SPANS):
            assert export(endpoint, spans[start : start + LOOP_SPANS]) == LOOP_SPANS
        pipeline = gateway.pipeline
        assert pipeline.undelivered == (traces - 3) * LOOP_SPANS
        assert gateway.metrics_endpoint is not None
        samples = scrape(gateway.metrics_endpoint)
        assert (
            value(samples, "otel_stall_gateway_spans_undelivered_total", reason="queue_full")
            == (traces - 3) * LOOP_SPANS
        )
        assert value(samples, "otel_stall_gateway_queue_spans") == queue
        sink.start()
        assert wait_until(lambda: sink.count == queue, timeout=60)
    assert pipeline.received == pipeline.forwarded + pipeline.undelivered
    assert pipeline.forwarded == sink.count == queue


def test_shutdown_with_the_upstream_down_reports_what_was_not_delivered(sink: OtlpSink) -> None:
    """Stopping while the upstream is down counts every held span as undelivered."""
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="off", upstream=sink.endpoint,
        retry_initial=0.05, retry_max=0.1,
    )  # fmt: skip
    sink.stop()
    gateway = Gateway(config).start()
    endpoint = gateway.grpc_endpoint
    assert endpoint is not None
    spans = agent_spans(loops=2, progresses=2)
    assert export(endpoint, spans) == len(spans)
    left = gateway.stop(timeout=0.5)
    assert left == len(spans)
    assert gateway.pipeline.undelivered == len(spans)
    assert gateway.pipeline.forwarded == 0
