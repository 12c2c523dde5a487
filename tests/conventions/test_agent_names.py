"""A run's agent name: the GenAI key, the convention's own key, then the agent span's name.

Issue 28 item 4, read from the real OpenInference framework captures.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_stall import replay
from otel_stall.conventions import agent_name
from otel_stall.conventions.names import name_from_span

FRAMEWORKS = Path(__file__).parent.parent / "frameworks"


@pytest.mark.parametrize(
    ("path", "agents"),
    [
        # AGENT spans named after the agent and a method, no name key
        ("crewai/1.15.30-openinference/loop.jsonl", ["main"]),
        ("smolagents/1.26.0-openinference/loop.jsonl", ["main"]),
        ("smolagents/1.26.0-openinference/subagent.jsonl", ["main", "researcher"]),
        # OpenInference's agent.name
        ("openai-agents/0.24.0-openinference/loop.jsonl", ["main"]),
        ("openai-agents/0.24.0-openinference/handoff.jsonl", ["main", "researcher"]),
    ],
)
def test_openinference_runs_are_named_after_their_agent(path: str, agents: list[str]) -> None:
    """Every run of these captures has its agent's name, none is left as "run"."""
    result = replay(str(FRAMEWORKS / path))
    assert sorted(str(r.attributes.get("agent")) for r in result.reports) == sorted(agents)


@pytest.mark.parametrize(
    ("attributes", "span_name", "expected"),
    [
        ({"gen_ai.agent.name": "a", "agent.name": "b"}, "invoke_agent c", "a"),
        ({"agent.name": "b"}, "c.run", "b"),
        ({}, "invoke_agent researcher", "researcher"),
        ({}, "invoke_agent", None),
        ({}, "main._execute_core", "main"),
        ({}, "researcher.run", "researcher"),
        ({}, "ai.generateText", "ai.generateText"),  # a library's operation, kept whole
        ({}, "mcp host session", "mcp host session"),
        ({}, None, None),
    ],
)
def test_the_name_comes_from_the_keys_then_the_span_name(
    attributes: dict[str, str], span_name: str | None, expected: str | None
) -> None:
    """The GenAI key first, then a convention's key, then the span's name without its method."""
    assert agent_name(attributes, span_name) == expected


def test_a_bare_operation_names_no_agent() -> None:
    """``invoke_agent`` alone, or a blank name, is no agent's name."""
    assert name_from_span("invoke_agent ") is None
    assert name_from_span("  ") is None
