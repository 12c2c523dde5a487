# mypy: ignore-errors
"""Agno: an ``Agent`` on ``OpenAIChat``, traced by ``openinference-instrumentation-agno``.

Plain functions are the agent's tools. A failing tool's exception is handed
back to the model by Agno as the tool's result.
"""

from __future__ import annotations

import fw_harness as h
from openinference.instrumentation.agno import AgnoInstrumentor


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "agno") as provider:
        AgnoInstrumentor().instrument(tracer_provider=provider)
        from agno.agent import Agent
        from agno.models.openai import OpenAIChat

        agent = Agent(
            name="main",
            model=OpenAIChat(id=h.MODEL, base_url=args.base_url, api_key=h.API_KEY),
            tools=[h.search, h.fetch_page, h.lookup, h.find_docs],
            instructions=h.instructions("main"),
            telemetry=False,
        )
        agent.run(h.prompt(args.scenario))


if __name__ == "__main__":
    main()
