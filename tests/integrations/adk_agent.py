"""A real ADK agent on a scripted model (no network), for the ADK integration's tests.

The model is a :class:`~google.adk.models.base_llm.BaseLlm` subclass that
records every request it gets (the tools it was offered, the system
instruction, the contents) and answers from a script: call a tool while it
has tools and the script has calls left, else write a final answer from the
function responses it has read. The tools count their own executions.

Run as a script (``python adk_agent.py``), it plays the loop in processor mode
in a fresh interpreter, since the global tracer provider can be set only once
per process: ``otel_stall.install()`` on a real SDK provider, ADK's own spans
feeding the processor, and prints what happened as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import Field

Call = tuple[str, dict[str, Any]]
"""One tool call the script asks for: the tool's name and its arguments."""


@dataclass
class Turn:
    """What the model was given on one turn."""

    tools: list[str]
    system: str
    contents: list[dict[str, Any]]

    def responses(self) -> list[dict[str, Any]]:
        """Every function response in the contents, oldest first."""
        return [
            part["function_response"]["response"]
            for content in self.contents
            for part in content.get("parts", [])
            if "function_response" in part
        ]


class ScriptedLlm(BaseLlm):
    """Asks for ``calls`` in order while it is offered tools, then answers in text."""

    calls: list[Call]
    turns: list[Turn] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """One turn: the next scripted call, or the final answer once out of calls or tools."""
        tools = [
            declaration.name or ""
            for tool in llm_request.config.tools or []
            if isinstance(tool, types.Tool)
            for declaration in tool.function_declarations or []
        ]
        system = llm_request.config.system_instruction
        turn = Turn(
            tools,
            system if isinstance(system, str) else "",
            [
                content.model_dump(mode="json", exclude_none=True)
                for content in llm_request.contents
            ],
        )
        self.turns.append(turn)
        asked = sum(1 for t in self.turns[:-1] if t.tools)
        if tools and asked < len(self.calls):
            name, args = self.calls[asked]
            part = types.Part(function_call=types.FunctionCall(name=name, args=args))
        else:
            part = types.Part(text=final_answer(turn))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


def final_answer(turn: Turn) -> str:
    """The answer the scripted model writes from the results it has read."""
    facts = [r for r in turn.responses() if "error" not in r]
    if not facts:
        return "Final answer: I found nothing."
    return "Final answer, from what I gathered: " + "; ".join(
        json.dumps(f, sort_keys=True) for f in facts[:1]
    )


@dataclass
class Tools:
    """The agent's tools, counting how often each body actually ran."""

    runs: Counter[str] = field(default_factory=Counter)

    def functions(self) -> list[Callable[..., Any]]:
        """The plain functions ADK wraps as FunctionTools."""

        def search(query: str) -> dict[str, Any]:
            """Search the web for a query."""
            self.runs["search"] += 1
            return {"hits": f"no results for {query}"}

        def poll_status(job: str) -> dict[str, Any]:
            """Poll a long job's status."""
            self.runs["poll_status"] += 1
            return {"job": job, "state": "running"}

        def lookup(key: str) -> dict[str, Any]:
            """Look a key up in a backend that is down."""
            self.runs["lookup"] += 1
            raise RuntimeError(f"backend unavailable for {key}")

        return [search, poll_status, lookup]


def report_error(tool: Any, args: Any, tool_context: Any, error: Exception) -> dict[str, Any]:
    """An agent's ``on_tool_error_callback``: the model reads the error; the run goes on."""
    return {"error": str(error)}


@dataclass
class Outcome:
    """One run of the agent: the model's turns, the tools' runs, the events' final text."""

    turns: list[Turn]
    runs: Counter[str]
    final: str
    invocation_id: str


async def run_agent(
    calls: list[Call],
    *,
    plugins: Sequence[BasePlugin] = (),
    callbacks: dict[str, Any] | None = None,
) -> Outcome:
    """Run one user message through an LlmAgent on ``InMemoryRunner`` to its end."""
    tools = Tools()
    model = ScriptedLlm(model="scripted", calls=calls)
    agent = LlmAgent(
        name="researcher",
        model=model,
        instruction="Answer the user's question.",
        tools=[*tools.functions()],
        **(callbacks or {}),
    )
    app = App(name="stall_tests", root_agent=agent, plugins=list(plugins))
    runner = InMemoryRunner(app=app)
    session = await runner.session_service.create_session(app_name=app.name, user_id="u")
    message = types.Content(role="user", parts=[types.Part(text="What is otel?")])
    final, invocation = "", ""
    async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
        invocation = event.invocation_id
        if event.is_final_response() and event.content and event.content.parts:
            final = "".join(part.text or "" for part in event.content.parts)
    await runner.close()
    return Outcome(model.turns, tools.runs, final, invocation)


LOOP: list[Call] = [("search", {"query": "otel"})] * 6
"""The loop: the same call asked 6 times."""


def processor_mode(asks: int) -> dict[str, Any]:
    """The loop, asked ``asks`` times, with ``otel_stall.install()`` on the global provider.

    ADK's own spans feed the processor; an in-memory exporter downstream keeps
    the enriched tool spans to show what each one carries.
    """
    os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_stall
    from otel_stall.integrations.adk import StallPlugin
    from otel_stall.semconv import StallAttributes

    exporter = InMemorySpanExporter()
    processor = otel_stall.install(downstream=SimpleSpanProcessor(exporter))
    plugin = StallPlugin()
    outcome = asyncio.run(run_agent(LOOP[:1] * asks, plugins=[plugin]))
    processor.force_flush()
    tool_spans = [
        {
            "name": span.name,
            "refused": (span.attributes or {}).get(StallAttributes.REFUSED),
            "action": (span.attributes or {}).get(StallAttributes.ACTION),
        }
        for span in exporter.get_finished_spans()
        if span.name.startswith("execute_tool")
    ]
    return {
        "runs": dict(outcome.runs),
        "turns": [
            {"tools": t.tools, "system": t.system, "responses": t.responses()}
            for t in outcome.turns
        ],
        "final": outcome.final,
        "tool_spans": tool_spans,
        "own_runs": plugin.callbacks.gate.open_runs,
    }


if __name__ == "__main__":
    json.dump(processor_mode(int(sys.argv[1])), sys.stdout, default=str)
