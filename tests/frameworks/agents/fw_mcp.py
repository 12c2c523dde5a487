# mypy: ignore-errors
"""The MCP Python SDK: a ``Client`` calling an ``MCPServer``'s tools over stdio.

The server is this script again (``--serve``), launched by the client over
stdio; it captures its own spans (``tools/call <tool>``, from the
``OpenTelemetryMiddleware`` that servers ship with) to a side file that the
client appends to its own (``MCP send tools/call <tool>``) at the end, so one
file holds both processes' spans, linked by the W3C context that the client
injects in ``_meta``. There is no agent framework: the client plays the
scripted model's turns (``/script/next``) inside one plain application span,
calling a turn's tools concurrently, like a host without GenAI instrumentation.
"""

from __future__ import annotations

import asyncio
import os
import sys

import fw_harness as h
from mcp import Client, StdioServerParameters
from mcp.server import MCPServer
from opentelemetry import trace


def serve() -> None:
    with h.capture(os.environ["MCP_SERVER_OUT"], "mcp-server"):
        server = MCPServer("stall-fixture-tools")
        server.tool()(h.search)
        server.tool()(h.fetch_page)
        server.tool()(h.lookup)
        server.run(transport="stdio")


async def play(args: h.Args) -> None:
    side = args.out + ".server"
    params = StdioServerParameters(
        command=sys.executable,
        args=[os.path.abspath(__file__), "--serve"],
        env={**os.environ, "MCP_SERVER_OUT": side},
    )
    with h.capture(args.out, "mcp-client"):
        tracer = trace.get_tracer("stall-fixture-host")
        with tracer.start_as_current_span("mcp host session"):
            async with Client(params) as client:
                while True:
                    calls = h.next_turn(args.base_url, "main")["turn"].get("tool_calls")
                    if not calls:
                        break
                    await asyncio.gather(
                        *(client.call_tool(c["name"], c["arguments"]) for c in calls)
                    )
    with open(side, "rb") as server_spans, open(args.out, "ab") as out:
        out.write(server_spans.read())
    os.remove(side)


if __name__ == "__main__":
    if "--serve" in sys.argv:
        serve()
    else:
        asyncio.run(play(h.parse_args()))
