"""``otel-stall demo --framework pydantic-ai``: the looping researcher as a real pydantic-ai agent.

The same story as the simulated demo (:mod:`otel_stall.demo`), told by the
framework itself: a pydantic-ai ``Agent`` with real tools, driven offline and
deterministically by pydantic-ai's ``FunctionModel``, instrumented by
pydantic-ai's own OpenTelemetry capability, with
:class:`~otel_stall.integrations.pydantic_ai.StallGuard` asking the live
processor's gate. Its spans are captured for the replay like the simulated
agents'. pydantic-ai is imported only when this demo runs.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from typing import IO, Any, Final

from otel_stall.core.escape import printable

__all__ = ["PAGE_URL", "available", "run_pydantic_ai_demo"]

PAGE_URL: Final = "https://docs.example.com/otel/spans"
PAGE_TEXT: Final = "Spans describe one operation."
ROUNDS: Final = 12
"""The most fetches the scripted researcher asks for; the gate stops it sooner."""


def _module(name: str) -> Any:
    """A pydantic-ai module, imported as this demo runs (typed loosely: an optional dependency)."""
    return importlib.import_module(name)


def available() -> bool:
    """Whether pydantic-ai is installed (``pip install pydantic-ai-slim``)."""
    return importlib.util.find_spec("pydantic_ai") is not None


def _researcher(messages: list[Any], info: Any) -> Any:
    """The scripted model: search once, then fetch the same page while it has tools."""
    pai = _module("pydantic_ai.messages")
    ModelResponse, TextPart, ToolCallPart = pai.ModelResponse, pai.TextPart, pai.ToolCallPart
    asked = sum(isinstance(m, ModelResponse) for m in messages)
    if info.function_tools and asked == 0:
        return ModelResponse(parts=[ToolCallPart("search", {"query": "otel span basics"})])
    if info.function_tools and asked <= ROUNDS:
        return ModelResponse(parts=[ToolCallPart("fetch", {"url": PAGE_URL})])
    pages = [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, pai.ToolReturnPart) and part.outcome == "success"
        if part.tool_name == "fetch"
    ]
    text = pages[-1]["text"] if pages else "nothing fetched"
    return ModelResponse(parts=[TextPart(f"From {PAGE_URL}: {text}")])


def _planner(messages: list[Any], info: Any) -> Any:
    """The scripted model of a run that progresses: a new page of issues each round."""
    pai = _module("pydantic_ai.messages")
    asked = sum(isinstance(m, pai.ModelResponse) for m in messages)
    if asked < 4:
        return pai.ModelResponse(parts=[pai.ToolCallPart("list_issues", {"page": asked + 1})])
    return pai.ModelResponse(parts=[pai.TextPart("Planned from 4 pages of issues.")])


def _agents(processor: Any, provider: Any) -> tuple[Any, Any]:
    from otel_stall.integrations.gate import ToolGate

    agent = _module("pydantic_ai").Agent
    model = _module("pydantic_ai.models.function").FunctionModel
    guard = _module("otel_stall.integrations.pydantic_ai").StallGuard

    def capabilities() -> list[Any]:
        settings = _module("pydantic_ai.models.instrumented").InstrumentationSettings
        instrumentation = _module("pydantic_ai.capabilities").Instrumentation
        return [
            instrumentation(settings=settings(tracer_provider=provider)),
            guard(gate=ToolGate(processor)),
        ]

    researcher = agent(
        model(_researcher),
        name="researcher",
        tools=[search, fetch],
        capabilities=capabilities(),
    )
    planner = agent(
        model(_planner), name="planner", tools=[list_issues], capabilities=capabilities()
    )
    return researcher, planner


def search(query: str) -> dict[str, Any]:
    """Search the docs."""
    return {"hits": [PAGE_URL]}


def fetch(url: str) -> dict[str, str]:
    """Fetch a page."""
    return {"url": url, "text": PAGE_TEXT}


def list_issues(page: int) -> dict[str, list[str]]:
    """List a page of open issues."""
    return {"issues": [f"#{page * 10}"]}


def run_pydantic_ai_demo(
    capture: str, export_otlp: str | None, stdout: IO[str], *, width: int | None = None
) -> None:
    """The guarded researcher and the planner as pydantic-ai agents, then the live findings.

    Spans go to ``capture`` (OTLP/JSON lines) and, given ``export_otlp``, to that
    endpoint; ``width`` is the findings' line width (``None``: the terminal's).
    """
    from otel_stall.demo import live_pipeline, print_live_findings

    provider, processor, findings = live_pipeline(capture, export_otlp)
    researcher, planner = _agents(processor, provider)
    stdout.write(
        "A pydantic-ai researcher agent that loops on one page, and a planner that makes\n"
        "progress, driven offline by pydantic-ai's FunctionModel and traced by pydantic-ai's\n"
        "own instrumentation through StallSpanProcessor. The researcher has the StallGuard\n"
        "capability: the live gate inside the framework.\n\nresearcher\n"
    )
    try:
        result = researcher.run_sync("What is a span?")
        _narrate(result.all_messages(), result.output, stdout)
        planned = planner.run_sync("Plan the week.")
        stdout.write(
            "planner\n  rounds 1..4  list_issues, pages 1 to 4: each result new, never stopped\n"
            f"  answer: {printable(planned.output)}\n"
        )
    finally:
        provider.shutdown()
    arguments = {"search": '{"query": "otel span basics"}', "fetch": json.dumps({"url": PAGE_URL})}
    print_live_findings(findings, arguments, stdout, width)


def _narrate(messages: Sequence[Any], output: str, stdout: IO[str]) -> None:
    """Each call the model asked for, what became of it, and what the model was told."""
    pai = _module("pydantic_ai.messages")
    told: set[str] = set()
    step, call = 0, ""
    for message in messages:
        for part in message.parts:
            if isinstance(part, pai.ToolCallPart):
                step += 1
                arguments = json.dumps(part.args_as_dict())
                call = f"  round {step:<3} {printable(part.tool_name)} {arguments}"
            elif isinstance(part, pai.ToolReturnPart):
                stdout.write(_outcome(call, str(part.content), part.outcome, told))
            elif isinstance(part, pai.SystemPromptPart):
                stdout.write(
                    "  stopped: the next request has no tools; the model is told:\n"
                    f"      {printable(part.content)}\n"
                )
    stdout.write(f"  answer: {printable(output)}\n")


def _outcome(call: str, content: str, outcome: str, told: set[str]) -> str:
    if outcome == "success":
        return f"{call}: ran\n"
    if content in told:
        return f"{call}: refused again\n"
    told.add(content)
    return f"{call}: refused by the gate; the model is told:\n      {printable(content)}\n"
