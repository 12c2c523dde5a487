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
from typing import Final

from otel_stall.conventions import Conventions, Role, SpanRecord, agent_name, is_agent_span_name
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import ABSENT, Finding, ModelCall, RunReport, ToolCall
from otel_stall.core.signing import Digests
from otel_stall.core.stall_attributes import (
    AttributeValue,
    SpanEvent,
    finding_event_attributes,
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.semconv import StallEventAttributes

_NESTED: Final = "\x00nested"
"""Sentinel run for a tool span nested in another tool span (never a span id)."""
_TOOL_FIRST: Final = 0
_MODEL_NEXT: Final = 1
_MODEL_DONE: Final = 2
"""A model call's end, ordered among the tool calls' ends: its outcome is known then."""
_MAX_HOPS: Final = 10_000
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


_Tool = tuple[ToolCall, Digests, "str | None"]
"""A tool span without its payloads: the bare call, its digests and its parent id."""


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
        "_links",
        "_models",
        "_odd_links",
        "_root_end",
        "_root_id",
        "_root_start",
        "_tools",
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
        self._models: dict[str, tuple[int, str | None, ModelCall]] | None = None
        """Model spans: start time, parent id and the model call (no payloads)."""
        self._agents: dict[str, tuple[str | None, int, str | None]] | None = None
        """Agent spans: agent name, end time and parent id."""
        self._root_id: str | None = None
        """The earliest parentless span: only its id and times are kept, not the span."""
        self._root_start = 0
        self._root_end = 0

    # -- intake --------------------------------------------------------------------------

    def add(self, span: SpanRecord, role: Role | None = None) -> Role:
        """Take one span; payloads are hashed now and dropped, so memory stays small.

        ``role`` is what this analyzer's ``conventions.role`` says of the span's
        attributes, if the caller has asked already.
        """
        span_id = span.span_id
        parent = self._place(span_id, span.parent_span_id or None, span.start_ns, span.end_ns)
        if role is None:
            role = self.conventions.role(span.attributes)
        if role is _OTHER:
            if not is_agent_span_name(span.name):
                if parent is not None:
                    link = _canonical_link(span_id, parent)
                    if link is not None:
                        self._links += link
                    else:
                        if self._odd_links is None:
                            self._odd_links = {}
                        self._odd_links[span_id] = parent
                return role
            role = Role.AGENT
        if role is _TOOL:
            self._keep_tool(span_id, self.conventions.tool_call(span), parent)
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

    def _keep_tool(self, span_id: str, call: ToolCall, parent: str | None) -> None:
        """Sign the call, then keep a copy of it without its payloads."""
        digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        if self._tools is None:
            self._tools = {}
        self._tools[span_id] = (_payload_free(call), digests, parent)

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

    def analyse(self, *, enrich: bool = True) -> TraceResult:
        """Resolve runs, order events as the live processor would, and detect.

        ``enrich=False`` leaves :attr:`TraceResult.attributes` and ``events``
        empty: a report needs only the runs' reports.
        """
        result = TraceResult(self.trace_id)
        tools = self._tools or {}
        models = self._models or {}
        if not tools and not models:
            return result
        agents = self._agents or {}
        walk = _Ancestry(self, tools, models, agents)
        runs: dict[str | None, list[tuple[int, int, str]]] = {}
        for span_id, (call, _, parent) in tools.items():
            run = parent if parent in agents else walk.run_of(parent, True)
            if run is not _NESTED:
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
        for run_span, keys in runs.items():
            keys.sort()
            run_span_id = run_span if run_span is not None else self._root_id
            self._detect(result, run_span, run_span_id, keys, tools, models, agents, enrich)
        return result

    def _detect(
        self,
        result: TraceResult,
        agent_span: str | None,
        run_span_id: str | None,
        keys: list[tuple[int, int, str]],
        tools: dict[str, _Tool],
        models: dict[str, tuple[int, str | None, ModelCall]],
        agents: dict[str, tuple[str | None, int, str | None]],
        enrich: bool,
    ) -> None:
        run_key = (self.trace_id, agent_span)
        detector = RunDetector(self.policy, run_key)
        fired: list[tuple[int, Finding]] = []
        on_tool, on_model = detector.tool_call, detector.model_call
        for time_ns, order, span_id in keys:
            tool = tools.get(span_id)
            # The record's own run key is left as the source gave it: the
            # detector reads the run key from itself, never from the call.
            if tool is not None:
                findings = on_tool(tool[0], tool[1]).findings
            elif order == _MODEL_DONE:
                findings = detector.model_ended(models[span_id][2])
            else:
                findings = on_model(models[span_id][2])
            if findings and enrich:
                fired += ((time_ns, f) for f in findings)
        agent = agents.get(agent_span) if agent_span is not None else None
        if agent is not None:
            end_ns = agent[1]
        elif agent_span is None and self._root_id is not None:
            end_ns = self._root_end
        else:
            end_ns = keys[-1][0] if keys else 0
        before = len(detector.findings) if enrich else 0
        report = detector.finish()
        context = {
            "trace_id": self.trace_id,
            "run_span_id": run_span_id,
            "agent": agent[0] if agent is not None and agent_span else None,
        }
        if report.attributes:
            report = replace(report, attributes=context)
        else:  # the detector's own fresh, empty dict: fill it rather than copy the report
            report.attributes.update(context)
        result.reports.append(report)
        if not enrich:
            return
        fired += ((end_ns, f) for f in report.findings[before:])
        for row in report.ledger:
            if row.span_id is not None:
                result.attributes[row.span_id] = tool_span_attributes(row)
        if run_span_id is not None:
            result.attributes.setdefault(run_span_id, {}).update(run_span_attributes(report))
            result.events[run_span_id] = [
                SpanEvent(StallEventAttributes.EVENT_NAME, t, finding_event_attributes(f))
                for t, f in fired
            ]


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
    """Walks up from a tool or model span to its run, during one analysis."""

    __slots__ = ("agents", "analyzer", "models", "plain", "tools")

    def __init__(
        self,
        analyzer: TraceAnalyzer,
        tools: dict[str, _Tool],
        models: dict[str, tuple[int, str | None, ModelCall]],
        agents: dict[str, tuple[str | None, int, str | None]],
    ) -> None:
        self.analyzer = analyzer
        self.tools = tools
        self.models = models
        self.agents = agents
        self.plain: dict[bytes, bytes] | None = None

    def run_of(self, parent: str | None, is_tool: bool) -> str | None:
        """The nearest agent ancestor, ``None`` for the trace, or ``_NESTED``.

        A tool span inside another tool span (an MCP client span under
        ``execute_tool``) is the same call seen twice: only the outer one counts.
        """
        agents, tools = self.agents, self.tools
        hops = 0
        while parent is not None and hops < _MAX_HOPS:
            if parent in agents:
                return parent
            tool = tools.get(parent)
            if tool is not None:
                if is_tool:
                    return _NESTED
                parent = tool[2]
            else:
                model = self.models.get(parent)
                parent = model[1] if model is not None else self._plain_parent(parent)
            hops += 1
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
    return {trace_id: a.analyse() for trace_id, a in analyzers.items()}
