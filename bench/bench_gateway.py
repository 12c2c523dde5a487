"""Gateway throughput (spans/s) with detection on, against the same server with detection off.

Both runs use the same pre-encoded OTLP requests (demo agents: a looping and
a progressing run, 37 spans per pair, unique trace ids), sent over gRPC by
concurrent senders to ``python -m otel_stall.gateway`` in its own process,
which forwards to a loopback OTLP sink. Time runs from the first request to
the last span arriving at the sink, so buffering and forwarding are counted.

    .venv/bin/python bench/bench_gateway.py [--quick] [--spans 100000] [--senders 4]

Prints a markdown section; ``--quick`` sends 20k spans, one run per mode.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall.demo import run_looping_agent, run_progressing_agent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from otlp_sink import OtlpSink

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ROOT = Path(__file__).resolve().parent.parent


def requests(total_spans: int, per_request: int = 512) -> tuple[list[bytes], int]:
    """Whole traces, packed into requests of about ``per_request`` spans."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    out: list[bytes] = []
    count = 0
    while count < total_spans:
        while len(memory.get_finished_spans()) < per_request:
            run_looping_agent(tracer)
            run_progressing_agent(tracer)
        spans = list(memory.get_finished_spans())
        memory.clear()
        out.append(encode_spans(spans).SerializeToString())
        count += len(spans)
    provider.shutdown()
    return out, count


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run(payloads: list[bytes], total: int, senders: int, detect: bool) -> float:
    """Spans per second through one gateway process."""
    port = free_port()
    with OtlpSink(keep=False, workers=8) as sink:
        argv = [
            sys.executable, "-m", "otel_stall.gateway",
            f"--grpc=127.0.0.1:{port}", "--http=off", "--metrics=off",
            f"--upstream={sink.endpoint}", "--log-level=WARNING",
        ]  # fmt: skip
        if not detect:
            argv.append("--no-detect")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        gateway = subprocess.Popen(argv, env=env)
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=30)
            call = channel.unary_unary(EXPORT, request_serializer=None)
            started = time.perf_counter()

            def send(index: int) -> None:
                for payload in payloads[index::senders]:
                    call(payload, timeout=60)

            threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            while sink.count < total:
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            channel.close()
        finally:
            gateway.terminate()
            gateway.wait(30)
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k spans, one run per mode")
    parser.add_argument("--spans", type=int, default=None)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=None, help="best of N runs per mode")
    args = parser.parse_args()
    spans = args.spans or (20_000 if args.quick else 100_000)
    repeat = args.repeat or (1 if args.quick else 2)
    payloads, total = requests(spans)
    off = max(run(payloads, total, args.senders, detect=False) for _ in range(repeat))
    on = max(run(payloads, total, args.senders, detect=True) for _ in range(repeat))
    print("## Gateway: throughput\n")
    print(
        f"{total:,} spans of demo agents (a looping and a progressing run, unique trace ids) "
        f"in {len(payloads)} pre-encoded OTLP requests, sent by {args.senders} concurrent "
        "gRPC senders to `python -m otel_stall.gateway` in its own process, which forwards "
        "to a receiver on loopback; timed from the first request to the last span at the "
        f"receiver, best of {repeat}. The pass-through only parses, counts and re-sends the "
        "bytes; detection decodes every span, signs the tool calls, runs the detector and "
        "re-encodes the enriched spans. No budget: for information.\n"
    )
    print("| mode | spans/s |")
    print("|---|---:|")
    print(f"| pass-through (`--no-detect`) | {off:,.0f} |")
    print(f"| detect and enrich | {on:,.0f} |")
    print(f"\nDetection costs {off / on:.1f}x the pass-through's time.\n")


if __name__ == "__main__":
    main()
