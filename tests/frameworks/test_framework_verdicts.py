"""Every framework fixture gets the manifest's verdict, runs and tool calls, replayed and live.

One parametrised test over ``manifest.toml``: a new fixture is covered by
adding its file and its entry. The live half feeds the same spans, with their
ids, times, attributes, events and status, through a real ``TracerProvider``
and :class:`StallSpanProcessor`, and expects the replay's reports and
``stall.*`` attributes, rounds included.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from otel_stall import (
    ABSENT,
    Conventions,
    Replayer,
    Role,
    RunReport,
    SpanRecord,
    StallSpanProcessor,
    replay,
)
from otel_stall.live.enriched import span_record
from otel_stall.otlp.decode import spans_from_json

tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
HERE = Path(__file__).parent
MANIFEST: list[dict[str, Any]] = tomllib.loads((HERE / "manifest.toml").read_text())["fixture"]
SEVERITY = ("break", "escalate", "warn", "ok")


def _cases() -> list[Any]:
    """Every manifest entry, named by its path."""
    return [pytest.param(entry, id=entry["path"]) for entry in MANIFEST]


def _found(reports: list[RunReport]) -> tuple[str, int, int]:
    """The worst verdict, the run count and the tool calls of all runs."""
    verdicts = sorted({r.verdict.value for r in reports}, key=SEVERITY.index)
    return (verdicts[0] if verdicts else "-", len(reports), sum(r.tool_calls for r in reports))


@pytest.mark.parametrize("entry", _cases())
def test_replay_gives_the_manifest_verdict(entry: dict[str, Any]) -> None:
    """Replay finds the fixture's expected verdict, run count and tool-call count."""
    result = replay(str(HERE / entry["path"]))
    assert _found(result.reports) == (entry["verdict"], entry["runs"], entry["tool_calls"])


@pytest.mark.parametrize(
    "entry",
    [e for e in MANIFEST if e["framework"] != "gemini-cli"],
    ids=[e["path"] for e in MANIFEST if e["framework"] != "gemini-cli"],
)
def test_runs_without_content_are_flagged(entry: dict[str, Any]) -> None:
    """A run whose tool calls carried no content says so, with the switch; others do not."""
    result = replay(str(HERE / entry["path"]))
    flagged = [r.attributes.get("content_captured") is False for r in result.reports]
    if entry["content"]:
        assert not any(flagged)
    else:
        assert all(flagged)
        switches = {r.attributes.get("content_switch") for r in result.reports}
        assert None not in switches or entry["framework"] == "mcp"


@pytest.mark.parametrize(
    "entry",
    [e for e in MANIFEST if e["framework"] != "gemini-cli"],
    ids=[e["path"] for e in MANIFEST if e["framework"] != "gemini-cli"],
)
def test_summary_counts_the_recognised_calls(entry: dict[str, Any]) -> None:
    """The replay summary counts the tool calls it recognised, and every model call once.

    Each model call opens a round; where tool calls run one after another inside
    one model span, each later one opens a round too (the model was asked in
    between), so there are more rounds than model spans.
    """
    result = replay(str(HERE / entry["path"]))
    recognised = result.summary()["recognised"]
    assert recognised["tool_calls"] == entry["tool_calls"]
    models = recognised["model_calls"]
    # MCP's spans and AutoGen's own (without OpenInference) hold no model calls
    no_models = entry["framework"] == "mcp" or (
        entry["framework"] == "autogen-agentchat" and entry["layout"] == "default"
    )
    assert (models == 0) == no_models
    rounds = sum(r.rounds for r in result.reports)
    if _tools_inside_model_spans(HERE / entry["path"]):
        assert 0 < models < rounds or models == rounds
    else:
        assert models in (0, rounds)


def _tools_inside_model_spans(path: Path) -> bool:
    """Whether two tool spans of the fixture run one after another under one model span."""
    conventions = Conventions()
    spans = [
        r
        for line in path.read_text().splitlines()
        if line
        for r in spans_from_json(orjson.loads(line))
    ]
    models = {s.span_id for s in spans if conventions.span_role(s.name, s.attributes) is Role.MODEL}
    children: dict[str, list[tuple[int, int]]] = {}
    for span in spans:
        role = conventions.span_role(span.name, span.attributes)
        if role is Role.TOOL and span.parent_span_id in models:
            children.setdefault(span.parent_span_id, []).append((span.start_ns, span.end_ns))
    for calls in children.values():
        calls.sort()
        if any(later[0] >= earlier[1] for earlier, later in itertools.pairwise(calls)):
            return True
    return False


class _FixedIds(IdGenerator):
    """Hands the SDK the fixture's own ids, so live spans keep the captured ids."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def _timeline(records: list[SpanRecord]) -> list[tuple[int, int, int, SpanRecord]]:
    """Starts and ends in time order; parents start before and end after their children."""
    by_id = {r.span_id: r for r in records}

    def depth(record: SpanRecord) -> int:
        n, parent = 0, record.parent_span_id
        while parent in by_id and n < 1000:
            n, parent = n + 1, by_id[parent].parent_span_id
        return n

    steps = []
    for record in records:
        d = depth(record)
        steps.append((record.start_ns, 0, d, record))
        steps.append((max(record.end_ns, record.start_ns), 1, -d, record))
    # at one clock time (Mastra's are milliseconds) break ties by span id, as replay does
    steps.sort(key=lambda s: (*s[:3], s[3].span_id))
    return steps


def _live_spans(path: Path, at_start: bool, *, redact: bool = False) -> list[ReadableSpan]:
    """The fixture's spans re-made through a real SDK pipeline with the live processor.

    ``at_start``: every attribute is set when the span starts; else a model
    span's only at its end, as Google ADK sets a model span's operation late.
    """
    records = [
        r
        for line in path.read_bytes().splitlines()
        if line.strip()
        for r in spans_from_json(orjson.loads(line))
    ]
    ids = _FixedIds()
    memory = InMemorySpanExporter()
    provider = TracerProvider(id_generator=ids)
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(memory), redact=redact))
    tracer = provider.get_tracer("fixture")
    live: dict[str, Span] = {}
    conventions = Conventions()
    for _, kind, _, record in _timeline(records):
        early = at_start or conventions.role(record.attributes) is not Role.MODEL
        if kind == 0:
            live[record.span_id] = _start(tracer, ids, record, live, early)
        else:
            _end(live[record.span_id], record, early)
    provider.shutdown()
    return list(memory.get_finished_spans())


def _start(
    tracer: Any, ids: _FixedIds, record: SpanRecord, live: dict[str, Span], at_start: bool
) -> Span:
    ids.trace_id, ids.span_id = int(record.trace_id, 16), int(record.span_id, 16)
    parent = live.get(record.parent_span_id or "")
    if parent is not None:
        context = set_span_in_context(parent)
    elif record.parent_span_id:
        remote = SpanContext(
            ids.trace_id, int(record.parent_span_id, 16), True, TraceFlags(TraceFlags.SAMPLED)
        )
        context = set_span_in_context(NonRecordingSpan(remote))
    else:
        context = set_span_in_context(INVALID_SPAN)
    attributes = _sdk_attributes(record.attributes) if at_start else None
    span: Span = tracer.start_span(
        record.name, context=context, attributes=attributes, start_time=record.start_ns
    )
    return span


def _end(span: Span, record: SpanRecord, at_start: bool) -> None:
    if not at_start:
        span.set_attributes(_sdk_attributes(record.attributes))
    for name, attributes in record.events:
        span.add_event(name, _sdk_attributes(attributes))
    if record.status_code:
        span.set_status(Status(StatusCode(record.status_code), record.status_message or None))
    span.end(end_time=max(record.end_ns, record.start_ns))


def _sdk_attributes(attributes: Any) -> dict[str, Any]:
    """Attribute values the SDK takes: kvlists as JSON text (OTLP's only shape it lacks)."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        if isinstance(value, dict):
            out[key] = json.dumps(value)
        elif isinstance(value, list):
            out[key] = [v if isinstance(v, str | bool | int | float) else str(v) for v in value]
        elif value is not None:
            out[key] = value
    return out


def _stall(attributes: Any) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if k.startswith("stall.")}


def _live_cases() -> list[Any]:
    """Every manifest entry twice: roles set at start, and model roles set at end."""
    cases = []
    for at_start in (True, False):
        for entry in MANIFEST:
            variant = "roles-at-start" if at_start else "model-role-at-end"
            cases.append(pytest.param(entry, at_start, id=f"{entry['path']}-{variant}"))
    return cases


@pytest.mark.parametrize(("entry", "at_start"), _live_cases())
def test_live_matches_replay(entry: dict[str, Any], at_start: bool) -> None:
    """Live, the fixture's spans get the replay's stall.* attributes and events, rounds included."""
    path = HERE / entry["path"]
    spans = _live_spans(path, at_start)
    result = Replayer().analyse([str(path)])
    live: dict[str, Any] = {}
    replayed: dict[str, Any] = {}
    for span in spans:
        ctx = span.get_span_context()
        assert ctx is not None
        trace = result.traces[f"{ctx.trace_id:032x}"]
        key = f"{span.name} {ctx.span_id:016x}"
        live[key] = _stall(span.attributes)
        replayed[key] = trace.attributes.get(f"{ctx.span_id:016x}", {})
        live[key + " events"] = [
            dict(e.attributes or {}) for e in span.events if e.name == "stall.detected"
        ]
        replayed[key + " events"] = [
            e.attributes for e in trace.events.get(f"{ctx.span_id:016x}", [])
        ]
    assert {k: v for k, v in live.items() if v} == {k: v for k, v in replayed.items() if v}


def _payloads(records: list[SpanRecord]) -> list[tuple[str, Any, Any]]:
    """The tool calls' arguments and results that the conventions read from ``records``."""
    conventions = Conventions()
    calls = [
        conventions.tool_call(r) for r in records if conventions.role(r.attributes) is Role.TOOL
    ]
    return [
        (c.tool, c.arguments, c.result) for c in calls if (c.arguments, c.result) != (ABSENT,) * 2
    ]


_CONTENT_CASES = [
    pytest.param(e, id=e["path"])
    for e in MANIFEST
    if e["scenario"] == "loop" and e.get("content", True)
]


@pytest.mark.parametrize("entry", _CONTENT_CASES)
def test_redacted_exports_carry_no_payload(entry: dict[str, Any], tmp_path: Path) -> None:
    """With redaction on, neither the live copy nor the replay's re-export holds a tool payload."""
    path = HERE / entry["path"]
    records = [
        r
        for line in path.read_bytes().splitlines()
        if line.strip()
        for r in spans_from_json(orjson.loads(line))
    ]
    assert _payloads(records), "the fixture's loop carries content"
    live = [span_record(span) for span in _live_spans(path, at_start=True, redact=True)]
    assert _payloads(live) == []
    out = tmp_path / "redacted.jsonl"
    replayer = Replayer()
    replayer.write_json_lines(replayer.analyse([str(path)]), [str(path)], out, redact=True)
    replayed = [
        r
        for line in out.read_bytes().splitlines()
        if line.strip()
        for r in spans_from_json(orjson.loads(line))
    ]
    assert len(replayed) == len(records)
    assert _payloads(replayed) == []
