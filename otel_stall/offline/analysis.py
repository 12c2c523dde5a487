"""Whole-trace analysis for spans that arrive after the fact (replay, gateway).

Spans of a trace may come in any order and in several batches. A
:class:`TraceAnalyzer` keeps only what detection needs, then resolves runs,
orders each run's events the way the live processor sees them (model calls
when they start, tool calls when they end) and runs the same
:class:`RunDetector`. A complete trace therefore gets the same verdicts and
``stall.*`` attributes as it would have got live.

Memory follows the tool calls, not the spans. A tool, model or agent span
keeps a small record (a payload-free :class:`ToolCall` and its digests, a start
time, an agent name) with its parent id. A plain span keeps only its parent
link, as 16 raw bytes in one ``bytearray`` per trace: since spans come in any
order, any plain span may turn out to sit between a tool span and its agent
span. The links become a dict only while the trace is analysed, and only if a
walk up from a tool or model span meets a plain span.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from otel_stall.conventions import Conventions, Role, SpanRecord, agent_name, looks_agent_like
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import (
    ABSENT,
    Finding,
    ModelCall,
    RunReport,
    Status,
    ToolCall,
    Verdict,
    handoff_run_key,
    session_run_key,
)
from otel_stall.core.signing import Digests
from otel_stall.core.stall_attributes import (
    AttributeValue,
    SpanEvent,
    finding_event_attributes,
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.offline import call_facts as facts
from otel_stall.offline.preview import argument_preview
from otel_stall.semconv import StallEventAttributes

_NESTED: Final = "\x00nested"
"""Sentinel run for a tool span nested in another tool span (never a span id)."""
_TOOL_FIRST: Final = 0
_MODEL_NEXT: Final = 1
_WALKING: Final = "\x00walking"
"""Memo mark of a span on the walk under way: meeting it again is a cycle."""
_MODEL_DONE: Final = 2
"""A model call's end, ordered among the tool calls' ends: its outcome is known then."""
_DELEGATE: Final = 3
"""A sub-agent run's end, ordered among its parent run's calls: its verdict is known then."""
_MAX_HOPS: Final = 10_000
_MAX_NAMES: Final = 64
"""Distinct unrecognised span names kept per trace."""
_OTHER: Final = Role.OTHER
_TOOL: Final = Role.TOOL
_MODEL: Final = Role.MODEL
_intern = sys.intern


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


_Tool = tuple[ToolCall, Digests, "str | None", "str | None"]
"""A tool span without its payloads: the bare call, its digests, its parent id and the
agent name it would give a run of its own."""
_Models = dict[str, tuple[int, "str | None", ModelCall]]
"""Model spans by id: start time, parent, and the call (its outcome and usage, no payloads)."""


_Delegates = dict[str, tuple["str | None", Verdict]]
"""Sub-agent runs that stalled, by run span id: agent name and verdict, for their parent."""


@dataclass(slots=True)
class SessionPart:
    """One trace's calls of a session run, payload-free, as its analysis left them."""

    keys: list[tuple[int, int, str]] = field(default_factory=list)
    tools: dict[str, _Tool] = field(default_factory=dict)
    models: _Models = field(default_factory=dict)
    contentless: dict[str, str | None] = field(default_factory=dict)
    previews: dict[str, str] = field(default_factory=dict)


def _feed(
    detector: RunDetector,
    keys: list[tuple[int, int, str]],
    tools: dict[str, _Tool],
    models: _Models,
    enrich: bool,
    delegates: _Delegates,
) -> list[tuple[int, Finding]]:
    """Feed a run's calls in time order; the findings fired, with their times, if ``enrich``.

    The records' own run keys are left as the source gave them: the detector
    reads the run key from itself, never from the call.
    """
    fired: list[tuple[int, Finding]] = []
    on_tool, on_model, on_model_end = detector.tool_call, detector.model_call, detector.model_ended
    for time_ns, order, span_id in keys:
        if order == _TOOL_FIRST:
            tool = tools[span_id]
            findings = on_tool(tool[0], tool[1]).findings
        elif order == _MODEL_DONE:
            findings = on_model_end(models[span_id][2])
        elif order == _MODEL_NEXT:
            findings = on_model(models[span_id][2])
        else:
            agent, verdict = delegates[span_id]
            findings = detector.delegate_ended(agent, verdict, time_ns)
        if findings and enrich:
            fired += ((time_ns, f) for f in findings)
    return fired


def _canonical_link(span_id: str, parent: str) -> bytes | None:
    """Both ids as 16 raw bytes, if they are 16 lower-case hex digits each."""
    if len(span_id) != 16 or len(parent) != 16:
        return None
    both = span_id + parent
    try:
        raw = bytes.fromhex(both)
    except ValueError:
        return None
    return raw if raw.hex() == both else None


class TraceAnalyzer:
    """Collects one trace's spans and analyses them once the trace is complete.

    :meth:`add` takes any span. The replay's decoder hands plain spans over
    with :meth:`add_link` instead, without building a :class:`SpanRecord` or
    decoding their attributes.
    """

    __slots__ = (
        "_agents",
        "_contentless",
        "_handoffs",
        "_links",
        "_models",
        "_odd_links",
        "_previews",
        "_root_end",
        "_root_id",
        "_root_start",
        "_sessions",
        "_tools",
        "_unrecognised",
        "conventions",
        "policy",
        "spans",
        "trace_id",
    )

    def __init__(
        self,
        trace_id: str,
        policy: StallPolicy | None = None,
        conventions: Conventions | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.policy = policy or StallPolicy()
        self.conventions = conventions or Conventions()
        self.spans = 0
        self._links = bytearray()
        """Plain spans' parent links: 8 bytes of span id, then 8 of parent id."""
        self._odd_links: dict[str, str] | None = None
        """Links whose ids are not 16 lower-case hex digits (hand-made records)."""
        # Created on first use: a trace of plain spans then costs little more than its links.
        self._tools: dict[str, _Tool] | None = None
        self._models: _Models | None = None
        """Model spans: start time, parent id and the model call (no payloads)."""
        self._agents: dict[str, tuple[str | None, int, str | None]] | None = None
        """Agent spans: agent name, end time and parent id."""
        self._previews: dict[str, str] | None = None
        """Call signature -> the start of its first call's arguments, for the reports' previews."""
        self._contentless: dict[str, str | None] | None = None
        """Tool spans with neither arguments nor result: the switch that captures content."""
        self._unrecognised: dict[str, int] | None = None
        """Agent-like names of spans no convention reads (see ``looks_agent_like``)."""
        self._root_id: str | None = None
        """The earliest parentless span: only its id and times are kept, not the span."""
        self._root_start = 0
        self._root_end = 0
        self._sessions: dict[str, str] | None = None
        """Tool and model spans that name a session (see ``Conventions.session``): its id."""
        self._handoffs: dict[str, str] | None = None
        """Handoff tool spans (see ``Conventions.handoff_target``): the agent they hand to."""

    # -- intake --------------------------------------------------------------------------

    def add(self, span: SpanRecord, role: Role | None = None) -> Role:
        """Take one span; payloads are hashed now and dropped, so memory stays small.

        ``role`` is what this analyzer's ``conventions.role`` says of the span's
        attributes, if the caller has asked already.
        """
        span_id = span.span_id
        parent = self._place(span_id, span.parent_span_id or None, span.start_ns, span.end_ns)
        if role is None:
            role = self.conventions.span_role(span.name, span.attributes)
        if role is _OTHER:
            role = self.conventions.role_by_name(span.name)
            if role is _OTHER:
                self._note_unrecognised(span)
                if parent is not None:
                    link = _canonical_link(span_id, parent)
                    if link is not None:
                        self._links += link
                    else:
                        if self._odd_links is None:
                            self._odd_links = {}
                        self._odd_links[span_id] = parent
                return role
        if role is not Role.AGENT:
            self._note_session(span)
        if role is _TOOL:
            self._keep_tool(span, parent)
        elif role is _MODEL:
            # The detector reads a model call's place, outcome and token counts: no payloads.
            if self._models is None:
                self._models = {}
            self._models[span_id] = (span.start_ns, parent, self.conventions.model_call(span))
        else:
            if self._agents is None:
                self._agents = {}
            self._agents[span_id] = (agent_name(span.attributes), span.end_ns, parent)
        return role

    def _note_session(self, span: SpanRecord) -> None:
        """Note the session a tool or model span names: outside every agent span, its run."""
        session = self.conventions.session(span.attributes)
        if session is not None:
            if self._sessions is None:
                self._sessions = {}
            self._sessions[span.span_id] = _intern(session)

    def _note_unrecognised(self, span: SpanRecord) -> None:
        """Count a plain span whose name looks agent-like and that holds no role key."""
        if not looks_agent_like(span.name):
            return
        keys = self.conventions.role_keys
        if keys is not None and not keys.isdisjoint(span.attributes):
            return  # a key the conventions know, with a value they chose not to read as a role
        found = self._unrecognised
        if found is None:
            found = self._unrecognised = {}
        if span.name in found or len(found) < _MAX_NAMES:
            found[span.name] = found.get(span.name, 0) + 1

    def _keep_tool(self, span: SpanRecord, parent: str | None) -> None:
        """Sign the call, then keep a copy of it without its payloads.

        With it, the name the span would give its run, should it turn out to be
        an agent used as a tool; and, for a call without content, the switch
        that captures content.
        """
        call = self.conventions.tool_call(span)
        target = self.conventions.handoff_target(call)
        if target is not None:
            if self._handoffs is None:
                self._handoffs = {}
            self._handoffs[span.span_id] = target
        if call.arguments is ABSENT and call.result is ABSENT:
            if self._contentless is None:
                self._contentless = {}
            self._contentless[span.span_id] = self.conventions.content_switch(span.attributes)
        digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        if self._tools is None:
            self._tools = {}
        agent = agent_name(span.attributes)
        self._tools[span.span_id] = (_payload_free(call), digests, parent, agent)
        self._previews = facts.keep_heads(self._previews, call, digests)

    def _place(self, span_id: str, parent: str | None, start_ns: int, end_ns: int) -> str | None:
        """Count a span, note it if it may be the trace's root, and share its parent's id."""
        self.spans += 1
        if parent is None:
            if self._root_id is None or start_ns < self._root_start:
                self._root_id, self._root_start, self._root_end = span_id, start_ns, end_ns
            return None
        # Most of a run's spans share one parent, the agent span: keep one copy of its id.
        return _intern(parent) if type(parent) is str else parent

    def add_link(self, link: bytes) -> None:
        """Take a plain span that has a parent: 16 raw bytes, its span id then its parent's.

        The caller has checked that no role attribute is set and that the name is
        not an agent span's: :meth:`add` would keep nothing more of the span.
        """
        self.spans += 1
        self._links += link

    @property
    def run_span_ids(self) -> frozenset[str]:
        """Agent spans seen so far: a gateway may decide once these have arrived."""
        return frozenset(self._agents or ())

    # -- analysis ------------------------------------------------------------------------

    def analyse(self, *, enrich: bool = True, sessions: bool = False) -> TraceResult:
        """Resolve runs, order events as the live processor would, and detect.

        ``enrich=False`` leaves :attr:`TraceResult.attributes` and ``events``
        empty: a report needs only the runs' reports. ``sessions``: the calls
        outside every agent span that name a session go to
        :attr:`TraceResult.sessions` instead of the trace's run, for
        :class:`SessionRuns` to join with the session's other traces.
        """
        result = TraceResult(self.trace_id)
        tools = self._tools or {}
        if not tools:  # listed where no call was seen: there they explain the silence
            result.unrecognised = self._unrecognised or {}
        models = self._models or {}
        if not tools and not models:
            return result
        agents = self._agents or {}
        walk = _Ancestry(self, tools, models, agents)
        models, agents = walk.models_and_tool_runs()
        result.model_calls = len(models)
        runs: dict[str | None, list[tuple[int, int, str]]] = {}
        for span_id, (call, _, parent, _) in tools.items():
            run = parent if parent in agents else walk.run_of(parent, True)
            if run is _NESTED:
                walk.pass_failure_out(call.status, parent)
            else:
                key = (call.end_ns, _TOOL_FIRST, span_id)
                found = runs.get(run)
                if found is None:
                    runs[run] = [key]
                else:
                    found.append(key)
        for span_id, (start_ns, parent, model) in models.items():
            run = parent if parent in agents else walk.run_of(parent, False)
            key = (start_ns, _MODEL_NEXT, span_id)
            done = (model.end_ns, _MODEL_DONE, span_id)
            found = runs.get(run)
            if found is None:
                runs[run] = [key, done]
            else:
                found += (key, done)
        if sessions and self._sessions and None in runs:
            self._split_sessions(result, runs, tools, models)
        handed = self._split_handoffs(runs) if self._handoffs else []
        if len(runs) == 1:
            for run_span, keys in runs.items():
                keys.sort()
                run_span_id = run_span if run_span is not None else self._root_id
                self._detect(result, run_span, run_span_id, keys, tools, models, agents, enrich, {})
        else:
            self._detect_nested(result, runs, walk, tools, models, agents, enrich)
        for run_span, agent, keys in handed:  # no span of their own: no run attributes
            self._detect(result, run_span, None, keys, tools, models, agents, enrich, {}, agent)
        return result

    def _detect_nested(
        self,
        result: TraceResult,
        runs: dict[str | None, list[tuple[int, int, str]]],
        walk: _Ancestry,
        tools: dict[str, _Tool],
        models: _Models,
        agents: dict[str, tuple[str | None, int, str | None]],
        enrich: bool,
    ) -> None:
        """Several runs: each child before its parent, which learns if the child stalled.

        Runs are detected in the order they end (the trace's own run last), as
        the live processor finishes them; the reports keep the runs' order.
        """
        delegates: _Delegates = {}
        done: set[str | None] = set()
        made: dict[str | None, RunReport] = {}
        never = float("inf")
        for run_span in sorted(runs, key=lambda r: agents[r][1] if r is not None else never):
            keys = runs[run_span]
            keys.sort()
            run_span_id = run_span if run_span is not None else self._root_id
            report = self._detect(
                result, run_span, run_span_id, keys, tools, models, agents, enrich, delegates
            )
            done.add(run_span)
            made[run_span] = report
            if run_span is not None and report.verdict is not Verdict.OK:
                self._hand_up(run_span, report.verdict, runs, done, walk, agents, delegates)
        result.reports[:] = [made[run_span] for run_span in runs]

    def _hand_up(
        self,
        child: str,
        verdict: Verdict,
        runs: dict[str | None, list[tuple[int, int, str]]],
        done: set[str | None],
        walk: _Ancestry,
        agents: dict[str, tuple[str | None, int, str | None]],
        delegates: _Delegates,
    ) -> None:
        """A stalled sub-agent run's end goes into its parent run's calls, at its end time.

        Only into a parent run still open and already started then (it had a call
        before), as live, where the child's end reaches the parent's detector only
        if that detector exists and has not finished.
        """
        name, end_ns, parent = agents[child]
        up = parent if parent in agents else walk.run_of(parent, False)
        keys = runs.get(up)
        if keys is None or up in done or not any(key[0] < end_ns for key in keys):
            return
        keys.append((end_ns, _DELEGATE, child))
        delegates[child] = (name, verdict)

    def _split_handoffs(
        self, runs: dict[str | None, list[tuple[int, int, str]]]
    ) -> list[tuple[str | None, str, list[tuple[int, int, str]]]]:
        """Cut each run at its handoff calls: what follows one is the receiving agent's run.

        The handoff call itself stays with the agent that made it. Runs by the
        run they were cut from and the receiving agent's name, in time order.
        """
        handoffs = self._handoffs or {}
        handed: list[tuple[str | None, str, list[tuple[int, int, str]]]] = []
        for run_span, keys in runs.items():
            if not any(key[2] in handoffs and key[1] == _TOOL_FIRST for key in keys):
                continue
            keys.sort()
            own: list[tuple[int, int, str]] = []
            receivers: dict[str, list[tuple[int, int, str]]] = {}
            current = own
            for key in keys:
                current.append(key)
                if key[1] == _TOOL_FIRST and key[2] in handoffs:
                    current = receivers.setdefault(handoffs[key[2]], [])
            runs[run_span] = own
            handed += ((run_span, agent, got) for agent, got in receivers.items() if got)
        return handed

    def _split_sessions(
        self,
        result: TraceResult,
        runs: dict[str | None, list[tuple[int, int, str]]],
        tools: dict[str, _Tool],
        models: _Models,
    ) -> None:
        """Move the trace run's calls that name a session to their session's part."""
        sessions = self._sessions or {}
        contentless, previews = self._contentless or {}, self._previews or {}
        rest: list[tuple[int, int, str]] = []
        for key in runs.pop(None):
            span_id = key[2]
            session = sessions.get(span_id)
            if session is None:
                rest.append(key)
                continue
            part = result.sessions.get(session)
            if part is None:
                part = result.sessions[session] = SessionPart()
            part.keys.append(key)
            tool = tools.get(span_id)
            if tool is None:
                part.models[span_id] = models[span_id]
                continue
            part.tools[span_id] = tool
            if span_id in contentless:
                part.contentless[span_id] = contentless[span_id]
            head = previews.get(tool[1].call_signature)
            if head is not None:
                part.previews[tool[1].call_signature] = head
        if rest:
            runs[None] = rest

    def _detect(
        self,
        result: TraceResult,
        agent_span: str | None,
        run_span_id: str | None,
        keys: list[tuple[int, int, str]],
        tools: dict[str, _Tool],
        models: _Models,
        agents: dict[str, tuple[str | None, int, str | None]],
        enrich: bool,
        delegates: _Delegates,
        handoff: str | None = None,
    ) -> RunReport:
        """Detect one run; ``handoff``: the agent a handoff gave the run of ``agent_span`` to."""
        run_key = (
            (self.trace_id, agent_span)
            if handoff is None
            else handoff_run_key((self.trace_id, agent_span), handoff)
        )
        detector = RunDetector(self.policy, run_key)
        fired = _feed(detector, keys, tools, models, enrich, delegates)
        agent = agents.get(agent_span) if agent_span is not None else None
        if agent is not None:
            end_ns = agent[1]
        elif agent_span is None and self._root_id is not None:
            end_ns = self._root_end
        else:
            end_ns = keys[-1][0] if keys else 0
        before = len(detector.findings) if enrich else 0
        report = detector.finish()
        context: dict[str, Any] = {
            "trace_id": self.trace_id,
            "run_span_id": run_span_id,
            "agent": handoff if handoff is not None else _agent_of(agent, agent_span),
            **_content_note(self._contentless, keys),
        }
        previews = _finding_previews(self._previews, report)
        if previews:
            context["argument_previews"] = previews
        context[facts.CALL_FACTS_KEY] = facts.call_facts(keys, tools, models)
        context[facts.HEADS_KEY] = facts.run_heads(report.ledger, self._previews)
        if report.attributes:
            report = replace(report, attributes=context)
        else:  # the detector's own fresh, empty dict: fill it rather than copy the report
            report.attributes.update(context)
        result.reports.append(report)
        if not enrich:
            return report
        fired += ((end_ns, f) for f in report.findings[before:])
        for row in report.ledger:
            if row.span_id is not None:  # an agent used as a tool may hold its run's already
                result.attributes.setdefault(row.span_id, {}).update(tool_span_attributes(row))
        if run_span_id is not None:
            result.attributes.setdefault(run_span_id, {}).update(run_span_attributes(report))
            result.events[run_span_id] = [
                SpanEvent(StallEventAttributes.EVENT_NAME, t, finding_event_attributes(f))
                for t, f in fired
            ]
        return report


def _agent_of(agent: tuple[str | None, int, str | None] | None, span: str | None) -> str | None:
    """The agent name of an agent span's run (none for a trace's run)."""
    return agent[0] if agent is not None and span else None


def _content_note(
    contentless: dict[str, str | None] | None, keys: list[tuple[int, int, str]]
) -> dict[str, object]:
    """``content_captured: False`` and the switch, if no tool call of the run had content.

    The detector never calls content-less calls repeats, so such a run is
    ``ok`` by construction: the report says so rather than look healthy.
    """
    if not contentless:
        return {}
    tools = [span_id for _, order, span_id in keys if order == _TOOL_FIRST]
    if not tools or any(span_id not in contentless for span_id in tools):
        return {}
    switch = next((contentless[t] for t in tools if contentless[t]), None)
    return {"content_captured": False, "content_switch": switch}


def _finding_previews(previews: dict[str, str] | None, report: RunReport) -> dict[str, str]:
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
        keys: list[tuple[int, int, str]] = []
        tools: dict[str, _Tool] = {}
        models: _Models = {}
        contentless: dict[str, str | None] = {}
        previews: dict[str, str] = {}
        owner: dict[str, TraceResult] = {}
        for result, part in parts:
            keys += part.keys
            tools.update(part.tools)
            models.update(part.models)
            contentless.update(part.contentless)
            for signature, head in part.previews.items():
                previews.setdefault(signature, head)
            owner.update(dict.fromkeys(part.tools, result))
            owner.update(dict.fromkeys(part.models, result))
        keys.sort()
        detector = RunDetector(self.policy, session_run_key(session))
        _feed(detector, keys, tools, models, False, {})  # a session has no sub-agents
        report = detector.finish()
        context: dict[str, Any] = {
            "trace_id": None,
            "run_span_id": None,
            "agent": None,
            "session": session,
            **_content_note(contentless, keys),
        }
        found = _finding_previews(previews, report)
        if found:
            context["argument_previews"] = found
        report = replace(report, attributes=context)
        if enrich:
            for row in report.ledger:
                span_id = row.span_id
                trace = None if span_id is None else owner.get(span_id)
                if span_id is not None and trace is not None:
                    trace.attributes.setdefault(span_id, {}).update(tool_span_attributes(row))
        return owner[keys[0][2]], report


def _payload_free(call: ToolCall) -> ToolCall:
    """A copy of ``call`` without its payloads."""
    return ToolCall(
        _intern(call.tool),
        ABSENT,
        ABSENT,
        call.status,
        call.run_key,
        call.seq,
        call.call_id,
        call.span_id,
        call.start_ns,
        call.end_ns,
        call.exempt,
        call.approval,
        call.error,
    )


class _Ancestry:
    """Walks up from a tool or model span to its run, during one analysis.

    Each span's run is memoised as the walk passes it, and a walk that comes
    back to a span it passed stops there (a parent cycle holds no agent span):
    resolving a whole trace costs one visit per span, however deep or cyclic
    its parent links (issue 21: a 4 MB chain took 88 s walked from every span).
    Tool walks and model walks differ at tool spans, so each has its own memo.
    """

    __slots__ = ("agents", "analyzer", "memo", "models", "plain", "tools")

    def __init__(
        self,
        analyzer: TraceAnalyzer,
        tools: dict[str, _Tool],
        models: _Models,
        agents: dict[str, tuple[str | None, int, str | None]],
    ) -> None:
        self.analyzer = analyzer
        self.tools = tools
        self.models = models
        self.agents = agents
        self.plain: dict[bytes, bytes] | None = None
        self.memo: tuple[dict[str, str | None], dict[str, str | None]] = ({}, {})
        """The run a walk from each span reaches: model walks, then tool walks."""

    def models_and_tool_runs(
        self,
    ) -> tuple[_Models, dict[str, tuple[str | None, int, str | None]]]:
        """The model calls that count, and the run spans, agents used as tools included.

        A model span inside another model span (a framework's wrapper around
        the client call) is the same call: only the outermost counts. A tool
        span that holds model calls with no agent span between is an agent
        used as a tool: it is the run span of the calls inside it, as the live
        processor makes it when the first of them starts.
        """
        models, agents = self.models, dict(self.agents)
        counted: _Models = {}
        for span_id, entry in models.items():
            above = self._above_model(entry[1])
            if above is _NESTED:
                continue
            counted[span_id] = entry
            if above is not None and above not in agents:
                call, _, parent, name = self.tools[above]
                agents[above] = (name, call.end_ns, parent)
        self.agents = agents  # every model span stays in self.models: tools walk through them
        return counted, agents

    def _above_model(self, parent: str | None) -> str | None:
        """The nearest agent or tool span above a model span; ``_NESTED`` inside a model."""
        agents, tools, models = self.agents, self.tools, self.models
        hops = 0
        while parent is not None and hops < _MAX_HOPS:
            if parent in agents or parent in tools:
                return parent
            model = models.get(parent)
            if model is not None:
                return _NESTED
            parent = self._plain_parent(parent)
            hops += 1
        return None

    def pass_failure_out(self, status: Status, parent: str | None) -> None:
        """A nested tool span failed: the outermost tool span of its run is the call that did.

        Signed as its own span says; failed as the nested span says (an MCP server span
        under its client span), as the live processor does.
        """
        if status is Status.OK:
            return
        outer: ToolCall | None = None
        hops = 0
        while parent is not None and parent not in self.agents and hops < _MAX_HOPS:
            tool = self.tools.get(parent)
            if tool is not None:
                outer, parent = tool[0], tool[2]
            else:
                model = self.models.get(parent)
                parent = model[1] if model is not None else self._plain_parent(parent)
            hops += 1
        if outer is not None and outer.status is Status.OK:
            outer.status = status

    def run_of(self, parent: str | None, is_tool: bool) -> str | None:
        """The nearest agent ancestor, ``None`` for the trace, or ``_NESTED``.

        A tool span inside another tool span (an MCP client span under
        ``execute_tool``) is the same call seen twice: only the outer one counts.
        """
        memo = self.memo[is_tool]
        path: list[str] = []
        run = self._walk(parent, is_tool, memo, path)
        for span_id in path:
            memo[span_id] = run
        return run

    def _walk(
        self, parent: str | None, is_tool: bool, memo: dict[str, str | None], path: list[str]
    ) -> str | None:
        """Up from ``parent`` to a run, a known span, a missing parent or a revisit.

        The spans passed are added to ``path``, each marked in ``memo`` as being
        walked, so that meeting one again ends the walk as a cycle.
        """
        agents, tools, models = self.agents, self.tools, self.models
        while parent is not None:
            if parent in agents:
                return parent
            if parent in memo:
                known = memo[parent]
                return None if known is _WALKING else known
            tool = tools.get(parent)
            if tool is not None and is_tool:
                return _NESTED
            path.append(parent)
            memo[parent] = _WALKING
            if tool is not None:
                parent = tool[2]
            else:
                model = models.get(parent)
                parent = model[1] if model is not None else self._plain_parent(parent)
        return None

    def _plain_parent(self, span_id: str) -> str | None:
        odd = self.analyzer._odd_links
        if odd is not None and span_id in odd:
            return odd[span_id]
        if len(span_id) != 16:
            return None
        try:
            key = bytes.fromhex(span_id)
        except ValueError:
            return None
        if key.hex() != span_id:
            return None  # "AB..." is not the span "ab...": only canonical ids are in the links
        plain = self.plain
        if plain is None:
            data = bytes(self.analyzer._links)
            plain = self.plain = {
                data[i : i + 8]: data[i + 8 : i + 16] for i in range(0, len(data), 16)
            }
        found = plain.get(key)
        return None if found is None else found.hex()


def analyse_spans(
    spans: Iterable[SpanRecord],
    policy: StallPolicy | None = None,
    conventions: Conventions | None = None,
) -> dict[str, TraceResult]:
    """Analyse complete traces from spans in any order; results by trace id."""
    analyzers: dict[str, TraceAnalyzer] = {}
    for span in spans:
        analyzer = analyzers.get(span.trace_id)
        if analyzer is None:
            analyzer = analyzers[span.trace_id] = TraceAnalyzer(span.trace_id, policy, conventions)
        analyzer.add(span)
    results = {trace_id: a.analyse(sessions=True) for trace_id, a in analyzers.items()}
    joined = SessionRuns(policy)
    for result in results.values():
        joined.add(result)
    for trace, report in joined.finish():  # listed with the trace of its first call
        trace.reports.append(report)
    return results
