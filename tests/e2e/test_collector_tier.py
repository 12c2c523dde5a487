"""End to end through a real OpenTelemetry Collector: load-balanced gateways, and back.

The collector is built from collector/manifest.yaml (``collector/build.sh``;
``make e2e`` builds it and runs these). Agents' spans go from the SDK's real
OTLP exporters to the front collector (collector-config/loadbalancing.yaml),
whose ``load_balancing`` exporter routes each trace to one of two
``otel-stall serve`` gateways; each gateway forwards to its own return
collector (collector-config/gateway-return.yaml), which writes the enriched
spans with the file exporter. Without the binary these tests skip, and fail
under ``CI=true``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from collector_stack import (
    CONFIGS,
    FileSpan,
    Stack,
    collector_binary,
    collector_stack,
    exit_summary,
    file_spans,
    metric,
    replay_verdicts,
    sleep_until,
)
from gateway_support import agent_spans, export, scrape, value, wait_until
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from otel_stall.demo import run_looping_agent, run_progressing_agent

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def binary() -> Path:
    return collector_binary()


@pytest.fixture
def stack(binary: Path, tmp_path: Path) -> Iterator[Stack]:
    with collector_stack(binary, tmp_path) as running:
        yield running


def plain_spans(traces: int) -> list[ReadableSpan]:
    """Ordinary service traffic: an HTTP server span with a database child, per trace."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("shop")
    for _ in range(traces):
        with (
            tracer.start_as_current_span("GET /cart", attributes={"http.route": "/cart"}),
            tracer.start_as_current_span("SELECT carts", attributes={"db.system": "sqlite"}),
        ):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def enriched(stack: Stack) -> list[list[FileSpan]]:
    """What each return collector's file exporter wrote, by gateway."""
    return [file_spans(path) for path in stack.files]


def delivered(stack: Stack, want: int, timeout: float = 90) -> list[list[FileSpan]]:
    """Wait until the files hold ``want`` spans in all, and return them."""
    wait_until(lambda: sum(len(f) for f in enriched(stack)) >= want, timeout, 0.5)
    return enriched(stack)


def traces_by_gateway(files: list[list[FileSpan]]) -> list[set[str]]:
    return [{s.trace_id for s in spans} for spans in files]


def run_verdicts(spans: list[FileSpan]) -> dict[str, list[str]]:
    """The gateway's stall.verdict on each agent (run) span, by agent name."""
    out: dict[str, list[str]] = {}
    for span in spans:
        if span.name.startswith("invoke_agent") and "stall.verdict" in span.attributes:
            out.setdefault(span.name.removeprefix("invoke_agent "), []).append(
                span.attributes["stall.verdict"]
            )
    return out


def test_every_config_validates(binary: Path) -> None:
    """Each file in collector-config/ is a valid config for the pinned collector."""
    configs = sorted(CONFIGS.glob("*.yaml"))
    assert len(configs) >= 3
    for config in configs:
        result = subprocess.run(
            [str(binary), "validate", f"--config={config}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, f"{config.name}: {result.stdout}{result.stderr}"


def test_routing_one_gateway_per_trace_and_replay_agrees(stack: Stack) -> None:
    """Each trace reaches one gateway; the loop breaks once; files, metrics and replay agree."""
    agents = agent_spans(loops=1, progresses=1, service="agents")
    plain = plain_spans(30)
    assert export(stack.grpc, agents) == len(agents)
    http = HttpSpanExporter(endpoint=stack.http, timeout=30)
    assert http.export(plain).name == "SUCCESS"
    http.shutdown()  # type: ignore[no-untyped-call]
    sent = agents + plain
    sent_ids = {format(s.context.span_id, "016x") for s in sent}
    sent_traces = {format(s.context.trace_id, "032x") for s in sent}

    files = delivered(stack, len(sent))
    got = [s.span_id for spans in files for s in spans]
    assert Counter(got) == Counter(sent_ids), "every span once, none lost or doubled"
    by_gateway = traces_by_gateway(files)
    assert by_gateway[0] | by_gateway[1] == sent_traces
    assert by_gateway[0] & by_gateway[1] == set(), "a trace split across gateways"
    assert by_gateway[0], "gateway 2 got every trace"
    assert by_gateway[1], "gateway 1 got every trace"

    verdicts = [run_verdicts(spans) for spans in files]
    merged = {k: v for per in verdicts for k, v in per.items()}
    assert merged == {"researcher": ["break"], "planner": ["ok"]}
    tools = [s for spans in files for s in spans if s.name == "execute_tool fetch"]
    assert {s.attributes.get("stall.action") for s in tools} >= {"warn", "break"}

    # Gateways: received = forwarded = what their return collector's file holds.
    for gateway, spans in zip(stack.gateways, files, strict=True):
        counts = gateway.counters()
        assert counts["received"] == counts["forwarded"] == len(spans), counts
        assert counts["undelivered"] == counts["unenriched"] == 0, counts
    breaks = [g.counters()["break_runs"] for g in stack.gateways]
    assert sorted(breaks) == [0, 1]
    loop_trace = next(s.trace_id for s in tools)
    assert loop_trace in by_gateway[breaks.index(1)]
    # The collectors' own telemetry counts the same spans in and out.
    front = stack.front.metrics()
    assert metric(front, "otelcol_receiver_accepted_spans") == len(sent), front
    assert metric(front, "otelcol_exporter_sent_spans", "exporter=load_balancing}") == len(sent)
    for collector, spans in zip(stack.returns, files, strict=True):
        counts = collector.metrics()
        assert metric(counts, "otelcol_receiver_accepted_spans") == len(spans), counts

    # Replay of each file exporter's output gives the gateways' verdicts.
    replayed = replay_verdicts(*stack.files)
    assert [run for run in replayed if run[2] != "ok"] == [(loop_trace, "researcher", "break")]
    planner = next(s.trace_id for spans in files for s in spans if s.name.endswith("planner"))
    assert (planner, "planner", "ok") in replayed
    assert replay_verdicts(stack.raw_file) == replayed, "raw spans and enriched agree"

    # The stalled trace is sampled to the trace store (tail_sampling, 10 s wait).
    assert wait_until(lambda: loop_trace in {s.trace_id for s in stack.jaeger.spans.values()}, 60)

    # Span metrics carry the stall dimensions.
    def breaks_counted() -> float:
        return sum(
            value(scrape(f"http://127.0.0.1:{p}/metrics"), "traces_span_metrics_calls_total",
                  stall_action="break")
            for p in stack.span_metrics
        )  # fmt: skip

    assert wait_until(lambda: breaks_counted() >= 1, 60, 0.5)


class Load:
    """Agents and plain traffic through the front collector, from a live SDK pipeline."""

    def __init__(self, endpoint: str, seconds: float) -> None:
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "load"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30)
        processor = BatchSpanProcessor(exporter, schedule_delay_millis=100, max_queue_size=100_000)
        self.provider.add_span_processor(processor)
        self.seconds = seconds
        self.thread = threading.Thread(target=self.run, name="load", daemon=True)

    def run(self) -> None:
        tracer: Tracer = self.provider.get_tracer("load")
        end = time.monotonic() + self.seconds
        i = 0
        while time.monotonic() < end:
            if i % 10 == 0:
                run_looping_agent(tracer)
            elif i % 10 == 5:
                run_progressing_agent(tracer)
            else:
                with (
                    tracer.start_as_current_span("GET /item"),
                    tracer.start_as_current_span("SELECT items"),
                ):
                    pass
            i += 1
            time.sleep(0.01)

    def finish(self) -> list[ReadableSpan]:
        self.thread.join(self.seconds + 30)
        assert not self.thread.is_alive()
        assert self.provider.force_flush(60_000)
        self.provider.shutdown()
        return list(self.memory.get_finished_spans())


def test_gateway_killed_under_load_then_restarted(stack: Stack, tmp_path: Path) -> None:
    """A gateway stopped mid-load: every span is accounted for, and retry delivers the rest."""
    victim, other = stack.gateways
    load = Load(stack.grpc, seconds=8.0)
    started = time.monotonic()
    load.thread.start()
    sleep_until(started + 2.0)
    assert victim.stop() == 0, victim.lives[-1].log()
    first_life = exit_summary(victim.lives[-1].log())
    down_from = time.time_ns()
    sleep_until(started + 5.0)
    down_to = time.time_ns()
    victim.start()
    sent = load.finish()
    sent_ids = Counter(format(s.context.span_id, "016x") for s in sent)

    files = delivered(stack, len(sent), timeout=150)
    got = Counter(s.span_id for spans in files for s in spans)
    front = stack.front.metrics()
    counts: dict[str, object] = {
        "sdk sent": len(sent),
        "front accepted": metric(front, "otelcol_receiver_accepted_spans"),
        "front load_balancing sent": metric(
            front, "otelcol_exporter_sent_spans", "exporter=load_balancing}"
        ),
        "front load_balancing failed": metric(
            front, "otelcol_exporter_send_failed_spans", "exporter=load_balancing}"
        ),
        "gateway-1 first life": first_life,
        "gateway-1 restarted": victim.counters(),
        "gateway-2": other.counters(),
        "return-1 accepted": metric(stack.returns[0].metrics(), "otelcol_receiver_accepted_spans"),
        "return-2 accepted": metric(stack.returns[1].metrics(), "otelcol_receiver_accepted_spans"),
        "file-1 spans": len(files[0]),
        "file-2 spans": len(files[1]),
        "backend outcomes": {k: v for k, v in front.items() if "backend_outcome" in k},
    }
    during = {s.trace_id for s in files[0] if down_from <= s.start <= down_to}
    counts["traces begun while gateway-1 was down, delivered to it later"] = len(during)
    (tmp_path / "kill-accounting.json").write_text(json.dumps(counts, indent=2, default=str))
    print(json.dumps(counts, indent=2, default=str))
    assert got == sent_ids, "lost or doubled spans"
    assert counts["front accepted"] == len(sent)
    restarted = counts["gateway-1 restarted"]
    assert isinstance(restarted, dict)
    assert first_life["undelivered"] == 0
    assert restarted["undelivered"] == 0
    assert first_life["forwarded"] + restarted["forwarded"] == len(files[0])
    assert other.counters()["forwarded"] == len(files[1])
    assert first_life["received"] + restarted["received"] + other.counters()["received"] == len(
        sent
    )
    # The dead gateway's traces were not re-routed: those made while it was down
    # reached it after its restart, and only it.
    assert during, "no trace of the outage window went to the restarted gateway"
    assert during.isdisjoint({s.trace_id for s in files[1]})
    assert first_life["received"] > 0
    assert restarted["received"] > 0


def gemini_session(tracer: Tracer, session: str, rounds: int, looping: bool) -> None:
    """gemini-cli's shape: every model call and every tool round a trace of its own."""
    common = {"gen_ai.agent.name": "gemini-cli", "gen_ai.conversation.id": session}
    for i in range(rounds):
        model = {**common, "gen_ai.operation.name": "llm_call", "gen_ai.request.model": "m"}
        with tracer.start_as_current_span("llm_call", attributes=model):
            pass
        path = "notes.txt" if looping else f"file{i}.txt"
        tool = {
            **common,
            "gen_ai.operation.name": "tool_call",
            "gen_ai.tool.name": "read_file",
            "gen_ai.tool.call.arguments": json.dumps({"file_path": path}),
            "gen_ai.tool.call.result": f"contents of {path}",
        }
        with (
            tracer.start_as_current_span("schedule_tool_calls", attributes=common),
            tracer.start_as_current_span("tool_call", attributes=tool),
        ):
            pass


def test_gemini_sessions_meet_at_one_gateway(stack: Stack) -> None:
    """Routed by gen_ai.conversation.id, a session's many traces all reach one gateway."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "gemini-cli"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("gemini-cli")
    # 16 sessions: the chance that all hash to one of the two gateways is 2**-15.
    sessions = {f"session-{n}": n == 0 for n in range(16)}
    for session, looping in sessions.items():
        gemini_session(tracer, session, rounds=5, looping=looping)
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    assert export(stack.sessions, spans) == len(spans)

    files = delivered(stack, len(spans))
    assert sum(len(f) for f in files) == len(spans)
    where: dict[str, set[int]] = {}
    traces: dict[str, set[str]] = {}
    for index, per in enumerate(files):
        for span in per:
            session = span.attributes["gen_ai.conversation.id"]
            where.setdefault(session, set()).add(index)
            traces.setdefault(session, set()).add(span.trace_id)
    assert set(where) == set(sessions)
    assert all(len(gateways) == 1 for gateways in where.values()), where
    assert all(len(ids) == 10 for ids in traces.values()), "10 traces per session"
    assert {next(iter(g)) for g in where.values()} == {0, 1}, "sessions are spread"
    # Met in one file, each session is one run across its traces again, and
    # only the looping one breaks. (The gateway itself judges each trace alone:
    # docs/deployment.md, "Sessions that span traces".)
    runs = [replay_verdicts(path) for path in stack.files]
    for index, replayed in enumerate(runs):
        sessions_here = sum(1 for g in where.values() if g == {index})
        assert len(replayed) == sessions_here, replayed
    home = next(iter(where["session-0"]))
    assert [verdict for *_, verdict in runs[home]].count("break") == 1
    assert all(verdict == "ok" for *_, verdict in runs[1 - home])


def test_the_tier_stops_cleanly(stack: Stack) -> None:
    """Idle, the gateways and collectors exit 0 on SIGTERM, having warned of no deprecated name."""
    for gateway in stack.gateways:
        assert gateway.stop() == 0
    for collector in (stack.front, *stack.returns):
        assert collector.process.stop(signal.SIGTERM) == 0, collector.process.log()
        # A deprecated component name ("loadbalancing") is accepted with a warning at start.
        assert "is deprecated" not in collector.process.log(), collector.process.log()
