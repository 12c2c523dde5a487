"""A trace gets the same verdicts and stall.* attributes live and replayed, in all formats."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from otel_stall import OtlpJsonLinesSpanExporter, Replayer, StallPolicy, StallSpanProcessor
from otel_stall.core.stall_attributes import with_defaults
from otel_stall.demo import run_looping_agent, run_progressing_agent
from otel_stall.otlp.decode import spans_from_json
from otel_stall.otlp.encode import traces_from_json

POLICY = StallPolicy(warn_at=2, break_at=4)


def _flaky_agent(provider: TracerProvider) -> None:
    """A tool that fails five times, in a trace without an agent span (the root is the run)."""
    tracer = provider.get_tracer("flaky")
    with tracer.start_as_current_span("POST /agent"):
        for attempt in range(5):
            with tracer.start_as_current_span(
                "deploy",
                attributes={
                    "traceloop.span.kind": "tool",
                    "traceloop.entity.name": "deploy",
                    "traceloop.entity.input": json.dumps({"try": attempt}),
                    "error.type": "TimeoutError",
                },
            ):
                pass


def _chat(
    tracer: Any, tokens: int, error: str | None = None, said: str = "", choice: str = ""
) -> None:
    """A GenAI model span with token usage (and output ``said``), or failing with ``error``.

    ``choice``: output in a ``gen_ai.choice`` event instead, as Strands writes it.
    """
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    if said:
        message = {"role": "assistant", "parts": [{"type": "text", "content": said}]}
        attributes["gen_ai.output.messages"] = json.dumps([message])
    if error is None:
        attributes |= {"gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 10}
    else:
        attributes["error.type"] = error
    with tracer.start_as_current_span("chat m", attributes=attributes) as span:
        if error is not None:
            span.set_status(StatusCode.ERROR, f"{error}: the request was rejected")
        if choice:
            body = json.dumps([{"text": choice}])
            span.add_event("gen_ai.choice", {"message": body, "finish_reason": "end_turn"})


def _tool(tracer: Any, tool: str, args: dict[str, Any], result: Any, error: str = "") -> None:
    """A GenAI tool span with its arguments and result, failing with ``error`` if given."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": json.dumps(args),
        "gen_ai.tool.call.result": json.dumps(result),
    }
    if error:
        attributes["error.type"] = error
    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes) as span:
        if error:
            span.set_status(StatusCode.ERROR, error)


def _agent(tracer: Any, name: str) -> Any:
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
    return tracer.start_as_current_span(f"invoke_agent {name}", attributes=attributes)


def issue_19_agents(tracer: Any) -> None:
    """One run per #19 rule: failure loops, monologue, 2-step cycle, stalled delegate; tokens.

    Chanting twice: within one output, and across two outputs read from
    ``gen_ai.choice`` events (six copies each: only the carry makes ten).
    """
    chant = "The build is still running, so I keep on waiting. "
    with _agent(tracer, "failing"):
        for attempt in range(4):
            _chat(tracer, 100 + attempt)
            _tool(tracer, "run", {"cmd": "make"}, {"line": attempt}, error="BuildError")
    with _agent(tracer, "overflowing"):
        _chat(tracer, 500)
        for _ in range(4):
            _chat(tracer, 0, error="ContextWindowExceededError")
    with _agent(tracer, "monologuing"):
        for _ in range(5):
            _chat(tracer, 300, said="I am fine, and thank you for asking.")
    with _agent(tracer, "chanting"):
        _chat(tracer, 300, said="Let me check. " + chant * 12)
    with _agent(tracer, "chanting-across-outputs"):
        _chat(tracer, 300, choice=chant * 6)
        _chat(tracer, 300, choice=chant * 6)
    with _agent(tracer, "cycling"):
        for _ in range(6):
            _chat(tracer, 200)
            _tool(tracer, "ls", {"path": "/"}, ["a", "b"])
            _tool(tracer, "cat", {"path": "/a"}, "same text")
    _delegating_agent(tracer)


def _delegating_agent(tracer: Any) -> None:
    """A parent whose delegates loop: an agent in its tool call, then an agent used as a tool."""
    with _agent(tracer, "delegating"):
        _chat(tracer, 100)
        for tool, inner in (("delegate", True), ("ask_expert", False)):
            attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
            with (
                tracer.start_as_current_span(f"execute_tool {tool}", attributes=attributes),
                _agent(tracer, "delegate") if inner else contextlib.nullcontext(),
            ):
                for _ in range(4):
                    _chat(tracer, 50)
                    _tool(tracer, "browse", {"url": "/release"}, "the same page")
            _chat(tracer, 100)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[ReadableSpan], Path]:
    """Live spans (enriched by the real processor) and the raw capture of the same spans."""
    capture = tmp_path_factory.mktemp("live") / "capture.jsonl"
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesSpanExporter(capture)))
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(memory), policy=POLICY))
    tracer = provider.get_tracer("equivalence")
    run_looping_agent(tracer, rounds=7)
    run_progressing_agent(tracer)
    _flaky_agent(provider)
    issue_19_agents(tracer)
    provider.shutdown()
    return list(memory.get_finished_spans()), capture


def _messages(capture: Path) -> list[Any]:
    return [traces_from_json(orjson.loads(line)) for line in capture.read_bytes().splitlines()]


def _binary(capture: Path, compress: bool = False) -> bytes:
    out = io.BytesIO()
    zstd = zstandard.ZstdCompressor()
    for message in _messages(capture):
        payload = message.SerializeToString()
        payload = zstd.compress(payload) if compress else payload
        out.write(len(payload).to_bytes(4, "big") + payload)
    return out.getvalue()


def _pretty(capture: Path) -> bytes:
    merged: dict[str, Any] = {"resourceSpans": []}
    for line in capture.read_bytes().splitlines():
        merged["resourceSpans"] += orjson.loads(line)["resourceSpans"]
    return json.dumps(merged, indent=2).encode()


def _reversed_lines(capture: Path) -> bytes:
    return b"\n".join(reversed(capture.read_bytes().splitlines())) + b"\n"


WRITERS: dict[str, Callable[[Path], bytes]] = {
    "json-lines": lambda c: c.read_bytes(),
    "json-lines-reversed": _reversed_lines,
    "pretty-json": _pretty,
    "proto": _binary,
    "proto-zstd-messages": lambda c: _binary(c, compress=True),
    "json.gz": lambda c: gzip.compress(c.read_bytes()),
    "proto.zst": lambda c: zstandard.ZstdCompressor().compress(_binary(c)),
}


def _stall_attributes(span: ReadableSpan) -> dict[str, Any]:
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("stall.")}


def _live_events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == "stall.detected"]


@pytest.mark.parametrize("fmt", list(WRITERS))
def test_replay_matches_live(
    fmt: str, live: tuple[list[ReadableSpan], Path], tmp_path: Path
) -> None:
    """Every span's stall.* attributes and every run's events match the live processor's."""
    spans, capture = live
    path = tmp_path / f"capture.{fmt}"
    path.write_bytes(WRITERS[fmt](capture))
    result = Replayer(POLICY).analyse([str(path)])
    assert result.errors == []
    assert result.spans == len(spans)
    enriched = 0
    for span in spans:
        ctx = span.get_span_context()
        assert ctx is not None
        trace = result.traces[f"{ctx.trace_id:032x}"]
        expected = _stall_attributes(span)
        assert trace.attributes.get(f"{ctx.span_id:016x}", {}) == expected, span.name
        replayed_events = [e.attributes for e in trace.events.get(f"{ctx.span_id:016x}", [])]
        assert replayed_events == _live_events(span), span.name
        enriched += bool(expected)
    verdicts = sorted(r.verdict.value for r in result.reports)
    assert verdicts == [
        "break",
        "break",
        "break",
        "break",
        "break",
        "escalate",
        "escalate",
        "escalate",
        "ok",
        "warn",
        "warn",
        "warn",
    ]
    kinds = {f.kind.value for r in result.reports for f in r.findings}
    assert {
        "failure_loop",
        "model_failure_loop",
        "cycle",
        "monologue",
        "chanting",
        "delegate_stalled",
    } <= kinds
    (delegating,) = [r for r in result.reports if r.attributes.get("agent") == "delegating"]
    assert [(f.kind.value, f.count) for f in delegating.findings] == [
        ("delegate_stalled", 1),
        ("delegate_stalled", 2),
    ]
    wasted = [r for r in result.reports if r.wasted_tokens]
    assert len(wasted) >= 2
    assert enriched > 10


@pytest.mark.parametrize("full", [False, True], ids=["compact", "full"])
def test_out_file_carries_the_live_attributes(
    live: tuple[list[ReadableSpan], Path], tmp_path: Path, full: bool
) -> None:
    """--out writes every span once, with the stall.* attributes the live processor attached.

    With ``full_attributes``, those at their defaults too, as the live processor's own
    ``full_attributes`` writes them (``with_defaults``).
    """
    spans, capture = live
    replayer = Replayer(POLICY, full_attributes=full)
    result = replayer.analyse([str(capture)])
    out = tmp_path / "enriched.jsonl"
    with out.open("wb") as f:
        written = replayer.write_json_lines(result, [str(capture)], f)
    assert written == len(spans)
    records = [
        r for line in out.read_bytes().splitlines() for r in spans_from_json(orjson.loads(line))
    ]
    by_id = {(r.trace_id, r.span_id): r for r in records}
    assert len(by_id) == len(spans)
    for span in spans:
        ctx = span.get_span_context()
        assert ctx is not None
        record = by_id[(f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")]
        stall = {k: v for k, v in record.attributes.items() if k.startswith("stall.")}
        live_stall = _stall_attributes(span)
        assert stall == (with_defaults(live_stall) if full else live_stall), span.name
