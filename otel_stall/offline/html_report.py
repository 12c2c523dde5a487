"""The replay report as one self-contained HTML page: a picture of each loop.

``otel-stall replay --format html -o report.html``. One file, no network: the
style and the script are inline, and a Content-Security-Policy forbids
loading anything. The page shows the summary, then for each listed run (the
same selection as the table: stalled runs, worst first) a timeline with one
mark per tool call, coloured by what the call brought (a new fact, a repeat,
a refusal, a failure), the stall onset marked, and the findings beside it.
A click on a call shows its ledger row, in words, and the findings that cover
it; a click on a finding highlights the calls it covers. With more than one
run listed, a sortable, filterable table of runs comes first, and
``--trace-url`` links each run to the user's trace UI.

Everything taken from spans (tool names, argument previews) is escaped into
the markup, or embedded as JSON that the script only ever sets as text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Final

import orjson

from otel_stall.core.records import LedgerRow, RunReport, Status
from otel_stall.offline.call_facts import CALL_FACTS_KEY, HEADS_KEY, CallFacts
from otel_stall.offline.preview import argument_preview
from otel_stall.offline.replay import ReplayResult
from otel_stall.offline.report import (
    FindingLine,
    ReportOptions,
    argument_previews,
    finding_lines,
    run_title,
    score_explanation,
    select_runs,
    stall_onset,
    summary_facts,
    wasted,
)

__all__ = ["TRACE_ID_FIELD", "call_class", "covered_seqs", "render_html", "trace_link"]

TRACE_ID_FIELD: Final = "{trace_id}"
"""The placeholder ``--trace-url`` replaces with a run's trace id."""

_FAILED: Final = frozenset({Status.ERROR, Status.OVERLOADED})
_CLASS_LABEL: Final = {
    "new": "new fact",
    "repeat": "repeat, nothing new",
    "refused": "refused",
    "failed": "failed",
}


def call_class(row: LedgerRow) -> str:
    """What one call brought, as the timeline colours it: new, repeat, refused or failed."""
    if row.status is Status.REFUSED:
        return "refused"
    if row.status in _FAILED:
        return "failed"
    return "new" if row.new_fact else "repeat"


def covered_seqs(report: RunReport, line: FindingLine) -> list[int]:
    """The calls a finding line covers: its signature's calls from its first seq to its last.

    A rule that compares results (a reworded loop) names one signature but
    covers differing calls; when no call in the range carries the signature,
    the whole range is the finding's.
    """
    span = [row for row in report.ledger if line.first_seq <= row.seq <= line.last_seq]
    own = [r.seq for r in span if line.signature in (r.signature, r.call_signature)]
    return own or [row.seq for row in span]


def trace_link(template: str | None, report: RunReport) -> str | None:
    """``template`` with the run's trace id in place of ``{trace_id}``; None without either."""
    trace_id = report.attributes.get("trace_id")
    if not template or not isinstance(trace_id, str) or not trace_id:
        return None
    return template.replace(TRACE_ID_FIELD, trace_id)


def render_html(
    result: ReplayResult, options: ReportOptions | None = None, *, trace_url: str | None = None
) -> str:
    """The whole page, as text; ``trace_url`` is ``--trace-url``'s template."""
    options = options or ReportOptions()
    selection = select_runs(result, options)
    parts = [_HEAD, "<header><h1>otel-stall replay</h1>", _summary(result)]
    what = "runs" if options.show_all else "stalled runs"
    if selection.eligible:
        shown = f"{len(selection.runs):,} of {selection.eligible:,}"
        parts.append(f'<p class="listing">{what.capitalize()}, worst first: {shown}</p>')
    elif result.reports:
        parts.append('<p class="listing">No stalled runs.</p>')
    else:
        parts.append('<p class="listing">No agent runs or tool calls found.</p>')
    parts.append(_legend())
    parts.append("</header><main>")
    if len(selection.runs) > 1:
        parts.append(_runs_table(selection.runs, trace_url))
    messages: dict[str, int] = {}
    parts += [
        _run(index, report, options, trace_url, messages)
        for index, report in enumerate(selection.runs)
    ]
    parts.append(f'<script type="application/json" id="messages">{_json(list(messages))}</script>')
    parts.append("</main>")
    if result.errors:
        parts.append(_errors(result))
    parts.append(f"<script>{_SCRIPT}</script></body></html>\n")
    return "".join(parts)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _summary(result: ReplayResult) -> str:
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in summary_facts(result))
    return f'<dl class="summary">{rows}</dl>'


def _legend() -> str:
    items = "".join(
        f'<li><span class="swatch {name}"></span>{_e(label)}</li>'
        for name, label in _CLASS_LABEL.items()
    )
    onset = '<li><span class="swatch onset-key"></span>stall onset</li>'
    return f'<ul class="legend">{items}{onset}</ul>'


def _runs_table(runs: Sequence[RunReport], trace_url: str | None) -> str:
    """Every listed run, one row each: sorted and filtered by the script, linked to its picture."""
    head = "".join(
        f'<th data-sort="{kind}" aria-sort="none"><button type="button">{_e(name)}</button></th>'
        for name, kind in (
            ("#", "num"),
            ("Verdict", "verdict"),
            ("Run", "text"),
            ("Score", "num"),
            ("Tool calls", "num"),
            ("Model rounds", "num"),
            ("Findings", "num"),
            ("Wasted tool calls", "num"),
            ("Trace", "text"),
        )
    )
    rows = []
    for index, report in enumerate(runs):
        link = trace_link(trace_url, report)
        trace = f'<a href="{_e(link)}" rel="noreferrer">trace</a>' if link else ""
        rows.append(
            f'<tr class="verdict-{report.verdict.value}"><td>{index + 1}</td>'
            f'<td><span class="verdict">{report.verdict.value}</span></td>'
            f'<td><a href="#run-{index}">{_e(_short_title(report))}</a></td>'
            f"<td>{report.stall_score:.2f}</td><td>{report.tool_calls}</td>"
            f"<td>{report.rounds}</td><td>{len(report.findings)}</td>"
            f"<td>{'' if report.wasted_calls is None else report.wasted_calls}</td>"
            f"<td>{trace}</td></tr>"
        )
    return (
        '<section class="runs"><h2>Runs</h2><p><label>Filter '
        '<input type="search" class="filter" placeholder="verdict, agent, tool..."></label> '
        '<span class="shown"></span></p>'
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
        "</table></section>"
    )


def _short_title(report: RunReport) -> str:
    """The agent and the start of its trace id: a table row's name (the section has it all)."""
    attrs = report.attributes
    where = attrs.get("session") or (attrs.get("trace_id") or "")[:8]
    return f"{attrs.get('agent') or 'run'} {where}".strip()


def _json(value: Any) -> str:
    """JSON that is safe inside <script>: no <, > or & left to end the element."""
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _run(
    index: int,
    report: RunReport,
    options: ReportOptions,
    trace_url: str | None,
    messages: dict[str, int],
) -> str:
    verdict = report.verdict.value
    onset = stall_onset(report)
    lines = finding_lines(report, redact=options.redact)
    link = trace_link(trace_url, report)
    trace = f' <a class="trace" href="{_e(link)}" rel="noreferrer">open trace</a>' if link else ""
    return (
        f'<section class="run verdict-{verdict}" id="run-{index}" '
        f'data-run-span="{_e(report.attributes.get("run_span_id") or "")}" '
        f'data-onset="{onset or ""}">'
        f'<h2><span class="verdict">{verdict}</span> {_e(run_title(report))}{trace}</h2>'
        f'<p class="score">{_e(score_explanation(report))}</p>'
        f'<div class="body"><div class="picture">{_timeline(report, onset)}'
        f"</div>{_aside(report, lines, onset, messages)}</div>"
        f'<script type="application/json" class="ledger">{_ledger_data(report, options)}</script>'
        "</section>"
    )


def _facts(report: RunReport) -> dict[str, CallFacts]:
    facts = report.attributes.get(CALL_FACTS_KEY)
    return facts if isinstance(facts, dict) else {}


def _timeline(report: RunReport, onset: int | None) -> str:
    """The timeline's frame: the script draws one button per call from the run's ledger data.

    Drawn from the data, a call costs its bytes once, not twice (markup and
    data): what keeps a thousand runs under 2 MB.
    """
    label = f"{report.tool_calls:,} tool calls in {report.rounds:,} rounds"
    return f'<ol class="timeline" aria-label="{_e(label)}"></ol>'


def _aside(
    report: RunReport, lines: Sequence[FindingLine], onset: int | None, messages: dict[str, int]
) -> str:
    """The findings; their messages, shared by many runs, are stored once and set by the script."""
    parts = ['<aside><h3>Findings</h3><ul class="findings">']
    for line in lines:
        preview = f' <code class="args">{_e(line.preview)}</code>' if line.preview else ""
        fired = f", fired {line.times} times" if line.times > 1 else ""
        seqs = f"{line.first_seq}..{line.last_seq}" if line.first_seq != line.last_seq else ""
        covered = " ".join(map(str, covered_seqs(report, line)))
        parts.append(
            f'<li class="finding act-{line.action.value}" data-seqs="{covered}" tabindex="0" '
            'role="button">'
            f"<b>{line.action.value}</b> {_e(line.kind)}: "
            f"<code>{_e(line.tool)}</code>{preview} x{line.count}, "
            f"seq {seqs or line.first_seq}{fired}"
            f'<p class="message" data-msg="{messages.setdefault(line.message, len(messages))}">'
            "</p></li>"
        )
    parts.append("</ul>" if lines else '<li class="none">none</li></ul>')
    parts.append(f'<p class="cost">{_e(_cost(report, onset))}</p>')
    parts.append("</aside>")
    return "".join(parts)


def _cost(report: RunReport, onset: int | None) -> str:
    """What the stall took, from its onset on: the one wording of the wasted cost."""
    if report.wasted_calls is None:
        return f"No stall onset; {report.tool_calls:,} tool calls in {report.rounds:,} rounds."
    where = f"Stalled from seq {onset}" if onset is not None else "Stalled after the last tool call"
    return f"{where}; wasted since: {wasted(report)}."


def _ledger_data(report: RunReport, options: ReportOptions) -> str:
    """The run's calls for the script, one array each (see ``COLUMNS``), safe in <script>."""
    previews = argument_previews(report, redact=options.redact)
    heads = report.attributes.get(HEADS_KEY)
    heads = heads if isinstance(heads, dict) and not options.redact else {}
    facts = _facts(report)
    rows = []
    for row in report.ledger:
        arguments = previews.get(row.call_signature)
        if row.repeat_of is not None:  # the same call and result: the script copies them
            arguments = result = None
        elif arguments is None and row.call_signature in heads:
            arguments = argument_preview(heads[row.call_signature])
        if row.repeat_of is None:
            result = heads.get(row.signature)
        fact = facts.get(row.span_id) if row.span_id is not None else None
        rows.append(
            [
                row.seq,
                row.tool,
                call_class(row),
                row.action.value,
                row.round,
                row.repeat_of,
                row.count,
                row.consecutive,
                int(row.new_fact),
                row.status.value,
                row.span_id,
                arguments,
                None if result is None else argument_preview(result),
                *(fact if fact is not None else (None, 0, 0, None)),
            ]
        )
    return _json(rows)


def _errors(result: ReplayResult) -> str:
    items = "".join(f"<li><code>{_e(e)}</code></li>" for e in result.errors[:100])
    more = len(result.errors) - 100
    tail = f"<li>... {more:,} more</li>" if more > 0 else ""
    return f'<section class="errors"><h2>Input errors</h2><ul>{items}{tail}</ul></section>'


_HEAD: Final = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<title>otel-stall replay</title>
<style>
:root { --new: #2f9e5a; --repeat: #e3a008; --refused: #6b7a99; --failed: #d43d3d;
  --ink: #1d232b; --muted: #5d6773; --line: #d9dee4; --bg: #f6f7f9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: var(--bg); }
header, main, .errors { max-width: 1200px; margin: 0 auto; padding: 16px 24px; }
h1 { font-size: 20px; margin: 8px 0; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.summary dt { font-weight: 600; } dl.summary dd { margin: 0; }
.listing { color: var(--muted); margin: 12px 0 4px; }
ul.legend { list-style: none; padding: 0; margin: 4px 0; display: flex; gap: 16px;
  color: var(--muted); }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 3px;
  margin-right: 6px; vertical-align: -1px; }
.swatch.new { background: var(--new); } .swatch.repeat { background: var(--repeat); }
.swatch.refused { background: var(--refused); } .swatch.failed { background: var(--failed); }
.swatch.onset-key { background: none; border-left: 3px solid var(--ink); border-radius: 0; }
section.run { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 16px; margin: 16px 0; }
section.run { content-visibility: auto; contain-intrinsic-size: auto 300px; }
section.run h2 { font-size: 16px; margin: 0 0 4px; overflow-wrap: anywhere; }
.verdict { display: inline-block; padding: 0 8px; border-radius: 10px; color: #fff;
  font-size: 13px; margin-right: 6px; background: var(--new); }
.verdict-warn .verdict { background: var(--repeat); }
.verdict-escalate .verdict { background: #a34fc2; }
.verdict-break .verdict { background: var(--failed); }
.score { color: var(--muted); margin: 0 0 8px; }
.body { display: flex; gap: 24px; align-items: flex-start; flex-wrap: wrap; }
.picture { flex: 3 1 420px; min-width: 0; }
aside { flex: 2 1 300px; min-width: 0; }
aside h3 { font-size: 14px; margin: 0 0 4px; }
ul.findings { padding-left: 18px; margin: 0; }
ul.findings li { margin-bottom: 6px; overflow-wrap: anywhere; }
.message { margin: 2px 0 0; color: var(--muted); font-size: 12px; }
.cost { font-weight: 600; }
code { font-size: 12px; background: #eef1f4; padding: 0 3px; border-radius: 3px; }
ol.timeline { list-style: none; padding: 8px 0; margin: 0; display: flex; flex-wrap: wrap;
  gap: 3px; align-items: center; }
ol.timeline li { display: contents; }
button.call { min-width: 26px; max-width: 92px; height: 34px; border: 0; border-radius: 4px;
  color: #fff; font-size: 10px; line-height: 1.1; cursor: pointer; padding: 1px 4px;
  display: flex; flex-direction: column; align-items: center; justify-content: center; }
button.call .seq { font-weight: 700; }
ol.timeline li.turns { display: block; min-width: 14px; height: 18px; padding: 0 3px;
  border-radius: 9px; background: #c9d3de; color: var(--ink); font-size: 10px;
  line-height: 18px; text-align: center; }
button.call .tool { max-width: 84px; overflow: hidden; text-overflow: ellipsis;
  white-space: nowrap; }
button.call.repeat { color: #1d232b; }
.run.linking button.call:not(.linked) { opacity: .3; }
button.call.linked { outline: 3px solid #1f6feb; outline-offset: 1px; }
li.finding { cursor: pointer; border-radius: 4px; padding: 2px 4px; }
li.finding:hover { background: #eef1f4; }
li.finding.linked { background: #dbe9ff; }
.call-findings h4 { font-size: 12px; margin: 8px 0 2px; }
.call-findings ul { margin: 0; padding-left: 18px; font-size: 12px; }
a.trace { font-size: 12px; font-weight: 400; margin-left: 8px; }
section.runs { background: #fff; border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 16px; margin: 16px 0; }
section.runs h2 { font-size: 16px; margin: 0 0 4px; }
table.runs { border-collapse: collapse; width: 100%; font-size: 13px; }
table.runs th, table.runs td { text-align: left; padding: 2px 10px 2px 0;
  border-bottom: 1px solid var(--line); }
table.runs th button { border: 0; background: none; font: inherit; font-weight: 600;
  cursor: pointer; padding: 0; }
table.runs th[aria-sort="ascending"] button::after { content: " \\25b2"; }
table.runs th[aria-sort="descending"] button::after { content: " \\25bc"; }
table.runs td:nth-child(3) { overflow-wrap: anywhere; }
.shown { color: var(--muted); }
button.call.new { background: var(--new); } button.call.repeat { background: var(--repeat); }
button.call.refused { background: var(--refused); }
button.call.failed { background: var(--failed); }
button.call.round-start { margin-left: 6px; }
button.call.act-warn, button.call.act-escalate, button.call.act-break {
  box-shadow: inset 0 -5px 0 rgba(0, 0, 0, .35); }
button.call.selected { outline: 3px solid var(--ink); outline-offset: 1px; }
ol.timeline li.onset-flag { display: block; position: relative; width: 3px; height: 40px;
  background: var(--ink); margin: 0 3px; color: transparent; font-size: 0; }
ol.timeline li.onset-flag::after { content: "onset"; position: absolute; top: -14px; left: -12px;
  font-size: 10px; color: var(--ink); }
ol.timeline { padding-top: 16px; }
table.detail { margin-top: 8px; border-collapse: collapse; font-size: 12px; }
table.detail caption { text-align: left; font-weight: 600; }
table.detail th { text-align: left; padding: 1px 12px 1px 0; color: var(--muted);
  font-weight: 500; }
table.detail td { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
</style></head><body>
"""

_SCRIPT: Final = """
(function () {
  "use strict";
  var COLUMNS = ["seq", "tool", "cls", "action", "round", "repeat_of", "count",
    "consecutive", "new_fact", "status", "span_id", "arguments", "result", "duration",
    "turns", "turn_ns", "tokens"];
  var KIND = {"new": "new fact", repeat: "repeat, nothing new", refused: "refused",
    failed: "failed"};
  var LABELS = [["seq", "Call"], ["tool", "Tool"], ["arguments", "Arguments"],
    ["result", "Result"], ["duration", "Duration"], ["turns", "Model turns before it"],
    ["status", "Result status"], ["action", "Action taken"], ["new_fact", "Brought a new fact"],
    ["repeat_of", "Repeats call"], ["count", "Times seen"], ["consecutive", "In a row"],
    ["round", "Model round"], ["span_id", "Span"]];
  function seconds(ns) {
    if (ns >= 1e9) { return (ns / 1e9).toFixed(1) + " s"; }
    return (ns / 1e6).toFixed(ns >= 1e6 ? 0 : 2) + " ms";
  }
  function turns(row) {
    var words = row.turns + " model turn" + (row.turns === 1 ? "" : "s") + ", " +
      seconds(row.turn_ns);
    return row.tokens === null ? words : words + ", " + row.tokens.toLocaleString("en") +
      " tokens";
  }
  function text(name, row) {
    var value = row[name];
    if (name === "duration") { return value === null ? "\u2014" : seconds(value); }
    if (name === "turns") { return value ? turns(row) : "none"; }
    if (name === "new_fact") { return value ? "yes" : "no"; }
    if (value === null || value === undefined) { return "\u2014"; }
    return String(value);
  }
  function show(table, row) {
    var body = table.tBodies[0];
    while (body.firstChild) { body.removeChild(body.firstChild); }
    LABELS.forEach(function (pair) {
      var name = pair[0];
      if ((name === "arguments" || name === "result") && row[name] === null) { return; }
      var tr = document.createElement("tr");
      var th = document.createElement("th");
      var td = document.createElement("td");
      th.textContent = pair[1];
      td.textContent = text(name, row);
      tr.appendChild(th);
      tr.appendChild(td);
      body.appendChild(tr);
    });
    table.hidden = false;
  }
  function el(tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (content !== undefined) { node.textContent = content; }
    return node;
  }
  function draw(list, rows, onset) {
    var last = null;
    rows.forEach(function (row) {
      var cls = "call " + row.cls + " act-" + row.action;
      if (last !== null && row.round !== last) { cls += " round-start"; }
      last = row.round;
      if (row.turns) {
        var mark = el("li", "turns", String(row.turns));
        mark.title = turns(row);
        list.appendChild(mark);
      }
      if (String(row.seq) === onset) {
        cls += " onset";
        var flag = el("li", "onset-flag", "onset");
        flag.setAttribute("aria-hidden", "true");
        list.appendChild(flag);
      }
      var button = el("button", cls);
      button.type = "button";
      button.setAttribute("data-seq", String(row.seq));
      button.title = "seq " + row.seq + ": " + row.tool + ", " + KIND[row.cls] + ", " +
        row.action + ", round " + row.round;
      button.appendChild(el("span", "seq", String(row.seq)));
      var name = row.tool.length > 12 ? row.tool.slice(0, 11) + "\u2026" : row.tool;
      button.appendChild(el("span", "tool", name));
      var li = el("li");
      li.appendChild(button);
      list.appendChild(li);
    });
  }
  function seqsOf(item) { return (item.getAttribute("data-seqs") || "").split(" "); }
  function clear(run) {
    run.classList.remove("linking");
    run.querySelectorAll(".linked").forEach(function (el) { el.classList.remove("linked"); });
  }
  function setup(run) {
    var rows = JSON.parse(run.querySelector("script.ledger").textContent).map(function (a) {
      var row = {};
      COLUMNS.forEach(function (name, i) { row[name] = a[i]; });
      return row;
    });
    var bySeq = {};
    rows.forEach(function (row) {
      var first = row.repeat_of === null ? null : bySeq[row.repeat_of];
      if (first) {
        row.arguments = first.arguments;
        row.result = first.result;
      }
      bySeq[row.seq] = row;
    });
    draw(run.querySelector("ol.timeline"), rows, run.getAttribute("data-onset"));
    var picture = run.querySelector(".picture");
    var table = el("table", "detail");
    table.hidden = true;
    table.appendChild(el("caption", "", "Call"));
    table.appendChild(el("tbody"));
    picture.appendChild(table);
    var panel = el("div", "call-findings");
    panel.hidden = true;
    panel.appendChild(el("h4", "", "Findings on this call"));
    panel.appendChild(el("ul"));
    picture.appendChild(panel);
    var findings = Array.prototype.slice.call(run.querySelectorAll("li.finding"));
    var selected = null;
    run.querySelector("ol.timeline").addEventListener("click", function (event) {
      var button = event.target.closest("button.call");
      if (!button) { return; }
      clear(run);
      if (selected) {
        selected.classList.remove("selected");
        selected.removeAttribute("aria-pressed");
      }
      selected = button;
      button.classList.add("selected");
      button.setAttribute("aria-pressed", "true");
      var seq = button.getAttribute("data-seq");
      show(table, bySeq[seq]);
      var list = panel.querySelector("ul");
      while (list.firstChild) { list.removeChild(list.firstChild); }
      findings.forEach(function (item) {
        if (seqsOf(item).indexOf(seq) < 0) { return; }
        item.classList.add("linked");
        var li = document.createElement("li");
        li.textContent = item.querySelector("b").textContent + item.childNodes[1].textContent +
          item.querySelector("code").textContent;
        list.appendChild(li);
      });
      if (!list.firstChild) {
        var none = document.createElement("li");
        none.textContent = "none";
        list.appendChild(none);
      }
      panel.hidden = false;
    });
    findings.forEach(function (item) {
      function pick() {
        var was = item.classList.contains("linked") && run.classList.contains("linking");
        clear(run);
        if (was) { return; }
        run.classList.add("linking");
        item.classList.add("linked");
        seqsOf(item).forEach(function (seq) {
          var b = run.querySelector('button.call[data-seq="' + seq + '"]');
          if (b) { b.classList.add("linked"); }
        });
      }
      item.addEventListener("click", pick);
      item.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); pick(); }
      });
    });
  }
  var ORDER = {ok: 0, warn: 1, escalate: 2, "break": 3};
  function key(cell, kind) {
    var t = cell.textContent;
    if (kind === "num") { return t === "" ? -1 : parseFloat(t); }
    if (kind === "verdict") { return ORDER[t] === undefined ? -1 : ORDER[t]; }
    return t.toLowerCase();
  }
  function runsTable(box) {
    var table = box.querySelector("table.runs");
    var body = table.tBodies[0];
    var filter = box.querySelector("input.filter");
    var shown = box.querySelector(".shown");
    var all = Array.prototype.slice.call(body.rows);
    function count() {
      var n = all.filter(function (r) { return !r.hidden; }).length;
      shown.textContent = n + " of " + all.length + " runs";
    }
    filter.addEventListener("input", function () {
      var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
      all.forEach(function (r) {
        var t = r.textContent.toLowerCase();
        r.hidden = !words.every(function (w) { return t.indexOf(w) >= 0; });
      });
      count();
    });
    table.tHead.querySelectorAll("th").forEach(function (th, column) {
      th.querySelector("button").addEventListener("click", function () {
        var up = th.getAttribute("aria-sort") !== "ascending";
        table.tHead.querySelectorAll("th").forEach(function (o) {
          o.setAttribute("aria-sort", "none");
        });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        var kind = th.getAttribute("data-sort");
        var sorted = all.slice().sort(function (a, b) {
          var x = key(a.cells[column], kind), y = key(b.cells[column], kind);
          var c = x < y ? -1 : x > y ? 1 : 0;
          return up ? c : -c;
        });
        var frag = document.createDocumentFragment();
        sorted.forEach(function (r) { frag.appendChild(r); });
        body.appendChild(frag);
      });
    });
    count();
  }
  var MESSAGES = JSON.parse(document.getElementById("messages").textContent);
  document.querySelectorAll("p.message").forEach(function (p) {
    p.textContent = MESSAGES[Number(p.getAttribute("data-msg"))];
  });
  document.querySelectorAll("section.run").forEach(setup);
  document.querySelectorAll("section.runs").forEach(runsTable);
})();
"""
