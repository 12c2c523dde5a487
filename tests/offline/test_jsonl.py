"""The JSONL tool-call trace loader and the errors it reports."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from otel_stall import ABSENT, InputError, ModelCall, Status, ToolCall, detect, load_events
from otel_stall.offline.jsonl import looks_like_trace_line

FIXTURES = Path(__file__).parent.parent / "fixtures"
GOOD = '{"type": "tool_call", "seq": 1, "tool": "search", "args": {"q": "x"}, "result": [1]}\n'


def tool_calls(events: list[ToolCall | ModelCall]) -> list[ToolCall]:
    return [e for e in events if isinstance(e, ToolCall)]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")))
def test_every_fixture_loads_cleanly(path: Path) -> None:
    """Each hand-made fixture reads without an error and holds tool calls."""
    result = load_events(path)
    assert result.errors == []
    assert result.ok
    assert tool_calls(result.events)
    assert result.lines == len([line for line in path.read_text().splitlines() if line.strip()])


@pytest.mark.parametrize("stem", ["loop", "progress", "poll_idempotent"])
def test_examples_are_the_reference_fixtures(fixtures_dir: Path, stem: str) -> None:
    """The package's bundled examples are the same traces as the test fixtures."""
    bundled = Path(__file__).parent.parent.parent / "otel_stall" / "examples" / f"{stem}.jsonl"
    assert bundled.read_bytes() == (fixtures_dir / f"{stem}.jsonl").read_bytes()


def test_fields_map_onto_tool_calls() -> None:
    """Every field of a line reaches the ToolCall, with ok as the default status."""
    line = (
        '{"type": "tool_call", "seq": 4, "tool": "send", "args": {"to": 1}, "result": {"ok": true},'
        ' "status": "Error", "run": "r1", "exempt": true, "approval": true, "call_id": "c9",'
        ' "span_id": "ab", "start_ns": 10, "end_ns": 20}\n{"tool": "t"}\n'
    )
    first, second = load_events(io.StringIO(line), name="mem").events
    assert first == ToolCall(
        "send", {"to": 1}, {"ok": True}, Status.ERROR, "r1", 4, "c9", "ab", 10, 20, True, True
    )
    assert isinstance(second, ToolCall)
    assert (second.status, second.run_key, second.exempt) == (Status.OK, "mem", False)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        pytest.param('{"type": "tool_call", "tool": "t", "args": {}}', ABSENT, id="missing-key"),
        pytest.param('{"type": "tool_call", "tool": "t", "result": null}', None, id="null"),
        pytest.param('{"type": "tool_call", "tool": "t", "result": ""}', "", id="empty-string"),
    ],
)
def test_missing_result_is_absent_and_null_is_empty(line: str, expected: object) -> None:
    """A missing result key means not captured; ``null`` is a captured empty result."""
    (event,) = load_events(io.StringIO(line)).events
    assert isinstance(event, ToolCall)
    assert event.result is expected or event.result == expected


def test_model_calls_open_rounds() -> None:
    """``model_call`` lines become ModelCall events that open rounds in the detector."""
    text = '{"type": "model_call", "model": "m1"}\n' + GOOD + '{"type": "model_call"}\n' + GOOD
    result = load_events(io.StringIO(text))
    assert [type(e).__name__ for e in result.events] == [
        "ModelCall",
        "ToolCall",
        "ModelCall",
        "ToolCall",
    ]
    first = result.events[0]
    assert isinstance(first, ModelCall)
    assert first.model == "m1"
    (report,) = detect(result.events)
    assert [row.round for row in report.ledger] == [1, 2]


def test_other_types_and_blank_lines_are_skipped() -> None:
    """Lines of other types are ignored on purpose, blank lines are not lines."""
    text = '\n{"type": "log", "msg": "hi"}\n   \n' + GOOD
    result = load_events(io.StringIO(text))
    assert (len(result.events), result.skipped, result.lines, result.errors) == (1, 1, 2, [])


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        pytest.param('{"type": "tool_call", "tool": "t"', "invalid JSON", id="truncated"),
        pytest.param("[1, 2]", "expected a JSON object, got an array", id="array"),
        pytest.param('{"type": 3}', '"type" must be', id="type"),
        pytest.param('{"type": "tool_call"}', '"tool" must be a non-empty string', id="no-tool"),
        pytest.param('{"type": "tool_call", "tool": " "}', '"tool" must be', id="blank-tool"),
        pytest.param(
            '{"tool": "t", "status": "failed"}', "ok, error, refused, overloaded", id="status"
        ),
        pytest.param('{"tool": "t", "seq": "4"}', '"seq" must be a whole number', id="seq"),
        pytest.param('{"tool": "t", "seq": true}', '"seq" must be a whole number', id="seq-bool"),
        pytest.param('{"tool": "t", "exempt": "yes"}', '"exempt" must be true or false', id="flag"),
        pytest.param(
            '{"tool": "t", "run": [1]}', '"run" must be a string or a whole number', id="run"
        ),
        pytest.param('{"type": "model_call", "model": 5}', '"model" must be a string', id="model"),
    ],
)
def test_bad_lines_name_file_line_and_reason(line: str, reason: str) -> None:
    """A bad line is one error with the file, line number and reason; the rest goes on."""
    text = GOOD + line + "\n" + GOOD
    result = load_events(io.StringIO(text), name="trace.jsonl")
    assert len(result.events) == 2
    (error,) = result.errors
    assert (error.path, error.line) == ("trace.jsonl", 2)
    assert reason in error.message
    assert str(error).startswith("trace.jsonl:2: ")
    assert not result.ok


def test_invalid_utf8_in_a_file(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 spoil only their own line."""
    path = tmp_path / "bad.jsonl"
    path.write_bytes(GOOD.encode() + b'{"tool": "t\xff"}\n' + GOOD.encode())
    result = load_events(path)
    assert len(result.events) == 2
    (error,) = result.errors
    assert (error.path, error.line) == (str(path), 2)


def test_undecodable_text_stream_keeps_what_was_read() -> None:
    """A text stream that cannot decode stops with an error, keeping earlier events."""
    raw = io.BytesIO(GOOD.encode() * 2 + b'{"tool": "\xff"}\n' + GOOD.encode())
    result = load_events(io.TextIOWrapper(raw, encoding="utf-8"), name="s")
    (error,) = result.errors
    assert error.path == "s"
    assert "cannot read" in error.message
    assert "can't decode" in error.message
    assert len(result.events) <= 2


def test_binary_stream_and_default_name(fixtures_dir: Path) -> None:
    """A binary stream works too and errors are labelled with the stream's name."""
    with (fixtures_dir / "loop.jsonl").open("rb") as stream:
        result = load_events(stream)
    assert result.errors == []
    assert {e.run_key for e in result.events} == {str(fixtures_dir / "loop.jsonl")}


def test_unreadable_path_is_an_error_not_an_exception(tmp_path: Path) -> None:
    """A file that cannot be opened gives one error naming it."""
    missing = tmp_path / "nope.jsonl"
    result = load_events(missing)
    assert result.events == []
    (error,) = result.errors
    assert error.path == str(missing)
    assert error.line is None
    assert "cannot read" in error.message


def test_run_field_splits_runs() -> None:
    """``run`` and ``run_key`` fields put events into separate runs; others use the name."""
    text = (
        '{"tool": "a", "args": {}, "result": 1, "run": "x"}\n'
        '{"tool": "a", "args": {}, "result": 1, "run_key": 7}\n'
        '{"tool": "a", "args": {}, "result": 1}\n'
    )
    events = load_events(io.StringIO(text), name="f").events
    assert [e.run_key for e in events] == ["x", 7, "f"]
    assert [r.run_key for r in detect(events)] == ["x", 7, "f"]


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (InputError("a.jsonl", 12, None, "bad"), "a.jsonl:12: bad"),
        (InputError("a.bin", None, 4096, "bad"), "a.bin:@4096: bad"),
        (InputError("a", None, None, "gone"), "a: gone"),
    ],
)
def test_input_error_text(error: InputError, text: str) -> None:
    """An InputError prints as path, position and reason."""
    assert str(error) == text


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (GOOD, True),
        ('{"type": "model_call"}', True),
        (b'{"type": "tool_call"}', True),
        ('{"resourceSpans": []}', False),
        ("not json", False),
        ("[]", False),
    ],
)
def test_looks_like_trace_line(line: str | bytes, expected: bool) -> None:
    """Format sniffing recognises this format's lines only."""
    assert looks_like_trace_line(line) is expected


@pytest.mark.parametrize("binary", [True, False], ids=["bytes", "text"])
@pytest.mark.parametrize("long", [4096, 1 << 21], ids=["one-piece", "several-pieces"])
def test_a_line_over_max_line_is_an_error_and_the_rest_is_read(binary: bool, long: int) -> None:
    """A line longer than the cap (a bomb's endless line) is skipped by number; the others load."""
    padded = '{"type": "tool_call", "tool": "search", "args": {"q": "' + "x" * long + '"}}\n'
    text = GOOD + padded + GOOD.replace('"seq": 1', '"seq": 3')
    stream = io.BytesIO(text.encode()) if binary else io.StringIO(text)
    result = load_events(stream, name="calls.jsonl", max_line=1024)
    assert [(e.path, e.line) for e in result.errors] == [("calls.jsonl", 2)]
    assert "over the 1024 bytes cap" in result.errors[0].message
    assert "--max-message-mib" in result.errors[0].message
    assert [c.seq for c in tool_calls(result.events)] == [1, 3]


def test_a_line_exactly_at_max_line_is_read() -> None:
    """The cap counts the line's bytes before its newline: a line of exactly the cap fits."""
    line = GOOD.rstrip("\n")
    result = load_events(io.BytesIO((line + "\n" + line).encode()), max_line=len(line))
    assert (result.errors, len(result.events)) == ([], 2)
