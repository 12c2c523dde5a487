"""A real Phoenix on loopback, for the tests marked ``phoenix`` (the ``phoenix`` extra).

``phoenix serve`` runs as a subprocess on free ports with its own working
folder, and is waited for on ``/healthz`` with a deadline. One server serves
every test of a process (it takes tens of seconds to start); it is stopped
when the process exits. Without the package the tests skip, except under
``CI=true``, where a missing Phoenix is a failure: CI's phoenix job must run them.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

START_DEADLINE = 240.0
"""Seconds Phoenix may take to answer ``/healthz`` (its imports and migrations; CI is loaded)."""


def require_phoenix() -> None:
    """Skip without the ``phoenix`` extra; fail instead under ``CI=true``."""
    if importlib.util.find_spec("phoenix") is not None:
        return
    message = "Phoenix is not installed (pip install -e '.[test,phoenix]'; .ci/run's phoenix job)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message}: required when CI=true")
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Phoenix:
    """A running Phoenix: its HTTP base URL, its OTLP/gRPC port, its process."""

    url: str
    grpc_port: int
    process: subprocess.Popen[bytes]
    log: str

    @property
    def traces_endpoint(self) -> str:
        """Its OTLP/HTTP traces endpoint."""
        return f"{self.url}/v1/traces"

    def get(self, path: str) -> Any:
        """A JSON answer of its REST API."""
        with urllib.request.urlopen(self.url + path, timeout=10) as answer:
            return orjson.loads(answer.read())

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> Any:
        """A GraphQL answer (what its UI asks), failing the test on errors."""
        body = orjson.dumps({"query": query, "variables": variables or {}})
        request = urllib.request.Request(
            self.url + "/graphql", body, {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            out = orjson.loads(answer.read())
        assert not out.get("errors"), out["errors"]
        return out["data"]

    def spans(self, project: str = "default", **query: str) -> list[dict[str, Any]]:
        """Every span of a project (following ``next_cursor``)."""
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            params = "&".join(f"{k}={v}" for k, v in {"limit": "1000", **query}.items())
            page = self.get(f"/v1/projects/{project}/spans?{params}{cursor}")
            out += page["data"]
            if not page.get("next_cursor"):
                return out
            cursor = f"&cursor={page['next_cursor']}"

    def wait_for_spans(
        self, count: int, project: str = "default", deadline: float = 60.0
    ) -> list[dict[str, Any]]:
        """The project's spans once at least ``count`` arrived (Phoenix inserts in batches)."""
        stop = time.monotonic() + deadline
        spans: list[dict[str, Any]] = []
        while time.monotonic() < stop:
            try:
                spans = self.spans(project)
            except urllib.error.HTTPError as exc:  # 404 until the project's first span
                if exc.code != 404:
                    raise
            if len(spans) >= count:
                return spans
            time.sleep(0.25)
        raise AssertionError(f"Phoenix has {len(spans)} spans after {deadline}s, not {count}")

    def stop(self) -> None:
        """Terminate it, then kill it if it lingers."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


_RUNNING: list[Phoenix] = []


def phoenix() -> Phoenix:
    """The process's Phoenix, started on first use."""
    require_phoenix()
    if _RUNNING and _RUNNING[0].process.poll() is None:
        return _RUNNING[0]
    folder = tempfile.mkdtemp(prefix="phoenix-")
    port, grpc_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_WORKING_DIR": folder,
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = os.path.join(folder, "phoenix.log")
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "phoenix.server.main", "serve"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    server = Phoenix(f"http://127.0.0.1:{port}", grpc_port, process, log)
    atexit.register(server.stop)
    stop = time.monotonic() + START_DEADLINE
    while time.monotonic() < stop:
        if process.poll() is not None:
            with open(log, "rb") as file:
                tail = file.read()[-3000:].decode("utf-8", "replace")
            raise AssertionError(f"phoenix serve exited {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(server.url + "/healthz", timeout=2) as answer:
                if answer.status == 200:
                    _RUNNING[:] = [server]
                    return server
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.5)
    server.stop()
    raise AssertionError(f"Phoenix did not answer /healthz within {START_DEADLINE}s ({log})")
