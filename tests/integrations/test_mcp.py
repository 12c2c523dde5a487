"""The live gate in an MCP client session, against a real MCP server run in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from integration_support import require
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import install
from otel_stall.core.policy import StallPolicy
from otel_stall.integrations.gate import ToolGate

pytestmark = pytest.mark.integrations


def _server(ran: list[str]) -> Any:
    """An MCP server with a weather tool and a polling tool, each counting its executions."""
    require("mcp")
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("weather")

    @server.tool()
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"{city}: sunny, 21 degrees"

    @server.tool()
    def job_status(job: str) -> str:
        """The status of a job."""
        ran.append(job)
        return "done" if len(ran) == 6 else f"running ({len(ran)})"

    return server


def _connected(
    ran: list[str],
    gate: ToolGate,
    body: Callable[[Any], Awaitable[list[Any]]],
    exempt: frozenset[str] = frozenset(),
) -> list[Any]:
    """Run ``body`` with a guarded ``ClientSession`` of a real in-memory connection."""
    from mcp.client import Client

    from otel_stall.integrations.mcp import guard_session

    async def main() -> list[Any]:
        async with Client(_server(ran)) as client:
            return await body(guard_session(client.session, gate=gate, exempt=exempt))

    return asyncio.run(main())


def _texts(result: Any) -> list[str]:
    return [block.text for block in result.content]


async def _six(session: Any, tool: str, arguments: dict[str, str]) -> list[Any]:
    return [await session.call_tool(tool, arguments) for _ in range(6)]


def _assert_loop_refused(ran: list[str], results: list[Any]) -> None:
    assert ran == ["Paris"]  # 6 calls, the server ran the tool once
    assert not results[0].is_error
    assert _texts(results[0]) == ["Paris: sunny, 21 degrees"]
    for refused in results[1:]:
        assert refused.is_error
        (text,) = _texts(refused)
        assert text.startswith("Refused: `weather` already ran with these arguments at step 1")
    print("refusal:", _texts(results[1])[0])


def test_a_repeated_call_is_refused_without_reaching_the_server() -> None:
    """Of 6 identical calls the 2nd on are refused as isError results; the tool ran once."""
    ran: list[str] = []
    gate = ToolGate(policy=StallPolicy())
    results = _connected(ran, gate, lambda s: _six(s, "weather", {"city": "Paris"}))
    _assert_loop_refused(ran, results)


def test_the_loop_is_refused_with_the_processor_installed() -> None:
    """With install() on a real SDK provider the gate finds no run of its spans and guards alone."""
    provider = TracerProvider()
    processor = install(provider, exporter=InMemorySpanExporter(), environ={})
    try:
        ran: list[str] = []
        results = _connected(
            ran, ToolGate(processor), lambda s: _six(s, "weather", {"city": "Paris"})
        )
        _assert_loop_refused(ran, results)
    finally:
        provider.shutdown()


GLOBAL_PROVIDER = """
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from mcp.client import Client
from mcp.server.mcpserver import MCPServer
import otel_stall
from otel_stall.integrations.mcp import guard_session

provider = TracerProvider()
trace.set_tracer_provider(provider)
spans = InMemorySpanExporter()
processor = otel_stall.install(exporter=spans, environ={})
server = MCPServer("weather")
ran = []

@server.tool()
def weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    ran.append(city)
    return f"{city}: sunny, 21 degrees"

async def main():
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    async with Client(server) as client:
        session = guard_session(client.session)
        with trace.get_tracer("app").start_as_current_span("invoke_agent", attributes=agent):
            results = [await session.call_tool("weather", {"city": "Paris"}) for _ in range(6)]
            live = processor.run_for(trace.get_current_span().get_span_context()) is not None
    return [r.is_error for r in results], live

errors, live = asyncio.run(main())
provider.force_flush()
finished = spans.get_finished_spans()
served = sum(s.attributes.get("gen_ai.operation.name") == "execute_tool" for s in finished)
print(json.dumps({"errors": errors, "ran": ran, "live": live, "served": served}))
"""
"""An app with otel-stall installed on the global provider, where MCP's own spans go."""


def test_the_loop_is_refused_with_mcp_spans_on_the_installed_processor() -> None:
    """MCP's spans reach the processor without arguments: the session still refuses the repeat."""
    import json
    import subprocess
    import sys

    require("mcp")
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["served"] == 1  # the server's tool span, one: the refused calls never reached it
    assert seen["live"]  # the processor holds a run of the app's agent span
    assert seen["errors"] == [False] + [True] * 5
    assert seen["ran"] == ["Paris"]


def test_a_run_at_break_is_told_to_answer_and_every_call_is_refused() -> None:
    """A host asking before each turn hears ``stops`` after 5 refused rounds; calls stay refused."""
    ran: list[str] = []
    gate = ToolGate(policy=StallPolicy())

    async def host(session: Any) -> list[Any]:
        decisions = []
        for _ in range(6):
            decisions.append(session.before_model())
            await session.call_tool("weather", {"city": "Paris"})
        decisions.append(session.before_model())
        after = await session.call_tool("weather", {"city": "Oslo"})
        return [decisions, after]

    decisions, after = _connected(ran, gate, host)
    assert [d.stops for d in decisions] == [False] * 6 + [True]
    assert decisions[-1].message
    assert after.is_error
    assert _texts(after) == [decisions[-1].message]
    assert ran == ["Paris"]
    print("break:", decisions[-1].message)


def test_a_healthy_session_is_untouched() -> None:
    """Different calls reach the server and come back exactly as an unguarded session's."""
    cities = ["Paris", "Oslo", "Lima"]

    async def calls(session: Any) -> list[Any]:
        return [await session.call_tool("weather", {"city": city}) for city in cities]

    plain_ran: list[str] = []
    gate = ToolGate(policy=StallPolicy())

    async def plain(session: Any) -> list[Any]:
        return await calls(session.session)

    unguarded = _connected(plain_ran, gate, plain)
    ran: list[str] = []
    guarded = _connected(ran, gate, calls)
    assert ran == plain_ran == cities
    assert [r.model_dump() for r in guarded] == [r.model_dump() for r in unguarded]


def test_an_exempt_polling_tool_is_never_refused() -> None:
    """A polling tool the policy exempts reaches the server every time it is asked."""
    ran: list[str] = []
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"job_status"})))
    results = _connected(ran, gate, lambda s: _six(s, "job_status", {"job": "42"}))
    assert ran == ["42"] * 6
    assert not any(r.is_error for r in results)
    assert [_texts(r)[0] for r in results] == [f"running ({n})" for n in range(1, 6)] + ["done"]


def test_a_warning_is_one_more_text_block_of_the_result() -> None:
    """With duplicates allowed, the 3rd identical result carries the warning, the 4th does not."""
    from otel_stall.core.policy import DuplicateMode

    ran: list[str] = []
    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    results = _connected(ran, gate, lambda s: _six(s, "weather", {"city": "Paris"}))
    assert len(ran) == 5  # the 5th identical result is a break: the 6th call is refused
    texts = [_texts(r) for r in results]
    assert texts[:2] == [["Paris: sunny, 21 degrees"]] * 2
    assert texts[2][0] == "Paris: sunny, 21 degrees"
    assert texts[2][1].startswith("Stall: `weather` was called 3 times in a row")
    assert texts[3] == ["Paris: sunny, 21 degrees"]
    assert results[5].is_error
    print("warning:", texts[2][1])


def test_a_tool_the_session_exempts_is_never_refused() -> None:
    """``guard_session(..., exempt=...)`` exempts a tool the policy does not name."""
    ran: list[str] = []
    gate = ToolGate(policy=StallPolicy())
    poll = lambda s: _six(s, "job_status", {"job": "42"})  # noqa: E731
    results = _connected(ran, gate, poll, exempt=frozenset({"job_status"}))
    assert ran == ["42"] * 6
    assert not any(r.is_error for r in results)
