"""The replay report as GitHub-flavoured Markdown, for pull requests and issues.

The same selection as the table: the summary, then a section per listed run,
worst first. Every value that came from a span (agent and tool names, session
ids, argument previews, input errors) goes through
:func:`otel_stall.core.escape.markdown`, so a hostile span cannot add HTML
(``<script>``, ``<img>``), Markdown (links, a closing code span, a table cell)
or terminal controls to the report (issue 27). Values are shown in ``<code>``,
where the escapes display as typed, rather than in backtick code spans, where
they would show literally.
"""

from __future__ import annotations

from otel_stall.core.escape import markdown as _md
from otel_stall.core.records import RunReport
from otel_stall.offline.replay import ReplayResult
from otel_stall.offline.report import (
    ERROR_LINES,
    LedgerGroup,
    ReportOptions,
    call_counts,
    elided_note,
    finding_lines,
    fired_note,
    ledger_groups,
    listing_heading,
    run_title,
    score_explanation,
    select_runs,
    seq_span,
    shown_groups,
    summary_facts,
    wasted,
)

__all__ = ["render_markdown"]


def _code(text: object) -> str:
    return f"<code>{_md(text)}</code>"


def render_markdown(result: ReplayResult, options: ReportOptions | None = None) -> str:
    """GitHub-flavoured Markdown: the summary, then a section per listed run."""
    options = options or ReportOptions()
    selection = select_runs(result, options)
    lines = ["# otel-stall replay", ""]
    lines += [f"- **{label}**: {_md(value)}" for label, value in summary_facts(result)]
    lines.append("")
    lines += [_md(listing_heading(result, selection, options)), ""]
    for report in selection.runs:
        lines += _markdown_run(report, options)
    if result.errors:
        lines += ["## Input errors", ""]
        lines += [f"- {_code(e)}" for e in result.errors[:ERROR_LINES]]
        if len(result.errors) > ERROR_LINES:
            lines.append(f"- ... {len(result.errors) - ERROR_LINES:,} more (stderr has all)")
        lines.append("")
    return "\n".join(lines)


def _markdown_run(report: RunReport, options: ReportOptions) -> list[str]:
    lines = [
        f"## {_md(run_title(report))}",
        "",
        f"**verdict: {report.verdict.value}** · {_md(score_explanation(report))} · "
        f"{call_counts(report)}",
        "",
    ]
    if report.wasted_calls is not None:
        lines += [f"Wasted since the stall began: {wasted(report)}.", ""]
    findings = finding_lines(report, redact=options.redact)
    if findings:
        lines += ["### Findings", ""]
        for f in findings:
            preview = f" {_code(f.preview)}" if f.preview else ""
            lines.append(
                f"- **{f.action.value}** `{f.kind}`: {_code(f.tool)}{preview} x{f.count}, "
                f"seq {seq_span(f.first_seq, f.last_seq)}{fired_note(f)}"
            )
        lines.append("")
    if report.ledger:
        lines += [
            "| seq | tool | count | repeat_of | new_fact | status | action |",
            "|---:|---|---:|---:|:---:|---|---|",
        ]
        head, tail = shown_groups(ledger_groups(report.ledger))
        lines += [_markdown_row(g) for g in head]
        if tail:
            lines.append(f"| | {elided_note(head, tail)} | | | | | |")
            lines += [_markdown_row(g) for g in tail]
        lines.append("")
    return lines


def _markdown_row(group: LedgerGroup) -> str:
    r = group.first
    repeat = "" if r.repeat_of is None else r.repeat_of
    return (
        f"| {group.seqs} | {_md(r.tool)} | {group.counts} | {repeat} | "
        f"{'yes' if r.new_fact else 'no'} | {r.status.value} | {r.action.value} |"
    )
