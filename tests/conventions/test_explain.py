"""``otel-stall explain``: each span's role and where its content was read, as replay reads it."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from otel_stall import Conventions, Role
from otel_stall.cli import main
from otel_stall.conventions.explain import explain
from otel_stall.otlp.decode import spans_from_json

FRAMEWORKS = Path(__file__).parent.parent / "frameworks"
LAYOUTS = sorted({p.parent for p in FRAMEWORKS.glob("*/*/*.jsonl")})
NAMES = {Role.TOOL: "tool", Role.MODEL: "model", Role.AGENT: "agent", Role.OTHER: "plain"}


@pytest.mark.parametrize("layout", LAYOUTS, ids=[str(p.relative_to(FRAMEWORKS)) for p in LAYOUTS])
def test_explain_agrees_with_the_conventions(layout: Path) -> None:
    """For every span of a framework's fixture, explain gives the role and tool the replay uses."""
    conventions = Conventions()
    path = sorted(layout.glob("*.jsonl"))[0]
    for line in path.read_bytes().splitlines():
        for span in spans_from_json(orjson.loads(line)):
            role = conventions.span_role(span.name, span.attributes)
            if role is Role.OTHER:
                role = conventions.role_by_name(span.name)
            got = explain(conventions, span)
            assert got.role == NAMES[role], span.name
            if role is Role.TOOL:
                assert got.tool == conventions.tool_call(span).tool


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        (
            "strands-agents/1.62.0-default/loop.jsonl",
            "event 'gen_ai.tool.message' attribute content",
        ),
        ("gemini-cli/0.61.0-telemetry/loop.jsonl", "attribute gen_ai.input.messages"),
        ("google-adk/2.13.0-legacy/loop-nocontent.jsonl", "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS"),
        ("google-adk/2.13.0-default/loop.jsonl", "OTEL_INSTRUMENTATION_GENAI_CAPTURE"),
        ("openai-agents/0.24.0-openinference/loop-nocontent.jsonl", "OPENINFERENCE_HIDE_INPUTS"),
    ],
)
def test_explain_says_where_arguments_come_from(
    fixture: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The arguments line names the key or event read, or the switch that captures content."""
    assert main(["explain", str(FRAMEWORKS / fixture)]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("arguments")]
    assert lines
    assert expected in lines[0]


def test_explain_one_span_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``--span ID --format json`` prints that span alone, with its role and sources."""
    path = FRAMEWORKS / "vercel-ai/7.0.173-legacy/loop.jsonl"
    main(["explain", str(path), "--format", "json"])
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    tool = next(r for r in rows if r["role"] == "tool")
    assert main(["explain", str(path), "--span", tool["span_id"], "--format", "json"]) == 0
    (only,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert only == tool
    assert only["tool_from"] == "attribute ai.toolCall.name"


def test_explain_unknown_span_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """A span id not in the file exits 2 and says so."""
    path = FRAMEWORKS / "vercel-ai/7.0.173-legacy/loop.jsonl"
    assert main(["explain", str(path), "--span", "00000000000000ff"]) == 2
    assert "not found" in capsys.readouterr().err
