"""A simulated agent, traced with the real SDK: the embedded example behind ``otel-stall demo``.

It emits OTel GenAI spans the way an instrumented agent framework does
(``invoke_agent`` > ``chat`` > ``execute_tool``, plus a plain HTTP client span
under a tool), with content capture on. The ``researcher`` run loops: it
re-fetches the same page and gets the same text back; the ``planner`` run
makes progress. Tests use the same agent, so the demo is what is tested.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

__all__ = ["run_looping_agent", "run_progressing_agent"]

_PAGE = {"url": "https://docs.example.com/otel/spans", "text": "Spans describe one operation."}


def _tool(tracer: Tracer, name: str, args: dict[str, Any], result: Any) -> None:
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(args),
        },
    ) as span:
        with tracer.start_as_current_span(
            "GET", kind=SpanKind.CLIENT, attributes={"http.request.method": "GET"}
        ) as http:
            http.set_attribute("http.response.status_code", 200)
        span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def _chat(tracer: Tracer, model: str = "demo-model") -> None:
    with tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
    ):
        pass


def run_looping_agent(tracer: Tracer | None = None, rounds: int = 6) -> None:
    """A researcher that searches once, then fetches the same page again and again."""
    tracer = tracer or trace.get_tracer("otel_stall.demo")
    with tracer.start_as_current_span(
        "invoke_agent researcher",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
    ):
        _chat(tracer)
        _tool(tracer, "search", {"query": "otel span basics"}, {"hits": [_PAGE["url"]]})
        for _ in range(rounds):
            _chat(tracer)
            _tool(tracer, "fetch", {"url": _PAGE["url"]}, _PAGE)
        _chat(tracer)


def run_progressing_agent(tracer: Tracer | None = None, rounds: int = 4) -> None:
    """A planner whose every round brings something new."""
    tracer = tracer or trace.get_tracer("otel_stall.demo")
    with tracer.start_as_current_span(
        "invoke_agent planner",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    ):
        for page in range(1, rounds + 1):
            _chat(tracer)
            _tool(tracer, "list_issues", {"page": page}, {"issues": [f"#{page * 10}"]})
        _chat(tracer)
