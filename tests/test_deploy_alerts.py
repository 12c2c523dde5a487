"""Alert rules and dashboards: promtool unit tests, and every metric and label is live.

The metric names are not copied into this test: a real gateway receives real
traces (a looping agent, a failing tool, a healthy agent, garbage input) and
its ``/metrics`` page is what the rules and dashboards are checked against.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from gateway_support import agent_spans, export, parse_prometheus, require_tool, wait_until
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from otel_stall.gateway import Gateway, GatewayConfig

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "deploy" / "prometheus" / "rules"
RULES = RULES_DIR / "otel-stall.rules.yml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "tests" / "otel-stall.rules.test.yml"
GRAFANA_ALERTS = ROOT / "deploy" / "grafana" / "provisioning" / "alerting" / "otel-stall-alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "otel-stall.json"
PROMETHEUS_ADDS = frozenset({"job", "instance"})
"""Labels Prometheus attaches to every scraped sample."""

Live = dict[str, dict[str, set[str]]]
"""Metric name -> label name -> values seen."""


def prometheus_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return rules


def grafana_rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = yaml.safe_load(GRAFANA_ALERTS.read_text())["groups"][0]["rules"]
    return rules


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def all_exprs() -> list[str]:
    return (
        [r["expr"] for r in prometheus_rules()]
        + [r["data"][0]["model"]["expr"] for r in grafana_rules()]
        + dashboard_exprs()
    )


def normalise(expr: str) -> str:
    return " ".join(expr.split())


_GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?(\s*\()?")
_KEYWORDS = frozenset({"and", "or", "unless", "offset", "bool", "group_left", "group_right"})


def selectors(expr: str) -> tuple[list[tuple[str, list[tuple[str, str, str]]]], set[str]]:
    """The metric selectors (name and matchers) and the grouping labels of a PromQL expr."""
    grouping = {
        label.strip() for labels in _GROUPING.findall(expr) for label in labels.split(",")
    } - {""}
    text = _GROUPING.sub(" ", expr)
    text = re.sub(r"\[[0-9smhdwy:]+\]", " ", text)
    text = re.sub(r"\boffset\s+[0-9smhdwy]+", " ", text)
    found = []
    for name, matchers, call in _SELECTOR.findall(text):
        if call or name in _KEYWORDS or re.fullmatch(r"[0-9.e]+", name):
            continue
        found.append((name, _MATCHER.findall(matchers)))
    return found, grouping


def failing_tool_spans() -> list[Any]:
    """An agent whose tool fails six times in a row: a `failures` finding, action escalate.

    Its model calls report token usage, so the tokens after the escalation are counted.
    """
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span(
        "invoke_agent deployer",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "deployer"},
    ):
        for attempt in range(6):
            usage = {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40}
            with tracer.start_as_current_span(
                "chat", attributes={"gen_ai.operation.name": "chat", **usage}
            ):
                pass
            with tracer.start_as_current_span(
                "execute_tool deploy",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "deploy",
                    "gen_ai.tool.call.arguments": json.dumps({"attempt": attempt}),
                },
            ) as span:
                span.set_status(StatusCode.ERROR, "connection refused")
    provider.shutdown()
    return list(memory.get_finished_spans())


@pytest.fixture(scope="module")
def live() -> Live:
    """Metric names, labels and values from a real gateway's /metrics after real traffic."""
    config = GatewayConfig(
        grpc="127.0.0.1:0", http="127.0.0.1:0", metrics="127.0.0.1:0", upstream=None,
        max_spans=30, decision_wait=0.5,
    )  # fmt: skip
    with Gateway(config) as gateway:
        assert gateway.grpc_endpoint is not None
        assert gateway.http_endpoint is not None
        assert gateway.metrics_endpoint is not None
        spans = agent_spans(loops=1, progresses=1) + failing_tool_spans()
        assert export(gateway.grpc_endpoint, spans) == len(spans)
        # A trace held without its root (20 spans) leaves no room in the 30-span buffer
        # for the next whole trace, which goes through un-enriched (and is counted).
        held = [s for s in agent_spans(loops=1, progresses=0) if s.parent is not None]
        assert export(gateway.grpc_endpoint, held[:20]) == 20
        assert export(gateway.grpc_endpoint, agent_spans(loops=1, progresses=0)) > 0
        request = urllib.request.Request(
            gateway.http_endpoint,
            data=b"\xff\x00garbage",
            headers={"Content-Type": "application/x-protobuf"},
        )
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(request, timeout=10)
        assert wait_until(lambda: gateway.pipeline.buffer.spans == 0)
        with urllib.request.urlopen(gateway.metrics_endpoint, timeout=10) as response:
            samples = parse_prometheus(response.read().decode())
    out: Live = {}
    for (name, labels), _value in samples.items():
        metric = out.setdefault(name, {})
        for label, label_value in labels:
            metric.setdefault(label, set()).add(label_value)
    return out


def test_promtool_checks_the_rules() -> None:
    """`promtool check rules` accepts the rule file."""
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_the_rules_folder_glob() -> None:
    """`promtool check rules rules/*.yml` passes: the folder holds only rule files (issue 29)."""
    promtool = require_tool("promtool")
    files = sorted(str(p) for p in RULES_DIR.glob("*.yml"))
    assert files
    result = subprocess.run(
        [promtool, "check", "rules", *files], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass() -> None:
    """`promtool test rules` runs the rule unit tests and they pass."""
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "test", "rules", RULES_TEST.name],
        cwd=RULES_TEST.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_alert_rules_are_the_documented_four() -> None:
    """The four documented alerts exist (a break pages; loop tokens are counted per hour)."""
    rules = {r["alert"]: r for r in prometheus_rules()}
    assert set(rules) == {
        "AgentStalled",
        "AgentToolFailureStreak",
        "AgentRepeatRateHigh",
        "AgentLoopTokensHigh",
    }
    assert "stall_wasted_tokens_total[1h]" in rules["AgentLoopTokensHigh"]["expr"]
    assert 'stall_action="break"' in rules["AgentStalled"]["expr"]
    assert "[5m]" in rules["AgentStalled"]["expr"]
    assert rules["AgentStalled"]["labels"]["severity"] == "page"


def test_grafana_alerts_use_the_prometheus_expressions() -> None:
    """Each Grafana alert rule queries exactly its Prometheus rule's PromQL."""
    prom = {r["alert"]: normalise(r["expr"]) for r in prometheus_rules()}
    grafana = {r["title"]: r for r in grafana_rules()}
    assert set(grafana) == set(prom)
    for title, rule in grafana.items():
        query = rule["data"][0]
        assert query["datasourceUid"] == "prometheus"
        assert normalise(query["model"]["expr"]) == prom[title]
        assert rule["for"] == next(r["for"] for r in prometheus_rules() if r["alert"] == title)


def test_dashboard_shows_every_alert_expression() -> None:
    """The dashboard's alert row plots the same expressions the alerts evaluate."""
    shown = {normalise(e) for e in dashboard_exprs()}
    for rule in prometheus_rules():
        assert normalise(rule["expr"]) in shown, rule["alert"]


def test_grafana_datasource_uids_match() -> None:
    """Alerts reference provisioned datasources; the dashboard's plugins are provisioned too."""
    path = ROOT / "deploy/grafana/provisioning/datasources/datasources.yml"
    provisioned = yaml.safe_load(path.read_text())["datasources"]
    assert {r["data"][0]["datasourceUid"] for r in grafana_rules()} <= {
        s["uid"] for s in provisioned
    }
    dashboard = json.loads(DASHBOARD.read_text())
    plugins = {i["pluginId"] for i in dashboard["__inputs"] if i["type"] == "datasource"}
    assert plugins <= {s["type"] for s in provisioned}


def _datasources(node: Any) -> list[dict[str, Any]]:
    """Every ``datasource`` object anywhere in a dashboard (panels, targets, variables)."""
    if isinstance(node, list):
        return [d for item in node for d in _datasources(item)]
    if not isinstance(node, dict):
        return []
    found = [node["datasource"]] if isinstance(node.get("datasource"), dict) else []
    return found + [d for value in node.values() for d in _datasources(value)]


def test_dashboard_imports_with_its_inputs_and_variables() -> None:
    """Importable anywhere: datasources are `__inputs` (and variables), no uid is hardcoded.

    Grafana's import replaces each ``${DS_*}`` by the datasource the user picks;
    provisioned, the datasource variables of the same names pick one. Job and
    agent are variables, and so is the Jaeger service (issue 29).
    """
    dashboard = json.loads(DASHBOARD.read_text())
    inputs = {i["name"]: i["pluginId"] for i in dashboard["__inputs"] if i["type"] == "datasource"}
    assert set(inputs.values()) == {"prometheus", "jaeger"}
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for name, plugin in inputs.items():
        assert variables[name]["type"] == "datasource"
        assert variables[name]["query"] == plugin
    used = _datasources(dashboard["panels"]) + _datasources(dashboard["templating"])
    assert used
    assert {d["uid"] for d in used} <= {"${" + name + "}" for name in inputs}
    assert all(inputs[d["uid"][2:-1]] == d["type"] for d in used)
    assert {"job", "agent", "jaeger_service"} <= set(variables)
    jaeger = [t for p in dashboard["panels"] for t in p.get("targets", []) if "service" in t]
    assert jaeger
    assert {t["service"] for t in jaeger} == {"${jaeger_service}"}


def test_dashboard_panels_read_zero_before_the_first_event() -> None:
    """An unsplit panel shows 0, not "No data", before its counter's first event."""
    dashboard = json.loads(DASHBOARD.read_text())
    unsplit = [
        t["expr"]
        for p in dashboard["panels"]
        for t in p.get("targets", [])
        if "expr" in t and " by (" not in t["expr"]
    ]
    assert unsplit
    assert [e for e in unsplit if not e.rstrip().endswith("or vector(0)")] == []


@pytest.mark.parametrize("expr", all_exprs())
def test_expression_uses_live_metrics_and_labels(live: Live, expr: str) -> None:
    """Every metric, label and matched value in the PromQL is one the gateway really emits."""
    found, grouping = selectors(expr)
    assert found, f"no metric selector found in {expr!r}"
    for name, matchers in found:
        assert name in live, f"{name} is not emitted; live metrics: {sorted(live)}"
        labels = live[name]
        for label, op, wanted in matchers:
            if label in PROMETHEUS_ADDS:
                continue  # the dashboard's $job variable: Prometheus adds it on scrape
            assert label in labels, f"{name} has no label {label}; it has {sorted(labels)}"
            if op == "=":
                assert wanted in labels[label], f"{name}{{{label}}} never is {wanted!r}"
    known = PROMETHEUS_ADDS.union(*(live[name] for name, _ in found))
    assert grouping <= known, f"grouping by unknown labels {grouping - known}"


def test_selector_extraction_sees_names_labels_and_values() -> None:
    """The PromQL reader used above finds selectors and ignores functions and keywords."""
    found, grouping = selectors(
        'sum by (job, tool) (rate(a_total{x="1", y!="2"}[5m])) / b offset 5m > 0.5 and c{z=~"q"}'
    )
    assert found == [
        ("a_total", [("x", "=", "1"), ("y", "!=", "2")]),
        ("b", []),
        ("c", [("z", "=~", "q")]),
    ]
    assert grouping == {"job", "tool"}
