# mypy: ignore-errors
"""LlamaIndex: a FunctionAgent (agent workflows) on its OpenAI LLM, traced by OpenInference.

The LLM streams chat completions from the stub. ``subagent``: the ``research``
tool awaits a second FunctionAgent. ``handoff``: an ``AgentWorkflow`` whose
``main`` agent may hand off to ``researcher`` (the model calls LlamaIndex's
``handoff`` tool). A failing tool's exception becomes an error tool output.
"""

from __future__ import annotations

import asyncio

import fw_harness as h
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "llama-index") as provider:
        LlamaIndexInstrumentor().instrument(tracer_provider=provider)
        from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
        from llama_index.core.tools import FunctionTool
        from llama_index.llms.openai import OpenAI

        llm = OpenAI(model=h.MODEL, api_base=args.base_url, api_key=h.API_KEY)
        researcher = FunctionAgent(
            name="researcher",
            description="Researches a topic by fetching pages.",
            system_prompt=h.instructions("researcher"),
            tools=[FunctionTool.from_defaults(h.fetch_page)],
            llm=llm,
        )

        async def research(topic: str) -> str:
            """Ask the researcher agent about a topic."""
            return str(await researcher.run(user_msg=f"Research {topic}."))

        handoff = args.scenario == "handoff"
        agent = FunctionAgent(
            name="main",
            description="Answers the user's request.",
            system_prompt=h.instructions("main"),
            tools=[
                FunctionTool.from_defaults(fn)
                for fn in (h.search, h.fetch_page, h.lookup, *(() if handoff else (research,)))
            ],
            llm=llm,
            can_handoff_to=["researcher"] if handoff else None,
        )
        if handoff:
            workflow = AgentWorkflow(agents=[agent, researcher], root_agent="main")
            await workflow.run(user_msg=h.prompt(args.scenario))
        else:
            await agent.run(user_msg=h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
