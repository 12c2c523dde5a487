"""One reading per span (``Conventions.read``): everything detection takes from a span, once."""

from __future__ import annotations

import json
from collections.abc import Mapping

from otel_stall.conventions import PLAIN, Conventions, Role, SpanRecord
from otel_stall.core.records import ABSENT, Status

CONVENTIONS = Conventions()


def _span(name: str, attributes: Mapping[str, object]) -> SpanRecord:
    return SpanRecord("t" * 32, "s" * 16, "p" * 16, name, 10, 20, attributes)


def test_a_plain_span_gets_the_shared_plain_reading() -> None:
    """An HTTP span holds no role key: its reading is the one shared value, with no record."""
    reading = CONVENTIONS.read(_span("GET /api", {"http.request.method": "GET"}))
    assert reading is PLAIN
    assert reading.tool is None
    assert reading.model is None


def test_a_tool_span_reads_into_its_call_session_and_handoff() -> None:
    """A handoff tool call: its record, the session it names and the agent it hands to."""
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "handoff",
        "gen_ai.tool.call.arguments": json.dumps({"to_agent": "billing"}),
        "gen_ai.tool.call.result": "ok",
        "gen_ai.conversation.id": "conv-7",
        "gen_ai.agent.name": "gemini-cli",  # the instrumentation that names sessions
    }
    reading = CONVENTIONS.read(_span("execute_tool handoff", attributes))
    assert reading.role is Role.TOOL
    assert reading.tool is not None
    assert reading.tool.tool == "handoff"
    assert reading.tool.status is Status.OK
    assert reading.handoff == "billing"
    assert reading.session == "conv-7"
    assert reading.content_switch is None  # it has content


def test_a_tool_call_without_content_says_how_to_capture_it() -> None:
    """Neither arguments nor result: the reading carries its convention's content switch."""
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    reading = CONVENTIONS.read(_span("execute_tool search", attributes))
    assert reading.tool is not None
    assert reading.tool.arguments is ABSENT
    assert reading.content_switch
    assert "CAPTURE_MESSAGE_CONTENT" in reading.content_switch
    openinference = {"openinference.span.kind": "TOOL", "tool.name": "search"}
    switch = CONVENTIONS.read(_span("search", openinference)).content_switch
    assert switch is not None
    assert "OPENINFERENCE" in switch


def test_a_model_span_reads_into_one_model_call() -> None:
    """A chat span's reading holds its call: outcome, usage and the output's digest."""
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "Hello there"}]}]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m-1",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.output.messages": json.dumps(output),
    }
    reading = CONVENTIONS.read(_span("chat m-1", attributes))
    assert reading.role is Role.MODEL
    assert reading.model is not None
    assert reading.model.model == "m-1"
    assert reading.model.input_tokens == 12
    assert reading.model.output is not None
    unread = CONVENTIONS.read(_span("chat m-1", attributes), output=False).model
    assert unread is not None
    assert unread.output is None
    assert unread.chant is None


def test_a_name_alone_gives_a_role_and_a_known_role_is_not_asked_again() -> None:
    """``invoke_agent x`` with no attributes is an agent; a role given is taken as it is."""
    assert CONVENTIONS.read(_span("invoke_agent x", {})).role is Role.AGENT
    assert CONVENTIONS.read(_span("chat m", {})).role is Role.MODEL
    assert CONVENTIONS.read(_span("anything", {}), Role.MODEL).model is not None
