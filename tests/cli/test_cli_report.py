"""`otel-stall replay`'s report options and `otel-stall demo`, through main([...]) and a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from otel_stall.cli import main

ROOT = Path(__file__).parent.parent.parent
GOLDEN = str(ROOT / "tests" / "golden" / "formats" / "otlp.jsonl")
LOOP = str(ROOT / "tests" / "fixtures" / "loop.jsonl")


def replay(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["replay", GOLDEN, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "shown", "hidden"),
    [
        (["--format", "table"], ["researcher", "run"], ["librarian"]),
        (["--format", "table", "--all"], ["researcher", "run", "librarian"], []),
        (["--format", "table", "--limit", "1"], ["researcher", "1 of 2"], ["librarian"]),
        (["--format", "markdown", "--limit", "1"], ["## researcher"], ["## run", "librarian"]),
    ],
)
def test_all_and_limit_choose_what_the_table_lists(
    args: list[str], shown: list[str], hidden: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Stalled runs by default, every run with --all, at most N with --limit."""
    code, out, _ = replay(args, capsys)
    assert code == 1
    for text in shown:
        assert text in out
    for text in hidden:
        assert text not in out


def test_report_file_takes_its_format_from_the_extension(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-o report.html writes one HTML page and nothing to stdout; .json writes the JSON."""
    page, doc = tmp_path / "report.html", tmp_path / "report.json"
    assert replay(["-o", str(page)], capsys)[1] == ""
    assert page.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert replay(["--report", str(doc)], capsys)[1] == ""
    assert len(json.loads(doc.read_text())["runs"]) == 3


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--limit", "-1"], "--limit"),
        (["--limit", "many"], "--limit"),
        (["-o", "/nonexistent/dir/report.html"], "--report /nonexistent/dir/report.html"),
        (["--threshold", "2", "--warn-at", "3"], "--threshold: must be at least --warn-at (3)"),
    ],
)
def test_bad_report_options_exit_2_naming_the_flag(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Errors name the flag the user typed (never break_at), and exit 2."""
    code, _, err = replay(args, capsys)
    assert code == 2
    assert named in err
    assert "break_at" not in err
    assert "Traceback" not in err


def test_a_setting_from_the_config_file_keeps_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """warn_at set in the file is named warn_at; break_at set by --threshold is --threshold."""
    config = tmp_path / "policy.toml"
    config.write_text("warn_at = 4\n")
    code, _, err = replay(["--threshold", "2", "--config", str(config)], capsys)
    assert code == 2
    assert "--threshold: must be at least warn_at (4)" in err


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m otel_stall demo`, with its temporary files confined to ``tmp_path / "tmp"``."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(scratch), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "otel_stall", "demo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_demo_researcher_stops_at_break_and_leaves_no_temp_folder(tmp_path: Path) -> None:
    """The gate refuses the repeat; the researcher stops at break, with guidance; no temp left."""
    done = demo(tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert list((tmp_path / "tmp").iterdir()) == []
    assert out.count("refused by the gate; the model is told:") == 1
    assert "refused again" in out
    assert "stopped: the run reached break; the model is told:" in out
    assert "Stop repeating refused calls" in out
    assert '{"url": "https://docs.example.com/otel/spans"}' in out
    rounds = [line for line in out.splitlines() if line.startswith("  round ")]
    assert len(rounds) < 12  # it stopped before its last round
    assert "stall score" in out
    # the gate refused calls 3 to 7: the score counts them, and the stall began at 3
    assert "5 of 7 tool calls repeated or refused" in out
    assert "stalled from seq 3" in out
    assert "wasted since the stall began: 5 tool calls, 5 model calls" in out
    # the live narration and the replay say the same
    assert "the stall began at call 3; wasted since: 5 tool calls, 5 model calls" in out


def test_demo_capture_keeps_the_spans(tmp_path: Path) -> None:
    """--capture FILE keeps the captured spans there, and the report says where."""
    capture = tmp_path / "spans.jsonl"
    done = demo(tmp_path, "--capture", str(capture))
    assert done.returncode == 0, done.stderr
    assert capture.stat().st_size > 0
    assert str(capture) in done.stdout


def test_demo_live_findings_are_collapsed(tmp_path: Path) -> None:
    """Each rule's findings on the looping call print as one line, the refusals included."""
    out = demo(tmp_path).stdout
    live = out[out.index("Live findings") : out.index("The spans")]
    lines = [line for line in live.splitlines()[1:] if line.strip()]
    kinds = [line.split()[1] for line in lines]
    assert kinds.count("duplicate_call") == 1
    assert len(kinds) == len(set(kinds))
