"""Fault injection: the gateway against an upstream that refuses, validates, dies and dawdles.

The upstream takes messages of at most 1 MiB (the gateway is told 4 MiB, so
it must learn the limit from a refusal), refuses any request holding a span
with malformed ids, answers every call after 100 ms, and is down for 5 s in
the middle of the run. Concurrent clients send agent traces, ordinary
traces, 2 MiB requests and requests with a bad span. At the end every span
the gateway took is forwarded or counted as undelivered, exactly, with
detection on (bad spans refused at the door) and off (the upstream refuses
them, and the batches they shared are split until only they are left out).
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from gateway_support import agent_spans, export, wait_until
from otlp_sink import OtlpSink
from test_gateway_attacks import call, plain_trace, request, span

from otel_stall.gateway import Gateway, GatewayConfig

pytestmark = pytest.mark.e2e

MIB = 1 << 20


@pytest.mark.parametrize("detect", [True, False], ids=["detect", "pass-through"])
def test_in_equals_forwarded_plus_counted_undelivered_under_upstream_faults(detect: bool) -> None:
    """Refusals, id validation, a 5 s outage and slow answers: in == forwarded + undelivered."""
    upstream = OtlpSink(max_message=1 * MIB, validate_ids=True, delay=0.1).start()
    settings = GatewayConfig(
        grpc="127.0.0.1:0", http="off", metrics="off", upstream=upstream.endpoint,
        upstream_max_bytes=4 * MIB, retry_initial=0.05, retry_max=0.5, decision_wait=0.5,
        detect=detect,
    )  # fmt: skip
    accepted = [0]
    lock = threading.Lock()
    gateway = Gateway(settings).start()
    endpoint = gateway.grpc_endpoint
    assert endpoint is not None

    def sent(count: int) -> None:
        with lock:
            accepted[0] += count

    def agents() -> None:
        for _ in range(6):
            spans = agent_spans(loops=3, progresses=3)
            sent(export(endpoint, spans, batch=40))

    def ordinary(base: int) -> None:
        for n in range(6):
            spans = [s for t in range(20) for s in plain_trace(base + n * 100 + t, 12)]
            assert call(endpoint, request(spans).SerializeToString())[0] is grpc.StatusCode.OK
            sent(len(spans))

    def large(base: int) -> None:
        for n in range(3):
            spans = plain_trace(base + n, 2_000, padding=1_000)
            assert call(endpoint, request(spans).SerializeToString())[0] is grpc.StatusCode.OK
            sent(len(spans))

    def bad() -> None:
        for n in range(5):
            spans = [span(900 + n, 1, None, trace_id=b"\x07" * 15), *plain_trace(950 + n, 4)]
            code, response = call(endpoint, request(spans).SerializeToString())
            assert code is grpc.StatusCode.OK
            sent(len(spans) - response.partial_success.rejected_spans)

    def outage() -> None:
        time.sleep(1.0)
        upstream.stop()
        time.sleep(5.0)
        upstream.start()

    workers = [
        threading.Thread(target=agents),
        threading.Thread(target=ordinary, args=(10_000,)),
        threading.Thread(target=ordinary, args=(20_000,)),
        threading.Thread(target=large, args=(30_000,)),
        threading.Thread(target=bad),
        threading.Thread(target=outage),
    ]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        pipeline = gateway.pipeline
        assert wait_until(
            lambda: pipeline.upstream.queued_spans == 0 and pipeline.buffer.spans == 0,
            timeout=120,
        )
        left = gateway.stop(timeout=60)
    finally:
        gateway.stop(timeout=1)
        upstream.stop()
    assert left == 0
    # With detection the five bad spans are received, then refused to their clients.
    assert pipeline.received == accepted[0] + (5 if detect else 0)
    assert pipeline.received == pipeline.forwarded + pipeline.undelivered
    # Only the refused bad spans are undelivered: nothing was lost to the faults.
    assert pipeline.undelivered == 5
    assert len(upstream.spans) == pipeline.forwarded
    if detect:
        assert upstream.refused == 0  # refused at the door: they never reached it
    else:  # they reached it, and were split off the batches they shared
        assert upstream.refused > 0
