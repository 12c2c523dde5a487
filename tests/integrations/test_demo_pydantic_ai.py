"""`otel-stall demo --framework pydantic-ai`: the looping researcher as a real pydantic-ai agent."""

from __future__ import annotations

import json
from pathlib import Path

import integration_support
import pytest

pytestmark = pytest.mark.integrations
integration_support.require("pydantic_ai")

from otel_stall.cli import main  # noqa: E402


def _demo(capture: Path, capsys: pytest.CaptureFixture[str], framework: str) -> str:
    assert (
        main(["demo", "--framework", framework, "--capture", str(capture), "--format", "json"]) == 0
    )
    return capsys.readouterr().out


def test_demo_runs_the_pydantic_ai_agent_with_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The researcher's repeats are refused by StallGuard, it answers without tools, and replays."""
    capture = tmp_path / "spans.jsonl"
    out = _demo(capture, capsys, "pydantic-ai")
    narration = out[: out.index("\n{\n")]
    assert "A pydantic-ai researcher agent" in narration
    assert narration.count(": ran\n") == 2, "search and the first fetch ran"
    assert "refused by the gate; the model is told:\n      Refused: `fetch`" in narration
    assert "stopped: the next request has no tools" in narration
    assert "answer: From https://docs.example.com/otel/spans: Spans describe one operation." in out
    report = json.loads(out[out.index("\n{\n") + 1 :])
    assert sorted(r["verdict"] for r in report["runs"]) == ["break", "ok"]
    spans = [json.loads(line) for line in capture.read_text().splitlines()]
    assert spans, "the captured spans are pydantic-ai's own"
    assert "logfire.msg" in json.dumps(spans), "pydantic-ai's instrumentation made them"


def test_auto_picks_pydantic_ai_when_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--framework auto` runs the pydantic-ai agent here; the default stays the simulated one."""
    assert "A pydantic-ai researcher agent" in _demo(tmp_path / "a.jsonl", capsys, "auto")
    assert "A simulated researcher agent" in _demo(tmp_path / "s.jsonl", capsys, "simulated")
    assert main(["demo", "--capture", str(tmp_path / "d.jsonl")]) == 0
    assert "A simulated researcher agent" in capsys.readouterr().out
