# mypy: ignore-errors
"""pydantic-ai with its tools on an MCP server: three layers of spans for one tool call.

The agent (instrumentation version ``PAI_INSTRUMENT``) reaches the tools
through ``MCPToolset`` on a FastMCP ``Client`` over stdio (pydantic-ai 2.x's
way; ``MCPServerStdio`` was removed); the server is ``fw_mcp.py --serve`` run by the MCP
SDK's own virtualenv (``FW_MCP_PYTHON``), so its ``tools/call <tool>`` spans
come from ``mcp`` 2.3's middleware, captured to a side file and appended here.
One call is then pydantic-ai's ``execute_tool``, the MCP client's span (if the
client library emits one) and the server's span: the case where nested tool
spans must count once.
"""

from __future__ import annotations

import asyncio
import os

import fw_harness as h
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


async def main() -> None:
    args = h.parse_args()
    side = args.out + ".server"
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fw_mcp.py")
    with h.capture(args.out, "pydantic-ai"):
        Agent.instrument_all(InstrumentationSettings(version=int(os.environ["PAI_INSTRUMENT"])))
        transport = StdioTransport(
            os.environ["FW_MCP_PYTHON"],
            [script, "--serve"],
            env={**os.environ, "MCP_SERVER_OUT": side},
        )
        # a failing tool is retried by the model, as with plain tools (ModelRetry)
        server = MCPToolset(Client(transport), max_retries=10)
        model = OpenAIChatModel(
            h.MODEL, provider=OpenAIProvider(base_url=args.base_url, api_key=h.API_KEY)
        )
        agent = Agent(model, name="main", instructions=h.instructions("main"), toolsets=[server])
        async with agent:
            await agent.run(h.prompt(args.scenario))
    with open(side, "rb") as server_spans, open(args.out, "ab") as out:
        out.write(server_spans.read())
    os.remove(side)


if __name__ == "__main__":
    asyncio.run(main())
