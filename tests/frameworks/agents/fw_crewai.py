# mypy: ignore-errors
"""CrewAI: one Agent and Task in a Crew on CrewAI's OpenAI-compatible LLM, traced by OpenInference.

``CrewAIInstrumentor`` traces the crew, agents, tasks and tools;
``OpenAIInstrumentor`` the model calls that CrewAI's native OpenAI provider
makes. CrewAI's own telemetry and tracing are switched off by environment
(the generator sets ``CREWAI_DISABLE_TELEMETRY`` and ``CREWAI_TRACING_ENABLED``).
A failing tool's exception is reported to the agent, which goes on. CrewAI
stops a run itself when a tool is called 5 times with the same arguments and
result (``check_repeated_tool_call`` raises ``ToolExecutionFailedError``): the
script catches it, as an application would, so the spans are kept.
"""

from __future__ import annotations

import fw_harness as h
from openinference.instrumentation.crewai import CrewAIInstrumentor
from openinference.instrumentation.openai import OpenAIInstrumentor


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "crewai") as provider:
        CrewAIInstrumentor().instrument(tracer_provider=provider)
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        from crewai import LLM, Agent, Crew, Task
        from crewai.tools import tool
        from crewai.tools.tool_failure import ToolExecutionFailedError

        search = tool("search")(h.search)
        fetch_page = tool("fetch_page")(h.fetch_page)
        lookup = tool("lookup")(h.lookup)
        llm = LLM(model=f"openai/{h.MODEL}", base_url=args.base_url, api_key=h.API_KEY)
        agent = Agent(
            role="main",
            goal="Answer the user's request with the tools.",
            backstory=h.instructions("main"),
            tools=[search, fetch_page, lookup],
            llm=llm,
            max_iter=20,
        )
        task = Task(
            description=h.prompt(args.scenario), expected_output="A short answer.", agent=agent
        )
        try:
            Crew(agents=[agent], tasks=[task]).kickoff()
        except ToolExecutionFailedError as exc:  # CrewAI's own repeated-call stop
            print(f"crew stopped: {exc}")


if __name__ == "__main__":
    main()
