# mypy: ignore-errors
"""pydantic-ai: an Agent on the real OpenAI chat model, instrumented with ``Agent.instrument_all``.

PAI_INSTRUMENT picks the instrumentation ``version``; ``*-nocontent``
scenarios set ``include_content=False``. A failing tool raises ``ModelRetry``
(pydantic-ai's way for a tool to report failure to the model; any other
exception ends the run), with retries raised so the model can keep trying.
"""

from __future__ import annotations

import asyncio
import os

import fw_harness as h
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.providers.openai import OpenAIProvider

try:
    from pydantic_ai.models.openai import OpenAIChatModel as ChatModel
except ImportError:  # before 1.0 the chat-completions model had this name
    from pydantic_ai.models.openai import OpenAIModel as ChatModel


def make_agent(name: str, args: h.Args) -> Agent:
    model = ChatModel(h.MODEL, provider=OpenAIProvider(base_url=args.base_url, api_key=h.API_KEY))
    return Agent(model, name=name, instructions=h.instructions(name))


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "pydantic-ai"):
        settings = InstrumentationSettings(
            version=int(os.environ["PAI_INSTRUMENT"]),
            include_content=not args.scenario.endswith("-nocontent"),
        )
        Agent.instrument_all(settings)  # the documented switch, in 1.x and 2.x alike
        agent = make_agent("main", args)
        agent.tool_plain(h.search)
        agent.tool_plain(h.fetch_page)

        @agent.tool_plain(retries=10)
        def lookup(key: str) -> str:
            """Look a key up in the backend."""
            try:
                return h.lookup(key)
            except RuntimeError as exc:
                raise ModelRetry(str(exc)) from exc

        researcher = make_agent("researcher", args)
        researcher.tool_plain(h.fetch_page)

        @agent.tool_plain
        async def research(topic: str) -> str:
            """Ask the researcher agent about a topic."""
            result = await researcher.run(f"Research {topic}.")
            return result.output

        await agent.run(h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
