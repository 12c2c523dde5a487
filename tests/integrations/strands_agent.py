"""A real Strands agent on a scripted model (no network), for the Strands integration's tests.

The model is a :class:`strands.models.Model` subclass that records every
request (the tool specs it was offered, the system prompt, the messages) and
streams Strands' own events: a ``toolUse`` block while it has tools and the
script has calls left, else a final text answer from the tool results it has
read. The tools count their own executions.

Run as a script (``python strands_agent.py ASKS``), it plays the loop in
processor mode in a fresh interpreter (the global tracer provider can be set
only once per process): ``otel_stall.install()`` on a real SDK provider, fed by
Strands' own spans, and prints what happened as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from strands import Agent, tool
from strands.agent import AgentResult
from strands.models import Model
from strands.plugins import Plugin
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import AgentTool, ToolSpec

T = TypeVar("T", bound=BaseModel)

Call = tuple[str, dict[str, Any]]
"""One tool call the script asks for: the tool's name and its input."""


@dataclass
class Turn:
    """What the model was given on one call."""

    tools: list[str]
    system: str
    messages: list[dict[str, Any]]

    def results(self) -> list[dict[str, Any]]:
        """Every tool result in the messages, oldest first."""
        return [
            block["toolResult"]
            for message in self.messages
            for block in message.get("content", [])
            if "toolResult" in block
        ]

    def texts(self, result: dict[str, Any]) -> list[str]:
        """The text blocks of one tool result."""
        return [block["text"] for block in result.get("content", []) if "text" in block]


class ScriptedModel(Model):
    """Asks for ``calls`` in order while it is offered tools, then answers in text."""

    def __init__(self, calls: list[Call]) -> None:
        self.calls = calls
        self.turns: list[Turn] = []

    def update_config(self, **model_config: Any) -> None:
        """Nothing to configure."""

    def get_config(self) -> dict[str, Any]:
        """No configuration."""
        return {}

    def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        """Not used by these tests."""
        raise NotImplementedError

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterable[StreamEvent]:
        """One turn: the next scripted call, or the final answer once out of calls or tools."""
        tools = [spec["name"] for spec in tool_specs or []]
        turn = Turn(tools, system_prompt or "", json.loads(json.dumps(messages, default=str)))
        self.turns.append(turn)
        asked = sum(1 for t in self.turns[:-1] if t.tools)
        yield {"messageStart": {"role": "assistant"}}
        if tools and asked < len(self.calls):
            name, args = self.calls[asked]
            start: Any = {"toolUse": {"toolUseId": f"call-{len(self.turns)}", "name": name}}
            yield {"contentBlockStart": {"start": start}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        else:
            yield {"contentBlockDelta": {"delta": {"text": final_answer(turn)}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}


def final_answer(turn: Turn) -> str:
    """The answer the scripted model writes from the results it has read."""
    facts = [r for r in turn.results() if r.get("status") == "success"]
    if not facts:
        return "Final answer: I found nothing."
    return "Final answer, from what I gathered: " + "; ".join(turn.texts(facts[0]))


@dataclass
class Tools:
    """The agent's tools, counting how often each body actually ran."""

    runs: Counter[str] = field(default_factory=Counter)

    def tools(self) -> list[AgentTool]:
        """Strands tools made with its ``@tool`` decorator."""

        @tool
        def search(query: str) -> str:
            """Search the web for a query.

            Args:
                query: what to look for.
            """
            self.runs["search"] += 1
            return f"no results for {query}"

        @tool
        def poll_status(job: str) -> str:
            """Poll a long job's status.

            Args:
                job: the job's id.
            """
            self.runs["poll_status"] += 1
            return f"job {job}: running"

        @tool
        def lookup(key: str) -> str:
            """Look a key up in a backend that is down.

            Args:
                key: the key.
            """
            self.runs["lookup"] += 1
            raise RuntimeError(f"backend unavailable for {key}")

        return [search, poll_status, lookup]


@dataclass
class Outcome:
    """One run of the agent: the model's turns, the tools' runs, the final text."""

    turns: list[Turn]
    runs: Counter[str]
    final: str
    stop_reason: str


def run_agent(
    calls: list[Call], *, plugins: Sequence[Plugin] = (), agent_async: bool = False
) -> Outcome:
    """Run one prompt through a Strands Agent to its end (``invoke_async`` when asked)."""
    tools = Tools()
    model = ScriptedModel(calls)
    agent = Agent(
        model=model,
        tools=[*tools.tools()],
        system_prompt="Answer the user's question.",
        callback_handler=None,
        plugins=list(plugins),
    )
    result: AgentResult
    if agent_async:
        result = asyncio.run(agent.invoke_async("What is otel?"))
    else:
        result = agent("What is otel?")
    return Outcome(model.turns, tools.runs, str(result).strip(), str(result.stop_reason))


LOOP: list[Call] = [("search", {"query": "otel"})] * 6
"""The loop: the same call asked 6 times."""


def processor_mode(asks: int) -> dict[str, Any]:
    """The loop, asked ``asks`` times, with ``otel_stall.install()`` on the global provider.

    Strands' own spans feed the processor; an in-memory exporter downstream keeps
    the enriched tool spans to show what each one carries.
    """
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import otel_stall
    from otel_stall.integrations.strands import StallPlugin
    from otel_stall.semconv import StallAttributes

    exporter = InMemorySpanExporter()
    processor = otel_stall.install(downstream=SimpleSpanProcessor(exporter))
    plugin = StallPlugin()
    outcome = run_agent(LOOP[:1] * asks, plugins=[plugin])
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
            {"tools": t.tools, "system": t.system, "results": t.results()} for t in outcome.turns
        ],
        "final": outcome.final,
        "tool_spans": tool_spans,
        "own_runs": plugin.gate.open_runs,
    }


if __name__ == "__main__":
    json.dump(processor_mode(int(sys.argv[1])), sys.stdout, default=str)
