"""Deployment files: compose mounts exist, and ports and endpoints agree everywhere.

Docker does not run here, so these tests check what can be checked without
it, against the gateway's real flag parser and defaults.
"""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from otel_stall.gateway import GatewayConfig, config_from_args
from otel_stall.gateway.config import DEFAULT_GRPC, DEFAULT_HTTP, DEFAULT_METRICS
from otel_stall.gateway.flags import build_parser

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR_CONFIGS = ("otelcol.yaml", "gateway-return.yaml", "loadbalancing.yaml")
_ENV = re.compile(r"\$\{env:[A-Z0-9_]+:-([^}]*)\}")
# Component names the pinned collector release deprecated, with their current names.
DEPRECATED = {"loadbalancing": "load_balancing", "spanmetrics": "span_metrics",
              "otlp": "otlp_grpc", "otlphttp": "otlp_http"}  # fmt: skip


def with_defaults(value: Any) -> Any:
    """A config with each ``${env:NAME:-default}`` replaced by its default, as compose runs it."""
    if isinstance(value, dict):
        return {k: with_defaults(v) for k, v in value.items()}
    if isinstance(value, list):
        return [with_defaults(v) for v in value]
    if isinstance(value, str):
        return _ENV.sub(lambda m: m.group(1), value)
    return value


def load(path: str) -> Any:
    return with_defaults(yaml.safe_load((ROOT / path).read_text()))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = load("docker-compose.yml")
    return data


def services(compose: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = compose["services"]
    return result


def port_of(endpoint: str) -> int:
    return int(endpoint.rpartition(":")[2])


def host_of(endpoint: str) -> str:
    return endpoint.rpartition(":")[0]


def address(value: tuple[str, int] | None) -> tuple[str, int]:
    assert value is not None
    return value


def gateway_config(compose: dict[str, Any]) -> GatewayConfig:
    command = services(compose)["otel-stall"]["command"]
    assert command[0] == "serve"
    return config_from_args(build_parser().parse_args(command[1:]))


def test_every_mounted_file_exists(compose: dict[str, Any]) -> None:
    """Each bind mount in docker-compose.yml points at a file or directory in the repo."""
    mounts = []
    for name, service in services(compose).items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                mounts.append((name, source))
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
    assert len(mounts) >= 7


def test_compose_has_the_whole_stack(compose: dict[str, Any]) -> None:
    """Collector, gateway, return collector, Jaeger, Prometheus, Grafana and a demo agent."""
    svc = services(compose)
    assert "opentelemetry-collector-contrib" in svc["otel-collector"]["image"]
    assert "opentelemetry-collector-contrib" in svc["otel-return"]["image"]
    assert svc["otel-stall"]["build"] == "."
    assert svc["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")
    assert "16686:16686" in svc["jaeger"]["ports"]
    assert svc["prometheus"]["image"].startswith("prom/prometheus")
    assert svc["grafana"]["image"].startswith("grafana/grafana")
    assert "otel-stall demo --export-otlp" in " ".join(svc["demo-agent"]["command"])
    for name, service in svc.items():
        for dependency in service.get("depends_on", []):
            assert dependency in svc, f"{name} depends on unknown service {dependency}"


def test_dockerfile_builds_the_gateway() -> None:
    """The Dockerfile installs this repo and runs `otel-stall`, exposing the default ports."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^RUN pip install \.", text, re.M)
    assert 'ENTRYPOINT ["otel-stall"]' in text
    exposed = {int(p) for p in re.findall(r"^EXPOSE (.+)$", text, re.M)[0].split()}
    assert exposed == {port_of(DEFAULT_GRPC), port_of(DEFAULT_HTTP), port_of(DEFAULT_METRICS)}
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored
    assert ".git" in ignored


def test_gateway_defaults_are_loopback_and_compose_binds_wider(compose: dict[str, Any]) -> None:
    """Loopback by default; compose binds 0.0.0.0 explicitly, on the same port numbers."""
    default = GatewayConfig.from_env(environ={})
    in_compose = gateway_config(compose)
    for name in ("grpc_address", "http_address", "metrics_address"):
        default_address = getattr(default, name)
        compose_address = getattr(in_compose, name)
        assert address(default_address)[0] == "127.0.0.1"
        assert compose_address == ("0.0.0.0", address(default_address)[1])
    listen_all = config_from_args(build_parser().parse_args(["--listen-all"]))
    assert listen_all.grpc_address == ("0.0.0.0", address(default.grpc_address)[1])


def test_agent_collector_sends_to_the_gateway(compose: dict[str, Any]) -> None:
    """otelcol.yaml's gateway exporter targets the compose service and its gRPC port."""
    collector = load("collector-config/otelcol.yaml")
    endpoint = collector["exporters"]["otlp_grpc/otel-stall"]["endpoint"]
    assert host_of(endpoint) in services(compose)
    assert port_of(endpoint) == address(gateway_config(compose).grpc_address)[1]
    exporters = load("collector-config/loadbalancing.yaml")["exporters"]
    balancer = exporters["load_balancing"]
    assert balancer["routing_key"] == "traceID"
    hostnames = balancer["resolver"]["static"]["hostnames"]
    assert len(hostnames) >= 2
    assert {port_of(h) for h in hostnames} == {port_of(DEFAULT_GRPC)}
    sessions = exporters["load_balancing/sessions"]
    assert sessions["routing_key"] == "attributes"
    assert sessions["routing_attributes"] == ["gen_ai.conversation.id"]
    assert sessions["resolver"] == balancer["resolver"]


def test_demo_agent_exports_to_the_collector(compose: dict[str, Any]) -> None:
    """The demo's --export-otlp URL is the collector's OTLP/HTTP receiver."""
    command = " ".join(services(compose)["demo-agent"]["command"])
    url = re.search(r"--export-otlp (\S+)", command)
    assert url is not None
    parts = urllib.parse.urlsplit(url.group(1))
    assert parts.hostname == "otel-collector"
    assert parts.path == "/v1/traces"
    receiver = load("collector-config/otelcol.yaml")["receivers"]["otlp"]["protocols"]
    assert port_of(receiver["http"]["endpoint"]) == parts.port
    published = services(compose)["otel-collector"]["ports"]
    assert f"{parts.port}:{parts.port}" in published


def test_gateway_upstream_is_the_return_collector(compose: dict[str, Any]) -> None:
    """The gateway's --upstream reaches gateway-return.yaml's gRPC receiver."""
    upstream = gateway_config(compose).upstream
    assert upstream is not None
    assert host_of(upstream) in services(compose)
    returned = load("collector-config/gateway-return.yaml")
    receiver = returned["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert port_of(upstream) == port_of(receiver)
    jaeger = returned["exporters"]["otlp_grpc/jaeger"]["endpoint"]
    assert host_of(jaeger) in services(compose)


def test_prometheus_scrapes_the_gateway_and_span_metrics(compose: dict[str, Any]) -> None:
    """prometheus.yml targets the gateway's /metrics port and the spanmetrics exporter."""
    config = load("deploy/prometheus/prometheus.yml")
    targets = {
        job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]
    }
    (gateway_target,) = targets["otel-stall"]
    assert host_of(gateway_target) in services(compose)
    assert port_of(gateway_target) == address(gateway_config(compose).metrics_address)[1]
    (spanmetrics_target,) = targets["otel-return-spanmetrics"]
    exporter = load("collector-config/gateway-return.yaml")["exporters"]["prometheus"]
    assert port_of(spanmetrics_target) == port_of(exporter["endpoint"])
    mounted = {v.split(":")[1] for v in services(compose)["prometheus"]["volumes"]}
    assert set(config["rule_files"]) <= mounted


def test_grafana_datasources_point_at_the_services(compose: dict[str, Any]) -> None:
    """Grafana's Prometheus and Jaeger datasources use compose service names and ports."""
    sources = load("deploy/grafana/provisioning/datasources/datasources.yml")["datasources"]
    by_type = {s["type"]: urllib.parse.urlsplit(s["url"]) for s in sources}
    assert by_type["prometheus"].hostname == "prometheus"
    assert f"{by_type['prometheus'].port}:9090" in services(compose)["prometheus"]["ports"]
    assert by_type["jaeger"].hostname == "jaeger"
    assert by_type["jaeger"].port == 16686


@pytest.mark.parametrize(
    ("config", "name", "service"),
    [
        ("otelcol.yaml", "file/replay", "otel-collector"),
        ("gateway-return.yaml", "file/enriched", "otel-return"),
    ],
)
def test_file_exporter_writes_into_the_mounted_volume(
    compose: dict[str, Any], config: str, name: str, service: str
) -> None:
    """The replay files land in a volume, with rotation on and a format replay reads."""
    exporter = load(f"collector-config/{config}")["exporters"][name]
    assert exporter["format"] in ("json", "proto")
    assert exporter["rotation"]["max_megabytes"] > 0
    assert exporter["rotation"]["max_backups"] > 0
    targets = [v.split(":")[1] for v in services(compose)[service]["volumes"]]
    assert any(exporter["path"].startswith(t + "/") for t in targets)


def manifest_release() -> str:
    """The collector release collector/manifest.yaml pins (its OTLP receiver's version)."""
    manifest = load("collector/manifest.yaml")
    (receiver,) = manifest["receivers"]
    module, version = receiver["gomod"].split()
    assert module == "go.opentelemetry.io/collector/receiver/otlpreceiver"
    return str(version)


def test_manifest_pins_one_release_and_compose_runs_it(compose: dict[str, Any]) -> None:
    """Every module of the builder manifest is at one release; compose and the docs name it."""
    release = manifest_release()
    minor = int(release.split(".")[1])
    stable = f"v1.{minor - 94}.0"  # the core's stable modules move in step: v0.161.0 <-> v1.67.0
    manifest = load("collector/manifest.yaml")
    modules = [c["gomod"] for kind in ("receivers", "processors", "exporters", "connectors",
               "providers") for c in manifest[kind]] + [manifest["telemetry"]["gomod"]]  # fmt: skip
    assert len(modules) >= 12
    for module in modules:
        assert module.split()[1] in (release, stable), module
    for name in ("otel-collector", "otel-return"):
        image = services(compose)[name]["image"]
        assert image == f"otel/opentelemetry-collector-contrib:{release.removeprefix('v')}"
    assert f"Collector **{release}**" in (ROOT / "docs" / "deployment.md").read_text()


@pytest.mark.parametrize("name", COLLECTOR_CONFIGS)
def test_collector_config_uses_current_names(name: str) -> None:
    """No component in collector-config/ goes by a name the pinned release deprecated."""
    config = load(f"collector-config/{name}")
    for section in ("receivers", "processors", "exporters", "connectors"):
        for component in config.get(section) or {}:
            kind = component.split("/")[0]
            if section == "receivers" and kind == "otlp":
                continue  # the OTLP receiver kept its name
            assert kind not in DEPRECATED, f"{name}: {component} is now {DEPRECATED[kind]}"
    assert (
        f"Tested with OpenTelemetry Collector {manifest_release()}"
        in (ROOT / "collector-config" / name).read_text()
    )


@pytest.mark.parametrize("name", COLLECTOR_CONFIGS)
def test_collector_config_is_consistent(name: str) -> None:
    """Each config starts with a header comment; pipelines use only defined components."""
    text = (ROOT / "collector-config" / name).read_text()
    assert text.startswith(f"# {name}:")
    config = yaml.safe_load(text)
    defined = {
        section: set(config.get(section) or {})
        for section in ("receivers", "processors", "exporters", "connectors")
    }
    used: set[str] = set()
    for pipeline in config["service"]["pipelines"].values():
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                known = defined[section] | defined["connectors"]
                assert component in known, f"{name}: {component} is not defined"
                used.add(component)
    assert set().union(*defined.values()) <= used, f"{name}: unused components"


def test_return_collector_samples_and_measures_stalls() -> None:
    """tail_sampling keeps stall.detected=true plus a baseline; spanmetrics has our dimensions."""
    config = load("collector-config/gateway-return.yaml")
    policies = config["processors"]["tail_sampling"]["policies"]
    by_type = {p["type"]: p for p in policies}
    assert by_type["boolean_attribute"]["boolean_attribute"] == {
        "key": "stall.detected",
        "value": True,
    }
    assert 0 < by_type["probabilistic"]["probabilistic"]["sampling_percentage"] <= 10
    dimensions = [d["name"] for d in config["connectors"]["span_metrics"]["dimensions"]]
    assert dimensions == ["stall.verdict", "stall.action", "gen_ai.tool.name"]


def test_ci_script_installs_prometheus_and_runs_make_test() -> None:
    """.ci/run is strict bash, installs prometheus, and runs the README's `make test`."""
    text = (ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in text
    assert "apt-get install" in text
    assert "prometheus" in text
    assert "DEBIAN_FRONTEND=noninteractive" in text
    assert re.search(r"^make test$", text, re.M)
    readme = (ROOT / "README.md").read_text()
    assert re.search(r"^make test\b", readme, re.M)
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^test:", makefile, re.M)


def test_ci_builds_the_collector_first_and_runs_make_e2e() -> None:
    """.ci/run starts the collector build before any install; `make e2e` runs once it is built."""
    text = (ROOT / ".ci" / "run").read_text()
    build = text.index("start_job collector collector/build.sh")
    assert build < text.index('install_packages "$')
    assert build < text.index("make .venv-uv/") < text.index("make .venv/")
    e2e = text[text.index("e2e_suite() {") : text.index("\n}\n", text.index("e2e_suite() {"))]
    assert e2e.index('"$logs/collector.ended"') < e2e.index("\n    make e2e")
    assert text.index("start_job e2e e2e_suite") > text.index("make .venv/")
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^e2e: .*\n\tcollector/build\.sh", makefile, re.M)
    assert "--ignore=tests/e2e" in makefile
