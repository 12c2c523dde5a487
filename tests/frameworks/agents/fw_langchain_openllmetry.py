# mypy: ignore-errors
"""LangChain's ``create_agent`` on ChatOpenAI, traced by OpenLLMetry's LangChain instrumentation.

``opentelemetry-instrumentation-langchain`` (OpenLLMetry, without the
Traceloop SDK) turns LangChain's callbacks into spans with the
``traceloop.*`` keys: ``traceloop.span.kind`` workflow / task / tool, content in
``traceloop.entity.input`` / ``output`` unless ``TRACELOOP_TRACE_CONTENT=false``.
The failing tool raises ``ToolException`` with ``handle_tool_error=True``, so its
error goes back to the model.
"""

from __future__ import annotations

import fw_harness as h
from opentelemetry.instrumentation.langchain import LangchainInstrumentor


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "langchain-openllmetry") as provider:
        LangchainInstrumentor().instrument(tracer_provider=provider)
        from langchain.agents import create_agent
        from langchain_core.tools import StructuredTool, ToolException, tool
        from langchain_openai import ChatOpenAI

        def lookup(key: str) -> str:
            """Look a key up in a backend that is down: always fails."""
            try:
                return h.lookup(key)
            except RuntimeError as exc:
                raise ToolException(str(exc)) from exc

        tools = [
            tool(h.search),
            tool(h.fetch_page),
            StructuredTool.from_function(lookup, handle_tool_error=True),
            tool(h.find_docs),
        ]
        model = ChatOpenAI(model=h.MODEL, base_url=args.base_url, api_key=h.API_KEY)
        agent = create_agent(model, tools=tools, system_prompt=h.instructions("main"), name="main")
        agent.invoke({"messages": [("user", h.prompt(args.scenario))]})


if __name__ == "__main__":
    main()
