"""The otel-stall command line, through main([...]) and as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from otel_stall.cli import main
from otel_stall.otlp.decode import spans_from_json

GOLDEN = Path(__file__).parent.parent / "golden"
FIXTURES = Path(__file__).parent.parent / "fixtures"
JSONL = str(GOLDEN / "formats" / "otlp.jsonl")
BINARY = str(GOLDEN / "formats" / "otlp.binpb")
PROGRESS = str(FIXTURES / "progress.jsonl")
LOOP = str(FIXTURES / "loop.jsonl")

RUN_KEYS = {
    "trace_id",
    "run_span_id",
    "agent",
    "verdict",
    "stall_score",
    "tool_calls",
    "rounds",
    "wasted",
    "findings",
    "ledger",
}
FINDING_KEYS = {
    "kind",
    "action",
    "tool",
    "signature",
    "count",
    "first_seq",
    "seq",
    "round",
    "message",
    "onset_seq",
    "arguments_preview",
}
LEDGER_KEYS = {
    "seq",
    "span_id",
    "tool",
    "signature",
    "call_signature",
    "result_digest",
    "repeat_of",
    "count",
    "consecutive",
    "new_fact",
    "round",
    "status",
    "action",
}


def run_json(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], str]:
    code = main(["replay", *args, "--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_json_report_has_the_documented_shape(capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON document has runs/errors/summary with exactly the documented fields."""
    code, doc, _ = run_json([JSONL, str(GOLDEN / "hostile" / "truncated_last_line.jsonl")], capsys)
    assert code == 2
    assert set(doc) == {"runs", "errors", "summary"}
    for run in doc["runs"]:
        assert set(run) == RUN_KEYS
        for finding in run["findings"]:
            assert set(finding) == FINDING_KEYS
        for row in run["ledger"]:
            assert set(row) == LEDGER_KEYS
    (error,) = doc["errors"]
    assert set(error) == {"path", "line", "message"}
    assert error["line"] == 6
    summary = doc["summary"]
    assert {"files", "spans", "traces", "runs", "verdicts"} <= set(summary)
    assert summary["files"] == 2
    assert summary["spans"] == 80
    assert summary["verdicts"] == {"ok": 1, "warn": 0, "escalate": 1, "break": 1}


def test_binary_errors_carry_an_offset(capsys: pytest.CaptureFixture[str]) -> None:
    """Errors in binary files name a byte offset instead of a line."""
    _, doc, err = run_json([str(GOLDEN / "hostile" / "corrupt_payload.binpb")], capsys)
    (error,) = doc["errors"]
    assert set(error) == {"path", "offset", "message"}
    assert f"@{error['offset']}" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([PROGRESS], 0),
        ([LOOP], 1),
        ([LOOP, "--fail-on", "break"], 1),
        ([JSONL, "--fail-on", "break"], 1),
        ([str(FIXTURES / "failures.jsonl"), "--fail-on", "break"], 0),
        ([str(FIXTURES / "failures.jsonl"), "--fail-on", "escalate"], 1),
        ([PROGRESS, str(GOLDEN / "hostile" / "wrong_types.jsonl")], 2),
        ([str(GOLDEN / "does-not-exist.jsonl")], 2),
    ],
)
def test_exit_codes(args: list[str], expected: int, capsys: pytest.CaptureFixture[str]) -> None:
    """0 clean, 1 a stall at or above --fail-on, 2 unreadable input."""
    code, _, _ = run_json(args, capsys)
    assert code == expected


@pytest.mark.parametrize(
    "args",
    [
        ["replay"],
        ["replay", JSONL, "--format", "yaml"],
        ["replay", JSONL, "--threshold", "2", "--warn-at", "4"],
        ["replay", JSONL, "--config", "/nonexistent/policy.toml"],
        ["nosuchcommand"],
    ],
)
def test_bad_usage_exits_2_without_traceback(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad flags and bad settings exit 2 with a message on stderr."""
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err
    assert "Traceback" not in err


def test_bad_input_does_not_hide_other_files(capsys: pytest.CaptureFixture[str]) -> None:
    """A corrupt file is listed as an error and the good file's runs are still reported."""
    code, doc, err = run_json(
        [str(GOLDEN / "hostile" / "corrupt_length_prefix.binpb"), LOOP], capsys
    )
    assert code == 2
    assert "corrupt length prefix" in err
    assert len(doc["runs"]) == 4
    assert doc["summary"]["files"] == 2


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_config_file_and_flags(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--config sets policy (TOML or JSON), and --exempt/--threshold adjust it."""
    config = tmp_path / f"policy{suffix}"
    if suffix == ".toml":
        config.write_text('[policy]\nwarn_at = 2\nbreak_at = 3\nexempt_tools = ["search"]\n')
    else:
        config.write_text(json.dumps({"warn_at": 2, "break_at": 3, "exempt_tools": ["search"]}))
    _, plain, _ = run_json([LOOP], capsys)
    _, configured, _ = run_json([LOOP, "--config", str(config)], capsys)
    _, exempted, _ = run_json([LOOP, "--exempt", "search"], capsys)
    assert plain["runs"][0]["findings"]
    assert configured["runs"][0]["findings"] != plain["runs"][0]["findings"]
    assert plain["runs"][0]["verdict"] != "ok"
    assert exempted["runs"][0]["verdict"] == "ok"  # loop.jsonl loops on search only


def test_threshold_moves_the_break(capsys: pytest.CaptureFixture[str]) -> None:
    """--threshold is break_at: a higher value turns the golden break into a warning."""
    _, default, _ = run_json([JSONL], capsys)
    _, raised, _ = run_json([JSONL, "--threshold", "50", "--warn-at", "3"], capsys)
    repeat = [f for r in default["runs"] for f in r["findings"] if f["kind"] == "repeat"]
    raised_repeat = [f for r in raised["runs"] for f in r["findings"] if f["kind"] == "repeat"]
    assert {f["action"] for f in repeat} == {"warn", "break"}
    assert {f["action"] for f in raised_repeat} == {"warn"}


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_human_formats(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Table and Markdown show each run's verdict, the ledger columns and the stall score."""
    assert main(["replay", JSONL, "--format", fmt, "--all"]) == 1
    out = capsys.readouterr().out
    for text in ("researcher", "break", "repeat_of", "new_fact", "stall score", "librarian"):
        assert text in out


def test_out_writes_every_span_enriched_and_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out writes each input span once (count in == count out), with stall.* and no payloads."""
    out = tmp_path / "enriched.jsonl"
    sources = [BINARY, str(GOLDEN / "hostile" / "wrong_types.jsonl")]
    code, doc, _ = run_json([*sources, "--out", str(out), "--redact"], capsys)
    assert code == 2
    assert doc["summary"]["written"] == doc["summary"]["spans"] == 83
    lines = out.read_bytes().splitlines()
    count = sum(
        len(ss["spans"])
        for line in lines
        for rs in orjson.loads(line)["resourceSpans"]
        if isinstance(rs, dict)
        for ss in rs.get("scopeSpans", [])
    )
    assert count == 83
    records = [r for line in lines for r in spans_from_json(orjson.loads(line), lambda e: None)]
    assert sum("stall.signature" in r.attributes for r in records) == 32
    assert not any("gen_ai.tool.call.arguments" in r.attributes for r in records)


def _subprocess(args: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent.parent)}
    return subprocess.run(
        [sys.executable, "-m", "otel_stall", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_subprocess_reads_stdin_twice_for_out(tmp_path: Path) -> None:
    """`python -m otel_stall replay - --out F` spools stdin, reports, and re-exports it."""
    out = tmp_path / "out.jsonl"
    data = (GOLDEN / "formats" / "otlp.jsonl.gz").read_bytes()
    proc = _subprocess(["replay", "-", "--format", "json", "--out", str(out)], stdin=data)
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["summary"]["spans"] == doc["summary"]["written"] == 40
    assert len(out.read_bytes().splitlines()) >= 1


def test_subprocess_errors_have_no_traceback() -> None:
    """A hostile file from the command line: error lines naming the file, no Python traceback."""
    proc = _subprocess(
        ["replay", str(GOLDEN / "hostile" / "invalid_utf8.jsonl"), "--format", "json"]
    )
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert "invalid_utf8.jsonl:2:" in err
    assert "Traceback" not in err


def test_demo_runs_live_then_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo prints live findings, captures the spans to a file, and replays them."""
    capture = tmp_path / "demo.jsonl"
    assert main(["demo", "--capture", str(capture), "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert "refused by the gate" in out
    report = json.loads(out[out.index("\n{\n") + 1 :])
    assert sorted(r["verdict"] for r in report["runs"]) == ["break", "ok"]
    assert report["summary"]["spans"] == len(
        [
            r
            for line in capture.read_bytes().splitlines()
            for r in spans_from_json(orjson.loads(line))
        ]
    )


def test_demo_as_subprocess() -> None:
    """`python -m otel_stall demo` works with no server and exits 0."""
    proc = _subprocess(["demo"])
    assert proc.returncode == 0, proc.stderr
    assert b"researcher" in proc.stdout


def test_compare_two_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Compare A B: the same loop in both runs points at the prompt or tool schema."""
    tool_calls = str(GOLDEN / "tool_calls" / "researcher.jsonl")
    code = main(["compare", f"{JSONL}#researcher", tool_calls, "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["conclusion"] == "prompt_or_schema"
    assert doc["shared"]
    code = main(["compare", f"{JSONL}#researcher", f"{JSONL}#librarian", "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["conclusion"] == "model"


def test_compare_unknown_run_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Selecting a run that does not exist exits 2 with a message."""
    assert main(["compare", f"{JSONL}#nobody", JSONL]) == 2
    assert "no run found" in capsys.readouterr().err


# -- issue 20 item 5: honest answers to wrong input --------------------------------------


def _empty_stdin(tmp: Path) -> tuple[list[str], str]:
    return ["-"], "<stdin>"


def _empty_directory(tmp: Path) -> tuple[list[str], str]:
    (tmp / "empty").mkdir()
    return [str(tmp / "empty")], str(tmp / "empty")


def _blank_lines(tmp: Path) -> tuple[list[str], str]:
    (tmp / "blank.jsonl").write_bytes(b"\n  \n\n")
    return [str(tmp / "blank.jsonl")], str(tmp / "blank.jsonl")


def _both(tmp: Path) -> tuple[list[str], str]:
    (paths, where), (more, also) = _blank_lines(tmp), _empty_directory(tmp)
    return [*paths, *more], f"{where}, {also}"


@pytest.mark.parametrize(
    "case",
    [_empty_stdin, _empty_directory, _blank_lines, _both],
    ids=["empty-stdin", "empty-directory", "blank-lines", "file-and-directory"],
)
def test_no_spans_at_all_is_exit_2_naming_the_inputs_and_the_formats(
    case: Any, tmp_path: Path
) -> None:
    """Nothing to replay is bad input: exit 2, the inputs named, the formats read listed."""
    paths, where = case(tmp_path)
    proc = _subprocess(["replay", *paths, "--format", "json"], stdin=b"")
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert f"no spans found in {where};" in err
    assert "OTLP/JSON lines" in err
    assert "JSONL tool calls" in err


def test_compare_with_an_input_without_spans_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`compare` given an empty file says there is nothing to compare, exit 2."""
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert main(["compare", str(empty), JSONL]) == 2
    err = capsys.readouterr().err
    assert f"no spans found in {empty}" in err
    assert "nothing to compare" in err


@pytest.mark.parametrize("value", ["0", "1025", "lots", "1.5"])
def test_max_message_mib_outside_1_to_1024_is_a_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-message-mib takes a whole number of MiB from 1 to 1024."""
    assert main(["replay", JSONL, "--max-message-mib", value]) == 2
    assert "expected a whole number from 1 to 1024" in capsys.readouterr().err
