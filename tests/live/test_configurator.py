"""``OTEL_PYTHON_CONFIGURATOR=otel_stall opentelemetry-instrument``: real runs, real OTLP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import distributions, entry_points
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receiver import GrpcReceiver, ReceivedSpan
from user_process import run_python

from otel_stall import StallSpanProcessor
from otel_stall.live.configurator import (
    NAME,
    SDK_HAS_HOOK,
    SDK_READS_CONFIG_FILE,
    ExporterWrapper,
    StallConfigurator,
)

TESTS = Path(__file__).parent.parent
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
    receiver: GrpcReceiver,
    exporters: str,
    *,
    select: bool,
    metrics: str = "none",
    sampler: tuple[str, str] | None = None,
    config_file: str | None = None,
    event_signal: str = "span",
    prelude: str = "",
    pythonpath: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run APP under ``opentelemetry-instrument``, exporting over OTLP/gRPC to ``receiver``.

    ``sampler`` is ``OTEL_TRACES_SAMPLER`` and its argument; ``config_file`` is
    ``OTEL_CONFIG_FILE``. Log records go to the console when ``event_signal`` asks for them.
    ``prelude`` is code the app runs first; ``pythonpath`` is ``PYTHONPATH``.
    """
    env = {
        "OTEL_TRACES_EXPORTER": exporters,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_METRICS_EXPORTER": metrics,
        "OTEL_LOGS_EXPORTER": "none" if event_signal == "span" else "console",
        "OTEL_STALL_EVENT_SIGNAL": event_signal,
        "OTEL_STALL_RAISE_ERRORS": "true",
    }
    if select:
        env["OTEL_PYTHON_CONFIGURATOR"] = NAME
    if sampler is not None:
        env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"] = sampler
    if config_file is not None:
        env["OTEL_CONFIG_FILE"] = config_file
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    return run_python(["-c", prelude + APP], env=env, launcher=[str(instrument)])


def arrived_once(receiver: GrpcReceiver) -> list[ReceivedSpan]:
    """Every span of the run, after checking each arrived exactly once."""
    spans = receiver.spans()
    assert len(spans) == SPANS
    assert len({s.span_id for s in spans}) == SPANS
    return spans


def exported(
    exporters: str = "otlp", *, select: bool = True, **options: Any
) -> tuple[subprocess.CompletedProcess[str], list[ReceivedSpan]]:
    """One instrumented run against a fresh receiver: its output, and its spans (each once)."""
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, exporters, select=select, **options)
        return done, arrived_once(receiver)


def agent_span(spans: list[ReceivedSpan]) -> ReceivedSpan:
    """The run's one agent span."""
    (agent,) = (s for s in spans if s.name.startswith("invoke_agent"))
    return agent


needs_hook = pytest.mark.skipif(
    not SDK_HAS_HOOK, reason="the configurator hook needs opentelemetry-sdk 1.40"
)


def test_the_entry_point_is_registered() -> None:
    """opentelemetry-instrument finds the configurator under the name users select."""
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_configurator")}
    assert found[NAME].load() is StallConfigurator


@needs_hook
@pytest.mark.parametrize("exporters", ["otlp", "otlp,console"])
def test_selected_it_wraps_the_exporters_and_each_span_leaves_once(exporters: str) -> None:
    """Every span is exported once, enriched; with two exporters detection still runs once."""
    done, spans = exported(exporters)
    tools = [s for s in spans if s.name == "execute_tool search"]
    assert sorted(t.attributes["stall.seq"] for t in tools) == list(range(1, ROUNDS + 1))
    agent = agent_span(spans)
    assert agent.attributes["stall.verdict"] == "break"
    findings = [(e.attributes["stall.kind"], e.attributes["stall.seq"]) for e in agent.events]
    assert findings
    assert len(findings) == len(set(findings))  # not once per exporter
    if "console" in exporters:  # the second exporter saw the enriched run span too
        assert done.stdout.count('"stall.verdict": "break"') == 1


INSTALL = "import otel_stall; print(type(otel_stall.install()).__name__)\n"
"""An app that also calls install(), as code written for runs without auto-instrumentation does."""


@needs_hook
def test_install_in_the_app_returns_the_configurators_processor() -> None:
    """install() under the configurator adds nothing: each span still leaves once, enriched."""
    done, spans = exported(prelude=INSTALL)
    assert done.stdout.splitlines()[0] == "StallSpanProcessor"
    assert agent_span(spans).attributes["stall.verdict"] == "break"
    findings = [
        (e.attributes["stall.kind"], e.attributes["stall.seq"]) for e in agent_span(spans).events
    ]
    assert len(findings) == len(set(findings)) > 0  # not added by two processors


@needs_hook
def test_selected_its_metrics_reach_the_sdks_meter_provider() -> None:
    """The processor is built before the SDK sets the meter provider; its counters still export."""
    done, spans = exported(metrics="console")
    agent = agent_span(spans)
    totals = counter_totals(done.stdout)
    assert totals["stall.tool_calls"] == ROUNDS
    assert totals["stall.runs"] == 1
    # Every finding is counted; the refusals among them get no event, and are counted on the run.
    refusals = agent.attributes.get("stall.refusals", 0)
    assert totals["stall.findings"] == len(agent.events) + refusals > refusals


@needs_hook
def test_with_the_recording_sampler_a_run_nobody_exports_is_still_detected() -> None:
    """OTEL_TRACES_SAMPLER=otel_stall_parentbased_traceidratio at 0: nothing leaves, all is seen."""
    sampler = ("otel_stall_parentbased_traceidratio", "0")
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, "otlp", select=True, metrics="console", sampler=sampler)
        assert receiver.spans() == []
    totals = counter_totals(done.stdout)
    assert totals["stall.tool_calls"] == ROUNDS
    assert totals["stall.runs"] == 1
    assert totals["stall.findings"] > 0


@needs_hook
def test_selected_its_log_based_events_reach_the_sdks_logger_provider() -> None:
    """With logs/dup, each finding event on the run span is also a log record in its context."""
    done, spans = exported(event_signal="logs/dup")
    agent = agent_span(spans)
    on_span = sorted((e.attributes["stall.kind"], e.attributes["stall.seq"]) for e in agent.events)
    records = console_documents(done.stdout)
    logged = sorted((r["attributes"]["stall.kind"], r["attributes"]["stall.seq"]) for r in records)
    assert logged == on_span != []
    assert {r["event_name"] for r in records} == {"stall.detected"}
    assert {r["span_id"] for r in records} == {f"0x{agent.span_id}"}


def console_documents(stdout: str) -> list[dict[str, Any]]:
    """The JSON documents a console exporter printed, in order."""
    decoder = json.JSONDecoder()
    text, at = stdout.strip(), 0
    documents: list[dict[str, Any]] = []
    while at < len(text):
        document, at = decoder.raw_decode(text, at)
        documents.append(document)
        while at < len(text) and text[at].isspace():
            at += 1
    return documents


def counter_totals(stdout: str) -> dict[str, float]:
    """Each counter's total over its points, from the console metric exporter's last export.

    Counters are cumulative, so the last export holds the whole run.
    """
    document = console_documents(stdout)[-1]
    totals: dict[str, float] = {}
    for resource in document["resource_metrics"]:
        for scope in resource["scope_metrics"]:
            for metric in scope["metrics"]:
                for point in metric["data"]["data_points"]:
                    totals[metric["name"]] = totals.get(metric["name"], 0) + point["value"]
    return totals


@pytest.mark.skipif(SDK_HAS_HOOK, reason="this SDK has the configurator hook")
def test_selected_on_an_sdk_without_the_hook_it_exports_plainly_and_says_why() -> None:
    """Before SDK 1.40 the set-up goes on without otel-stall, and stderr says how to fix it."""
    done, spans = exported()
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)
    assert "needs opentelemetry-sdk 1.40" in done.stderr


@pytest.mark.skipif(not SDK_READS_CONFIG_FILE, reason="this SDK ignores OTEL_CONFIG_FILE")
def test_selected_with_a_config_file_it_says_the_sdk_ignores_it() -> None:
    """The SDK's file configuration takes no configurator's changes: the error says so."""
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, "otlp", select=True, config_file="/nonexistent.yaml")
    assert "OTEL_CONFIG_FILE is set" in done.stderr
    assert "exported without otel-stall" in done.stderr


def test_not_selected_it_is_the_sdks_default_set_up() -> None:
    """Without OTEL_PYTHON_CONFIGURATOR=otel_stall, spans leave as the SDK alone would send them."""
    _, spans = exported(select=False)
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)


OTHER_CONFIGURATOR = textwrap.dedent(
    """
    import sys
    from opentelemetry.sdk._configuration import _OTelSDKConfigurator

    class OtherConfigurator(_OTelSDKConfigurator):
        def _configure(self, **kwargs):
            print("the other configurator ran", file=sys.stderr)
            super()._configure(**kwargs)
    """
)


def _distribution(folder: Path, name: str, entry_points_text: str) -> None:
    """A distribution's metadata in ``folder``, with its entry points (a real install's shape)."""
    info = folder / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points_text)


def test_not_selected_beside_another_configurator_it_runs_that_one_and_says_nothing(
    tmp_path: Path,
) -> None:
    """Found first and not chosen, it runs the other configurator and prints no "not loaded"."""
    ours, other = tmp_path / "ours", tmp_path / "other"
    # The first one found: an editable install is found twice under `python -m pytest`
    # (its egg-info in the working directory, and the dist-info in the virtualenv).
    own = next(d for d in distributions() if d.metadata["Name"] == "otel-stall")
    _distribution(ours, "otel-stall", own.read_text("entry_points.txt") or "")
    _distribution(
        other,
        "other-configurator",
        "[opentelemetry_configurator]\nconfigurator = other_configurator:OtherConfigurator\n",
    )
    (other / "other_configurator.py").write_text(OTHER_CONFIGURATOR)
    with GrpcReceiver() as receiver:  # otel_stall's metadata first on the path: it is found first
        done = instrumented_run(
            receiver, "otlp", select=False, pythonpath=f"{ours}{os.pathsep}{other}"
        )
        spans = arrived_once(receiver)
    assert "the other configurator ran" in done.stderr
    assert "not loaded" not in done.stderr
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
