"""The live gate's cost per tool call inside real frameworks, against the framework's own cost.

Issue 30 asks for the gate's check per tool call in instructions, and as a ratio
of what the framework itself spends per call. Per framework, one process under
``valgrind --tool=callgrind`` counts windows (``callgrind.window``) of ``RUNS``
runs of ``CALLS`` tool calls with different arguments (nothing refused: the
gate's everyday cost), of three sides:

- ``bare``: the framework as it is, offline: the OpenAI Agents SDK's
  ``Runner.run`` over a scripted model asking one tool call per turn; an MCP
  session's ``call_tool`` round trips to an in-process server over a real
  in-memory connection; Google ADK's and Strands' agents on the scripted models
  of ``tests/integrations``;
- ``guarded``: the same with the integration (``guard(agent)``,
  ``guard_session(session)``, the ADK and Strands plugins), on one gate shared
  by every run, as the process's default gate is;
- ``gate``: that gate alone, asked what the integrations ask per call
  (``before_model``, ``before_tool``, ``after_tool``, then ``end_run``).

After two warm-ups of each side (the first runs high: the framework's lazy
set-up), the sides alternate for ``REPEATS`` rounds and the least window of each
is kept; the cyclic garbage collector is held off in every window (see
:func:`_counted`). ``guarded - bare`` is what the integration adds in place (the
gate and the translation around it); ``gate`` is the gate's check alone.

The frameworks come from the ``integrations`` extra: run with
``.venv-integrations/bin/python bench/bench_gate.py [--quick]`` (``make
.venv-integrations/.installed``); under another interpreter the script re-runs
itself with that one if it exists, and otherwise measures the frameworks it
finds and names the others. Without valgrind it says so and exits 0. No budget:
the figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import callgrind

from otel_stall.integrations.gate import ToolGate

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "integrations"))

CALLS = 8
"""Tool calls per run, each with different arguments, then the model's final answer."""

INTEGRATIONS_PYTHON = HERE.parent / ".venv-integrations/bin/python"

GATE = ToolGate()
"""The one gate every guarded run asks, as the process's default gate would be."""

Side = Callable[[], Awaitable[Any]]
"""One run of ``CALLS`` tool calls."""

FRAMEWORKS = {
    "agents": ("OpenAI Agents SDK: a `Runner.run` turn", ("agents",)),
    "mcp": ("MCP: a `call_tool` round trip, in memory", ("mcp",)),
    "adk": ("Google ADK: an agent's model turn and tool call", ("google.adk",)),
    "strands": ("Strands: an agent's model turn and tool call", ("strands",)),
}
"""Per framework: its row's name, and the modules it needs."""

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": f"topic {i}"}) for i in range(CALLS)
]
"""The ADK and Strands agents' tool calls (the tests' scripted models)."""


def _gate_side(
    name: str, args: Callable[[int], dict[str, Any]], result: Callable[[int], Any]
) -> Side:
    """What the integrations ask the gate per call, on a run of its own each time."""
    runs = iter(range(10**9))

    async def one() -> None:
        run = ("bench", next(runs))
        for key in range(CALLS):
            GATE.before_model(run=run)
            GATE.before_tool(name, args(key), run=run)
            GATE.after_tool(name, args(key), result(key), run=run)
        GATE.before_model(run=run)
        GATE.end_run(run)

    return one


def _record(key: int) -> str:
    return f"record {key}: " + "x" * 200


def _agents(guarded: bool) -> Side:
    """One ``Runner.run`` of ``CALLS`` tool turns and an answer, over a scripted model."""
    from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call

    from otel_stall.integrations.openai_agents import guard

    class Scripted(Model):
        """Asks ``lookup`` with a new key each turn until ``CALLS`` results are in, then answers."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            items = args[1] if len(args) > 1 else kwargs["input"]
            done = sum(
                1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
            )
            if done < CALLS:
                output = [function_call("lookup", {"key": done}, call_id=f"call-{done}")]
            else:
                output = [assistant_message("done")]
            return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def lookup(key: int) -> str:
        """A record by its key."""
        return _record(key)

    agent = Agent(name="bench", instructions="Look things up.", tools=[lookup], model=Scripted())
    if guarded:
        agent = guard(agent, gate=GATE)
    config = RunConfig(tracing_disabled=True)

    async def one() -> None:
        result = await Runner.run(agent, "Go.", run_config=config, max_turns=CALLS + 2)
        assert result.final_output == "done"

    return one


def _mcp(session: Any, guarded: bool) -> Side:
    """``CALLS`` round trips on one connection; guarded, each run on a wrapper of its own."""
    from otel_stall.integrations.mcp import guard_session

    async def one() -> None:
        target = guard_session(session, gate=GATE) if guarded else session
        for key in range(CALLS):
            result = await target.call_tool("lookup", {"key": key})
            assert not result.is_error
        if guarded:
            target.end_run()

    return one


def _adk(guarded: bool) -> Side:
    import adk_agent

    from otel_stall.integrations.adk import StallPlugin

    plugins = [StallPlugin(GATE)] if guarded else []

    async def one() -> None:
        await adk_agent.run_agent(SCRIPT, plugins=plugins)

    return one


def _strands(guarded: bool) -> Side:
    import strands_agent

    from otel_stall.integrations.strands import StallPlugin

    async def one() -> None:
        plugins = [StallPlugin(GATE)] if guarded else []  # a plugin is bound to one agent
        strands_agent.run_agent(SCRIPT, plugins=plugins)

    return one


def _search(key: int) -> dict[str, Any]:
    return SCRIPT[key][1]


def _hits(key: int) -> dict[str, Any]:
    return {"hits": f"no results for {SCRIPT[key][1]['query']}"}


async def _with_sides(framework: str, body: Callable[[list[Side]], Awaitable[None]]) -> None:
    """``body`` on the framework's three sides (bare, guarded, gate)."""
    if framework == "mcp":
        from mcp.client import Client
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("bench")

        @server.tool()
        def lookup(key: int) -> str:
            """A record by its key."""
            return _record(key)

        async with Client(server) as client:
            gate = _gate_side("lookup", lambda key: {"key": key}, _record)
            await body([_mcp(client.session, False), _mcp(client.session, True), gate])
        return
    if framework == "agents":
        make, gate = _agents, _gate_side("lookup", lambda key: {"key": key}, _record)
    else:
        make = _adk if framework == "adk" else _strands
        gate = _gate_side("search", _search, _hits)
    await body([make(False), make(True), gate])


async def _counted(side: Side, runs: int) -> None:
    """One counted window of ``runs`` runs of ``side``, the cyclic garbage collector held off.

    With a framework imported, a full collection walks every object it made; one
    falling in a window would be charged to whichever side happened to run then.
    """
    gc.collect()
    gc.disable()
    try:
        with callgrind.window():
            for _ in range(runs):
                await side()
    finally:
        gc.enable()


async def _drive(sides: list[Side], runs: int, repeats: int) -> None:
    """The measured process: two warm-ups of each side, then ``repeats`` rounds of windows."""
    for _ in range(2):
        for side in sides:
            await side()
    for _ in range(repeats):
        for side in sides:
            await _counted(side, runs)


def _instructions(framework: str, runs: int, repeats: int) -> tuple[float, float, float]:
    """Instructions per tool call of bare, guarded and the gate alone: the least window each."""
    command = [sys.executable, __file__, "--drive", framework, str(runs), str(repeats)]
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    counts = callgrind.count(command, 3 * repeats, env=env)
    bare, guarded, gate = (min(counts[i::3]) / (runs * CALLS) for i in range(3))
    return bare, guarded, gate


def _here(framework: str) -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in FRAMEWORKS[framework][1])
    except ModuleNotFoundError:
        return False


def _rerun(argv: list[str] | None) -> int | None:
    """The exit code of this script re-run in the integrations virtualenv, if it should be."""
    if all(_here(f) for f in FRAMEWORKS) or Path(sys.executable) == INTEGRATIONS_PYTHON:
        return None
    if not INTEGRATIONS_PYTHON.exists():
        return None
    again = [str(INTEGRATIONS_PYTHON), __file__, *(argv if argv is not None else sys.argv[1:])]
    return subprocess.run(again, check=False).returncode


def _table(rows: dict[str, tuple[float, float, float]]) -> None:
    print(
        "| framework, per tool call | the framework | added by the integration "
        "| the gate's check alone | added / framework | gate / framework |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for framework, (bare, guarded, gate) in rows.items():
        added = guarded - bare
        print(
            f"| {FRAMEWORKS[framework][0]} | {bare / 1000:,.1f} k | {added / 1000:,.1f} k "
            f"| {gate / 1000:,.1f} k | **{added / bare:.1%}** | {gate / bare:.1%} |"
        )
    print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer runs and windows")
    parser.add_argument("--drive", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    if options.drive:
        framework, runs, repeats = options.drive[0], int(options.drive[1]), int(options.drive[2])
        asyncio.run(_with_sides(framework, lambda sides: _drive(sides, runs, repeats)))
        return 0
    again = _rerun(argv)
    if again is not None:
        return again
    print("## Live gate in the frameworks: per tool call\n")
    present = [f for f in FRAMEWORKS if _here(f)]
    missing = [f for f in FRAMEWORKS if f not in present]
    if missing:
        print(f"Not installed here (the `integrations` extra): {', '.join(missing)}.\n")
    if not present:
        return 0
    if not callgrind.available():
        print("valgrind is not installed here: no figures.\n")
        return 0
    runs, repeats = (2, 2) if options.quick else (4, 3)
    print(
        f"Instructions (callgrind) per tool call: runs of {CALLS} tool calls with different "
        f"arguments (none refused) and an answer, {runs} runs per window, the least of "
        f"{repeats} windows per side, the sides alternating in one process per framework.\n"
    )
    _table({f: _instructions(f, runs, repeats) for f in present})
    return 0


if __name__ == "__main__":
    sys.exit(main())
