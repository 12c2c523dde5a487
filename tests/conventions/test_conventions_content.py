"""Per-call envelope fields are volatile; a tool's own ids and errors are not lost."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from otel_stall import Conventions, Role, StallPolicy
from otel_stall.conventions.content import says_error, without_call_ids
from otel_stall.otlp.decode import spans_from_json

FRAMEWORKS = Path(__file__).parent.parent / "frameworks"


def _tool_signatures(fixture: str, tool: str) -> list[str]:
    """The signatures of one tool's calls in a framework fixture, in file order."""
    conventions, signer = Conventions(), StallPolicy().signer
    out = []
    for line in (FRAMEWORKS / fixture).read_bytes().splitlines():
        for span in spans_from_json(orjson.loads(line)):
            if conventions.span_role(span.name, span.attributes) is Role.TOOL:
                call = conventions.tool_call(span)
                if call.tool == tool:
                    out.append(signer.sign(call.tool, call.arguments, call.result, "ok").signature)
    return out


@pytest.mark.parametrize(
    ("fixture", "tool"),
    [
        ("langgraph/1.2.24-create-agent/loop.jsonl", "search"),
        ("langgraph/1.2.24-openinference/loop.jsonl", "search"),
        ("gemini-cli/0.61.0-telemetry/loop.jsonl", "read_file"),
    ],
)
def test_id_bearing_results_of_a_real_loop_still_match(fixture: str, tool: str) -> None:
    """A framework's result that embeds the call's id signs the same on every repeat."""
    signatures = _tool_signatures(fixture, tool)
    assert len(signatures) >= 4
    assert len(set(signatures)) == 1


@pytest.mark.parametrize(
    ("fixture", "tool"),
    [("langgraph/1.2.24-create-agent/progress.jsonl", "fetch_page")],
)
def test_distinct_results_stay_distinct(fixture: str, tool: str) -> None:
    """Stripping the envelope leaves results that really differ different."""
    signatures = _tool_signatures(fixture, tool)
    assert len(set(signatures)) == len(signatures) >= 3


def test_envelope_fields_go_and_the_tools_own_ids_stay() -> None:
    """Call ids, ids beside them, timings and echoes of a call id go; other ids stay."""
    message = {
        "tool_call_id": "call_7",
        "id": None,
        "durationMs": 12,
        "content": {"rows": [{"id": 41, "name": "a"}], "ref": "call_7"},
    }
    assert without_call_ids(json.dumps(message)) == {"content": {"rows": [{"id": 41, "name": "a"}]}}


def test_payload_without_a_call_id_is_untouched() -> None:
    """A payload naming no call id comes back as the very same text."""
    text = '{"id": 3, "durationMs": 5}'
    assert without_call_ids(text) is text


@pytest.mark.parametrize(
    ("result", "error"),
    [
        ('{"status": "error", "response": {}}', True),
        ('{"type": "tool", "data": {"status": "error"}}', True),
        ('{"is_error": true, "blocks": []}', True),
        ('{"error": "boom"}', True),
        ('{"error": "boom", "rows": []}', False),
        ('{"status": "success"}', False),
        ("an error occurred", False),
    ],
)
def test_results_that_report_their_own_failure(result: str, error: bool) -> None:
    """A result envelope that says it failed makes the call an error; prose does not."""
    assert says_error(result) is error
