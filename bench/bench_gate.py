"""The live gate's cost per tool call inside real frameworks, against the framework's own cost.

Side by side in one process, each a run of ``CALLS`` tool calls with different
arguments (nothing refused: the gate's everyday cost):

- **OpenAI Agents SDK:** ``Runner.run`` of an agent whose offline model asks
  one tool call per turn and then answers, the agent as it is and as
  ``guard(agent)`` makes it (two guardrails and an ``is_enabled`` check per
  call, the gate asked once per turn). Per call: the run's cost over its calls.
- **MCP:** ``call_tool`` round trips over a real in-memory connection to an
  in-process server, on the session and on ``guard_session(session)``.
- **The gate alone:** ``before_model``, ``before_tool`` and ``after_tool`` per
  call on a ``ToolGate`` of its own: what both adapters add, without them.

CPU time (``time.process_time``): the median of interleaved repeats, so a burst
of load from elsewhere lands on both sides. Instructions: each side in counted
windows of one process under ``valgrind --tool=callgrind`` (see ``callgrind.py``),
the least of ``WINDOWS``; skipped without valgrind. The frameworks come from
the ``integrations`` extra: run with ``.venv-integrations/bin/python
bench/bench_gate.py [--quick]`` (``make .venv-integrations/.installed``); under
another interpreter without them the script re-runs itself with that one if it
exists, and otherwise says so and exits 0. No budget: the figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import callgrind

CALLS = 20
"""Tool calls per run (one per model turn in the agents run)."""

WINDOWS = 2
"""Counted windows per side under callgrind; the least is kept."""

INTEGRATIONS_PYTHON = Path(__file__).resolve().parent.parent / ".venv-integrations/bin/python"

DASH = "\N{EN DASH}"

SIDES = ("agents", "agents+gate", "mcp", "mcp+gate", "gate")
"""What is measured, in order: each framework without and with the gate, and the gate alone."""


def _agents_side(guarded: bool) -> Callable[[], Awaitable[Any]]:
    """One ``Runner.run`` of ``CALLS`` tool turns and an answer, over a model that never ends."""
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
        return f"record {key}: " + "x" * 200

    agent = Agent(name="bench", instructions="Look things up.", tools=[lookup], model=Scripted())
    if guarded:
        agent = guard(agent)
    config = RunConfig(tracing_disabled=True)

    async def one() -> Any:
        result = await Runner.run(agent, "Go.", run_config=config, max_turns=CALLS + 2)
        assert result.final_output == "done"

    return one


def _mcp_side(session: Any, guarded: bool) -> Callable[[], Awaitable[Any]]:
    """``CALLS`` round trips on one connection; guarded, each run on a wrapper of its own."""
    from otel_stall.integrations.mcp import guard_session

    async def one() -> None:
        target = guard_session(session) if guarded else session
        for key in range(CALLS):
            result = await target.call_tool("lookup", {"key": key})
            assert not result.is_error
        if guarded:
            target.end_run()

    return one


def _gate_side() -> Callable[[], Awaitable[Any]]:
    """What both adapters ask of the gate per call, on a run of its own each time."""
    from otel_stall.integrations.gate import ToolGate

    gate = ToolGate(own_state=True)
    result = "record 0: " + "x" * 200
    runs = iter(range(10**9))

    async def one() -> None:
        run = ("bench", next(runs))
        for key in range(CALLS):
            gate.before_model(run=run)
            gate.before_tool("lookup", {"key": key}, run=run)
            gate.after_tool("lookup", {"key": key}, result, run=run)
        gate.end_run(run)

    return one


def _server() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench")

    @server.tool()
    def lookup(key: int) -> str:
        """A record by its key."""
        return f"record {key}: " + "x" * 200

    return server


async def _with_sides(body: Callable[[list[Callable[[], Awaitable[Any]]]], Awaitable[Any]]) -> Any:
    """The five sides (``SIDES``), the MCP ones on one live in-memory connection."""
    from mcp.client import Client

    async with Client(_server()) as client:
        sides = [
            _agents_side(False),
            _agents_side(True),
            _mcp_side(client.session, False),
            _mcp_side(client.session, True),
            _gate_side(),
        ]
        return await body(sides)


async def _clock(sides: list[Callable[[], Awaitable[Any]]], repeats: int) -> list[list[float]]:
    """CPU seconds per call of each side, over interleaved repeats (after one warm-up each)."""
    for side in sides:
        await side()
    per_call: list[list[float]] = [[] for _ in sides]
    for _ in range(repeats):
        for i, side in enumerate(sides):
            start = time.process_time()
            await side()
            per_call[i].append((time.process_time() - start) / CALLS)
    return per_call


async def _drive(sides: list[Callable[[], Awaitable[Any]]], reps: int) -> None:
    """Under callgrind: per side a warm-up, then ``WINDOWS`` counted windows of ``reps`` runs."""
    for side in sides:
        await side()
        for _ in range(WINDOWS):
            with callgrind.window():
                for _ in range(reps):
                    await side()


def _instructions(reps: int) -> list[float] | None:
    """Instructions per call of each side, or ``None`` without valgrind."""
    if not callgrind.available():
        return None
    command = [sys.executable, __file__, "--drive", str(reps)]
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    counts = callgrind.count(command, WINDOWS * len(SIDES), env=env)
    return [
        min(counts[WINDOWS * i : WINDOWS * (i + 1)]) / (reps * CALLS) for i in range(len(SIDES))
    ]


def _cell(values: list[float], unit: str) -> str:
    """The median, and the interquartile range where there are repeats."""
    middle = statistics.median(values)
    if len(values) < 4:
        return f"{middle:,.1f} {unit}"
    low, _, high = statistics.quantiles(values, n=4)
    return f"{middle:,.1f} {unit} [{low:,.0f}{DASH}{high:,.0f}]"


def _table(per_call: list[list[float]], unit: str) -> None:
    """One row per framework, then the gate alone against each framework's own per-call cost."""
    mid = [statistics.median(values) for values in per_call]
    print("| framework, per tool call | without the gate | with it | the gate adds | ratio |")
    print("|---|---:|---:|---:|---:|")
    names = ("OpenAI Agents SDK: a `Runner.run` turn", "MCP: a `call_tool` round trip, in memory")
    for row, name in enumerate(names):
        plain, guarded = 2 * row, 2 * row + 1
        print(
            f"| {name} | {_cell(per_call[plain], unit)} | {_cell(per_call[guarded], unit)} "
            f"| {mid[guarded] - mid[plain]:,.1f} {unit} | **{mid[guarded] / mid[plain]:.3f}** |"
        )
    gate = mid[4]
    print(
        "\nThe gate alone (`before_model`, `before_tool`, `after_tool`): "
        f"{_cell(per_call[4], unit)} per call, {gate / mid[0]:.1%} of an agents turn, "
        f"{gate / mid[2]:.1%} of an MCP round trip.\n"
    )


def _frameworks_here() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("agents", "mcp"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    if options.drive:
        reps = int(options.drive)
        asyncio.run(_with_sides(lambda sides: _drive(sides, reps)))
        return 0
    if not _frameworks_here():
        if INTEGRATIONS_PYTHON.exists() and Path(sys.executable) != INTEGRATIONS_PYTHON:
            again = [
                str(INTEGRATIONS_PYTHON),
                __file__,
                *(argv if argv is not None else sys.argv[1:]),
            ]
            return subprocess.run(again, check=False).returncode
        print("## Live gate in the frameworks: per tool call\n")
        print("The `integrations` extra is not installed here: no figures.\n")
        return 0
    repeats = 5 if options.quick else 15
    print("## Live gate in the frameworks: per tool call\n")
    print(
        f"Runs of {CALLS} tool calls with different arguments (none refused), each framework "
        "with and without the gate, side by side in one process; per call, the run's cost "
        "over its calls.\n"
    )
    clocked = asyncio.run(_with_sides(lambda sides: _clock(sides, repeats)))
    load = os.getloadavg()[0]
    print(
        f"CPU time, the median of {repeats} interleaved repeats [interquartile range] "
        f"(load average {load:.1f} on {os.cpu_count()} cores: on a loaded machine the "
        "instruction counts below are the steadier figure):\n"
    )
    _table([[t * 1e6 for t in times] for times in clocked], "µs")
    counted = _instructions(1 if options.quick else 2)
    if counted is None:
        print("valgrind is not installed here: no instruction counts.\n")
        return 0
    print(f"Instructions (callgrind), the least of {WINDOWS} windows:\n")
    _table([[n / 1000] for n in counted], "k")
    return 0


if __name__ == "__main__":
    sys.exit(main())
