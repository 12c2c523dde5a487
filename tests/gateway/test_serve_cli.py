"""`otel-stall serve` as a user meets it: --help, bad settings, and stopping with Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

import pytest

from otel_stall.gateway.flags import build_parser

ROOT = Path(__file__).parent.parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_STALL_")}
    return subprocess.run(
        [sys.executable, "-m", "otel_stall", "serve", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _help_entries() -> dict[str, str]:
    """``--help``'s text for each flag, by flag, with its lines joined."""
    entries: dict[str, str] = {}
    flag = None
    for line in build_parser().format_help().splitlines():
        if line.startswith("  -"):
            flag = line.split()[0].rstrip(",")
            entries[flag] = line
        elif flag is not None and line.startswith("      "):
            entries[flag] += " " + line.strip()
        else:
            flag = None
    entries.pop("-h")
    return entries


HELP = _help_entries()


@pytest.mark.parametrize("flag", sorted(HELP))
def test_help_shows_the_variable_and_default_of_every_flag(flag: str) -> None:
    """Each flag's help names its OTEL_STALL_GATEWAY_* variable, and its default if it takes one."""
    text = " ".join(HELP[flag].split())
    assert "OTEL_STALL_GATEWAY_" in text.replace("OTEL_STALL_GATEWAY_ ", "OTEL_STALL_GATEWAY_")
    takes_value = len(HELP[flag].split()) > 1 and HELP[flag].split()[1].isupper()
    if takes_value:
        assert "default: " in text


def test_help_covers_every_flag() -> None:
    """No flag is left out of the check above (the list has the 25 serve flags)."""
    assert len(HELP) == 25
    assert {"--grpc", "--log-level", "--listen-all", "--no-detect", "--upstream-tls"} <= set(HELP)


def test_help_lists_the_settings_that_have_no_flag() -> None:
    """--help ends with the environment-only settings and their defaults."""
    done = serve("--help")
    assert done.returncode == 0
    assert "OTEL_STALL_GATEWAY_WORKERS" in done.stdout
    assert "default 8" in done.stdout


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--log-level", "LOUD"], {}, "--log-level"),
        ([], {"OTEL_STALL_GATEWAY_LOG_LEVEL": "loud"}, "OTEL_STALL_GATEWAY_LOG_LEVEL='loud'"),
        (["--max-traces", "0"], {}, "--max-traces: must be above 0"),
        ([], {"OTEL_STALL_GATEWAY_MAX_TRACES": "0"}, "OTEL_STALL_GATEWAY_MAX_TRACES='0'"),
        (["--max-bytes", "12x"], {}, "--max-bytes: '12x' is not a size"),
        (["--export-timeout", "soon"], {}, "--export-timeout: 'soon' is not a duration"),
        (["--tls-cert", "cert.pem"], {}, "--tls-cert: TLS needs both --tls-cert and --tls-key"),
    ],
)
def test_bad_settings_exit_2_naming_what_the_user_set(
    args: list[str], env: dict[str, str], named: str
) -> None:
    """A bad flag or variable: exit 2, one message naming the flag or variable, no traceback."""
    done = serve("--grpc=off", "--http=off", "--metrics=off", *args, env=env)
    assert done.returncode == 2, done.stderr
    assert named in done.stderr
    assert "Traceback" not in done.stderr
    assert "max_traces:" not in done.stderr or "OTEL_STALL_GATEWAY_MAX_TRACES" in done.stderr


def _plain_trace(spans: int) -> bytes:
    """One trace of plain spans as OTLP/JSON: forwarded at once, so they queue upstream."""
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "scopeSpans": [
                        {
                            "spans": [
                                {
                                    "traceId": "ab" * 16,
                                    "spanId": f"{i + 1:016x}",
                                    "name": "GET /",
                                    "startTimeUnixNano": "1",
                                    "endTimeUnixNano": "2",
                                }
                                for i in range(spans)
                            ]
                        }
                    ]
                }
            ]
        }
    ).encode()


def _read_lines(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _wait_for_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port}")


def _wait_for_line(lines: queue.Queue[str], text: str, deadline: float) -> str:
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if text in line:
            return line
    raise AssertionError(f"no log line with {text!r}")


@pytest.mark.e2e
def test_second_ctrl_c_exits_at_once_saying_what_was_not_delivered() -> None:
    """Ctrl-C logs the drain deadline; a second one ends it at once, with the undelivered count."""
    http = free_port()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_STALL_")}
    command = [sys.executable, "-m", "otel_stall", "serve", "--grpc=off", "--metrics=off"]
    command += [f"--http=127.0.0.1:{http}", f"--upstream=127.0.0.1:{free_port()}"]
    command += ["--shutdown-timeout=60s", "--export-timeout=1s"]
    process = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        text=True,
        env={**environ, "PYTHONPATH": str(ROOT)},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert process.stderr is not None
    reader = threading.Thread(target=_read_lines, args=(process.stderr, lines))
    reader.start()
    try:
        deadline = time.monotonic() + 60
        _wait_for_port(http, deadline)
        request = urllib.request.Request(
            f"http://127.0.0.1:{http}/v1/traces",
            data=_plain_trace(7),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200
        process.send_signal(signal.SIGINT)
        first = _wait_for_line(lines, "received SIGINT: stopping", deadline)
        assert "for up to 60s (until " in first
        assert "again (Ctrl-C) to exit at once" in first
        pressed = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        waited = time.monotonic() - pressed
        last = _wait_for_line(lines, "exiting now", time.monotonic() + 10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=10)
    assert code == 1
    assert waited < 10  # not the 60 s drain
    assert "7 of 7 spans received were not delivered" in last
