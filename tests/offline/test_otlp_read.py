"""Reading stored traces: every format sniffed without flags, hostile files reported, not fatal."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_stall import Replayer, ReplayResult, replay
from otel_stall.offline.readers import NOT_A_SPAN_FILE, Format, read_units
from otel_stall.offline.report import run_json

GOLDEN = Path(__file__).parent.parent / "golden"
FORMATS = sorted((GOLDEN / "formats").iterdir())
SPANS_IN_DATASET = 40


def runs(result: ReplayResult) -> list[dict[str, Any]]:
    """Run reports without the per-file run key, sorted for comparison."""
    out = [run_json(r) for r in result.reports]
    return sorted(out, key=lambda r: (r["trace_id"] or "", r["agent"] or ""))


@pytest.fixture(scope="module")
def reference() -> ReplayResult:
    """The dataset read from plain OTLP/JSON lines."""
    result = replay(str(GOLDEN / "formats" / "otlp.jsonl"))
    assert result.errors == []
    return result


def test_golden_files_are_what_the_script_writes(tmp_path: Path) -> None:
    """The committed golden files are exactly what make_golden.py generates."""
    subprocess.run(
        [sys.executable, str(GOLDEN / "make_golden.py"), str(tmp_path)], check=True, timeout=120
    )
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(GOLDEN) for p in GOLDEN.rglob("*") if p.is_file() and p.suffix != ".py"
    )
    assert generated == committed
    for rel in generated:
        assert (tmp_path / rel).read_bytes() == (GOLDEN / rel).read_bytes(), rel


def test_reference_dataset_verdicts(reference: ReplayResult) -> None:
    """The dataset holds a looping run, a progressing run and a failing tool run."""
    verdicts = {(r.attributes["agent"], r.verdict.value) for r in reference.reports}
    assert verdicts == {("researcher", "break"), ("librarian", "ok"), (None, "escalate")}
    assert reference.spans == SPANS_IN_DATASET
    assert len(reference.traces) == 4


@pytest.mark.parametrize("path", FORMATS, ids=lambda p: p.name)
def test_every_format_gives_the_same_runs(path: Path, reference: ReplayResult) -> None:
    """Each stored format, sniffed from its bytes, yields the same runs and span count."""
    result = replay(str(path))
    assert result.errors == []
    assert result.spans == SPANS_IN_DATASET
    assert runs(result) == runs(reference)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("otlp.jsonl", Format.JSON_LINES),
        ("otlp_pretty.json", Format.JSON_DOCUMENT),
        ("otlp.binpb", Format.PROTO),
        ("otlp_zstd_messages.binpb", Format.PROTO_ZSTD),
        ("otlp.jsonl.gz", Format.JSON_LINES),
        ("otlp.binpb.zst", Format.PROTO),
        ("gzip_without_extension.dat", Format.PROTO),
    ],
)
def test_format_is_sniffed(name: str, expected: str) -> None:
    """The format is detected from content (and magic bytes), not from the file name."""
    path = GOLDEN / "formats" / name
    errors: list[Any] = []
    with path.open("rb") as stream:
        formats = {unit.format for unit in read_units(str(path), stream, errors)}
    assert formats == {expected}
    assert errors == []


def test_tool_call_format_matches_the_spans() -> None:
    """The reference JSONL tool-call file gives the researcher's verdict and ledger signatures."""
    result = replay(str(GOLDEN / "tool_calls" / "researcher.jsonl"))
    spans = replay(str(GOLDEN / "formats" / "otlp.jsonl"))
    (from_calls,) = result.reports
    (from_spans,) = [r for r in spans.reports if r.attributes["agent"] == "researcher"]
    assert from_calls.verdict == from_spans.verdict
    assert [r.signature for r in from_calls.ledger] == [r.signature for r in from_spans.ledger]
    assert [f.kind for f in from_calls.findings] == [f.kind for f in from_spans.findings]


@pytest.mark.parametrize(
    ("name", "position", "reason"),
    [
        ("truncated_last_line.jsonl", {"line": 6}, "truncated"),
        ("corrupt_length_prefix.binpb", {"offset": None}, "corrupt length prefix"),
        ("corrupt_payload.binpb", {"offset": None}, "not an OTLP protobuf traces message"),
        ("invalid_utf8.jsonl", {"line": 2}, "UTF-8"),
        ("empty_ids.jsonl", {"line": 6}, "empty traceId"),
        ("wrong_types.jsonl", {"line": 3}, "expected an integer, got 'soon'"),
        ("wrong_types.jsonl", {"line": 3}, "attributes: expected a list"),
        ("wrong_types.jsonl", {"line": 4}, "resourceSpans: expected a list"),
        ("wrong_types.jsonl", {"line": 5}, "expected an object with resourceSpans"),
    ],
)
def test_hostile_files_report_position_and_keep_the_rest(
    name: str, position: dict[str, int | None], reason: str, reference: ReplayResult
) -> None:
    """Each damage is one clear error with file and line/offset; every good span still counts."""
    path = str(GOLDEN / "hostile" / name)
    result = replay(path)
    matching = [e for e in result.errors if reason in e.message]
    assert len(matching) == 1, result.errors
    error = matching[0]
    assert error.path == path
    if "line" in position:
        assert error.line == position["line"]
    else:
        assert error.offset is not None
        assert error.offset > 0
    assert runs(result) == runs(reference)
    assert result.spans >= SPANS_IN_DATASET


@pytest.mark.parametrize("name", ["uppercase_ids.jsonl", "snake_case.jsonl"])
def test_valid_variants_are_not_errors(name: str, reference: ReplayResult) -> None:
    """Upper-case ids and snake_case keys with numeric int64 are valid: same runs, no error."""
    result = replay(str(GOLDEN / "hostile" / name))
    assert result.errors == []
    assert runs(result) == runs(reference)


def test_directory_is_read_recursively_and_errors_do_not_hide_results(
    reference: ReplayResult,
) -> None:
    """A directory replays every file; bad files' errors sit next to the good files' runs.

    The same trace stored in several files is one trace: spans are keyed by
    span id, so copies collapse instead of looking like repeats.
    """
    result = replay(str(GOLDEN))
    files = [p for p in GOLDEN.rglob("*") if p.is_file()]
    assert result.files == len(files)
    assert {e.path for e in result.errors} >= {
        str(GOLDEN / "hostile" / "wrong_types.jsonl"),
        str(GOLDEN / "hostile" / "corrupt_payload.binpb"),
    }
    from_spans = [r for r in result.reports if r.attributes["trace_id"] is not None]
    assert sorted((r.attributes["agent"] or "", r.verdict.value) for r in from_spans) == sorted(
        (r.attributes["agent"] or "", r.verdict.value) for r in reference.reports
    )
    assert result.spans > SPANS_IN_DATASET * len(FORMATS)


def test_missing_file_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """A path that does not exist is reported and the other paths are still read."""
    missing = str(tmp_path / "nope.jsonl")
    from otel_stall import Replayer

    result = Replayer().analyse([missing, str(GOLDEN / "formats" / "otlp.jsonl")])
    assert [(e.path, e.message) for e in result.errors] == [(missing, "no such file or directory")]
    assert result.spans == SPANS_IN_DATASET


def test_empty_file_has_no_spans_and_no_errors(tmp_path: Path) -> None:
    """An empty capture is not an error."""
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    result = replay(str(path))
    assert (result.spans, result.errors, result.reports) == (0, [], [])


class Pipe(io.RawIOBase):
    """A stream that cannot seek, like stdin from a pipe: sniffed bytes must be put back."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._data.readinto(buffer)


def _spans(units: list[Any]) -> list[Any]:
    return [u.proto if u.proto is not None else u.json for u in units]


@pytest.mark.parametrize("path", FORMATS, ids=lambda p: p.name)
def test_a_file_and_a_pipe_give_the_same_units(path: Path) -> None:
    """Whether sniffing seeks back in a file or wraps a pipe, the same messages come out."""
    file_errors: list[Any] = []
    pipe_errors: list[Any] = []
    with path.open("rb") as f:
        from_file = list(read_units(str(path), f, file_errors))
    pipe = io.BufferedReader(Pipe(path.read_bytes()))
    from_pipe = list(read_units(str(path), pipe, pipe_errors))
    assert from_file
    assert [u.format for u in from_file] == [u.format for u in from_pipe]
    assert _spans(from_file) == _spans(from_pipe)
    assert file_errors == pipe_errors == []


# -- issue 20 item 5: files that are not span files, and tool calls behind other lines -----

RESEARCHER = GOLDEN / "tool_calls" / "researcher.jsonl"
NOT_SPAN_FILES: dict[str, bytes] = {
    # Its first four bytes, '"""A', read as a length prefix said 572662337 bytes.
    "module.py": b'"""A module, not a trace."""\n\nimport os\n',
    "README.md": b"# Notes\n\nNot a trace.\n",
    "image.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
    "table.csv": b"tool,args\nsearch,otel\n",
    "package.json": b'{"name": "agent", "version": "1.0.0"}\n',
    "settings.json": b'{\n  "indent": 2,\n  "tabs": false\n}\n',
    "zeros.bin": b"\x00" * 64,
}


@pytest.mark.parametrize("name", list(NOT_SPAN_FILES))
def test_a_file_that_is_not_a_span_format_is_unrecognised(name: str) -> None:
    """Other files read as one unrecognised unit, not as protobuf or JSON full of errors."""
    errors: list[Any] = []
    stream = io.BufferedReader(Pipe(NOT_SPAN_FILES[name]))
    units = list(read_units(name, stream, errors))
    assert ([u.format for u in units], errors) == ([Format.UNRECOGNISED], [])


def test_not_span_files_in_a_directory_are_skipped_not_errors(tmp_path: Path) -> None:
    """In a folder, other files are noted as skipped; named on their own, each is an error."""
    for name, data in NOT_SPAN_FILES.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "spans.jsonl").write_bytes((GOLDEN / "formats" / "otlp.jsonl").read_bytes())
    found = Replayer().analyse([str(tmp_path)])
    assert found.errors == []
    assert sorted(Path(e.path).name for e in found.skipped) == sorted(NOT_SPAN_FILES)
    assert {e.message.split(":")[0] for e in found.skipped} == {NOT_A_SPAN_FILE}
    assert found.spans == SPANS_IN_DATASET
    named = Replayer().analyse([str(tmp_path / name) for name in NOT_SPAN_FILES])
    assert (len(named.errors), named.skipped) == (len(NOT_SPAN_FILES), [])
    assert {e.message.split(":")[0] for e in named.errors} == {NOT_A_SPAN_FILE}


@pytest.mark.parametrize(
    "before",
    [
        b'{"type": "run_start", "run": "r1", "agent": "researcher"}\n',
        b'{"type": "note", "text": "resourceSpans are not in this file"}\n',
        b'{"type": "log", "level": "info", "msg": "starting"}\n' * 50,
        b'{"type": "run_start"}\n{"type": "log", "msg": "x"}\n\n{"type": "note"}\n',
    ],
    ids=["run_start", "note-naming-resourceSpans", "50-log-lines", "mixed"],
)
def test_tool_calls_behind_lines_of_other_types_are_read_as_tool_calls(
    before: bytes, tmp_path: Path
) -> None:
    """Lines of another type first (which the format skips): still the tool-call format."""
    path = tmp_path / "calls.jsonl"
    path.write_bytes(before + RESEARCHER.read_bytes())
    errors: list[Any] = []
    with path.open("rb") as stream:
        units = list(read_units(str(path), stream, errors))
    assert ([u.format for u in units], errors) == ([Format.TOOL_CALLS], [])
    result = replay(str(path))
    plain = replay(str(RESEARCHER))
    assert result.errors == []
    assert result.tool_call_events == plain.tool_call_events > 0
    (got,), (want,) = result.reports, plain.reports
    assert [r.signature for r in got.ledger] == [r.signature for r in want.ledger]
    assert got.verdict == want.verdict
