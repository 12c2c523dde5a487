"""The peer-scenario fixtures (issue #19): generated, listed in the manifest, readable as runs.

These tests keep ``tests/peers`` honest as data; they assert no verdicts. The
detection work for #19 adds the test that every scenario gets what its
manifest entry expects.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_stall import replay
from otel_stall.offline.report import run_json

PEERS = Path(__file__).parent.parent / "peers"
GENERATED_SUFFIXES = {".jsonl", ".toml"}
JUDGEMENTS = {"stuck", "not_stuck"}
EXPECTS = {"warn_or_above", "ok"}
BASES = {"behaviour", "threshold", "stream_reset", "rule_scope"}
SOURCES = {
    "openhands": "https://github.com/All-Hands-AI/OpenHands/blob/",
    "gemini_cli": "https://github.com/google-gemini/gemini-cli/blob/",
    "roo_code": "https://github.com/RooCodeInc/Roo-Code/blob/",
}


def _load_manifest() -> dict[str, Any]:
    # tomllib is 3.11+; the project depends on its backport tomli before that.
    toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    manifest: dict[str, Any] = toml.loads((PEERS / "manifest.toml").read_text("utf-8"))
    return manifest


MANIFEST = _load_manifest()
SCENARIOS: list[dict[str, Any]] = MANIFEST["scenario"]


def _mapped(judgement: str) -> str:
    return "warn_or_above" if judgement == "stuck" else "ok"


def test_committed_fixtures_are_what_the_script_writes(tmp_path: Path) -> None:
    """The committed fixtures and manifest are exactly what generate_peers.py writes."""
    subprocess.run(
        [sys.executable, str(PEERS / "generate_peers.py"), str(tmp_path)], check=True, timeout=120
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(PEERS)
        for p in PEERS.rglob("*")
        if p.is_file() and p.suffix in GENERATED_SUFFIXES
    )
    assert generated == committed
    for rel in generated:
        assert (tmp_path / rel).read_bytes() == (PEERS / rel).read_bytes(), rel


def test_manifest_lists_every_fixture_once() -> None:
    """Each fixture file has exactly one manifest entry, and each entry's file exists."""
    files = sorted(str(p.relative_to(PEERS)) for p in PEERS.rglob("*.jsonl"))
    listed = [s["file"] for s in SCENARIOS]
    assert sorted(listed) == files
    assert len({s["id"] for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_manifest_entry_is_complete(scenario: dict[str, Any]) -> None:
    """An entry names the peer's judgement, #19's expectation, its basis and its source test."""
    assert scenario["file"] == f"{scenario['id']}.jsonl"
    assert scenario["id"].startswith(f"{scenario['peer']}/")
    assert scenario["judgement"] in JUDGEMENTS
    assert scenario["expect"] in EXPECTS
    assert scenario["basis"] in BASES
    assert scenario["source"].startswith(SOURCES[scenario["peer"]])
    for key in ("rule", "description", "test"):
        assert scenario[key].strip(), key
    for run in scenario.get("runs", []):
        assert run["judgement"] in JUDGEMENTS
        assert run["expect"] in EXPECTS


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_an_expectation_against_the_peer_says_why(scenario: dict[str, Any]) -> None:
    """Where #19 expects other than the peer's judgement mapped, the entry explains the conflict."""
    disagree = scenario["expect"] != _mapped(scenario["judgement"])
    disagree |= any(r["expect"] != _mapped(r["judgement"]) for r in scenario.get("runs", []))
    if disagree:
        assert scenario.get("conflict", "").strip()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_fixture_replays_into_its_runs(scenario: dict[str, Any]) -> None:
    """Replay reads every span without error and finds the runs the manifest lists."""
    path = PEERS / scenario["file"]
    result = replay(str(path))
    assert result.errors == []
    assert result.spans == len(path.read_bytes().splitlines())
    runs = [run_json(r) for r in result.reports]
    listed = scenario.get("runs", [])
    if listed:
        assert sorted(r["run_span_id"] for r in runs) == sorted(r["run_span_id"] for r in listed)
    else:
        assert len(runs) == 1


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s["id"])
def test_every_tool_span_is_a_tool_call(scenario: dict[str, Any]) -> None:
    """The GenAI conventions read each execute_tool span as one tool call of a run."""
    lines = (PEERS / scenario["file"]).read_bytes().splitlines()
    spans = [
        span
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    ]
    tool_spans = sum(1 for s in spans if s["name"].startswith("execute_tool "))
    result = replay(str(PEERS / scenario["file"]))
    assert sum(r.tool_calls for r in result.reports) == tool_spans
