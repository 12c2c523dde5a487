# mypy: ignore-errors
"""AG2 (the ``ag2`` package): an ``Agent`` on ``OpenAIConfig``, traced by its TelemetryMiddleware.

AG2's ``TelemetryMiddleware`` writes GenAI spans (``invoke_agent``, ``chat``,
``execute_tool``) with ``ag2.span.type`` on each; ``capture_content`` (on by
default) puts messages and tool arguments/results in them. The generator sets
``AG2_CAPTURE_CONTENT=false`` for ``*-nocontent`` scenarios; this script
passes it on. A failing tool's error goes back to the model.
"""

from __future__ import annotations

import asyncio
import os

import fw_harness as h


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "ag2") as provider:
        from ag2 import Agent
        from ag2.config.openai.config import OpenAIConfig
        from ag2.middleware.builtin import TelemetryMiddleware

        capture = os.environ.get("AG2_CAPTURE_CONTENT", "true") != "false"
        agent = Agent(
            "main",
            h.instructions("main"),
            config=OpenAIConfig(model=h.MODEL, api_key=h.API_KEY, base_url=args.base_url),
            tools=[h.search, h.fetch_page, h.lookup, h.find_docs],
            middleware=[TelemetryMiddleware(tracer_provider=provider, capture_content=capture)],
        )
        await agent.ask(h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
