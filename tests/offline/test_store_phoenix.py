"""``otel-stall replay URL`` against a real Phoenix, started on loopback (the phoenix extra).

Spans are sent to it with the real OTLP exporter (``replay --export-otlp``),
then read back through its REST API by URL: the verdicts must be the file's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from phoenix_server import Phoenix, phoenix
from test_stores import GOLDEN

from otel_stall import Replayer
from otel_stall.cli import main

pytestmark = [pytest.mark.phoenix, pytest.mark.e2e]


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden traces without their bytes attributes, which Phoenix cannot store."""
    path = tmp_path_factory.mktemp("phoenix") / "golden.jsonl"
    lines = []
    for line in GOLDEN.read_bytes().splitlines():
        doc = orjson.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    attrs = span.get("attributes", [])
                    span["attributes"] = [a for a in attrs if "bytesValue" not in a["value"]]
        lines.append(orjson.dumps(doc))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.fixture(scope="module")
def loaded(sent: Path) -> Phoenix:
    """A Phoenix holding those traces, sent by the real OTLP/HTTP exporter."""
    server = phoenix()
    code = main(["replay", str(sent), "--export-otlp", server.traces_endpoint, "--format", "json"])
    assert code in (0, 1)
    server.wait_for_spans(Replayer().analyse([str(sent)]).spans)
    return server


def _replay(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any, str]:
    code = main(["replay", *argv, "--format", "json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, err


def _verdicts(report: Any) -> dict[str, tuple[str, int]]:
    return {r["trace_id"]: (r["verdict"], r["tool_calls"]) for r in report["runs"]}


def _golden(sent: Path) -> dict[str, tuple[str, int]]:
    result = Replayer().analyse([str(sent)])
    return {str(r.attributes["trace_id"]): (r.verdict.value, r.tool_calls) for r in result.reports}


@pytest.mark.parametrize("endpoint", ["spans", "spans/otlpv1"])
def test_a_phoenix_project_replays_like_the_file(
    loaded: Phoenix, sent: Path, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every span of the project, paged by cursor (10 a page): the verdicts of the file."""
    url = f"{loaded.url}/v1/projects/default/{endpoint}?limit=10"
    code, report, err = _replay([url], capsys)
    assert _verdicts(report) == _golden(sent), err
    assert code == 1
    assert report["summary"]["spans"] == Replayer().analyse([str(sent)]).spans


def test_a_phoenix_filter_gives_the_looping_runs_trace(
    loaded: Phoenix, sent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``attribute=stall.verdict:break`` matches the run span; its whole trace is replayed."""
    url = f"{loaded.url}/v1/projects/default/spans?attribute=stall.verdict:break"
    code, report, err = _replay([url], capsys)
    broken = {t: v for t, v in _golden(sent).items() if v[0] == "break"}
    assert broken
    assert _verdicts(report) == broken, err
    assert code == 1


def test_a_phoenix_ui_trace_url_replays_that_trace(
    loaded: Phoenix, sent: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The UI's ``/projects/<id>/traces/<trace id>`` reads that trace through the REST API."""
    project = next(p for p in loaded.get("/v1/projects")["data"] if p["name"] == "default")
    trace_id, verdict = next(iter(_golden(sent).items()))
    _, report, err = _replay([f"{loaded.url}/projects/{project['id']}/traces/{trace_id}"], capsys)
    assert _verdicts(report) == {trace_id: verdict}, err


def test_a_phoenix_project_that_does_not_exist_exits_2(
    loaded: Phoenix, capsys: pytest.CaptureFixture[str]
) -> None:
    """Phoenix's 404 for an unknown project: exit 2 naming the URL and the answer."""
    url = f"{loaded.url}/v1/projects/no-such-project/spans"
    code, _, err = _replay([url], capsys)
    assert code == 2
    assert f"{url}" in err
    assert "HTTP 404" in err
