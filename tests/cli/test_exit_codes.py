"""docs/reference/exit-codes.md, row by row: each situation is run through the command line.

The table is read from the page, so it cannot drift from the program: a row
without a case here, or a case without a row, fails; so does a row whose exit
code or printed text is not what ``otel_stall.cli.main`` gives.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from test_replay_attacks import replay_child, zstd_document_bomb

from otel_stall.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "reference" / "exit-codes.md"
GOLDEN = ROOT / "tests" / "golden"
FIXTURES = ROOT / "tests" / "fixtures"
OTLP = GOLDEN / "formats" / "otlp.jsonl"
MIB = 1 << 20


def table() -> dict[str, tuple[int, list[str], bool]]:
    """The page's rows: situation -> (exit code, quoted texts, whether nothing is written).

    The quoted texts are those in backticks in "What is printed"; a row that says
    "nothing is written" promises that no file is created or changed.
    """
    rows = {}
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].isdigit():
            continue
        texts = re.findall(r"`([^`]+)`", cells[2])
        rows[cells[0]] = (int(cells[1]), texts, "nothing is written" in cells[2])
    return rows


def files(tmp: Path) -> dict[str, bytes]:
    """Every file under ``tmp``, hidden ones too, with its bytes."""
    return {str(p.relative_to(tmp)): p.read_bytes() for p in tmp.rglob("*") if p.is_file()}


ROWS = table()

Case = Callable[[Path], list[str]]
"""Builds the situation's files under a tmp dir and returns the command line's arguments."""


def clean(tmp: Path) -> list[str]:
    return ["replay", str(FIXTURES / "progress.jsonl")]


def stalled(tmp: Path) -> list[str]:
    return ["replay", str(FIXTURES / "loop.jsonl")]


def bad_line(tmp: Path) -> list[str]:
    path = tmp / "truncated.jsonl"
    path.write_bytes((GOLDEN / "hostile" / "truncated_last_line.jsonl").read_bytes())
    return ["replay", str(path)]


def no_spans(tmp: Path) -> list[str]:
    (tmp / "empty.jsonl").write_bytes(b"")
    (tmp / "nothing").mkdir()
    return ["replay", str(tmp / "empty.jsonl"), str(tmp / "nothing")]


def named_not_spans(tmp: Path) -> list[str]:
    path = tmp / "README.md"
    path.write_text("# Notes\n\nNot a trace.\n")
    return ["replay", str(path)]


def found_not_spans(tmp: Path) -> list[str]:
    (tmp / "README.md").write_text("# Notes\n\nNot a trace.\n")
    (tmp / "run.jsonl").write_bytes((FIXTURES / "progress.jsonl").read_bytes())
    return ["replay", str(tmp)]


def out_over_input(tmp: Path) -> list[str]:
    path = tmp / "in.jsonl"
    path.write_bytes(OTLP.read_bytes())
    return ["replay", str(path), "--out", str(path)]


def out_in_input_dir(tmp: Path) -> list[str]:
    (tmp / "in.jsonl").write_bytes(OTLP.read_bytes())
    return ["replay", str(tmp), "--out", str(tmp / "enriched.jsonl")]


def report_over_input(tmp: Path) -> list[str]:
    path = tmp / "in.jsonl"
    path.write_bytes(OTLP.read_bytes())
    return ["replay", str(path), "--report", str(path)]


def over_the_cap(tmp: Path) -> list[str]:
    path = tmp / "bomb.jsonl.gz"
    filler = gzip.compress(b"abcdefgh" * (MIB // 8))  # gzip members, one after another
    head = gzip.compress(OTLP.read_bytes() + b'{"resourceSpans":[{"x":"')
    path.write_bytes(head + filler * 129 + gzip.compress(b'"}]}\n'))
    return ["replay", str(path)]


def cut_short(tmp: Path) -> list[str]:
    data = gzip.compress(OTLP.read_bytes())
    path = tmp / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    return ["replay", str(path)]


def missing(tmp: Path) -> list[str]:
    return ["replay", str(tmp / "nope.jsonl")]


def export_fails(tmp: Path) -> list[str]:
    return ["replay", str(OTLP), "--export-otlp", "http://127.0.0.1:1/v1/traces"]


def bad_flag(tmp: Path) -> list[str]:
    return ["replay", str(OTLP), "--fail-on", "never"]


CASES: dict[str, Case] = {
    "Every run's verdict is below `--fail-on`": clean,
    "A run's verdict is at or above `--fail-on`": stalled,
    "A line, message or span that cannot be read; the rest of the input is read": bad_line,
    "No spans at all: an empty file, an empty directory, empty standard input": no_spans,
    "A file named on the command line that is not a span file": named_not_spans,
    "A file found in a directory that is not a span file: skipped, the exit code comes "
    "from the other files": found_not_spans,
    "`--out` names an input (or another name of it), which it would overwrite": out_over_input,
    "`--out` is inside an input directory, where it would be read as input": out_in_input_dir,
    "`--report` names an input, which it would overwrite": report_over_input,
    "A line, JSON document or (inflated) message over the cap, such as a compression bomb": (
        over_the_cap
    ),
    "A `.gz` or `.zst` file cut short: the spans before the cut are reported": cut_short,
    "A path that does not exist": missing,
    "`--export-otlp` could not deliver every span": export_fails,
    "Bad flags or settings": bad_flag,
}
"""Situations run in this process through ``main``; the out-of-memory row runs in a child."""
OUT_OF_MEMORY = "Replay runs out of memory"


def test_every_row_has_a_case_and_every_case_a_row() -> None:
    """The table and the cases list the same situations."""
    assert set(ROWS) == {*CASES, OUT_OF_MEMORY}


@pytest.mark.parametrize("situation", list(CASES), ids=[c.__name__ for c in CASES.values()])
def test_the_row_is_what_the_command_line_does(
    situation: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The row's exit code, and each text it quotes on standard error."""
    code, texts, nothing_written = ROWS[situation]
    args = CASES[situation](tmp_path)
    before = files(tmp_path)
    got = main([*args, "--format", "json"])
    err = capsys.readouterr().err
    assert got == code, err
    for text in texts:
        assert text in err
    if nothing_written:
        assert files(tmp_path) == before


def test_running_out_of_memory_is_the_row_it_says(tmp_path: Path) -> None:
    """A child with too little memory for a raised cap: the row's code and text."""
    code, texts, _ = ROWS[OUT_OF_MEMORY]
    path = zstd_document_bomb(tmp_path)
    got, _, err, _ = replay_child([str(path), "--max-message-mib", "1024"], 768 * MIB)
    assert got == code, err
    for text in texts:
        assert text in err
