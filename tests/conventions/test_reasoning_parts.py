"""Reasoning parts are the model's output: a model that thinks the same thing again is seen.

Issue 28 item 3.

``gen_ai.output.messages`` may hold ``{"type": "reasoning"}`` (or ``"thinking"``) parts
beside, or instead of, text: monologue and chanting read them as what the model said.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from stall_pipeline import make_pipeline

from otel_stall import Kind
from otel_stall.conventions.model_content import output_text


def _said(*parts: dict[str, Any]) -> str:
    """``gen_ai.output.messages`` of one assistant message with these parts."""
    return json.dumps([{"role": "assistant", "parts": list(parts)}])


THOUGHT = "The settings file may have changed since I last read it; read it again."
CALL = {"type": "tool_call", "id": "c1", "name": "read_file", "arguments": {"path": "a.json"}}


@pytest.mark.parametrize(
    "part",
    [
        {"type": "reasoning", "content": THOUGHT},
        {"type": "thinking", "thinking": THOUGHT},
        {"type": "thinking", "content": THOUGHT},
    ],
    ids=["reasoning", "thinking", "thinking-content"],
)
def test_a_model_that_thinks_the_same_thing_three_times_is_flagged(part: dict[str, Any]) -> None:
    """Three model calls whose only words are the same thought: a monologue, live."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span(
        "invoke_agent thinker",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "thinker"},
    ):
        for _ in range(3):
            with pipe.tracer.start_as_current_span(
                "chat gpt-4.1",
                attributes={
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4.1",
                    "gen_ai.output.messages": _said(part, CALL),
                },
            ):
                pass
    pipe.provider.shutdown()
    assert [f.kind for f in pipe.findings] == [Kind.MONOLOGUE]


def test_reasoning_is_read_beside_the_text_and_tool_calls_are_not() -> None:
    """Text and reasoning parts are the output, in order; a tool call part is not words."""
    text = output_text(
        {
            "gen_ai.output.messages": _said(
                {"type": "reasoning", "content": "think"}, CALL, {"type": "text", "content": "say"}
            )
        }
    )
    assert text == "think say"
    assert output_text({"gen_ai.output.messages": _said(CALL)}) is None


def test_a_chant_in_the_reasoning_is_flagged() -> None:
    """A passage repeated over and over inside a reasoning part chants."""
    pipe = make_pipeline()
    with pipe.tracer.start_as_current_span(
        "invoke_agent thinker",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "thinker"},
    ):
        passage = "I need to read the settings file again before I answer the user. " * 30
        with pipe.tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": _said({"type": "reasoning", "content": passage}),
            },
        ):
            pass
    pipe.provider.shutdown()
    assert Kind.CHANTING in {f.kind for f in pipe.findings}
