"""The people-facing report: a summary, the stalled runs worst first, one line per finding."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from otel_stall import ABSENT, Action, Kind, ModelCall, ReplayResult, ToolCall, detect, replay
from otel_stall.core.records import ACTION_SEVERITY
from otel_stall.offline.preview import PREVIEW_CHARS, argument_preview
from otel_stall.offline.report import (
    DEFAULT_LIMIT,
    ReportOptions,
    evidence_start,
    finding_lines,
    ledger_groups,
    render_json,
    render_markdown,
    render_table,
    score_explanation,
    select_runs,
    stall_onset,
)

GOLDEN = Path(__file__).parent.parent / "golden" / "formats" / "otlp.jsonl"
URL = "https://docs.example.com/otel/spans"


@pytest.fixture(scope="module")
def golden() -> ReplayResult:
    """The golden capture: a looping researcher, a failing deploy run, a healthy librarian."""
    return replay(str(GOLDEN))


def table(result: ReplayResult, options: ReportOptions | None = None) -> str:
    out = io.StringIO()
    render_table(result, Console(file=out, width=200, color_system=None), options)
    return out.getvalue()


@pytest.mark.parametrize("stem", ["loop", "reworded_queries", "failures", "refused_rounds"])
def test_one_line_per_rule_and_signature(
    stem: str, trace_events: Callable[[str], list[ToolCall | ModelCall]]
) -> None:
    """Each (rule, signature) is one line, standing for every finding of it, at its worst action."""
    (report,) = detect(trace_events(stem))
    lines = finding_lines(report)
    keys = [(line.kind, line.signature) for line in lines]
    assert len(keys) == len(set(keys))
    assert sum(line.times for line in lines) == len(report.findings)
    for line in lines:
        same = [
            f for f in report.findings if (f.kind.value, f.signature) == (line.kind, line.signature)
        ]
        assert ACTION_SEVERITY[line.action] == max(ACTION_SEVERITY[f.action] for f in same)
        assert line.first_seq == min(evidence_start(f) for f in same)
        assert line.last_seq == max(f.seq for f in same)
        assert line.count == max(f.count for f in same)


def test_a_looping_call_is_one_refusal_line(
    trace_events: Callable[[str], list[ToolCall | ModelCall]],
) -> None:
    """The reference loop's repeated refusals of one call collapse into a single line."""
    (report,) = detect(trace_events("loop"))
    refusals = [f for f in report.findings if f.kind is Kind.DUPLICATE_CALL]
    assert len(refusals) > 1
    lines = [line for line in finding_lines(report) if line.kind == Kind.DUPLICATE_CALL.value]
    assert len({f.signature for f in refusals}) == len(lines)


def test_default_lists_only_stalled_runs_worst_first(golden: ReplayResult) -> None:
    """By default the healthy run is left out and break comes before escalate."""
    selection = select_runs(golden, ReportOptions())
    assert [r.verdict.value for r in selection.runs] == ["break", "escalate"]
    assert selection.stalled == 2
    assert selection.hidden == 0


@pytest.mark.parametrize(
    ("options", "verdicts", "hidden"),
    [
        (ReportOptions(show_all=True), ["break", "escalate", "ok"], 0),
        (ReportOptions(limit=1), ["break"], 1),
        (ReportOptions(show_all=True, limit=2), ["break", "escalate"], 1),
        (ReportOptions(limit=0), [], 2),
    ],
)
def test_all_and_limit_choose_the_runs(
    golden: ReplayResult, options: ReportOptions, verdicts: list[str], hidden: int
) -> None:
    """--all adds healthy runs, --limit caps the list; what is left out is counted."""
    selection = select_runs(golden, options)
    assert [r.verdict.value for r in selection.runs] == verdicts
    assert selection.hidden == hidden


def test_table_opens_with_the_summary_and_leaves_healthy_runs_out(golden: ReplayResult) -> None:
    """The summary comes first; the healthy librarian appears only with --all."""
    text = table(golden)
    assert text.splitlines()[0].startswith("read")
    assert "3 (break 1, escalate 1, ok 1)" in text
    assert "16 tool calls in 17 rounds" in text
    assert "librarian" not in text
    assert "librarian" in table(golden, ReportOptions(show_all=True))


def test_each_finding_is_one_line_with_tool_arguments_count_and_seqs(golden: ReplayResult) -> None:
    """The researcher's repeat reads: action, rule, tool, times, seq range and the fetched URL."""
    lines = table(golden).splitlines()
    (repeat,) = [line for line in lines if line.split()[:2] == ["break", "repeat"]]
    assert "fetch x5 seq 2..6" in repeat
    assert URL in repeat
    (refusal,) = [line for line in lines if "duplicate_call" in line]
    assert "x6 seq 3..7 (5 findings)" in refusal  # the refusals began at 3, not at 2


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_redact_hides_the_argument_previews(golden: ReplayResult, fmt: str) -> None:
    """With --redact no report shows the looping arguments; without it every one does."""
    render: dict[str, Callable[[ReplayResult, ReportOptions], str]] = {
        "table": table,
        "markdown": render_markdown,
        "json": render_json,
    }
    assert URL in render[fmt](golden, ReportOptions())
    assert URL not in render[fmt](golden, ReportOptions(redact=True))


def test_json_keeps_every_run_and_finding_with_a_nullable_preview(golden: ReplayResult) -> None:
    """JSON ignores the listing options and adds arguments_preview, null under redaction."""
    doc = json.loads(render_json(golden, ReportOptions(limit=0)))
    assert len(doc["runs"]) == 3
    findings = [f for run in doc["runs"] for f in run["findings"]]
    assert len(findings) == sum(len(r.findings) for r in golden.reports)
    assert {f["arguments_preview"] for f in findings if f["tool"] == "fetch"} == {
        json.dumps({"url": URL})
    }
    redacted = json.loads(render_json(golden, ReportOptions(redact=True)))
    assert all(f["arguments_preview"] is None for r in redacted["runs"] for f in r["findings"])


def test_the_score_is_explained_with_the_ledger_counts(golden: ReplayResult) -> None:
    """The score is explained by the run's verdict and its ledger's repeat count."""
    for report in golden.reports:
        rows = report.ledger
        repeats = sum(1 for row in rows if row.repeat_of is not None)
        text = score_explanation(report)
        assert text.startswith(f"stall score {report.stall_score:.2f}: ")
        if rows:
            assert f"{report.verdict.value}, {repeats} of {len(rows)} tool call" in text


def test_the_onset_is_the_first_call_that_brought_nothing_new(golden: ReplayResult) -> None:
    """The onset is the first fruitless call of the finding that raised the verdict.

    The researcher's repeat warns at its third identical fetch (seq 4); the stall
    began at the first repeat (seq 3), before any row said warn. The failing deploy
    began at its first repeated failure. Ok runs have none.
    """
    for report in golden.reports:
        onset = stall_onset(report)
        warned = [r.seq for r in report.ledger if ACTION_SEVERITY[r.action] >= 2]
        assert (onset is None) is (report.verdict.value == "ok")
        if onset is not None:
            row = next(r for r in report.ledger if r.seq == onset)
            assert not row.new_fact or row.status.value == "error"  # or a repeated failure
            assert not warned or onset <= warned[0]
            assert report.wasted_calls == report.tool_calls - onset + 1
    researcher = next(r for r in golden.reports if r.attributes["agent"] == "researcher")
    assert stall_onset(researcher) == 3
    assert ACTION_SEVERITY[Action.REFUSE] < 2  # a refusal alone is not the onset


def test_ledger_groups_cover_every_row_once(
    trace_events: Callable[[str], list[ToolCall | ModelCall]],
) -> None:
    """Folding back-to-back identical outcomes keeps every seq, in order, exactly once."""
    (report,) = detect(trace_events("loop"))
    groups = ledger_groups(report.ledger)
    covered = [seq for g in groups for seq in range(g.first.seq, g.last.seq + 1)]
    assert covered == [row.seq for row in report.ledger]
    assert len(groups) < len(report.ledger)


def test_many_stalled_runs_are_capped_with_a_note(tmp_path: Path) -> None:
    """Thirty copies of a looping trace list the default number of runs and say how to see more."""
    text = GOLDEN.read_text()
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(re.sub(r'"traceId":"..', f'"traceId":"{n:02x}', text) for n in range(30))
    )
    result = replay(str(path))
    stalled = sum(1 for r in result.reports if r.verdict.value != "ok")
    text = table(result)
    assert f"{DEFAULT_LIMIT} of {stalled}" in text
    assert text.count("stall score") == DEFAULT_LIMIT


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (ABSENT, None),
        ('{"url":  "https://a.example/x"}', '{"url": "https://a.example/x"}'),
        ({"q": "otel", "page": 2}, '{"q":"otel","page":2}'),
        ("ls\x1b[2J\n-la", "ls [2J -la"),
        ("   ", None),
    ],
)
def test_argument_preview_is_one_printable_line(arguments: object, expected: str | None) -> None:
    """Previews squeeze whitespace, drop control characters and are absent for absent content."""
    assert argument_preview(arguments) == expected


def test_argument_preview_is_bounded() -> None:
    """A megabyte of arguments gives a preview of at most PREVIEW_CHARS, ending in an ellipsis."""
    preview = argument_preview(json.dumps({"text": "x" * 1_000_000}))
    assert preview is not None
    assert len(preview) == PREVIEW_CHARS
    assert preview.endswith("…")
