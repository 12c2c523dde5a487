"""otel_stall.install(): one call that wires the processor from the environment."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receiver import GrpcReceiver, HttpReceiver
from stall_pipeline import STYLES, Agent, Call
from user_process import run_python

from otel_stall.core.config import ConfigError
from otel_stall.live.install import install, otlp_exporter_from_env
from otel_stall.live.processor import StallSpanProcessor

SEARCH = Call("search", {"q": 1}, {"r": 1})


def _loop(provider: TracerProvider, rounds: int = 3) -> None:
    agent = Agent(provider.get_tracer("t"), STYLES[0])
    with agent.run():
        for _ in range(rounds):
            agent.round(SEARCH)


def test_install_with_exporter() -> None:
    """install(provider, exporter=...) wraps a BatchSpanProcessor around the exporter."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = install(provider, exporter=exporter, environ={})
    assert isinstance(processor, StallSpanProcessor)
    _loop(provider)
    provider.force_flush()
    run = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert run.attributes["stall.verdict"] == "warn"  # type: ignore[index]
    assert install(provider, exporter=InMemorySpanExporter()) is processor  # idempotent


def test_install_with_downstream_and_settings() -> None:
    """Explicit downstream processors and settings keywords are used as given."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    processor = install(
        provider, downstream=SimpleSpanProcessor(exporter), redact=True, max_runs=12, environ={}
    )
    assert (processor.settings.redact, processor.settings.max_runs) == (True, 12)
    _loop(provider, 1)
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool search")
    assert "gen_ai.tool.call.arguments" not in tool.attributes  # type: ignore[operator]
    assert "stall.signature" in tool.attributes  # type: ignore[operator]


def test_install_passes_span_limits_to_the_processor() -> None:
    """install(provider, span_limits=...) bounds the copies as the provider bounds its spans."""
    limits = SpanLimits(max_span_attributes=6)
    provider = TracerProvider(span_limits=limits)
    exporter = InMemorySpanExporter()
    install(provider, downstream=SimpleSpanProcessor(exporter), span_limits=limits, environ={})
    _loop(provider, 1)
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool search")
    assert len(tool.attributes or {}) == 6
    assert tool.dropped_attributes > 0
    assert "stall.action" in (tool.attributes or {})  # the newest stay


def test_install_reads_policy_from_environ() -> None:
    """OTEL_STALL_* thresholds reach the policy."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    env = {
        "OTEL_STALL_WARN_AT": "2",
        "OTEL_STALL_BREAK_AT": "3",
        "OTEL_STALL_DUPLICATE_MODE": "off",
    }
    processor = install(provider, downstream=[SimpleSpanProcessor(exporter)], environ=env)
    assert (processor.policy.warn_at, processor.policy.break_at) == (2, 3)
    _loop(provider, 3)
    run = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent"))
    assert run.attributes["stall.verdict"] == "break"  # type: ignore[index]


def test_no_exporter_env_means_no_downstream() -> None:
    """Without OTLP variables there is no downstream; detection still runs."""
    provider = TracerProvider()
    processor = install(provider, environ={})
    assert processor.downstream == ()
    assert otlp_exporter_from_env({}) is None


def test_unknown_setting_is_refused() -> None:
    """A misspelt keyword raises ConfigError naming the valid settings."""
    with pytest.raises(ConfigError, match="redact"):
        install(TracerProvider(), environ={}, redcat=True)


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
        {"OTEL_TRACES_EXPORTER": " None ", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:1"},
        {"OTEL_TRACES_EXPORTER": "otlp,none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:1"},
    ],
    ids=["none with an endpoint", "none, spaced and capitalised", "none beside otlp"],
)
def test_traces_exporter_none_means_no_exporter(env: dict[str, str]) -> None:
    """OTEL_TRACES_EXPORTER=none wins over an endpoint set for other signals."""
    assert otlp_exporter_from_env(env) is None
    assert install(TracerProvider(), environ=env).downstream == ()


@pytest.mark.parametrize("name", ["console", "zipkin,jaeger"])
def test_other_traces_exporters_are_refused(name: str) -> None:
    """A non-OTLP OTEL_TRACES_EXPORTER is refused with the fix, not silently ignored."""
    env = {"OTEL_TRACES_EXPORTER": name, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
    with pytest.raises(ConfigError, match=re.escape("exporter=...")):
        install(TracerProvider(), environ=env)


def test_bad_protocol_is_refused() -> None:
    """An unsupported OTLP protocol is refused with the fix."""
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "kafka",
    }
    with pytest.raises(ConfigError, match="'grpc' or 'http/protobuf'"):
        otlp_exporter_from_env(env)


@pytest.mark.e2e
def test_install_exports_over_grpc_from_env() -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT selects the OTLP/gRPC exporter; spans arrive enriched."""
    with GrpcReceiver() as receiver:
        provider = TracerProvider()
        install(provider, environ={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint})
        _loop(provider)
        provider.force_flush()
        spans = receiver.wait_for(7)
        provider.shutdown()
    run = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert run.attributes["stall.detected"] is True


@pytest.mark.e2e
def test_install_exports_over_http_from_env() -> None:
    """OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf selects the HTTP exporter."""
    with HttpReceiver() as receiver:
        provider = TracerProvider()
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
        install(provider, environ=env)
        _loop(provider)
        provider.force_flush()
        spans = receiver.wait_for(7)
        provider.shutdown()
    tools = [s for s in spans if s.name == "execute_tool search"]
    assert sorted(t.attributes["stall.seq"] for t in tools) == [1, 2, 3]


@pytest.mark.parametrize(
    ("sampler", "runs", "described"),
    [
        ("", 1, "ParentBased{root:AlwaysOnSampler"),
        ("otel_stall_parentbased_traceidratio", 1, "RecordAllSampler{ParentBased{"),
        ("parentbased_traceidratio", 0, "ParentBased{root:TraceIdRatioBased{0.0}"),
    ],
    ids=["default sampler", "otel-stall's sampler at 0", "the SDK's sampler at 0"],
)
def test_install_on_the_global_provider(sampler: str, runs: int, described: str) -> None:
    """With the global provider still a proxy, install() creates and sets an SDK provider.

    Its sampler is the one OTEL_TRACES_SAMPLER names, otel-stall's too: with that
    one a run nobody exports is still detected, and with the SDK's it is not seen.
    """
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        import otel_stall as inst

        processor = inst.install()
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), provider
        assert inst.install() is processor
        tracer = trace.get_tracer("t")
        agent = {"gen_ai.operation.name": "invoke_agent"}
        with tracer.start_as_current_span("invoke_agent", attributes=agent):
            for _ in range(2):
                with tracer.start_as_current_span("execute_tool s", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "{}"}):
                    pass
        print(processor.stats().finished_runs)
        print(provider.sampler.get_description())
        """
    )
    env = {"OTEL_TRACES_SAMPLER": sampler, "OTEL_TRACES_SAMPLER_ARG": "0"} if sampler else {}
    done = run_python(["-c", script], env=env, cwd=Path(__file__).parent.parent)
    finished, description = done.stdout.splitlines()
    assert int(finished) == runs
    assert description.startswith(described)


def test_a_provider_install_creates_gets_the_span_limits() -> None:
    """install(span_limits=...) on a proxy global: the new provider and the copies share them."""
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import SpanLimits
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import otel_stall

        exporter = InMemorySpanExporter()
        otel_stall.install(
            span_limits=SpanLimits(max_span_attributes=3),
            downstream=SimpleSpanProcessor(exporter),
        )
        tracer = trace.get_tracer("t")
        plain = {f"http.k{i}": i for i in range(8)}
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": "{}"}
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.agent.name": "a"}):
            with tracer.start_as_current_span("GET /", attributes=plain):
                pass
            with tracer.start_as_current_span("execute_tool s", attributes=tool):
                pass
        for span in exporter.get_finished_spans():
            print(span.name, len(span.attributes), span.dropped_attributes > 0)
        """
    )
    done = run_python(["-c", script], cwd=Path(__file__).parent.parent)
    assert done.stdout.splitlines() == [
        "GET / 3 True",  # bounded by the provider: a plain span is forwarded as it is
        "execute_tool s 3 True",  # bounded by the processor's copy
        "invoke_agent 3 True",
    ]
