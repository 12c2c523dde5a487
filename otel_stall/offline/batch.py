"""The batch driver of the run model: a trace's span starts and ends in, run reports out.

:mod:`otel_stall.offline.analysis` orders a trace's spans as the live processor
would have seen them start and end; :class:`BatchRuns` feeds that order to the
same :class:`~otel_stall.core.runs.RunTable` the live processor drives, so where
each call goes (which run, nested or not, handed off, a session's) is decided
by the one run model. What is left here is the batch's own business: each
run's calls are kept payload-free, fed to its :class:`RunDetector` in time
order when its run span ends (model calls when they start, tool calls when
they end, as live), and the reports and ``stall.*`` attributes collected.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import (
    Finding,
    ModelCall,
    RunReport,
    Status,
    ToolCall,
    Verdict,
    session_run_key,
)
from otel_stall.core.run_state import Node, Role, Run, text_run_key
from otel_stall.core.runs import RunTable
from otel_stall.core.signing import Digests
from otel_stall.core.stall_attributes import (
    AttributeValue,
    SpanEvent,
    finding_event_attributes,
    is_escalation,
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.offline import call_facts as facts
from otel_stall.offline.preview import argument_preview
from otel_stall.semconv import StallEventAttributes

TOOL_END: Final = 0
MODEL_START: Final = 1
MODEL_END: Final = 2
"""A model call's end, ordered among the tool calls' ends: its outcome is known then."""
DELEGATE: Final = 3
"""A sub-agent run's end, ordered among its parent run's calls: its verdict is known then."""
ROUND: Final = 4
"""A round opened inside one model span, at the start of a tool call after its earlier ones."""

Key = tuple[int, int, str]
"""One call of a run, as it is ordered for its detector: time, kind of event, span id."""
Tool = tuple[ToolCall, Digests, "str | None", "str | None"]
"""A tool span without its payloads: the bare call, its digests, its parent id and the
agent name it would give a run of its own."""
Models = dict[str, tuple[int, "str | None", ModelCall]]
"""Model spans by id: start time, parent, and the call (its outcome and usage, no payloads)."""
Agents = dict[str, tuple["str | None", int, "str | None", int]]
"""Agent spans by id: agent name, end time, parent id and start time."""
Delegates = dict[str, tuple["str | None", Verdict]]
"""Sub-agent runs that stalled, by run span id: agent name and verdict, for their parent."""


@dataclass(slots=True)
class SessionPart:
    """One trace's calls of a session run, payload-free, as its analysis left them."""

    keys: list[Key] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict)
    models: Models = field(default_factory=dict)
    contentless: dict[str, str | None] = field(default_factory=dict)
    previews: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class TraceResult:
    """Detection results for one trace, keyed by span id for enrichment."""

    trace_id: str
    reports: list[RunReport] = field(default_factory=list)
    attributes: dict[str, dict[str, AttributeValue]] = field(default_factory=dict)
    """``stall.*`` attributes to add, by span id (tool spans and run spans)."""
    events: dict[str, list[SpanEvent]] = field(default_factory=dict)
    """``stall.detected`` events to add, by run span id."""
    model_calls: int = 0
    """Model calls recognised (a nested model span counts once)."""
    unrecognised: dict[str, int] = field(default_factory=dict)
    """In a trace with no tool call recognised: names of spans that look agent-like but no
    convention reads, with how many."""
    sessions: dict[str, SessionPart] = field(default_factory=dict)
    """This trace's calls of session runs (see :class:`SessionRuns`), by session id: they
    are detected once every trace of the session is in."""


@dataclass(slots=True)
class TraceSpans:
    """What the analysis kept of one trace's spans, for the driver to read."""

    trace_id: str
    tools: dict[str, Tool]
    models: Models
    agents: Agents
    root: tuple[str, int, int] | None
    """The trace's root span: its id, start and end time."""
    sessions: Mapping[str, str]
    """Tool and model spans that name a session: its id (empty: sessions not joined)."""
    handoffs: Mapping[str, str]
    contentless: Mapping[str, str | None]
    previews: Mapping[str, str]


def _unbounded_table() -> RunTable:
    """A run table for one trace's batch: no bounds, no clock (the whole trace is in)."""
    return RunTable(
        max_runs=1 << 62,
        ttl=float("inf"),
        max_spans=1 << 62,
        clock=float,
        on_evict=lambda run: None,
        key_of=text_run_key,
    )


class BatchRuns:
    """Drives the run model over one trace's ordered starts and ends; detects each run."""

    def __init__(self, spans: TraceSpans, policy: StallPolicy, result: TraceResult, enrich: bool):
        self.spans = spans
        self.policy = policy
        self.result = result
        self.enrich = enrich
        self.table = _unbounded_table()
        self.keys: dict[Run, list[Key]] = {}
        self.earliest: dict[Run, int] = {}
        self.landed: dict[str, Run] = {}
        """Each call's run, by span id: the reports are listed in the order of their calls."""
        self.reports: list[tuple[Run, RunReport]] = []
        self.delegates: Delegates = {}

    # -- the model's inputs ------------------------------------------------------------

    def start(self, span_id: str, role: Role, up: str | None) -> None:
        """A span starts (``up``: its nearest tool, model or agent ancestor)."""
        spans = self.spans
        table = self.table
        root = spans.root is not None and spans.root[0] == span_id
        if root:
            table.root_started(spans.trace_id, None, span_id)
        if role is Role.OTHER:
            return  # the plain root: it only closes the trace's run
        inherit = None if up is None else table.inherit(up)
        opens, run = table.start(role, spans.trace_id, span_id, inherit, None, span_id, root)
        if opens and role is Role.TOOL:  # a round inside one model span: see RunTable.start
            call = spans.tools[span_id][0]
            self._add(self._use(run, span_id, up), (call.start_ns, ROUND, span_id))
        elif opens:
            start_ns, _, _ = spans.models[span_id]
            self._add(self._use(run, span_id, up), (start_ns, MODEL_START, span_id))
            self.result.model_calls += 1

    def end(self, span_id: str, role: Role, up: str | None) -> None:
        """A span ends: its call is fed, and the run it is the run span of ends."""
        table = self.table
        spans = self.spans
        node = table.span_ended(span_id) or table.untracked(up)
        if role is Role.TOOL:
            self._tool(span_id, node, up)
        elif role is Role.MODEL and not node.in_model:
            _, _, call = spans.models[span_id]
            self._add(self._use(node.run, span_id, up), (call.end_ns, MODEL_END, span_id))
        root = spans.root is not None and spans.root[0] == span_id
        run = table.closing(node, spans.trace_id, span_id, root)
        if run is None:
            return
        end_ns = self._end_of(span_id)
        report = self._close(run, end_ns)
        if report is not None and not root and report.verdict is not Verdict.OK:
            self._delegate(report, table.delegate_parent(node, spans.trace_id), run, end_ns)

    def finish(self) -> None:
        """The trace is over: runs no span ended (a trace run with no root, sessions) end."""
        for run in list(self.table.runs.values()):
            if not run.closed:
                self._close(run, None)
        self._list_reports()

    # -- calls -------------------------------------------------------------------------

    def _use(self, run: Run | None, span_id: str, up: str | None) -> Run | None:
        session = self.spans.sessions.get(span_id) if run is None else None
        return self.table.use(run, self.spans.trace_id, up, session)

    def _tool(self, span_id: str, node: Node, up: str | None) -> None:
        """A tool span ended: the call of its run, or (nested) the outer call's failure."""
        call = self.spans.tools[span_id][0]
        child = node.child
        if node.nested:
            if child is not None and child.inner_failure is None and call.status is not Status.OK:
                child.inner_failure = call.status  # an MCP server span under its client span
            return
        inner = None if child is None else child.inner_failure
        if inner is not None and call.status is Status.OK:
            call.status = inner  # signed as its own span says; failed as the nested span says
        run = self._use(node.run, span_id, up)
        self._add(run, (call.end_ns, TOOL_END, span_id))
        target = self.spans.handoffs.get(span_id)
        if run is not None and target is not None:
            self.table.hand_over(run, target)  # its later calls are the receiving agent's

    def _add(self, run: Run | None, key: Key) -> None:
        if run is None:
            return
        found = self.keys.get(run)
        if found is None:
            self.keys[run] = [key]
            self.earliest[run] = key[0]
        else:
            found.append(key)
            self.earliest[run] = min(self.earliest[run], key[0])
        self.landed.setdefault(key[2], run)

    def _delegate(self, report: RunReport, up: Run | None, child: Run, end_ns: int) -> None:
        """A stalled sub-agent run's end goes into its parent run's calls, at its end time.

        Only into a parent run still open and started then (a call before), as live,
        where the child's end reaches the parent's detector only if it exists and is open.
        """
        if up is None or up.closed or up not in self.keys or self.earliest[up] >= end_ns:
            return
        span_id = str(child.span_id)
        self.keys[up].append((end_ns, DELEGATE, span_id))
        self.delegates[span_id] = (report.attributes.get("agent"), report.verdict)

    # -- runs --------------------------------------------------------------------------

    def _end_of(self, span_id: str) -> int:
        """When the run span ``span_id`` ended."""
        spans = self.spans
        agent = spans.agents.get(span_id)
        if agent is not None:
            return agent[1]
        tool = spans.tools.get(span_id)
        if tool is not None:
            return tool[0].end_ns
        return spans.root[2] if spans.root is not None else 0

    def _close(self, run: Run, end_ns: int | None) -> RunReport | None:
        """Finish a run's receivers, then the run; its report, if it was used."""
        receivers, used = self.table.close(run)
        for receiver in receivers:
            self._detect(receiver, end_ns)
        return self._detect(run, end_ns) if used else None

    def _detect(self, run: Run, end_ns: int | None) -> RunReport | None:
        """Detect one run in its calls' time order; a session's calls wait for its others."""
        run.closed = True
        keys = self.keys.get(run)
        if not keys:
            return None
        keys.sort()
        if run.session is not None:
            self._to_session(run.session, keys)
            return None
        spans = self.spans
        owner = run.owner
        run_span = None if owner is not None else run.span_id
        if end_ns is None:
            end_ns = keys[-1][0]
        if owner is not None:
            agent: str | None = run.run_key[-1]
            run_span_id = None
        elif run_span is None:
            agent, run_span_id = None, spans.root[0] if spans.root is not None else None
        else:
            agent, run_span_id = self._agent_of(str(run_span)), str(run_span)
        context: dict[str, Any] = {
            "trace_id": spans.trace_id,
            "run_span_id": run_span_id,
            "agent": agent,
            **content_note(spans.contentless, keys),
        }
        report, fired = detect_run(
            self.policy, run.run_key, keys, spans, self.delegates, context, end_ns, self.enrich
        )
        if self.enrich:
            self._enriched(report, run_span_id, fired)
        self.reports.append((run, report))
        return report

    def _agent_of(self, run_span: str) -> str | None:
        agent = self.spans.agents.get(run_span)
        if agent is not None:
            return agent[0]
        tool = self.spans.tools.get(run_span)
        return None if tool is None else tool[3]

    def _enriched(
        self, report: RunReport, run_span_id: str | None, fired: list[tuple[int, Finding]]
    ) -> None:
        """The ``stall.*`` attributes of the run's tool spans and run span, and its events."""
        result = self.result
        for row in report.ledger:
            if row.span_id is not None:  # an agent used as a tool may hold its run's already
                result.attributes.setdefault(row.span_id, {}).update(tool_span_attributes(row))
        if run_span_id is not None:
            result.attributes.setdefault(run_span_id, {}).update(run_span_attributes(report))
            result.events[run_span_id] = [
                SpanEvent(StallEventAttributes.EVENT_NAME, t, finding_event_attributes(f))
                for t, f in fired
                if is_escalation(f)  # a refusal gets no event: see stall_attributes
            ]

    def _to_session(self, session: str, keys: list[Key]) -> None:
        """A session's calls in this trace, payload-free, for :class:`SessionRuns` to join."""
        spans = self.spans
        part = self.result.sessions.get(session)
        if part is None:
            part = self.result.sessions[session] = SessionPart()
        part.keys += keys
        for _, _, span_id in keys:
            tool = spans.tools.get(span_id)
            if tool is None:
                part.models[span_id] = spans.models[span_id]
                continue
            part.tools[span_id] = tool
            if span_id in spans.contentless:
                part.contentless[span_id] = spans.contentless[span_id]
            head = spans.previews.get(tool[1].call_signature)
            if head is not None:
                part.previews[tool[1].call_signature] = head

    def _list_reports(self) -> None:
        """The reports in the order their runs' first calls were taken (tools, then models).

        A handoff's receiving runs come last, by their giver, in the order they
        were handed; the trace's own run goes after its session runs were split off.
        """
        rank: dict[Run, int] = {}
        for span_id in (*self.spans.tools, *self.spans.models):
            run = self.landed.get(span_id)
            if run is not None:
                base = (run.owner or run) if run.session is None else _SESSION
                rank.setdefault(base, len(rank))
        if _SESSION in rank:
            for run in rank:
                if run.span_id is None and run.owner is None and run.session is None:
                    rank[run] = len(rank) + 1  # the trace's run, after its sessions split off
        order = {run: i for i, (run, _) in enumerate(self.reports)}

        def place(item: tuple[Run, RunReport]) -> tuple[int, int, int]:
            run = item[0]
            if run.owner is not None:
                return 1, rank.get(run.owner, 0), order[run]
            return 0, rank.get(run, 0), 0

        self.result.reports += [report for _, report in sorted(self.reports, key=place)]


_SESSION: Final = Run("", None, session="\x00sessions")
"""Stands for every session run in the reports' order: they are listed elsewhere."""


def detect_run(
    policy: StallPolicy,
    run_key: Any,
    keys: list[Key],
    spans: TraceSpans,
    delegates: Delegates,
    context: dict[str, Any],
    end_ns: int,
    enrich: bool,
) -> tuple[RunReport, list[tuple[int, Finding]]]:
    """Feed one run's calls in time order and finish it; its report, with ``context``.

    With it, if ``enrich``, the findings fired, with their times (those fired by
    finishing at ``end_ns``).
    """
    detector = RunDetector(policy, run_key)
    fired = feed(detector, keys, spans.tools, spans.models, enrich, delegates)
    before = len(detector.findings) if enrich else 0
    report = detector.finish()
    previews = finding_previews(spans.previews, report)
    if previews:
        context["argument_previews"] = previews
    context[facts.CALL_FACTS_KEY] = facts.call_facts(keys, spans.tools, spans.models)
    context[facts.HEADS_KEY] = facts.run_heads(report.ledger, spans.previews)
    if enrich:
        fired += ((end_ns, f) for f in report.findings[before:])
    if report.attributes:
        report = replace(report, attributes=context)
    else:  # the detector's own fresh, empty dict: fill it rather than copy the report
        report.attributes.update(context)
    return report, fired


def feed(
    detector: RunDetector,
    keys: list[Key],
    tools: Mapping[str, Tool],
    models: Models,
    enrich: bool,
    delegates: Delegates,
) -> list[tuple[int, Finding]]:
    """Feed a run's calls in time order; the findings fired, with their times, if ``enrich``.

    The records' own run keys are left as the source gave them: the detector
    reads the run key from itself, never from the call.
    """
    fired: list[tuple[int, Finding]] = []
    on_tool, on_model, on_model_end = detector.tool_call, detector.model_call, detector.model_ended
    for time_ns, order, span_id in keys:
        if order == TOOL_END:
            tool = tools[span_id]
            findings = on_tool(tool[0], tool[1]).findings
        elif order == MODEL_END:
            findings = on_model_end(models[span_id][2])
        elif order == MODEL_START:
            findings = on_model(models[span_id][2])
        elif order == ROUND:
            findings = on_model(ModelCall(None, None, time_ns))
        else:
            agent, verdict = delegates[span_id]
            findings = detector.delegate_ended(agent, verdict, time_ns)
        if findings and enrich:
            fired += ((time_ns, f) for f in findings)
    return fired


def content_note(contentless: Mapping[str, str | None], keys: list[Key]) -> dict[str, object]:
    """``content_captured: False`` and the switch, if no tool call of the run had content.

    The detector never calls content-less calls repeats, so such a run is
    ``ok`` by construction: the report says so rather than look healthy.
    """
    if not contentless:
        return {}
    tools = [span_id for _, order, span_id in keys if order == TOOL_END]
    if not tools or any(span_id not in contentless for span_id in tools):
        return {}
    switch = next((contentless[t] for t in tools if contentless[t]), None)
    return {"content_captured": False, "content_switch": switch}


def finding_previews(previews: Mapping[str, str], report: RunReport) -> dict[str, str]:
    """Argument previews of the calls the findings point at, by call signature."""
    if not previews or not report.findings:
        return {}
    seqs = {f.seq for f in report.findings}
    found: dict[str, str] = {}
    for row in report.ledger:
        head = previews.get(row.call_signature) if row.seq in seqs else None
        preview = None if head is None else argument_preview(head)
        if preview is not None:
            found[row.call_signature] = preview
    return found


class SessionRuns:
    """Joins session runs across traces: one run per session, detected once all are in.

    An instrumentation with no span spanning a run (gemini-cli: each model call
    and each tool round is a trace of its own) names its session on every span
    instead; its calls outside every agent span are one run per session, as
    the live processor makes them. The replay hands every analysed trace to
    :meth:`add`, then calls :meth:`finish`. A session run has no run span:
    its tool spans get their ``stall.*`` attributes, and its report and
    findings are the report's alone (no span carries the run's attributes or
    ``stall.detected`` events; live, findings reach metrics, log events and
    ``on_finding``).
    """

    __slots__ = ("_parts", "policy")

    def __init__(self, policy: StallPolicy | None = None) -> None:
        self.policy = policy or StallPolicy()
        self._parts: dict[str, list[tuple[TraceResult, SessionPart]]] = {}

    def add(self, result: TraceResult) -> None:
        """Keep a trace's session parts; the trace's own runs are done already."""
        for session, part in result.sessions.items():
            self._parts.setdefault(session, []).append((result, part))
        result.sessions = {}

    def finish(self, *, enrich: bool = True) -> list[tuple[TraceResult, RunReport]]:
        """Detect every session's run; its tool spans' attributes go to their traces.

        Each report comes with the trace of the session's first call.
        """
        reports = [self._detect(s, parts, enrich) for s, parts in self._parts.items()]
        self._parts = {}
        return reports

    def _detect(
        self, session: str, parts: list[tuple[TraceResult, SessionPart]], enrich: bool
    ) -> tuple[TraceResult, RunReport]:
        joined = SessionPart()
        owner: dict[str, TraceResult] = {}
        for result, part in parts:
            joined.keys += part.keys
            joined.tools.update(part.tools)
            joined.models.update(part.models)
            joined.contentless.update(part.contentless)
            for signature, head in part.previews.items():
                joined.previews.setdefault(signature, head)
            owner.update(dict.fromkeys(part.tools, result))
            owner.update(dict.fromkeys(part.models, result))
        keys = joined.keys
        keys.sort()
        spans = TraceSpans(
            "", joined.tools, joined.models, {}, None, {}, {}, joined.contentless, joined.previews
        )
        context: dict[str, Any] = {
            "trace_id": None,
            "run_span_id": None,
            "agent": None,
            "session": session,
            **content_note(joined.contentless, keys),
        }
        # A session has no sub-agents, and no span to carry its findings.
        report, _ = detect_run(
            self.policy, session_run_key(session), keys, spans, {}, context, 0, False
        )
        if enrich:
            for row in report.ledger:
                span_id = row.span_id
                trace = None if span_id is None else owner.get(span_id)
                if span_id is not None and trace is not None:
                    trace.attributes.setdefault(span_id, {}).update(tool_span_attributes(row))
        return owner[keys[0][2]], report


__all__ = ["BatchRuns", "SessionPart", "SessionRuns", "TraceResult", "TraceSpans"]
