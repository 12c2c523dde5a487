"""Whole-trace analysis for spans that arrive after the fact (replay, gateway): an orderer.

Spans of a trace may come in any order and in several batches. A
:class:`TraceAnalyzer` keeps only what detection needs; once the trace is in,
it replays the spans' starts and ends in the order the live processor would
have seen them, into the same run model (:mod:`otel_stall.core.runs`, driven
by :class:`~otel_stall.offline.batch.BatchRuns`). Which run each call feeds is
therefore decided once, by the same code live and offline; a complete trace
gets the same verdicts and ``stall.*`` attributes as it would have got live.

Memory follows the tool calls, not the spans. A tool, model or agent span
keeps a small record (a payload-free :class:`ToolCall` and its digests, a start
time, an agent name) with its parent id. A plain span keeps only its parent
link, as 16 raw bytes in one ``bytearray`` per trace: since spans come in any
order, any plain span may turn out to sit between a tool span and its agent
span. The links become a dict only while the trace is analysed, and only if a
walk up from a tool, model or agent span meets a plain span.

:class:`~otel_stall.offline.order.LiveOrder` puts the starts and ends in order.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Final

from otel_stall.conventions import (
    Conventions,
    Reading,
    Role,
    SpanRecord,
    agent_name,
    looks_agent_like,
)
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import ABSENT, ToolCall
from otel_stall.offline import call_facts as facts
from otel_stall.offline.batch import (
    Agents,
    BatchRuns,
    Models,
    SessionPart,
    SessionRuns,
    Tool,
    TraceResult,
    TraceSpans,
)
from otel_stall.offline.order import LiveOrder

_MAX_NAMES: Final = 64
"""Distinct unrecognised span names kept per trace."""
_OTHER: Final = Role.OTHER
_intern = sys.intern


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
        self._tools: dict[str, Tool] | None = None
        self._models: Models | None = None
        """Model spans: start time, parent id and the model call (no payloads)."""
        self._agents: Agents | None = None
        """Agent spans: agent name, end time, parent id and start time."""
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

    def add(
        self, span: SpanRecord, role: Role | None = None, reading: Reading | None = None
    ) -> Role:
        """Take one span; payloads are hashed now and dropped, so memory stays small.

        ``role`` is the span's role if the caller knows it already, ``reading``
        the conventions' reading of it if the caller read it (the gateway reads a
        model span as it forwards it): the span is read at most once.
        """
        span_id = span.span_id
        parent = self._place(span_id, span.parent_span_id or None, span.start_ns, span.end_ns)
        if reading is None:
            reading = self.conventions.read(span, role)
        role = reading.role
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
        if reading.session is not None:  # outside every agent span, the session's run
            if self._sessions is None:
                self._sessions = {}
            self._sessions[span_id] = _intern(reading.session)
        if reading.tool is not None:
            self._keep_tool(span, parent, reading)
        elif reading.model is not None:
            # The detector reads a model call's place, outcome and token counts: no payloads.
            if self._models is None:
                self._models = {}
            self._models[span_id] = (span.start_ns, parent, reading.model)
        else:
            if self._agents is None:
                self._agents = {}
            self._agents[span_id] = (
                agent_name(span.attributes, span.name),
                span.end_ns,
                parent,
                span.start_ns,
            )
        return role

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

    def _keep_tool(self, span: SpanRecord, parent: str | None, reading: Reading) -> None:
        """Sign the call, then keep a copy of it without its payloads.

        With it, the name the span would give its run, should it turn out to be
        an agent used as a tool; and, for a call without content, the switch
        that captures content.
        """
        call = reading.tool
        assert call is not None
        if reading.handoff is not None:
            if self._handoffs is None:
                self._handoffs = {}
            self._handoffs[span.span_id] = reading.handoff
        if call.arguments is ABSENT and call.result is ABSENT:
            if self._contentless is None:
                self._contentless = {}
            self._contentless[span.span_id] = reading.content_switch
        digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        if self._tools is None:
            self._tools = {}
        agent = agent_name(span.attributes, span.name)
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
        """Replay the trace's starts and ends into the run model, as live would see them.

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
        root = None if self._root_id is None else (self._root_id, self._root_start, self._root_end)
        spans = TraceSpans(
            self.trace_id,
            tools,
            models,
            agents,
            root,
            (self._sessions or {}) if sessions else {},
            self._handoffs or {},
            self._contentless or {},
            self._previews or {},
        )
        driver = BatchRuns(spans, self.policy, result, enrich)
        LiveOrder(spans, self._links, self._odd_links).replay(driver)
        driver.finish()
        return result


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


__all__ = ["SessionPart", "SessionRuns", "TraceAnalyzer", "TraceResult", "analyse_spans"]
