"""Render replay results: a table for people, JSON for CI, Markdown for pull requests.

The JSON document is for machines: every run, every finding, the whole
ledger, in the shape the docs describe. The table and Markdown are for people
reading a capture of any size: a summary first, then only the stalled runs,
worst first and capped (``--all``, ``--limit``), each finding on one line and
the ledger folded into runs of identical calls. The HTML page
(:mod:`otel_stall.offline.html_report`) draws the same selection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from otel_stall.core.errors import InputError
from otel_stall.core.escape import printable
from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, LedgerRow, RunReport, Verdict
from otel_stall.offline.replay import ReplayResult
from otel_stall.offline.stall_facts import (
    call_counts,
    evidence_start,
    score_explanation,
    stall_onset,
    wasted,
    wasted_text,
)

__all__ = [
    "DEFAULT_LIMIT",
    "FindingLine",
    "LedgerGroup",
    "ReportOptions",
    "Selection",
    "argument_previews",
    "call_counts",
    "collapse_findings",
    "elided_note",
    "error_json",
    "evidence_start",
    "finding_json",
    "finding_lines",
    "finding_text",
    "fired_note",
    "ledger_groups",
    "ledger_json",
    "listing_heading",
    "render_json",
    "render_markdown",
    "render_table",
    "report_json",
    "run_json",
    "run_title",
    "score_explanation",
    "select_runs",
    "seq_span",
    "shown_groups",
    "stall_onset",
    "summary_facts",
    "wasted",
    "wasted_text",
]

DEFAULT_LIMIT: Final = 20
"""Stalled runs a people-facing report lists unless told otherwise: a capture may hold thousands."""
LEDGER_LINES: Final = 12
"""Folded ledger lines per run in the table and Markdown; the JSON and HTML have every row."""
ERROR_LINES: Final = 10
"""Input errors listed in the table and Markdown; stderr has every one."""
PREVIEWS_KEY: Final = "argument_previews"
"""``RunReport.attributes`` key of the replay's argument previews, by call signature."""

_VERDICT_STYLE = {
    Verdict.OK: "green",
    Verdict.WARN: "yellow",
    Verdict.ESCALATE: "magenta",
    Verdict.BREAK: "bold red",
}
_ACTION_STYLE = {
    "continue": "dim",
    "warn": "yellow",
    "refuse": "cyan",
    "escalate": "magenta",
    "break": "bold red",
}


@dataclass(frozen=True, slots=True)
class ReportOptions:
    """What a people-facing report lists; JSON ignores all but ``redact``."""

    show_all: bool = False
    """Every run, healthy ones too (``--all``); uncapped unless ``limit`` is set."""
    limit: int | None = None
    """At most this many runs (``--limit``); None: DEFAULT_LIMIT, or no cap with --all."""
    redact: bool = False
    """No argument previews anywhere (``--redact``)."""

    @property
    def cap(self) -> int | None:
        """The number of runs listed at most, ``None`` for no cap."""
        if self.limit is not None:
            return max(self.limit, 0)
        return None if self.show_all else DEFAULT_LIMIT


# -- JSON ------------------------------------------------------------------------------


def finding_json(finding: Finding, preview: str | None = None) -> dict[str, Any]:
    """One ``findings[]`` entry; ``arguments_preview`` is ``null`` when unknown or redacted."""
    return {
        "kind": finding.kind.value,
        "action": finding.action.value,
        "tool": finding.tool,
        "signature": finding.signature,
        "count": finding.count,
        "first_seq": finding.first_seq,
        "seq": finding.seq,
        "onset_seq": finding.onset_seq or None,
        "round": finding.round,
        "message": finding.message,
        "arguments_preview": preview,
    }


def ledger_json(row: LedgerRow) -> dict[str, Any]:
    """One ``ledger[]`` entry."""
    return {
        "seq": row.seq,
        "span_id": row.span_id,
        "tool": row.tool,
        "signature": row.signature,
        "call_signature": row.call_signature,
        "result_digest": row.result_digest,
        "repeat_of": row.repeat_of,
        "count": row.count,
        "consecutive": row.consecutive,
        "new_fact": row.new_fact,
        "round": row.round,
        "status": row.status.value,
        "action": row.action.value,
    }


def run_json(report: RunReport, *, redact: bool = False) -> dict[str, Any]:
    """One ``runs[]`` entry."""
    attrs = report.attributes
    previews = _Previews(report, redact)
    return {
        "trace_id": attrs.get("trace_id"),
        "run_span_id": attrs.get("run_span_id"),
        "agent": attrs.get("agent"),
        **({"session": attrs["session"]} if attrs.get("session") else {}),
        **_content_json(attrs),
        "verdict": report.verdict.value,
        "stall_score": report.stall_score,
        "tool_calls": report.tool_calls,
        "rounds": report.rounds,
        "wasted": {
            "from_seq": report.onset_seq,
            "calls": report.wasted_calls,
            "model_calls": report.wasted_model_calls,
            "tokens": report.wasted_tokens,
            "seconds": report.wasted_seconds,
        },
        "findings": [finding_json(f, previews.of(f)) for f in report.findings],
        "ledger": [ledger_json(r) for r in report.ledger],
    }


def _content_json(attrs: Any) -> dict[str, Any]:
    """``content_captured: false`` and the switch, for a run whose tool calls had no content."""
    if attrs.get("content_captured") is not False:
        return {}
    return {"content_captured": False, "content_switch": attrs.get("content_switch")}


def error_json(error: InputError) -> dict[str, Any]:
    """One ``errors[]`` entry: the path, the line or byte offset, and the reason."""
    out: dict[str, Any] = {"path": error.path}
    if error.offset is not None and error.line is None:
        out["offset"] = error.offset
    else:
        out["line"] = error.line
    out["message"] = error.message
    return out


def report_json(result: ReplayResult, options: ReportOptions | None = None) -> dict[str, Any]:
    """The whole JSON document: ``runs`` (all of them), ``errors`` and ``summary``."""
    redact = options is not None and options.redact
    return {
        "runs": [run_json(r, redact=redact) for r in result.reports],
        "errors": [error_json(e) for e in result.errors],
        "summary": result.summary(),
    }


def render_json(result: ReplayResult, options: ReportOptions | None = None) -> str:
    """The JSON document as indented text."""
    doc = report_json(result, options)
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n"


# -- what a people-facing report shows -------------------------------------------------


def argument_previews(report: RunReport, *, redact: bool = False) -> dict[str, str]:
    """The replay's previews of the arguments its findings point at, by call signature.

    Empty under ``redact``, and for runs from sources that keep none (the
    tool-call JSONL format).
    """
    previews = None if redact else report.attributes.get(PREVIEWS_KEY)
    return previews if isinstance(previews, dict) else {}


class _Previews:
    """A run's argument previews, looked up by finding (through the ledger row it names)."""

    __slots__ = ("_by_call", "_calls")

    def __init__(self, report: RunReport, redact: bool) -> None:
        self._by_call = argument_previews(report, redact=redact)
        self._calls: dict[int, str] | None = None
        if self._by_call:
            self._calls = {row.seq: row.call_signature for row in report.ledger}

    def of(self, finding: Finding) -> str | None:
        """The preview of the call at the finding's seq, if the replay kept one."""
        if self._calls is None:
            return None
        call = self._calls.get(finding.seq)
        return None if call is None else self._by_call.get(call)


@dataclass(frozen=True, slots=True)
class Selection:
    """The runs a people-facing report lists, and what it leaves out."""

    runs: list[RunReport]
    """Worst first: verdict, then stall score, then tool calls."""
    stalled: int
    """Runs with a verdict other than ``ok``."""
    eligible: int
    """Runs that could be listed (stalled ones, or all with ``--all``)."""

    @property
    def hidden(self) -> int:
        """Eligible runs left out by the cap."""
        return self.eligible - len(self.runs)


def select_runs(result: ReplayResult, options: ReportOptions) -> Selection:
    """The stalled runs (every run with ``--all``), worst first, capped."""
    stalled = [r for r in result.reports if r.verdict is not Verdict.OK]
    pool = list(result.reports) if options.show_all else stalled
    pool.sort(key=lambda r: (-r.verdict.severity, -r.stall_score, -r.tool_calls))
    cap = options.cap
    return Selection(pool if cap is None else pool[:cap], len(stalled), len(pool))


def summary_facts(result: ReplayResult) -> list[tuple[str, str]]:
    """The summary a people-facing report opens with, as (label, value) lines.

    The table, Markdown and HTML all show it.
    """
    summary = result.summary()
    verdicts = ", ".join(f"{k} {v}" for k, v in _worst_first(summary["verdicts"]) if v)
    read = (
        f"{_n(summary['files'], 'file')}, {_n(summary['spans'], 'span')}, "
        f"{_n(summary['traces'], 'trace')}"
    )
    if result.tool_call_events:
        read += f", {_n(result.tool_call_events, 'tool-call event')}"
    facts = [
        ("read", read),
        ("runs", f"{summary['runs']:,}" + (f" ({verdicts})" if verdicts else "")),
        (
            "calls recognised",
            f"{_n(sum(r.tool_calls for r in result.reports), 'tool call')} in "
            f"{_n(sum(r.rounds for r in result.reports), 'round')}, "
            f"{_n(result.model_calls, 'model call')}",
        ),
    ]
    wasted = _total_wasted(result.reports)
    if wasted is not None:
        facts.append(("wasted in loops", wasted))
    facts += _blind_spots(result, summary.get("unrecognised_span_names"))
    if result.written is not None:
        facts.append(("written", _n(result.written, "span")))
    if result.exported is not None:
        facts.append(("exported", _n(result.exported, "span")))
    return facts


def _total_wasted(reports: Sequence[RunReport]) -> str | None:
    """What the stalled runs spent after their stalls began; tokens only where captured."""
    stalled = [r for r in reports if r.wasted_calls is not None]
    if not stalled:
        return None
    calls = sum(r.wasted_calls or 0 for r in stalled)
    models = sum(r.wasted_model_calls or 0 for r in stalled)
    seconds = sum(r.wasted_seconds or 0.0 for r in stalled)
    counted = [r.wasted_tokens for r in stalled if r.wasted_tokens is not None]
    tokens = f"{sum(counted):,} tokens" if counted else "tokens not captured"
    return f"{wasted_text(calls, models, tokens, seconds)} ({_n(len(stalled), 'stalled run')})"


def _blind_spots(
    result: ReplayResult, unrecognised: dict[str, int] | None
) -> list[tuple[str, str]]:
    """What the replay could not see: runs without content, agent-like spans not read."""
    facts = []
    blind = [r for r in result.reports if r.attributes.get("content_captured") is False]
    if blind:
        switches = sorted({str(r.attributes.get("content_switch")) for r in blind} - {"None"})
        hint = f": turn it on with {', '.join(switches)}" if switches else ""
        facts.append(("content not captured", f"{_n(len(blind), 'run')}{hint}"))
    if unrecognised:
        names = ", ".join(f"{name!r} x{n}" for name, n in list(unrecognised.items())[:5])
        facts.append(("not recognised", f"{names} (see otel-stall explain)"))
    return facts


def _worst_first(verdicts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(verdicts.items(), key=lambda kv: -Verdict(kv[0]).severity)


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def run_title(report: RunReport) -> str:
    """The agent's name (or ``run``) and where the run is: trace and run span."""
    attrs = report.attributes
    agent = attrs.get("agent") or "run"
    where = []
    if attrs.get("trace_id"):
        where.append(f"trace {attrs['trace_id']}")
    if attrs.get("run_span_id"):
        where.append(f"span {attrs['run_span_id']}")
    if attrs.get("session"):  # a session run: its calls span many traces
        where.append(f"session {attrs['session']}")
    return f"{agent}" + (f" ({', '.join(where)})" if where else "")


@dataclass(frozen=True, slots=True)
class FindingLine:
    """Every finding of one rule on one signature, as one line of a report."""

    kind: str
    action: Action
    """The most severe action among them."""
    tool: str
    signature: str
    count: int
    """The most occurrences any of them counted."""
    first_seq: int
    last_seq: int
    times: int
    """How many findings the line stands for."""
    message: str
    """The most severe finding's guidance message (the latest among equals)."""
    preview: str | None


def finding_lines(report: RunReport, *, redact: bool = False) -> list[FindingLine]:
    """A run's findings, one line per rule and signature, with the replay's argument previews."""
    return collapse_findings(report.findings, _Previews(report, redact).of)


def collapse_findings(
    findings: Iterable[Finding], preview_of: Callable[[Finding], str | None] | None = None
) -> list[FindingLine]:
    """One line per rule and signature, in the order each first fired.

    A looping call is refused again on every repeat, then warned, then
    broken; listing each finding buries the others. JSON keeps every finding.
    """
    groups: dict[tuple[str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.kind.value, finding.signature), []).append(finding)
    lines = []
    for (kind, signature), found in groups.items():
        worst = max(reversed(found), key=lambda f: ACTION_SEVERITY[f.action])
        preview = None
        if preview_of is not None:
            preview = preview_of(worst) or next(filter(None, map(preview_of, found)), None)
        lines.append(
            FindingLine(
                kind,
                worst.action,
                worst.tool,
                signature,
                max(f.count for f in found),
                min(evidence_start(f) for f in found),
                max(f.seq for f in found),
                len(found),
                worst.message,
                preview,
            )
        )
    lines.sort(key=lambda line: line.first_seq)
    return lines


@dataclass(frozen=True, slots=True)
class LedgerGroup:
    """Back-to-back ledger rows of one call with the same outcome, as one line."""

    first: LedgerRow
    last: LedgerRow

    @property
    def seqs(self) -> str:
        """``3`` or ``4..6``."""
        return seq_span(self.first.seq, self.last.seq)

    @property
    def counts(self) -> str:
        """``1`` or ``3..5``: the signature's occurrences over the group."""
        return seq_span(self.first.count, self.last.count)


def seq_span(first: int, last: int) -> str:
    """``3`` or ``4..6``."""
    return str(first) if first == last else f"{first}..{last}"


def _same_line(a: LedgerRow, b: LedgerRow) -> bool:
    return (
        a.signature == b.signature
        and a.repeat_of == b.repeat_of
        and (a.new_fact, a.status, a.action) == (b.new_fact, b.status, b.action)
    )


def ledger_groups(rows: Iterable[LedgerRow]) -> list[LedgerGroup]:
    """Fold back-to-back rows of the same call with the same outcome into one line."""
    groups: list[LedgerGroup] = []
    for row in rows:
        if groups and _same_line(groups[-1].last, row):
            groups[-1] = LedgerGroup(groups[-1].first, row)
        else:
            groups.append(LedgerGroup(row, row))
    return groups


def shown_groups(groups: Sequence[LedgerGroup]) -> tuple[list[LedgerGroup], list[LedgerGroup]]:
    """The head and tail to show when a ledger has more than :data:`LEDGER_LINES` lines."""
    if len(groups) <= LEDGER_LINES:
        return list(groups), []
    head = LEDGER_LINES // 3
    return list(groups[:head]), list(groups[-(LEDGER_LINES - head) :])


def elided_note(head: Sequence[LedgerGroup], tail: Sequence[LedgerGroup]) -> str:
    """The line standing for the ledger rows between ``head`` and ``tail``."""
    first, last = head[-1].last.seq + 1, tail[0].first.seq - 1
    return f"... seq {seq_span(first, last)} not shown: --format json or html has every row"


def _listing_note(selection: Selection, options: ReportOptions) -> str | None:
    """What the list leaves out, and how to see it."""
    if not selection.eligible:
        return None
    what = "runs" if options.show_all else "stalled runs"
    if not selection.hidden:
        return f"{what.capitalize()}, worst first ({selection.eligible:,}):"
    return (
        f"{what.capitalize()}, worst first: {len(selection.runs):,} of {selection.eligible:,} "
        "(--limit N or --all for more, --format json for everything):"
    )


def listing_heading(result: ReplayResult, selection: Selection, options: ReportOptions) -> str:
    """The line above the runs: what is listed, or why nothing is."""
    note = _listing_note(selection, options)
    if note is not None:
        return note
    if not result.reports:
        return "No agent runs or tool calls found."
    return f"No stalled runs: all {len(result.reports):,} ok (--all lists them)."


# -- table -----------------------------------------------------------------------------


def render_table(
    result: ReplayResult, console: Console, options: ReportOptions | None = None
) -> None:
    """Print the summary, then the stalled runs (worst first), then input errors."""
    options = options or ReportOptions()
    selection = select_runs(result, options)
    console.print(_summary_table(result))
    console.print()
    console.print(_line(listing_heading(result, selection, options)))
    for report in selection.runs:
        console.print()
        for part in _run_block(report, options):
            if isinstance(part, Text):  # one line, cut to the width rather than wrapped
                console.print(part, no_wrap=True, overflow="ellipsis")
            else:
                console.print(part)
    if result.errors:
        console.print()
        console.print(Text(_errors_heading(result.errors), style="bold red"))
        for error in result.errors[:ERROR_LINES]:
            console.print(_line(f"  {error}"))


def _errors_heading(errors: Sequence[InputError]) -> str:
    shown = "" if len(errors) <= ERROR_LINES else f" (the first {ERROR_LINES}; stderr has all)"
    return f"{len(errors):,} input error(s){shown}:"


def _summary_table(result: ReplayResult) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for label, value in summary_facts(result):
        table.add_row(label, _line(value))
    return table


def _run_block(report: RunReport, options: ReportOptions) -> list[Any]:
    """A run: verdict and agent, where it is, its score in words, one line per finding, its ledger.

    :func:`render_table` cuts each line but the ledger's to the console's
    width rather than wrapping it: a long argument preview ends in an ellipsis.
    """
    head = Text()
    head.append(f"{report.verdict.value:<9}", style=_VERDICT_STYLE[report.verdict])
    head.append(printable(report.attributes.get("agent") or "run"), style="bold")
    where = run_title(report).partition(" (")[2].rstrip(")")
    parts: list[Any] = [head]
    parts += [
        _line(f"  {text}") for text in (where, score_explanation(report), call_counts(report))
    ]
    if report.attributes.get("content_captured") is False:
        switch = report.attributes.get("content_switch")
        hint = f": turn it on with {switch}" if switch else ""
        parts.append(_line(f"  content not captured, so repeats cannot be seen{hint}"))
    if report.wasted_calls is not None:
        parts.append(_line(f"  wasted since the stall began: {wasted(report)}"))
    parts += [finding_text(line) for line in finding_lines(report, redact=options.redact)]
    if report.ledger:
        parts.append(_ledger_table(report))
    return [part for part in parts if not isinstance(part, Text) or part.plain.strip()]


def _line(text: str) -> Text:
    """One line of the table: never rich markup, controls shown as escapes (issue 27)."""
    return Text(printable(text))


def finding_text(line: FindingLine) -> Text:
    """``  break    repeat          fetch x5 seq 2..6  {"url": ...}``, on one line."""
    action = line.action.value
    text = _line("  ")
    text.append(f"{action:<9}", style=_ACTION_STYLE.get(action, ""))
    text.append(f"{line.kind:<15}")
    text.append(printable(line.tool), style="bold")
    text.append(f" x{line.count} seq {seq_span(line.first_seq, line.last_seq)}{fired_note(line)}")
    if line.preview:
        text.append("  ")
        text.append(printable(line.preview), style="cyan")
    return text


def fired_note(line: FindingLine) -> str:
    """`` (5 findings)`` when a line stands for more than one."""
    return f" ({line.times} findings)" if line.times > 1 else ""


def _ledger_table(report: RunReport) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for name, justify in (
        ("seq", "right"),
        ("tool", "left"),
        ("count", "right"),
        ("repeat_of", "right"),
        ("new_fact", "center"),
        ("status", "left"),
        ("action", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    head, tail = shown_groups(ledger_groups(report.ledger))
    for group in head:
        table.add_row(*_ledger_cells(group))
    if tail:
        table.add_row("", Text(elided_note(head, tail), style="dim"))
        for group in tail:
            table.add_row(*_ledger_cells(group))
    return table


def _ledger_cells(group: LedgerGroup) -> list[Any]:
    row = group.first
    action = row.action.value
    return [
        group.seqs,
        _line(row.tool),
        group.counts,
        "" if row.repeat_of is None else str(row.repeat_of),
        "yes" if row.new_fact else "no",
        row.status.value,
        Text(action, style=_ACTION_STYLE.get(action, "")),
    ]


# -- Markdown --------------------------------------------------------------------------


def render_markdown(result: ReplayResult, options: ReportOptions | None = None) -> str:
    """GitHub-flavoured Markdown: :func:`otel_stall.offline.markdown_report.render_markdown`."""
    from otel_stall.offline.markdown_report import render_markdown as render

    return render(result, options)
