# mypy: ignore-errors
"""Google ADK: an LlmAgent on the real Gemini client (google-genai), traced by ADK's own OTel.

The Gemini client is pointed at the stub with ``GOOGLE_GEMINI_BASE_URL``
(the generator passes the stub's root). ADK's tracer uses the global provider
that the harness sets. Sub-agents are ADK's own: ``AgentTool`` (an agent used
as a tool) for ``subagent`` and ``sub_agents`` (``transfer_to_agent``) for
``handoff``. A failing tool raises; ``on_tool_error_callback`` hands the error
back to the model as the tool's response (without it ADK ends the run).
"""

from __future__ import annotations

import asyncio

import fw_harness as h
from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.adk.tools.agent_tool import AgentTool
from google.genai import types

MODEL = "gemini-2.5-flash"


def tool_error(tool, args, tool_context, error):
    """Report a tool's exception to the model, as ADK's error callback allows."""
    return {"error": str(error)}


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "google-adk"):
        researcher = LlmAgent(
            name="researcher",
            model=MODEL,
            instruction=h.instructions("researcher"),
            description="Researches a topic by fetching pages.",
            tools=[h.fetch_page],
            on_tool_error_callback=tool_error,
        )
        handoff = args.scenario == "handoff"
        agent = LlmAgent(
            name="main",
            model=MODEL,
            instruction=h.instructions("main"),
            tools=[h.search, h.fetch_page, h.lookup, *([] if handoff else [AgentTool(researcher)])],
            sub_agents=[researcher] if handoff else [],
            on_tool_error_callback=tool_error,
        )
        runner = InMemoryRunner(agent=agent, app_name="stall-fixtures")
        session = await runner.session_service.create_session(
            app_name="stall-fixtures", user_id="user"
        )
        message = types.Content(role="user", parts=[types.Part(text=h.prompt(args.scenario))])
        async for _ in runner.run_async(user_id="user", session_id=session.id, new_message=message):
            pass


if __name__ == "__main__":
    asyncio.run(main())
