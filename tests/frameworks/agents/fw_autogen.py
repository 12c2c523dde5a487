# mypy: ignore-errors
"""AutoGen AgentChat: an ``AssistantAgent`` on ``OpenAIChatCompletionClient``, its own tracing.

autogen-core writes GenAI spans (``invoke_agent``, ``execute_tool``) on the
global provider that the harness sets; there is no instrumentation package.
``max_tool_iterations`` is raised above the scripts' length (the default, 1,
stops after one round of calls). A failing tool's exception goes back to the
model as an error result. ``AG_INSTRUMENTATION=openinference`` adds
OpenInference's AgentChat instrumentor, which records content.
"""

from __future__ import annotations

import asyncio
import os

import fw_harness as h


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "autogen") as provider:
        if os.environ.get("AG_INSTRUMENTATION") == "openinference":
            from openinference.instrumentation.autogen_agentchat import (
                AutogenAgentChatInstrumentor,
            )

            AutogenAgentChatInstrumentor().instrument(tracer_provider=provider)
        from autogen_agentchat.agents import AssistantAgent
        from autogen_ext.models.openai import OpenAIChatCompletionClient

        client = OpenAIChatCompletionClient(
            model=h.MODEL,
            base_url=args.base_url,
            api_key=h.API_KEY,
            model_info={
                "vision": False,
                "function_calling": True,
                "json_output": True,
                "family": "gpt-4o",
                "structured_output": True,
            },
        )
        agent = AssistantAgent(
            "main",
            model_client=client,
            tools=[h.search, h.fetch_page, h.lookup, h.find_docs],
            system_message=h.instructions("main"),
            max_tool_iterations=20,
        )
        await agent.run(task=h.prompt(args.scenario))
        await client.close()


if __name__ == "__main__":
    asyncio.run(main())
