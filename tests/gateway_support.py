"""Helpers for the gateway and deployment tests (no tests here).

Spans are made by the real SDK with the demo's agents, exported by the real
OTLP exporters, received by a real gateway and a real loopback sink.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall.demo import run_looping_agent, run_progressing_agent

ROOT = Path(__file__).resolve().parent.parent

Sample = tuple[str, tuple[tuple[str, str], ...]]
"""A Prometheus sample's name and sorted labels."""


def require_tool(name: str) -> str:
    """The tool's path; skip when absent locally, fail when absent in CI (``CI=true``)."""
    path = shutil.which(name)
    if path is not None:
        return path
    message = (
        f"`{name}` is not installed (Debian package `prometheus`; `.ci/run` installs it in CI)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}: required when CI=true")
    pytest.skip(message)


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(condition: Any, timeout: float = 30.0, interval: float = 0.05) -> bool:
    """Poll ``condition()`` until it is true or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return bool(condition())


def agent_spans(loops: int, progresses: int, service: str = "agent") -> list[ReadableSpan]:
    """Finished spans of ``loops`` looping and ``progresses`` progressing demo agent runs."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for i in range(max(loops, progresses)):
        if i < loops:
            run_looping_agent(tracer)
        if i < progresses:
            run_progressing_agent(tracer)
    provider.shutdown()
    return list(memory.get_finished_spans())


def export(endpoint: str, spans: list[ReadableSpan], batch: int = 512) -> int:
    """Send spans in batches with the SDK's OTLP/gRPC exporter; spans it reported exported."""
    exporter = OTLPSpanExporter(endpoint=endpoint, insecure=True, timeout=30)
    sent = 0
    try:
        for start in range(0, len(spans), batch):
            chunk = spans[start : start + batch]
            if exporter.export(chunk) is SpanExportResult.SUCCESS:
                sent += len(chunk)
    finally:
        exporter.shutdown()
    return sent


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_prometheus(text: str) -> dict[Sample, float]:
    """Samples of a Prometheus text exposition, by name and labels."""
    out: dict[Sample, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a Prometheus sample line: {line!r}"
        name, labels, value = match.groups()
        pairs = tuple(sorted(_LABEL.findall(labels or "")))
        out[(name, pairs)] = float(value)
    return out


def scrape(url: str) -> dict[Sample, float]:
    """GET a ``/metrics`` page and parse it."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return parse_prometheus(response.read().decode())


def value(samples: dict[Sample, float], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


@contextmanager
def prometheus(
    tmp_path: Path, scrape_target: str, rules: list[Path]
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A real Prometheus on loopback scraping ``scrape_target`` every second."""
    binary = require_tool("prometheus")
    port = free_port()
    rule_lines = "\n".join(f"  - {path}" for path in rules)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"rule_files:\n{rule_lines}\n"
        "scrape_configs:\n  - job_name: otel-stall\n"
        f"    static_configs:\n      - targets: ['{scrape_target}']\n"
    )
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return process.poll() is not None

    try:
        assert wait_until(ready, timeout=60), "prometheus did not become ready"
        assert process.poll() is None, (tmp_path / "prometheus.log").read_text()
        yield base, process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
        log.close()
