# mypy: ignore-errors
"""OpenAI Agents SDK on the real chat-completions model, traced by an OTel instrumentation.

OA_INSTRUMENTATION picks ``openinference`` (openinference-instrumentation-openai-agents)
or ``genai`` (the OTel contrib opentelemetry-instrumentation-openai-agents-v2).
The SDK's default trace processor (export to OpenAI's backend) is removed first,
so nothing leaves the machine; the instrumentation adds its own processor.
"""

from __future__ import annotations

import asyncio
import os

import fw_harness as h
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_trace_processors,
)
from openai import AsyncOpenAI


def instrument(provider) -> None:
    set_trace_processors([])  # drop the exporter to OpenAI's backend
    if os.environ["OA_INSTRUMENTATION"] == "openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    else:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor
    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "openai-agents") as provider:
        instrument(provider)
        client = AsyncOpenAI(base_url=args.base_url, api_key=h.API_KEY)
        model = OpenAIChatCompletionsModel(model=h.MODEL, openai_client=client)

        researcher = Agent(
            name="researcher",
            instructions=h.instructions("researcher"),
            model=model,
            tools=[function_tool(h.fetch_page)],
        )

        @function_tool
        async def research(topic: str) -> str:
            """Ask the researcher agent about a topic."""
            result = await Runner.run(researcher, f"Research {topic}.")
            return str(result.final_output)

        agent = Agent(
            name="main",
            instructions=h.instructions("main"),
            model=model,
            tools=[
                function_tool(h.search),
                function_tool(h.fetch_page),
                function_tool(h.lookup),
                research,
            ],
            handoffs=[researcher] if args.scenario == "handoff" else [],
        )
        await Runner.run(agent, h.prompt(args.scenario), max_turns=20)


if __name__ == "__main__":
    asyncio.run(main())
