"""``OTEL_PYTHON_CONFIGURATOR=otel_stall opentelemetry-instrument``: real runs, real OTLP."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receiver import GrpcReceiver, ReceivedSpan

from otel_stall.configurator import NAME, SDK_HAS_HOOK, ExporterWrapper, StallConfigurator
from otel_stall.processor import StallSpanProcessor

TESTS = Path(__file__).parent
ROUNDS = 5
SPANS = 1 + 2 * ROUNDS  # the agent span, and a model span and a tool span per round
APP = textwrap.dedent(
    f"""
    import sys
    sys.path.insert(0, {str(TESTS)!r})
    from opentelemetry import trace
    from stall_pipeline import STYLES, Agent, Call

    agent = Agent(trace.get_tracer("app"), STYLES[0])
    with agent.run():
        for _ in range({ROUNDS}):
            agent.round(Call("search", {{"q": 1}}, {{"hits": [1]}}))
    """
)
"""An agent that runs the same search every round, instrumented by nothing but the API."""


def instrumented_run(
    receiver: GrpcReceiver, exporters: str, *, select: bool
) -> subprocess.CompletedProcess[str]:
    """Run APP under ``opentelemetry-instrument``, exporting over OTLP/gRPC to ``receiver``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    env |= {
        "OTEL_TRACES_EXPORTER": exporters,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_STALL_RAISE_ERRORS": "true",
    }
    if select:
        env["OTEL_PYTHON_CONFIGURATOR"] = NAME
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    done = subprocess.run(
        [str(instrument), sys.executable, "-c", APP],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def arrived_once(receiver: GrpcReceiver) -> list[ReceivedSpan]:
    """Every span of the run, after checking each arrived exactly once."""
    spans = receiver.spans()
    assert len(spans) == SPANS
    assert len({s.span_id for s in spans}) == SPANS
    return spans


def test_the_entry_point_is_registered() -> None:
    """opentelemetry-instrument finds the configurator under the name users select."""
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_configurator")}
    assert found[NAME].load() is StallConfigurator


@pytest.mark.skipif(not SDK_HAS_HOOK, reason="the configurator hook needs opentelemetry-sdk 1.40")
@pytest.mark.parametrize("exporters", ["otlp", "otlp,console"])
def test_selected_it_wraps_the_exporters_and_each_span_leaves_once(exporters: str) -> None:
    """Every span is exported once, enriched; with two exporters detection still runs once."""
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, exporters, select=True)
        spans = arrived_once(receiver)
    tools = [s for s in spans if s.name == "execute_tool search"]
    assert sorted(t.attributes["stall.seq"] for t in tools) == list(range(1, ROUNDS + 1))
    (agent,) = (s for s in spans if s.name.startswith("invoke_agent"))
    assert agent.attributes["stall.verdict"] == "break"
    findings = [(e.attributes["stall.kind"], e.attributes["stall.seq"]) for e in agent.events]
    assert findings
    assert len(findings) == len(set(findings))  # not once per exporter
    if "console" in exporters:  # the second exporter saw the enriched run span too
        assert done.stdout.count('"stall.verdict": "break"') == 1


@pytest.mark.skipif(SDK_HAS_HOOK, reason="this SDK has the configurator hook")
def test_selected_on_an_sdk_without_the_hook_it_exports_plainly_and_says_why() -> None:
    """Before SDK 1.40 the set-up goes on without otel-stall, and stderr says how to fix it."""
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, "otlp", select=True)
        spans = arrived_once(receiver)
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)
    assert "needs opentelemetry-sdk 1.40" in done.stderr


def test_not_selected_it_is_the_sdks_default_set_up() -> None:
    """Without OTEL_PYTHON_CONFIGURATOR=otel_stall, spans leave as the SDK alone would send them."""
    with GrpcReceiver() as receiver:
        instrumented_run(receiver, "otlp", select=False)
        spans = arrived_once(receiver)
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)


def test_exporter_wrapper_shares_one_processor() -> None:
    """The first exporter gets a StallSpanProcessor; later ones join it behind a no-op."""
    wrap = ExporterWrapper()
    first = wrap(InMemorySpanExporter())
    second = wrap(InMemorySpanExporter())
    assert isinstance(first, StallSpanProcessor)
    assert wrap.processor is first
    assert type(second) is SpanProcessor
    assert [type(p) for p in first.downstream] == [BatchSpanProcessor, BatchSpanProcessor]
    first.shutdown()
