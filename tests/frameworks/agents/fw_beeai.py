# mypy: ignore-errors
"""BeeAI: a ``RequirementAgent`` on ``OpenAIChatModel``, traced by OpenInference.

``openinference-instrumentation-beeai`` follows BeeAI's emitter events into
spans. A ``RequirementAgent`` ends through its own ``final_answer`` tool
(``final_answer_as_tool=True``, the default), so the generator turns each
closing text into a ``final_answer`` call with ``{"response": ...}``: its span
is the answer, not a call. BeeAI's own repeated-call checker is turned off
(``tool_call_checker=False``) so that the loop plays out as scripted; a
failing tool's error goes back to the model.
"""

from __future__ import annotations

import asyncio

import fw_harness as h
from openinference.instrumentation.beeai import BeeAIInstrumentor


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "beeai") as provider:
        BeeAIInstrumentor().instrument(tracer_provider=provider)
        from beeai_framework.adapters.openai import OpenAIChatModel
        from beeai_framework.agents.requirement import RequirementAgent
        from beeai_framework.tools import tool

        tools = [tool(f) for f in (h.search, h.fetch_page, h.lookup, h.find_docs)]
        agent = RequirementAgent(
            llm=OpenAIChatModel(h.MODEL, api_key=h.API_KEY, base_url=args.base_url),
            tools=tools,
            name="main",
            instructions=h.instructions("main"),
            tool_call_checker=False,
        )
        await agent.run(h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
