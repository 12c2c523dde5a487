# mypy: ignore-errors
"""LangGraph agents on ChatOpenAI, traced by OpenInference's LangChain instrumentor.

``LG_API=prebuilt`` builds ``langgraph.prebuilt.create_react_agent`` with a
``ToolNode(handle_tool_errors=True)`` (a failing tool becomes an error
``ToolMessage``, as in most LangGraph apps); ``LG_API=create_agent`` builds
LangChain 1.x's ``create_agent``, whose failing tool raises ``ToolException``
with ``handle_tool_error=True``. The sub-agent is a second compiled graph
invoked from the ``research`` tool.
"""

from __future__ import annotations

import os

import fw_harness as h
from openinference.instrumentation.langchain import LangChainInstrumentor

CREATE_AGENT = os.environ.get("LG_API") == "create_agent"


def build(args: h.Args, name: str, tools: list):
    from langchain_core.messages import SystemMessage
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    model = ChatOpenAI(model=h.MODEL, base_url=args.base_url, api_key=h.API_KEY)
    if CREATE_AGENT:
        from langchain.agents import create_agent

        return create_agent(model, tools=tools, system_prompt=h.instructions(name), name=name)
    return create_react_agent(
        model,
        tools=ToolNode(tools, handle_tool_errors=True),
        prompt=SystemMessage(h.instructions(name)),
        name=name,
    )


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "langgraph") as provider:
        LangChainInstrumentor().instrument(tracer_provider=provider)
        from langchain_core.tools import StructuredTool, ToolException, tool

        def lookup(key: str) -> str:
            """Look a key up in a backend that is down: always fails."""
            try:
                return h.lookup(key)
            except RuntimeError as exc:
                raise ToolException(str(exc)) from exc

        failing = (
            StructuredTool.from_function(lookup, handle_tool_error=True)
            if CREATE_AGENT
            else tool(h.lookup)
        )

        researcher = build(args, "researcher", [tool(h.fetch_page)])

        @tool
        def research(topic: str) -> str:
            """Ask the researcher agent about a topic."""
            state = researcher.invoke({"messages": [("user", f"Research {topic}.")]})
            return str(state["messages"][-1].content)

        tools = [tool(h.search), tool(h.fetch_page), failing, research]
        agent = build(args, "main", tools)
        agent.invoke({"messages": [("user", h.prompt(args.scenario))]})


if __name__ == "__main__":
    main()
