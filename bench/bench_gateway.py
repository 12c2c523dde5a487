"""Gateway throughput (spans/s) with detection on, against the same server with detection off.

Three workloads, each run through ``python -m otel_stall.gateway`` in its own
process, sent over gRPC by concurrent senders and forwarded to a loopback
OTLP sink; time runs from the first request to the last span arriving at
the sink, so buffering and forwarding are counted:

- ``agent``: demo agents only (a looping and a progressing run per pair);
- ``mix``: 10% agent traces and 90% ordinary service traces (an HTTP server
  span with database, HTTP client and Kafka publish spans, with the attributes
  real instrumentations set), each kind from its own instrumentation scope, as
  a collector tier sees it;
- ``plain``: the ordinary service traces only, no agent at all: what detection
  costs a tier that carries no agent traffic.

The modes run interleaved, best of ``--repeat``, so a noisy machine hits both
alike. ``--baseline DIR`` also runs another source tree's gateway (e.g. a
``git archive`` of main) on the same requests, side by side. Prints a markdown
section for the performance page; ``--quick`` sends 20k spans, one run per mode.

    .venv/bin/python bench/bench_gateway.py [--quick] [--spans N] [--senders 4] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from budgets import BUDGETS, record
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Tracer

from otel_stall.demo import run_looping_agent, run_progressing_agent

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from otlp_sink import OtlpSink

KINDS = ("agent", "mix", "plain")
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
ROOT = Path(__file__).resolve().parent.parent
RESOURCE = {
    "service.name": "shop",
    "service.version": "1.4.2",
    "deployment.environment.name": "prod",
    "host.name": "shop-7d9c8b-x2k4q",
    "k8s.pod.name": "shop-7d9c8b-x2k4q",
    "k8s.namespace.name": "shop",
    "telemetry.sdk.language": "python",
}
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari"
)


def service_trace(http: Tracer, db: Tracer, mq: Tracer, rnd: random.Random) -> None:
    """One ordinary request: a server span over queries, a downstream call and a publish."""
    route = rnd.choice(["/api/orders", "/api/users/{id}", "/api/cart", "/checkout"])
    with http.start_as_current_span(
        f"POST {route}",
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": "POST",
            "http.route": route,
            "url.scheme": "https",
            "url.path": route.replace("{id}", str(rnd.randint(1, 99_999))),
            "server.address": "shop.example.com",
            "server.port": 443,
            "client.address": f"10.0.{rnd.randint(0, 255)}.{rnd.randint(0, 255)}",
            "user_agent.original": USER_AGENT,
            "network.protocol.version": "1.1",
        },
    ) as server:
        for _ in range(rnd.randint(1, 4)):
            table = rnd.choice(["orders", "users", "carts", "items"])
            with db.start_as_current_span(
                f"SELECT shop.{table}",
                kind=SpanKind.CLIENT,
                attributes={
                    "db.system.name": "postgresql",
                    "db.namespace": "shop",
                    "db.collection.name": table,
                    "db.operation.name": "SELECT",
                    "db.query.text": f"SELECT id, status, total, updated_at FROM {table} "
                    "WHERE customer_id = $1 AND status = $2 ORDER BY updated_at DESC LIMIT 50",
                    "server.address": "pg-primary.internal",
                    "server.port": 5432,
                },
            ):
                pass
        with http.start_as_current_span(
            "GET",
            kind=SpanKind.CLIENT,
            attributes={
                "http.request.method": "GET",
                "url.full": f"http://inventory.internal:8080/v2/stock?sku={rnd.randint(1, 10**6)}",
                "server.address": "inventory.internal",
                "server.port": 8080,
                "http.response.status_code": 200,
                "network.peer.address": "10.1.2.3",
            },
        ):
            pass
        with mq.start_as_current_span(
            "publish orders.created",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": "kafka",
                "messaging.operation.type": "publish",
                "messaging.destination.name": "orders.created",
                "messaging.kafka.message.key": f"order-{rnd.randint(1, 10**6)}",
                "messaging.message.body.size": rnd.randint(200, 2000),
                "server.address": "kafka-0.internal",
                "server.port": 9092,
            },
        ):
            pass
        server.set_attribute("http.response.status_code", 200)


def workload(kind: str, total_spans: int, per_request: int = 512) -> tuple[list[bytes], int]:
    """Whole traces of ``kind`` (``agent``, ``mix``, ``plain``) in requests of about 512 spans."""
    rnd = random.Random(21)
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    agent = provider.get_tracer("opentelemetry.instrumentation.openai_agents", "0.1.0")
    http = provider.get_tracer("opentelemetry.instrumentation.flask", "0.48b0")
    db = provider.get_tracer("opentelemetry.instrumentation.psycopg", "0.48b0")
    mq = provider.get_tracer("opentelemetry.instrumentation.kafka", "0.48b0")
    out: list[bytes] = []
    count = 0
    while count < total_spans:
        while len(memory.get_finished_spans()) < per_request:
            if kind == "agent":
                run_looping_agent(agent)
                run_progressing_agent(agent)
            elif kind == "mix" and rnd.random() < 0.1:
                (run_looping_agent if rnd.random() < 0.5 else run_progressing_agent)(agent)
            else:
                service_trace(http, db, mq, rnd)
        spans: list[ReadableSpan] = list(memory.get_finished_spans())
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


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    payloads: list[bytes], total: int, senders: int, detect: bool, root: Path
) -> tuple[float, float]:
    """Spans per second through one gateway process from the tree ``root``, and its CPU µs/span.

    CPU time is steadier than wall time on a shared machine: the page can
    read both.
    """
    port = free_port()
    with OtlpSink(keep=False, workers=8) as sink:
        argv = [
            sys.executable, "-m", "otel_stall.gateway",
            f"--grpc=127.0.0.1:{port}", "--http=off", "--metrics=off",
            f"--upstream={sink.endpoint}", "--log-level=WARNING",
        ]  # fmt: skip
        if not detect:
            argv.append("--no-detect")
        env = {**os.environ, "PYTHONPATH": str(root)}
        gateway = subprocess.Popen(argv, env=env, cwd=root)
        try:
            channel = grpc.insecure_channel(f"127.0.0.1:{port}")
            grpc.channel_ready_future(channel).result(timeout=30)
            call = channel.unary_unary(EXPORT, request_serializer=None)
            cpu_before = cpu_seconds(gateway.pid)
            started = time.perf_counter()

            def send(index: int) -> None:
                for payload in payloads[index::senders]:
                    call(payload, timeout=120)

            threads = [threading.Thread(target=send, args=(i,)) for i in range(senders)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            deadline = time.monotonic() + 300
            while sink.count < total and time.monotonic() < deadline:
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
            cpu = cpu_seconds(gateway.pid) - cpu_before
            channel.close()
            if sink.count != total:
                raise SystemExit(f"the sink got {sink.count} of {total} spans")
        finally:
            gateway.terminate()
            gateway.wait(60)
    return total / elapsed, cpu / total * 1e6


def measure(
    trees: dict[str, Path], spans: int, senders: int, repeat: int
) -> tuple[dict[tuple[str, str, str], float], dict[tuple[str, str, str], float], dict[str, int]]:
    """Best spans/s and CPU µs/span per (workload, tree, mode), the modes interleaved."""
    results: dict[tuple[str, str, str], float] = {}
    cpu: dict[tuple[str, str, str], float] = {}
    totals: dict[str, int] = {}
    for kind in KINDS:
        payloads, total = workload(kind, spans)
        totals[kind] = total
        print(f"{kind}: {total} spans in {len(payloads)} requests", file=sys.stderr, flush=True)
        for _ in range(repeat):
            for name, root in trees.items():
                for mode, detect in (("pass-through", False), ("detect", True)):
                    rate, micros = run(payloads, total, senders, detect, root)
                    key = (kind, name, mode)
                    results[key] = max(results.get(key, 0.0), rate)
                    cpu[key] = min(cpu.get(key, float("inf")), micros)
    return results, cpu, totals


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20k spans, one run per mode")
    parser.add_argument("--spans", type=int, default=None)
    parser.add_argument("--senders", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=None, help="best of N runs per mode")
    parser.add_argument(
        "--baseline", type=Path, help="another source tree to run side by side (e.g. main)"
    )
    args = parser.parse_args()
    spans = args.spans or (20_000 if args.quick else 100_000)
    repeat = args.repeat or (1 if args.quick else 2)
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = args.baseline.resolve()
    results, cpu, totals = measure(trees, spans, args.senders, repeat)
    print("## Gateway: throughput and CPU per span\n")
    print(
        f"Pre-encoded OTLP requests of about 512 spans, sent by {args.senders} concurrent gRPC "
        "senders to `python -m otel_stall.gateway` in its own process, which forwards to a "
        "receiver on loopback; timed from the first request to the last span at the "
        f"receiver, best of {repeat} (the modes interleaved). `agent`: demo agents only (a "
        "looping and a progressing run per pair); `mix`: 10% agent traces, 90% ordinary "
        "service traces (HTTP server, database, HTTP client and Kafka spans), as a collector "
        "tier sees it; `plain`: the ordinary service traces alone. CPU is the gateway "
        "process's, per span, steadier than spans/s on a shared machine; spans/s per core is "
        "one second of CPU over it, what one core of a collector tier forwards when busy. The "
        "pass-through only parses, counts and re-sends the bytes; detection decodes every "
        "agent span, signs the tool calls, runs the detector and re-encodes the enriched "
        "spans.\n"
    )
    print("| workload | spans | code | mode | spans/s | gateway CPU µs/span | spans/s per core |")
    print("|---|---:|---|---|---:|---:|---:|")
    for (kind, name, mode), rate in sorted(results.items()):
        micros = cpu[(kind, name, mode)]
        print(
            f"| {kind} | {totals[kind]:,} | {name} | {mode} | {rate:,.0f} | {micros:.1f} "
            f"| {1e6 / micros:,.0f} |"
        )
    print()
    for name in trees:
        rows = budget_rows(results, cpu, name)
        for key, (value, text) in rows.items():
            budget = BUDGETS[key]
            verdict = "within" if budget.met(value) else "over"
            print(f"- {budget.path} ({name}): {text}; budget {budget.text}: {verdict}.")
            tree = "this" if name == "this tree" else "before"
            kind = KEY_KIND[key]
            record(
                key,
                tree=tree,
                value=value,
                per_core=1e6 / cpu[(kind, name, "detect")],
                per_core_pass=1e6 / cpu[(kind, name, "pass-through")],
            )
    if "baseline" in trees:
        for kind in KINDS:
            new, old = cpu[(kind, "this tree", "detect")], cpu[(kind, "baseline", "detect")]
            print(f"- {kind}: detection CPU, baseline over this tree: {old / new:.2f}.")
    print()


KEY_KIND = {"gateway.mix": "mix", "gateway.plain": "plain", "gateway.agent": "agent"}


def budget_rows(
    results: dict[tuple[str, str, str], float], cpu: dict[tuple[str, str, str], float], name: str
) -> dict[str, tuple[float, str]]:
    """The three gateway budget rows for one tree: the value and how it reads."""
    mix = results[("mix", name, "detect")] / results[("mix", name, "pass-through")]
    plain = cpu[("plain", name, "detect")] / cpu[("plain", name, "pass-through")]
    agent = results[("agent", name, "detect")]
    return {
        "gateway.mix": (mix, f"detection forwards {mix:.2f} of the pass-through's spans/s"),
        "gateway.plain": (plain, f"detection costs {plain:.2f}x the pass-through's CPU"),
        "gateway.agent": (
            agent,
            f"{agent:,.0f} spans/s with detection, "
            f"{1e6 / cpu[('agent', name, 'detect')]:,.0f} spans/s per core of CPU",
        ),
    }


if __name__ == "__main__":
    main()
