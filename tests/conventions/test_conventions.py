"""Conventions on real SDK spans: roles, payloads, status mapping and self-declared flags."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from stall_pipeline import (
    CUSTOM,
    STYLE_PARAMS,
    STYLES,
    Agent,
    Call,
    Style,
    make_pipeline,
    needs_map_attributes,
    stall,
    stall_values,
)

from otel_stall import ABSENT, Conventions, Role
from otel_stall import Status as CallStatus
from otel_stall.conventions import ROLE_KEYS
from otel_stall.live.processor import span_record


def _span(attributes: dict[str, Any], *, error: bool = False, name: str = "span") -> ReadableSpan:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span(
        name, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        if error:
            span.set_status(Status(StatusCode.ERROR, "failed"))
    (done,) = exporter.get_finished_spans()
    return done


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_roles_of_each_convention(style: Style) -> None:
    """Agent, model and tool spans of each convention are classified as such."""
    conv = style.conventions
    assert conv.role(_span(style.agent("a")[1]).attributes) is Role.AGENT
    assert conv.role(_span(style.model()[1]).attributes) is Role.MODEL
    assert conv.role(_span(style.tool("t", {"a": 1}, {"b": 2})[1]).attributes) is Role.TOOL
    assert conv.role(_span({"http.method": "GET"}).attributes) is Role.OTHER


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_tool_call_payloads(style: Style) -> None:
    """The tool name, arguments and result come from the convention's own attributes."""
    name, attrs = style.tool("search", {"q": "x"}, {"hits": [1]})
    call = style.conventions.tool_call(span_record(_span(attrs, name=name)))
    assert call.tool == "search"
    assert call.arguments is not ABSENT
    assert call.result is not ABSENT
    assert call.status is CallStatus.OK


def test_tool_name_falls_back_to_span_name() -> None:
    """Without a tool-name attribute, 'execute_tool NAME' names the tool."""
    span = _span({"gen_ai.operation.name": "execute_tool"}, name="execute_tool fetch_page")
    call = Conventions().tool_call(span_record(span))
    assert call.tool == "fetch_page"
    assert call.arguments is ABSENT
    assert call.result is ABSENT


@needs_map_attributes
def test_structured_arguments_stay_structured() -> None:
    """A map/list attribute value reaches the detector as a map/list, not text."""
    span = _span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "t",
            "gen_ai.tool.call.arguments": {"q": "x", "tags": ["a", "b"]},
            "gen_ai.tool.call.result": [{"id": 1}],
        }
    )
    call = Conventions().tool_call(span_record(span))
    assert call.arguments == {"q": "x", "tags": ("a", "b")}
    assert list(call.result) == [{"id": 1}]


TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}


@pytest.mark.parametrize(
    ("extra", "error", "expected"),
    [
        ({}, False, CallStatus.OK),
        ({}, True, CallStatus.ERROR),
        ({"error.type": "TimeoutError"}, False, CallStatus.ERROR),
        ({"error.type": "overloaded"}, True, CallStatus.OVERLOADED),
        ({"error.type": "429"}, True, CallStatus.OVERLOADED),
        ({"error.type": "503"}, True, CallStatus.OVERLOADED),
        ({"error.type": "rate_limit"}, True, CallStatus.OVERLOADED),
        ({"error.type": "RateLimitError"}, True, CallStatus.OVERLOADED),
        ({"http.response.status_code": 429}, True, CallStatus.OVERLOADED),
        ({"http.response.status_code": 503}, True, CallStatus.OVERLOADED),
        ({"http.response.status_code": 500}, True, CallStatus.ERROR),
        ({"rpc.grpc.status_code": 8}, True, CallStatus.OVERLOADED),
        ({"error.type": "refused"}, True, CallStatus.REFUSED),
        ({"error.type": "permission_denied"}, True, CallStatus.REFUSED),
        ({"error.type": "blocked"}, False, CallStatus.REFUSED),
        ({"stall.refused": True}, False, CallStatus.REFUSED),
        ({"stall.refused": False}, False, CallStatus.OK),
    ],
)
def test_status_mapping(extra: dict[str, Any], error: bool, expected: CallStatus) -> None:
    """Span status, error.type, HTTP/gRPC codes and stall.refused map to the call status."""
    span = _span({**TOOL, **extra}, error=error)
    assert Conventions().status(span_record(span)) is expected


def test_markers_are_configurable() -> None:
    """Custom overload and refusal markers replace the defaults, case-insensitively."""
    conv = Conventions(overloaded_markers=frozenset({"Quota"}), refused_markers=frozenset({"nope"}))
    assert (
        conv.status(span_record(_span({**TOOL, "error.type": "quota"}, error=True)))
        is CallStatus.OVERLOADED
    )
    assert conv.status(span_record(_span({**TOOL, "error.type": "NOPE"}))) is CallStatus.REFUSED
    assert (
        conv.status(span_record(_span({**TOOL, "error.type": "429"}, error=True)))
        is CallStatus.ERROR
    )


def test_markers_from_env() -> None:
    """OTEL_STALL_OVERLOADED_MARKERS / REFUSED_MARKERS configure the conventions."""
    conv = Conventions.from_env(
        {"OTEL_STALL_OVERLOADED_MARKERS": "busy, throttled", "OTEL_STALL_REFUSED_MARKERS": "denied"}
    )
    assert conv.overloaded_markers == frozenset({"busy", "throttled"})
    assert conv.refused_markers == frozenset({"denied"})


@pytest.mark.parametrize("flag", ["stall.tool.exempt", "stall.tool.approval"])
def test_self_declared_flags(flag: str) -> None:
    """A tool span may declare itself exempt or approval-gated."""
    call = Conventions().tool_call(span_record(_span({**TOOL, flag: True})))
    assert (call.exempt, call.approval) == (
        flag == "stall.tool.exempt",
        flag == "stall.tool.approval",
    )


def test_exempt_polling_tool_never_loops() -> None:
    """A polling tool marked stall.tool.exempt repeats without repeat or duplicate findings."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    poll = Call("job_status", {"id": 7}, {"state": "running"}, {"stall.tool.exempt": True})
    with agent.run():
        for _ in range(6):
            agent.round(poll)
    rows = [stall_values(s) for s in pipe.named("execute_tool job_status")]
    assert [r["stall.action"] for r in rows] == ["continue"] * 6
    assert all(r["stall.new_fact"] is True for r in rows)
    assert stall(pipe.one("invoke_agent researcher"))["stall.verdict"] == "ok"


def test_failures_escalate_and_refusals_run_nothing() -> None:
    """Five failing calls of one tool escalate; refused calls never count as run."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    with agent.run():
        for i in range(5):
            agent.round(Call("deploy", {"n": i}, {"err": "x"}, error=True))
    rows = [stall(s) for s in pipe.named("execute_tool deploy")]
    assert rows[-1]["stall.action"] == "escalate"
    assert stall(pipe.one("invoke_agent researcher"))["stall.verdict"] == "escalate"

    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    refused = Call("search", {"q": 1}, {}, {"stall.refused": True})
    with agent.run():
        for _ in range(5):
            agent.round(refused)
    run = stall(pipe.one("invoke_agent researcher"))
    assert run["stall.verdict"] == "break"  # refused_rounds: five rounds in which nothing ran
    assert [f.kind.value for f in pipe.findings] == ["refused_rounds"]


def test_custom_mapping_reads_its_own_keys() -> None:
    """A CustomConvention maps a private schema's role and payload keys."""
    attrs = {"myco.step": "tool", "myco.tool": "grep", "myco.args": '{"p": 1}', "myco.out": "[]"}
    call = CUSTOM.tool_call(span_record(_span(attrs)))
    assert (call.tool, call.arguments, call.result) == ("grep", '{"p": 1}', "[]")
    assert Conventions().role(_span(attrs).attributes) is Role.OTHER


@pytest.mark.parametrize("style", STYLE_PARAMS)
def test_role_keys_cover_every_convention(style: Style) -> None:
    """The processor's one-set-test prefilter never hides a span role() would classify."""
    keys = ROLE_KEYS | {c.role_key for c in style.conventions.custom}
    for attrs in (style.agent("a")[1], style.model()[1], style.tool("t", {}, {})[1]):
        assert not keys.isdisjoint(attrs)


def test_approval_tool_results_are_always_new() -> None:
    """A tool flagged stall.tool.approval never counts as a duplicate and always brings news."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, STYLES[0])
    send = Call("send_email", {"to": "a@b.c"}, {"sent": True}, {"stall.tool.approval": True})
    with agent.run():
        for _ in range(2):
            agent.round(send)
    rows = [stall_values(s) for s in pipe.named("execute_tool send_email")]
    assert [r["stall.new_fact"] for r in rows] == [True, True]
    assert [r["stall.action"] for r in rows] == ["continue", "continue"]
    assert pipe.findings == []
