# mypy: ignore-errors
"""Microsoft Agent Framework: an Agent on OpenAIChatCompletionClient, with its built-in telemetry.

Instrumentation is on by default and uses the global provider; content is
switched with ``ENABLE_SENSITIVE_DATA`` and the layout with
``OTEL_SEMCONV_STABILITY_OPT_IN``, both read from the environment the generator
sets. ``subagent``: ``researcher.as_tool(name="research", arg_name="topic")``.
"""

from __future__ import annotations

import asyncio

import fw_harness as h


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "agent-framework"):
        from agent_framework import Agent
        from agent_framework.openai import OpenAIChatCompletionClient

        client = OpenAIChatCompletionClient(
            model=h.MODEL, base_url=args.base_url, api_key=h.API_KEY
        )
        researcher = Agent(
            client,
            h.instructions("researcher"),
            name="researcher",
            description="Researches a topic by fetching pages.",
            tools=[h.fetch_page],
        )
        research = researcher.as_tool(name="research", arg_name="topic")
        agent = Agent(
            client,
            h.instructions("main"),
            name="main",
            tools=[h.search, h.fetch_page, h.lookup, research],
        )
        await agent.run(h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
