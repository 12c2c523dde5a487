"""Whole-trace analysis for spans that arrive after the fact (replay, gateway).

Spans of a trace may come in any order and in several batches. A
:class:`TraceAnalyzer` keeps only what detection needs (the parent links,
and a payload-free record with digests for each tool and model span), then
resolves runs, orders each run's events the way the live processor sees them
(model calls when they start, tool calls when they end) and runs the same
:class:`RunDetector`. A complete trace therefore gets the same verdicts and
``stall.*`` attributes as it would have got live.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from otel_stall.attributes import GenAIAttributes as GenAI
from otel_stall.attributes import StallEventAttributes
from otel_stall.attributes import TraceloopAttributes as TL
from otel_stall.conventions import Conventions, Role, SpanRecord, is_agent_span_name
from otel_stall.detector import RunDetector
from otel_stall.enrich import (
    AttributeValue,
    finding_event_attributes,
    run_span_attributes,
    tool_span_attributes,
)
from otel_stall.policy import StallPolicy
from otel_stall.records import ABSENT, Finding, ModelCall, RunReport, ToolCall, unfrozen_twin
from otel_stall.signature import Digests

_NESTED = "\x00nested"
"""Sentinel run for a tool span nested in another tool span (never a span id)."""
_TOOL_FIRST = 0
_TwinToolCall: Any = unfrozen_twin(ToolCall)
_MODEL_NEXT = 1


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event to add to an exported span."""

    name: str
    time_ns: int
    attributes: dict[str, AttributeValue]


@dataclass(slots=True)
class TraceResult:
    """Detection results for one trace, keyed by span id for enrichment."""

    trace_id: str
    reports: list[RunReport] = field(default_factory=list)
    attributes: dict[str, dict[str, AttributeValue]] = field(default_factory=dict)
    """``stall.*`` attributes to add, by span id (tool spans and run spans)."""
    events: dict[str, list[SpanEvent]] = field(default_factory=dict)
    """``stall.detected`` events to add, by run span id."""


@dataclass(slots=True)
class _Tool:
    call: ToolCall
    digests: Digests


def agent_name(attributes: Any) -> str | None:
    """The agent's name as the conventions spell it, if any."""
    name = attributes.get(GenAI.AGENT_NAME) or attributes.get(TL.ENTITY_NAME)
    return None if name is None else str(name)


class TraceAnalyzer:
    """Collects one trace's spans and analyses them once the trace is complete."""

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
        self._parents: dict[str, str | None] = {}
        self._roles: dict[str, Role] = {}
        self._tools: dict[str, _Tool] = {}
        self._models: dict[str, ModelCall] = {}
        self._agents: dict[str, str | None] = {}
        self._root_id: str | None = None
        """The earliest parentless span: only its id and times are kept, not the span."""
        self._root_start = 0
        self._root_end = 0
        self._ends: dict[str, int] = {}

    def add(self, span: SpanRecord) -> Role:
        """Take one span; payloads are hashed now and dropped, so memory stays small."""
        self.spans += 1
        span_id = span.span_id
        parent = span.parent_span_id
        if parent:
            self._parents[span_id] = parent
        else:
            self._parents[span_id] = None
            if self._root_id is None or span.start_ns < self._root_start:
                self._root_id, self._root_start, self._root_end = (
                    span_id,
                    span.start_ns,
                    span.end_ns,
                )
        role = self.conventions.role(span.attributes)
        if role is Role.OTHER:
            if not is_agent_span_name(span.name):
                return role
            role = Role.AGENT
        self._roles[span_id] = role
        if role is Role.TOOL:
            call = self.conventions.tool_call(span)
            digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
            # The payload-free record, built directly: the payloads are hashed and dropped.
            bare: ToolCall = _TwinToolCall(
                call.tool,
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
            )
            bare.__class__ = ToolCall
            self._tools[span_id] = _Tool(bare, digests)
        elif role is Role.MODEL:
            self._models[span_id] = self.conventions.model_call(span)
        else:
            self._agents[span_id] = agent_name(span.attributes)
            self._ends[span_id] = span.end_ns
        return role

    @property
    def run_span_ids(self) -> frozenset[str]:
        """Agent spans seen so far: a gateway may decide once these have arrived."""
        return frozenset(self._agents)

    def analyse(self) -> TraceResult:
        """Resolve runs, order events as the live processor would, and detect."""
        result = TraceResult(self.trace_id)
        runs: dict[str | None, list[tuple[int, int, str]]] = {}
        for span_id in (*self._tools, *self._models):
            run = self._run_of(span_id)
            if run is _NESTED:
                continue
            if span_id in self._tools:
                key = (self._tools[span_id].call.end_ns, _TOOL_FIRST, span_id)
            else:
                key = (self._models[span_id].start_ns, _MODEL_NEXT, span_id)
            runs.setdefault(run, []).append(key)
        for run_span, keys in runs.items():
            run_span_id = run_span if run_span is not None else self._root_id
            self._detect(result, run_span, run_span_id, sorted(keys))
        return result

    def _detect(
        self,
        result: TraceResult,
        agent_span: str | None,
        run_span_id: str | None,
        keys: list[tuple[int, int, str]],
    ) -> None:
        run_key = (self.trace_id, agent_span)
        detector = RunDetector(self.policy, run_key)
        fired: list[tuple[int, Finding]] = []
        tools, models = self._tools, self._models
        for time_ns, _, span_id in keys:
            tool = tools.get(span_id)
            if tool is None:
                findings = detector.model_call(models[span_id])
            else:
                # The record's own run key is left as the source gave it: the
                # detector reads the run key from itself, never from the call.
                findings = detector.tool_call(tool.call, tool.digests).findings
            if findings:
                fired += ((time_ns, f) for f in findings)
        end_ns = self._run_end(agent_span, keys)
        before = len(detector.findings)
        report = detector.finish()
        fired += ((end_ns, f) for f in report.findings[before:])
        report = replace(
            report,
            attributes={
                "trace_id": self.trace_id,
                "run_span_id": run_span_id,
                "agent": self._agents.get(agent_span) if agent_span else None,
            },
        )
        result.reports.append(report)
        for row in report.ledger:
            if row.span_id is not None:
                result.attributes[row.span_id] = tool_span_attributes(row)
        if run_span_id is not None:
            result.attributes.setdefault(run_span_id, {}).update(run_span_attributes(report))
            result.events[run_span_id] = [
                SpanEvent(StallEventAttributes.EVENT_NAME, t, finding_event_attributes(f))
                for t, f in fired
            ]

    def _run_end(self, agent_span: str | None, keys: list[tuple[int, int, str]]) -> int:
        if agent_span is not None and agent_span in self._ends:
            return self._ends[agent_span]
        if agent_span is None and self._root_id is not None:
            return self._root_end
        return keys[-1][0] if keys else 0

    def _run_of(self, span_id: str) -> str | None:
        """The nearest agent ancestor, ``None`` for the trace, or ``_NESTED``.

        A tool span inside another tool span (an MCP client span under
        ``execute_tool``) is the same call seen twice: only the outer one counts.
        """
        is_tool = span_id in self._tools
        parent = self._parents.get(span_id)
        hops = 0
        while parent is not None and hops < 10_000:
            role = self._roles.get(parent)
            if role is Role.AGENT:
                return parent
            if role is Role.TOOL and is_tool:
                return _NESTED
            parent = self._parents.get(parent)
            hops += 1
        return None


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
