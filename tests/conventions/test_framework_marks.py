"""Which framework wrote a span: its own content switch, and its final-answer tool.

The spans are real SDK spans with each framework's attributes as its own
source writes them (the source file is named per case); where a real fixture
exists (Haystack, DSPy, google-genai under ``tests/frameworks/``) the
fixture tests cover the same through the framework itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import Conventions, Role
from otel_stall import Status as CallStatus
from otel_stall.conventions.mappings import SpanConvention
from otel_stall.conventions.user import load_conventions
from otel_stall.live.processor import span_record


def _span(name: str, attributes: dict[str, Any]) -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span(name, attributes=attributes):
        pass
    (done,) = exporter.get_finished_spans()
    return done


def _switch(name: str, attributes: dict[str, Any]) -> str | None:
    span = _span(name, attributes)
    return Conventions().content_switch(dict(span.attributes or {}))


SWITCHES = [
    pytest.param(  # semantic_kernel/utils/telemetry/model_diagnostics (sk.available_functions)
        "chat.completions gpt-4o",
        {"gen_ai.operation.name": "chat.completions", "sk.available_functions": "[]"},
        "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE",
        id="semantic-kernel",
    ),
    pytest.param(  # haystack/components/agents/tool_calling.py, content tracing off
        "haystack.agent.step.tool",
        {"haystack.tool.name": "search", "haystack.tool.description": "Search."},
        "HAYSTACK_CONTENT_TRACING_ENABLED",
        id="haystack",
    ),
    pytest.param(  # autogen/instrumentation.py: execute_tool span, no content
        "execute_tool search",
        {"ag2.span.type": "tool", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "s"},
        "capture_content",
        id="ag2",
    ),
    pytest.param(  # Mastra through its OpenInference exporter: hideInput / hideOutput
        "tool: search",
        {
            "mastra.span.type": "tool_call",
            "openinference.span.kind": "TOOL",
            "input.value": "__REDACTED__",
        },
        "hideInput",
        id="mastra",
    ),
    pytest.param(
        "search",
        {"openinference.span.kind": "TOOL", "tool.name": "search", "input.value": "__REDACTED__"},
        "OPENINFERENCE_HIDE_INPUTS",
        id="openinference",
    ),
    pytest.param(
        "search.tool",
        {"traceloop.span.kind": "tool", "traceloop.entity.name": "search"},
        "TRACELOOP_TRACE_CONTENT",
        id="openllmetry",
    ),
    pytest.param(  # OpenLLMetry's LangChain instrumentation (fixture langchain/1.5.2-openllmetry)
        "execute_tool search",
        {
            "gen_ai.operation.name": "execute_tool",
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": "search",
        },
        "TRACELOOP_TRACE_CONTENT",
        id="openllmetry-langchain",
    ),
    pytest.param(  # Mastra through an OpenLLMetry-keyed exporter: Mastra's switch
        "tool: search",
        {"mastra.span.type": "tool_call", "traceloop.span.kind": "tool"},
        "hideInput",
        id="mastra-openllmetry",
    ),
    pytest.param(  # autogen-core's tracing (fixture autogen-agentchat/0.7.5-default)
        "execute_tool search",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.system": "autogen"},
        "AutoGen's own tracing records no tool arguments",
        id="autogen",
    ),
    pytest.param(
        "execute_tool search",
        {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"},
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        id="genai",
    ),
]


@pytest.mark.parametrize(("name", "attributes", "switch"), SWITCHES)
def test_content_hint_names_the_frameworks_own_switch(
    name: str, attributes: dict[str, Any], switch: str
) -> None:
    """A content-less span's hint names the switch of the framework that wrote it."""
    found = _switch(name, attributes)
    assert found is not None
    assert switch in found


def test_a_frameworks_marks_win_over_the_exporters_conventions() -> None:
    """Mastra's marks pick Mastra's switch although the span is OpenInference's otherwise."""
    mastra = _switch("t", {"mastra.trace_id": "x", "openinference.span.kind": "TOOL"})
    plain = _switch("t", {"openinference.span.kind": "TOOL"})
    assert mastra is not None
    assert plain is not None
    assert "Mastra" in mastra
    assert "Mastra" not in plain


def test_a_mapping_files_marks_pick_its_switch() -> None:
    """A user mapping with a key prefix of its own gets its switch on its spans."""
    acme = SpanConvention("acme", content_switch="ACME_CONTENT=1", marker_prefixes=("acme.",))
    span = _span("run", {"acme.step": 1, "gen_ai.operation.name": "execute_tool"})
    found = Conventions(mappings=(acme,)).content_switch(dict(span.attributes or {}))
    assert found == "ACME_CONTENT=1"


def _role(name: str, attributes: dict[str, Any]) -> Role:
    span = _span(name, attributes)
    return Conventions().span_role(span.name, dict(span.attributes or {}))


FINAL_ANSWERS = [
    pytest.param(  # smolagents' FinalAnswerTool under OpenInference (fixture too)
        "FinalAnswerTool",
        {"openinference.span.kind": "TOOL", "tool.name": "final_answer"},
        id="smolagents",
    ),
    pytest.param(  # beeai_framework/agents/requirement/utils/_tool.py FinalAnswerTool
        "final_answer",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "final_answer",
            "tool.description": "Sends the final answer to the user",
        },
        id="beeai-description",
    ),
    pytest.param(  # OpenInference BeeAI names the class (fixture beeai/0.1.85-openinference)
        "final_answer",
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "final_answer",
            "metadata.class_name": "FinalAnswerTool",
            "output.value": "__REDACTED__",
        },
        id="beeai-class",
    ),
    pytest.param(
        "execute_tool final_answer",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "final_answer",
            "gen_ai.tool.call.result": "Message has been sent",
        },
        id="beeai-result",
    ),
    pytest.param(  # dspy/predict/react.py tools["finish"], OpenInference span name
        "finish.__call__",
        {"openinference.span.kind": "TOOL", "output.value": "__REDACTED__"},
        id="dspy-openinference",
    ),
    pytest.param(
        "execute_tool finish",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "finish",
            "gen_ai.tool.description": "Marks the task as complete. That is, signals ...",
        },
        id="dspy-genai",
    ),
]


@pytest.mark.parametrize(("name", "attributes"), FINAL_ANSWERS)
def test_a_frameworks_final_answer_tool_is_not_a_call(
    name: str, attributes: dict[str, Any]
) -> None:
    """The tool a framework's agent calls to finish is the answer: a plain span."""
    assert _role(name, attributes) is Role.OTHER


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        (
            "execute_tool finish",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "finish"},
        ),
        (
            "final_answer",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "final_answer",
                "tool.description": "Post the answer to the ticket.",
                "output.value": "posted",
            },
        ),
    ],
    ids=["finish", "final_answer"],
)
def test_a_users_tool_of_the_same_name_is_a_call(name: str, attributes: dict[str, Any]) -> None:
    """A tool named like a framework's terminal tool, without its marks, is counted."""
    assert _role(name, attributes) is Role.TOOL


def test_a_mapping_file_gives_marks_and_error_flags(tmp_path: Path) -> None:
    """``marker_prefixes`` and ``error_flags`` in a mapping file work as the built-ins' do."""
    path = tmp_path / "acme.toml"
    path.write_text(
        "[[convention]]\n"
        'name = "acme"\n'
        'roles = { "acme.kind" = { step = "tool" } }\n'
        'tool_name_keys = ["acme.tool"]\n'
        'marker_prefixes = ["acme."]\n'
        'error_flags = ["acme.failed"]\n'
        'content_switch = "ACME_CONTENT=1"\n'
    )
    conventions = Conventions(mappings=load_conventions(path))
    span = _span("step", {"acme.kind": "step", "acme.tool": "search", "acme.failed": True})
    attributes = dict(span.attributes or {})
    assert conventions.content_switch(attributes) == "ACME_CONTENT=1"
    call = conventions.tool_call(span_record(span))
    assert call.status is CallStatus.ERROR
    ok = _span("step", {"acme.kind": "step", "acme.tool": "search", "acme.failed": False})
    assert conventions.tool_call(span_record(ok)).status is CallStatus.OK


def test_openllmetrys_serialised_tool_message_says_the_call_failed() -> None:
    """OpenLLMetry's LangChain tool span: a ``ToolMessage`` with status error is a failure."""
    message = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages"]}
    failed = {"output": {**message, "kwargs": {"content": "down", "status": "error"}}}
    fine = {"output": {**message, "kwargs": {"content": "page 1", "status": "success"}}}
    base = {"gen_ai.operation.name": "execute_tool", "traceloop.span.kind": "tool"}
    conventions = Conventions()
    for result, status in ((failed, CallStatus.ERROR), (fine, CallStatus.OK)):
        span = _span("execute_tool lookup", {**base, "gen_ai.tool.call.result": json.dumps(result)})
        assert conventions.tool_call(span_record(span)).status is status
