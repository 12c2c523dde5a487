"""Render replay results: a table for people, JSON for CI, Markdown for pull requests.

The JSON shape is documented in the README and kept stable; the table and
Markdown show the same facts (verdict, findings, the ledger, stall score).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from otel_stall.core.errors import InputError
from otel_stall.core.records import Finding, LedgerRow, RunReport, Verdict
from otel_stall.offline.replay import ReplayResult

__all__ = [
    "error_json",
    "finding_json",
    "ledger_json",
    "render_json",
    "render_markdown",
    "render_table",
    "report_json",
    "run_json",
]

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


def finding_json(finding: Finding) -> dict[str, Any]:
    """One ``findings[]`` entry."""
    return {
        "kind": finding.kind.value,
        "action": finding.action.value,
        "tool": finding.tool,
        "signature": finding.signature,
        "count": finding.count,
        "first_seq": finding.first_seq,
        "seq": finding.seq,
        "round": finding.round,
        "message": finding.message,
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


def run_json(report: RunReport) -> dict[str, Any]:
    """One ``runs[]`` entry."""
    attrs = report.attributes
    return {
        "trace_id": attrs.get("trace_id"),
        "run_span_id": attrs.get("run_span_id"),
        "agent": attrs.get("agent"),
        "verdict": report.verdict.value,
        "stall_score": report.stall_score,
        "tool_calls": report.tool_calls,
        "rounds": report.rounds,
        "wasted": {
            "calls": report.wasted_calls,
            "tokens": report.wasted_tokens,
            "seconds": report.wasted_seconds,
        },
        "findings": [finding_json(f) for f in report.findings],
        "ledger": [ledger_json(r) for r in report.ledger],
    }


def error_json(error: InputError) -> dict[str, Any]:
    """One ``errors[]`` entry: the path, the line or byte offset, and the reason."""
    out: dict[str, Any] = {"path": error.path}
    if error.offset is not None and error.line is None:
        out["offset"] = error.offset
    else:
        out["line"] = error.line
    out["message"] = error.message
    return out


def report_json(result: ReplayResult) -> dict[str, Any]:
    """The whole JSON document: ``runs``, ``errors`` and ``summary``."""
    return {
        "runs": [run_json(r) for r in result.reports],
        "errors": [error_json(e) for e in result.errors],
        "summary": result.summary(),
    }


def render_json(result: ReplayResult) -> str:
    """The JSON document as indented text."""
    return orjson.dumps(report_json(result), option=orjson.OPT_INDENT_2).decode() + "\n"


def _title(report: RunReport) -> str:
    attrs = report.attributes
    agent = attrs.get("agent") or "run"
    where = []
    if attrs.get("trace_id"):
        where.append(f"trace {attrs['trace_id']}")
    if attrs.get("run_span_id"):
        where.append(f"span {attrs['run_span_id']}")
    return f"{agent}" + (f" ({', '.join(where)})" if where else "")


def _ledger_table(rows: Iterable[LedgerRow]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for name, justify in (
        ("seq", "right"),
        ("tool", "left"),
        ("count", "right"),
        ("repeat_of", "right"),
        ("new_fact", "center"),
        ("status", "left"),
        ("action", "left"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        action = row.action.value
        table.add_row(
            str(row.seq),
            row.tool,
            str(row.count),
            "" if row.repeat_of is None else str(row.repeat_of),
            "yes" if row.new_fact else "no",
            row.status.value,
            Text(action, style=_ACTION_STYLE.get(action, "")),
        )
    return table


def condensed(findings: Iterable[Finding]) -> list[tuple[Finding, int]]:
    """One line per kind, action and signature: the latest finding and how often it fired.

    A looping call is refused again on every repeat; listing each refusal in a
    report for people buries the other findings. JSON keeps every finding.
    """
    lines: dict[tuple[str, str, str], tuple[Finding, int]] = {}
    for finding in findings:
        key = (finding.kind.value, finding.action.value, finding.signature)
        seen = lines.get(key)
        lines[key] = (finding, 1 if seen is None else seen[1] + 1)
    return list(lines.values())


def _wasted(report: RunReport) -> str:
    """Calls, tokens (when captured) and seconds after the stall's onset, in one line."""
    tokens = (
        "tokens not captured" if report.wasted_tokens is None else f"{report.wasted_tokens} tokens"
    )
    return f"{report.wasted_calls} calls, {tokens}, {report.wasted_seconds or 0.0:.1f} s"


def _fired(times: int) -> str:
    return f", fired {times} times" if times > 1 else ""


def _run_block(report: RunReport) -> Panel:
    verdict = report.verdict
    head = Text()
    head.append("verdict ", style="bold")
    head.append(verdict.value, style=_VERDICT_STYLE[verdict])
    head.append(
        f"   stall score {report.stall_score:.2f}   tool calls {report.tool_calls}"
        f"   rounds {report.rounds}"
    )
    parts: list[Any] = [head]
    if report.wasted_calls is not None:
        parts.append(Text(f"wasted since the stall began: {_wasted(report)}"))
    if report.findings:
        findings = Text()
        for f, times in condensed(report.findings):
            findings.append("\n")
            findings.append(f"{f.kind.value}", style="bold")
            findings.append(f" -> {f.action.value}", style=_ACTION_STYLE.get(f.action.value, ""))
            findings.append(
                f"  {f.tool} x{f.count} (seq {f.first_seq}..{f.seq}, round {f.round}, "
                f"signature {f.signature[:12]}){_fired(times)}\n    {f.message}"
            )
        parts.append(findings)
    if report.ledger:
        parts.append(_ledger_table(report.ledger))
    return Panel(Group(*parts), title=_title(report), title_align="left")


def render_table(result: ReplayResult, console: Console) -> None:
    """Print one block per run, then input errors and the summary."""
    for report in result.reports:
        console.print(_run_block(report))
    if not result.reports:
        console.print("No agent runs or tool calls found.")
    if result.errors:
        console.print(Text(f"{len(result.errors)} input error(s):", style="bold red"))
        for error in result.errors:
            console.print(Text(f"  {error}"))
    console.print(_summary_text(result))


def _summary_text(result: ReplayResult) -> str:
    summary = result.summary()
    verdicts = ", ".join(f"{k} {v}" for k, v in summary["verdicts"].items() if v)
    text = (
        f"{summary['files']} file(s), {summary['spans']} span(s), {summary['traces']} trace(s), "
        f"{summary['runs']} run(s)" + (f": {verdicts}" if verdicts else "")
    )
    if result.written is not None:
        text += f"; wrote {result.written} span(s)"
    if result.exported is not None:
        text += f"; exported {result.exported} span(s)"
    return text


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(result: ReplayResult) -> str:
    """GitHub-flavoured Markdown: a section per run, with findings and the ledger."""
    lines = ["# otel-stall replay", ""]
    for report in result.reports:
        lines += [
            f"## {_md(_title(report))}",
            "",
            f"**verdict: {report.verdict.value}** · stall score {report.stall_score:.2f} · "
            f"tool calls {report.tool_calls} · rounds {report.rounds}",
            "",
        ]
        if report.findings:
            lines += ["### Findings", ""]
            for f, times in condensed(report.findings):
                lines.append(
                    f"- `{f.kind.value}` → **{f.action.value}**: `{_md(f.tool)}` x{f.count} "
                    f"(seq {f.first_seq}-{f.seq}, round {f.round}){_fired(times)}: "
                    f"{_md(f.message)}"
                )
            lines.append("")
        if report.ledger:
            lines += [
                "| seq | tool | count | repeat_of | new_fact | status | action |",
                "|---:|---|---:|---:|:---:|---|---|",
            ]
            for r in report.ledger:
                repeat = "" if r.repeat_of is None else r.repeat_of
                lines.append(
                    f"| {r.seq} | {_md(r.tool)} | {r.count} | {repeat} | "
                    f"{'yes' if r.new_fact else 'no'} | {r.status.value} | {r.action.value} |"
                )
            lines.append("")
    if not result.reports:
        lines += ["No agent runs or tool calls found.", ""]
    if result.errors:
        lines += ["## Input errors", ""]
        lines += [f"- `{_md(e)}`" for e in result.errors]
        lines.append("")
    lines += ["## Summary", "", _summary_text(result), ""]
    return "\n".join(lines)
