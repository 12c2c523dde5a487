"""``OTEL_STALL_INSTRUMENT=true opentelemetry-instrument``: real runs, real distro, real OTLP."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.metadata import distribution, entry_points
from pathlib import Path
from typing import Any

import pytest
from otlp_receiver import GrpcReceiver, ReceivedSpan
from user_process import run_python

from otel_stall.live.auto_instrument import LEGACY, SWITCH, post_instrument
from otel_stall.live.log_events import API_EMITS_EVENTS

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
    select: str | None,
    metrics: str = "none",
    sampler: tuple[str, str] | None = None,
    event_signal: str = "span",
    prelude: str = "",
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run APP under ``opentelemetry-instrument``, exporting over OTLP/gRPC to ``receiver``.

    ``select`` is how otel-stall is chosen: ``"switch"`` (``OTEL_STALL_INSTRUMENT=true``),
    ``"legacy"`` (the old configurator name) or ``None``. ``sampler`` is
    ``OTEL_TRACES_SAMPLER`` and its argument. Log records go to the console when
    ``event_signal`` asks for them. ``prelude`` is code the app runs first.
    """
    env = {
        "OTEL_TRACES_EXPORTER": exporters,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint,
        "OTEL_METRICS_EXPORTER": metrics,
        "OTEL_LOGS_EXPORTER": "none" if event_signal == "span" else "console",
        "OTEL_STALL_EVENT_SIGNAL": event_signal,
        "OTEL_STALL_RAISE_ERRORS": "true",
    }
    if select == "switch":
        env[SWITCH] = "true"
    elif select == "legacy":
        env[LEGACY[0]] = LEGACY[1]
    if sampler is not None:
        env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"] = sampler
    env.update(extra_env or {})
    instrument = Path(sys.executable).with_name("opentelemetry-instrument")
    return run_python(["-c", prelude + APP], env=env, launcher=[str(instrument)])


def arrived_once(receiver: GrpcReceiver) -> list[ReceivedSpan]:
    """Every span of the run, after checking each arrived exactly once."""
    spans = receiver.spans()
    assert len(spans) == SPANS
    assert len({s.span_id for s in spans}) == SPANS
    return spans


def exported(
    exporters: str = "otlp", *, select: str | None = "switch", **options: Any
) -> tuple[subprocess.CompletedProcess[str], list[ReceivedSpan]]:
    """One instrumented run against a fresh receiver: its output, and its spans (each once)."""
    with GrpcReceiver() as receiver:
        done = instrumented_run(receiver, exporters, select=select, **options)
        return done, arrived_once(receiver)


def agent_span(spans: list[ReceivedSpan]) -> ReceivedSpan:
    """The run's one agent span."""
    (agent,) = (s for s in spans if s.name.startswith("invoke_agent"))
    return agent


def test_it_is_a_post_instrument_hook_and_no_configurator() -> None:
    """opentelemetry-instrument finds the hook; otel-stall registers no configurator of its own.

    A second configurator is what made every auto-instrumented app print "Configuration
    of ... not loaded" about otel-stall (issue 29).
    """
    found = {ep.name: ep for ep in entry_points(group="opentelemetry_post_instrument")}
    assert found["otel_stall"].load() is post_instrument
    ours = distribution("otel-stall").entry_points
    assert not [ep for ep in ours if ep.group == "opentelemetry_configurator"]


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


def test_install_in_the_app_returns_the_configurators_processor() -> None:
    """install() in an auto-instrumented app adds nothing: each span still leaves once, enriched."""
    done, spans = exported(prelude=INSTALL)
    assert done.stdout.splitlines()[0] == "StallSpanProcessor"
    assert agent_span(spans).attributes["stall.verdict"] == "break"
    findings = [
        (e.attributes["stall.kind"], e.attributes["stall.seq"]) for e in agent_span(spans).events
    ]
    assert len(findings) == len(set(findings)) > 0  # not added by two processors


def test_selected_its_metrics_reach_the_sdks_meter_provider() -> None:
    """The processor's counters go to the meter provider the SDK's set-up made."""
    done, spans = exported(metrics="console")
    agent = agent_span(spans)
    totals = counter_totals(done.stdout)
    assert totals["stall.tool_calls"] == ROUNDS
    assert totals["stall.runs"] == 1
    # Every finding is counted; the refusals among them get no event, and are counted on the run.
    refusals = agent.attributes.get("stall.refusals", 0)
    assert totals["stall.findings"] == len(agent.events) + refusals > refusals


def test_with_the_recording_sampler_a_run_nobody_exports_is_still_detected() -> None:
    """OTEL_TRACES_SAMPLER=otel_stall_parentbased_traceidratio at 0: nothing leaves, all is seen."""
    sampler = ("otel_stall_parentbased_traceidratio", "0")
    with GrpcReceiver() as receiver:
        done = instrumented_run(
            receiver, "otlp", select="switch", metrics="console", sampler=sampler
        )
        assert receiver.spans() == []
    totals = counter_totals(done.stdout)
    assert totals["stall.tool_calls"] == ROUNDS
    assert totals["stall.runs"] == 1
    assert totals["stall.findings"] > 0


@pytest.mark.skipif(not API_EMITS_EVENTS, reason="this Logs API emits no named events")
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


def test_not_selected_it_is_the_sdks_set_up_and_says_nothing() -> None:
    """Installed but not chosen: spans leave as the distro sends them, and nothing is said.

    The distro's configurator is the only one found, so no "not loaded" line names otel-stall.
    """
    done, spans = exported(select=None)
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)
    assert "otel_stall" not in done.stderr
    assert "otel-stall" not in done.stderr
    assert "not loaded" not in done.stderr


def test_the_old_configurator_name_still_wraps_and_names_the_new_switch() -> None:
    """The old configurator name still selects otel-stall, and stderr names the new switch.

    It matches no configurator now, which would leave the SDK unset and every span
    unexported: otel-stall runs the SDK's set-up itself, then wraps it.
    """
    done, spans = exported(select="legacy")
    assert agent_span(spans).attributes["stall.verdict"] == "break"
    assert f"{SWITCH}=true" in done.stderr


def test_a_bad_setting_leaves_the_spans_exported_and_says_which() -> None:
    """A wrong OTEL_STALL_* value fails open: every span still leaves, plain; stderr names it."""
    done, spans = exported(extra_env={"OTEL_STALL_MAX_RUNS": "lots"})
    assert not any(k.startswith("stall.") for s in spans for k in s.attributes)
    assert "OTEL_STALL_MAX_RUNS" in done.stderr
    assert "exported without otel-stall" in done.stderr


def test_unselected_the_hook_imports_nothing_of_the_processor() -> None:
    """opentelemetry-instrument loads every hook in every app: unselected, ours stays free."""
    probe = (
        "import sys\n"
        "from otel_stall.live.auto_instrument import post_instrument\n"
        "post_instrument()\n"
        "heavy = ('otel_stall.live.', 'opentelemetry.sdk')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    loaded = run_python(["-c", probe]).stdout.strip()
    assert loaded == "['otel_stall.live.auto_instrument']"
