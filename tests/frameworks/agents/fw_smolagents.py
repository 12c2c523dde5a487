# mypy: ignore-errors
"""smolagents: a ToolCallingAgent on OpenAIServerModel, traced by OpenInference.

smolagents ends a run only through its ``final_answer`` tool, so the generator
turns each scripted closing text into a ``final_answer`` call. The sub-agent is
a managed agent (``managed_agents=[researcher]``), which the manager calls as
the tool ``researcher`` with ``{"task": ...}``. A failing tool's exception is
reported to the model as an error observation and the run goes on.
"""

from __future__ import annotations

import fw_harness as h
from openinference.instrumentation.smolagents import SmolagentsInstrumentor


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "smolagents") as provider:
        SmolagentsInstrumentor().instrument(tracer_provider=provider)
        from smolagents import OpenAIServerModel, ToolCallingAgent, tool

        @tool
        def search(query: str) -> str:
            """Search the web: the same query always gives the same answer.

            Args:
                query: what to search for.
            """
            return h.search(query)

        @tool
        def fetch_page(page: int) -> str:
            """Fetch one page of a listing: each page is new.

            Args:
                page: the page number.
            """
            return h.fetch_page(page)

        @tool
        def lookup(key: str) -> str:
            """Look a key up in a backend that is down: always fails.

            Args:
                key: the key to look up.
            """
            return h.lookup(key)

        model = OpenAIServerModel(model_id=h.MODEL, api_base=args.base_url, api_key=h.API_KEY)
        researcher = ToolCallingAgent(
            tools=[fetch_page],
            model=model,
            name="researcher",
            description="Researches a topic by fetching pages.",
            instructions=h.instructions("researcher"),
            max_steps=20,
        )
        agent = ToolCallingAgent(
            tools=[search, fetch_page, lookup],
            model=model,
            name="main",
            instructions=h.instructions("main"),
            managed_agents=[researcher],
            max_steps=20,
        )
        agent.run(h.prompt(args.scenario))


if __name__ == "__main__":
    main()
