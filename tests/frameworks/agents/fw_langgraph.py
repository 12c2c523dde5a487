# mypy: ignore-errors
"""LangGraph's prebuilt ReAct agent on ChatOpenAI, traced by OpenInference's LangChain instrumentor.

The tools run in a ``ToolNode`` with ``handle_tool_errors=True`` (a failing tool
becomes an error ``ToolMessage``, as in most LangGraph apps). The sub-agent is a
second compiled graph invoked from the ``research`` tool.
"""

from __future__ import annotations

import fw_harness as h
from openinference.instrumentation.langchain import LangChainInstrumentor


def build(args: h.Args, name: str, tools: list):
    from langchain_core.messages import SystemMessage
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    model = ChatOpenAI(model=h.MODEL, base_url=args.base_url, api_key=h.API_KEY)
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
        from langchain_core.tools import tool

        researcher = build(args, "researcher", [tool(h.fetch_page)])

        @tool
        def research(topic: str) -> str:
            """Ask the researcher agent about a topic."""
            state = researcher.invoke({"messages": [("user", f"Research {topic}.")]})
            return str(state["messages"][-1].content)

        tools = [tool(h.search), tool(h.fetch_page), tool(h.lookup), research]
        agent = build(args, "main", tools)
        agent.invoke({"messages": [("user", h.prompt(args.scenario))]})


if __name__ == "__main__":
    main()
