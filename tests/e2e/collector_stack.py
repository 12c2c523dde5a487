"""A real collector tier on loopback, for the e2e tests (no tests here).

The front collector runs ``collector-config/loadbalancing.yaml``, each gateway
is ``otel-stall serve``, and each gateway's upstream is its own return
collector running ``collector-config/gateway-return.yaml``, so the file a span
lands in says which gateway carried it. The configs are the files a user
copies; only their ``${env:...}`` ports and paths are set here. Every process
is started in its own session and stopped at the end; every wait has a
deadline.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from gateway_support import free_port, scrape, value, wait_until
from otlp_sink import OtlpSink

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "collector-config"
BUILD = ROOT / "collector" / "build.sh"
DECISION_WAIT = "2s"


def collector_binary() -> Path:
    """The collector built from collector/manifest.yaml; skip (fail with CI=true) if absent."""
    given = os.environ.get("OTEL_STALL_COLLECTOR")
    if given:
        path = Path(given)
    else:
        out = subprocess.run(
            ["bash", str(BUILD), "--path"], capture_output=True, text=True, check=True, timeout=30
        )
        path = Path(out.stdout.strip())
    if os.access(path, os.X_OK):
        return path
    message = f"no collector binary at {path}: build it with collector/build.sh (`make e2e` does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}; required when CI=true")
    pytest.skip(message)


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on loopback ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Process:
    """A child process with its output in a log file; always stopped by the stack."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Signal it and wait (then kill): its exit status."""
        assert self.popen is not None
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@dataclass
class Gateway:
    """One ``otel-stall serve``; restartable on the same ports."""

    index: int
    grpc: int
    metrics: int
    upstream: int
    tmp: Path
    lives: list[Process] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics}/metrics"

    def start(self) -> None:
        script = Path(sys.executable).with_name("otel-stall")
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        argv = [
            str(script), "serve",
            f"--grpc=127.0.0.1:{self.grpc}", "--http=off",
            f"--metrics=127.0.0.1:{self.metrics}",
            f"--upstream=127.0.0.1:{self.upstream}",
            f"--decision-wait={DECISION_WAIT}",
        ]  # fmt: skip
        life = len(self.lives) + 1
        log = self.tmp / f"gateway-{self.index}.{life}.log"
        self.lives.append(Process(f"gateway-{self.index}", argv, env, log).start())
        assert wait_until(lambda: port_open(self.grpc) and port_open(self.metrics), 30), self.lives[
            -1
        ].log()

    def stop(self) -> int:
        return self.lives[-1].stop()

    def counters(self) -> dict[str, float]:
        """received, forwarded, undelivered, unenriched and break runs, from /metrics."""
        samples = scrape(self.metrics_url)
        prefix = "otel_stall_gateway_spans_"
        return {
            name: value(samples, f"{prefix}{name}_total")
            for name in ("received", "forwarded", "undelivered", "unenriched")
        } | {"break_runs": value(samples, "stall_runs_total", stall_verdict="break")}


_SUMMARY = re.compile(r"(\d+) spans received, (\d+) forwarded, (\d+) undelivered")


def exit_summary(log: str) -> dict[str, int]:
    """The counts a gateway prints as it exits."""
    match = _SUMMARY.search(log)
    assert match, log
    received, forwarded, undelivered = (int(g) for g in match.groups())
    return {"received": received, "forwarded": forwarded, "undelivered": undelivered}


def collector_metrics(port: int) -> dict[str, float]:
    """A collector's own span counters (internal telemetry, Prometheus), by name."""
    samples = scrape(f"http://127.0.0.1:{port}/metrics")
    out: dict[str, float] = {}
    for (name, labels), number in samples.items():
        if "spans" in name or "loadbalancer" in name:
            shown = ("exporter", "receiver", "endpoint", "success")
            key = name + "".join(f"{{{k}={v}}}" for k, v in labels if k in shown)
            out[key] = out.get(key, 0.0) + number
    return out


def metric(samples: dict[str, float], prefix: str, component: str = "") -> float:
    """Sum of the counters whose key starts with ``prefix`` and names ``component``."""
    return sum(v for k, v in samples.items() if k.startswith(prefix) and component in k)


@dataclass
class Collector:
    """One collector process running a config of collector-config/."""

    name: str
    telemetry: int
    ports: dict[str, int]
    process: Process

    def metrics(self) -> dict[str, float]:
        return collector_metrics(self.telemetry)


def start_collector(
    binary: Path, config: str, name: str, tmp: Path, env: dict[str, str], ports: list[int]
) -> Collector:
    """Start ``binary --config=collector-config/<config>`` and wait until its ports listen."""
    telemetry = free_port()
    prefix = "OTEL_STALL_LB" if config == "loadbalancing.yaml" else "OTEL_STALL_RETURN"
    full = {
        **os.environ,
        f"{prefix}_TELEMETRY_HOST": "127.0.0.1",
        f"{prefix}_TELEMETRY_PORT": str(telemetry),
        **env,
    }
    argv = [str(binary), f"--config={CONFIGS / config}"]
    process = Process(name, argv, full, tmp / f"{name}.log").start()
    ready = wait_until(lambda: all(port_open(p) for p in [telemetry, *ports]), 60, 0.1)
    assert ready, process.log()
    return Collector(name, telemetry, {}, process)


@dataclass
class Stack:
    """Front collector, two gateways, a return collector per gateway, a Jaeger stand-in."""

    front: Collector
    grpc: str
    http: str
    sessions: str
    gateways: list[Gateway]
    returns: list[Collector]
    files: list[Path]
    raw_file: Path
    jaeger: OtlpSink
    span_metrics: list[int]


def kill_all(processes: list[Process]) -> None:
    """The end of every test: whatever still runs is killed, the last started first."""
    for process in reversed(processes):
        process.stop(signal.SIGKILL, 10)


@contextmanager
def collector_stack(binary: Path, tmp: Path) -> Iterator[Stack]:
    """Start the whole tier on free loopback ports; stop every process at the end."""
    with ExitStack() as stack:
        jaeger = stack.enter_context(OtlpSink())
        processes: list[Process] = []
        stack.callback(kill_all, processes)
        returns: list[Collector] = []
        files: list[Path] = []
        span_metrics: list[int] = []
        gateways: list[Gateway] = []
        for index in (1, 2):
            grpc, metrics_port = free_port(), free_port()
            folder = tmp / f"enriched-{index}"
            folder.mkdir()
            files.append(folder / "enriched.jsonl")
            span_metrics.append(metrics_port)
            env = {
                "OTEL_STALL_RETURN_GRPC": f"127.0.0.1:{grpc}",
                "OTEL_STALL_RETURN_HTTP": f"127.0.0.1:{free_port()}",
                "OTEL_STALL_JAEGER_OTLP": jaeger.endpoint,
                "OTEL_STALL_SPAN_METRICS": f"127.0.0.1:{metrics_port}",
                "OTEL_STALL_ENRICHED_FILE": str(files[-1]),
            }
            name = f"return-{index}"
            collector = start_collector(binary, "gateway-return.yaml", name, tmp, env, [grpc])
            processes.append(collector.process)
            returns.append(collector)
            gateway = Gateway(index, free_port(), free_port(), grpc, tmp)
            stack.callback(kill_all, gateway.lives)
            gateway.start()
            gateways.append(gateway)
        (tmp / "spans").mkdir()
        raw = tmp / "spans" / "spans.jsonl"
        grpc, http, sessions = free_port(), free_port(), free_port()
        env = {
            "OTEL_STALL_LB_GRPC": f"127.0.0.1:{grpc}",
            "OTEL_STALL_LB_HTTP": f"127.0.0.1:{http}",
            "OTEL_STALL_LB_SESSIONS_GRPC": f"127.0.0.1:{sessions}",
            "OTEL_STALL_GATEWAY_1": gateways[0].endpoint,
            "OTEL_STALL_GATEWAY_2": gateways[1].endpoint,
            "OTEL_STALL_SPANS_FILE": str(raw),
        }
        front = start_collector(binary, "loadbalancing.yaml", "front", tmp, env, [grpc, http])
        processes.append(front.process)
        yield Stack(
            front,
            f"127.0.0.1:{grpc}",
            f"http://127.0.0.1:{http}/v1/traces",
            f"127.0.0.1:{sessions}",
            gateways,
            returns,
            files,
            raw,
            jaeger,
            span_metrics,
        )


@dataclass(frozen=True)
class FileSpan:
    """One span as the file exporter wrote it (OTLP/JSON)."""

    trace_id: str
    span_id: str
    name: str
    start: int
    attributes: dict[str, Any]


def _any_value(value: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        return int(value["intValue"])
    return value


def file_spans(path: Path) -> list[FileSpan]:
    """Every span in a file exporter's OTLP/JSON-lines output (and its rotated files)."""
    out: list[FileSpan] = []
    for part in sorted(path.parent.glob(path.stem + "*" + path.suffix)):
        for line in part.read_text().splitlines():
            if not line.strip():
                continue
            request = json.loads(line)
            for resource in request.get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    for span in scope.get("spans", []):
                        attributes = {
                            a["key"]: _any_value(a.get("value", {}))
                            for a in span.get("attributes", [])
                        }
                        out.append(
                            FileSpan(
                                span["traceId"],
                                span["spanId"],
                                span["name"],
                                int(span.get("startTimeUnixNano", 0)),
                                attributes,
                            )
                        )
    return out


Run = tuple[str, str, str]
"""A replayed run: its trace id, agent and verdict (``-`` for none: a session's run)."""


def replay_verdicts(*paths: Path) -> list[Run]:
    """``otel-stall replay --format json`` on ``paths``: every run, sorted."""
    script = Path(sys.executable).with_name("otel-stall")
    result = subprocess.run(
        [str(script), "replay", "--format", "json", "--fail-on", "break", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    assert report["errors"] == [], report["errors"]
    return sorted((r["trace_id"] or "-", r["agent"] or "-", r["verdict"]) for r in report["runs"])


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        text: str = response.read().decode()
        return text


def sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))
