"""The gate's cost per tool call inside a real framework, beside the framework's own (callgrind).

Issue 30 asks for the gate's check per tool call in instructions, and as a ratio
of what the framework itself spends per call. One process, in the integrations
virtualenv, under ``valgrind --tool=callgrind``, counts windows
(``callgrind.window``) of ``RUNS`` agent runs each, after a warm-up of each side:

- ``bare``: the framework's agent (the tests' scripted model, offline) running
  ``CALLS`` different tool calls and a final answer, without the gate;
- ``guarded``: the same agent with the integration's plugin, on one gate shared
  by every run (as the process's default gate is), in its own run state;
- ``gate``: that gate alone, asked exactly what the plugin asks for those calls
  (``before_model``, ``before_tool``, ``after_tool`` per call, ``end_run``).

``bare`` and ``guarded`` alternate, ``REPEATS`` windows each, and the least of
each is kept: the first window runs high (the framework's lazy set-up). The
cyclic garbage collector is held off in every window (see :func:`counted`). Per tool call:
a window over ``CALLS * RUNS``. ``guarded - bare`` is what the integration adds
in place (the gate and the translation around it); ``gate`` is the gate's check
alone. A healthy run: nothing is refused, the common path.

Run ``.venv-integrations/bin/python bench/bench_integration_gate.py adk|strands``;
``--inner`` is the measured process. Without valgrind it says so and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import callgrind

from otel_stall.integrations.gate import ToolGate

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests" / "integrations"))

CALLS = 8
"""Tool calls per run: different searches, then the model's final answer."""

RUNS = 4
"""Runs per counted window."""

REPEATS = 3
"""Windows of each of ``bare`` and ``guarded``, alternating; the least of each is kept."""

GATE = ToolGate()
"""The one gate every guarded run asks, as the process's default gate would be."""

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("search", {"query": f"topic {i}"}) for i in range(CALLS)
]


def runner(framework: str) -> tuple[Callable[[bool], Any], str]:
    """A function running one agent run (with the plugin or not), and the tool's name."""
    if framework == "adk":
        import adk_agent

        from otel_stall.integrations.adk import StallPlugin

        plugin = StallPlugin(GATE)

        def adk_run(guarded: bool) -> Any:
            return asyncio.run(adk_agent.run_agent(SCRIPT, plugins=[plugin] if guarded else []))

        return adk_run, "search"
    import strands_agent

    from otel_stall.integrations.strands import StallPlugin as StrandsPlugin

    def strands_run(guarded: bool) -> Any:
        plugins = [StrandsPlugin(GATE)] if guarded else []  # a plugin is bound to one agent
        return strands_agent.run_agent(SCRIPT, plugins=plugins)

    return strands_run, "search"


def gate_alone(run: int) -> None:
    """What the plugin asks the gate in one run, without the framework."""
    gate = GATE
    key = ("bench", run)
    for name, args in SCRIPT:
        gate.before_model(run=key)
        gate.before_tool(name, args, run=key)
        gate.after_tool(name, args, {"hits": f"no results for {args['query']}"}, run=key)
    gate.before_model(run=key)
    gate.end_run(key)


def counted(work: Callable[[int], object]) -> None:
    """One counted window of ``RUNS`` runs of ``work``, the cyclic garbage collector held off.

    With a framework imported, a full collection walks every object it made; one
    falling in a window would be charged to whichever side happened to run then.
    """
    gc.collect()
    gc.disable()
    try:
        with callgrind.window():
            for i in range(RUNS):
                work(i)
    finally:
        gc.enable()


def inner(framework: str) -> None:
    """The measured process: warm up each side, then count alternating windows, the gate last."""
    run, _ = runner(framework)
    for side in (False, True, False, True):
        run(side)
    gate_alone(-1)

    def bare(_: int) -> object:
        return run(False)

    def guarded(_: int) -> object:
        return run(True)

    for _ in range(REPEATS):
        counted(bare)
        counted(guarded)
    counted(gate_alone)


def main() -> int:
    """Count the three windows under callgrind and print them per tool call."""
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=["adk", "strands"])
    parser.add_argument("--inner", action="store_true")
    ns = parser.parse_args()
    if ns.inner:
        inner(ns.framework)
        return 0
    if not callgrind.available():
        print("valgrind is not installed: nothing measured")
        return 0
    counts = callgrind.count(
        [sys.executable, __file__, ns.framework, "--inner"], windows=2 * REPEATS + 1
    )
    bare, guarded, gate = min(counts[0:-1:2]), min(counts[1:-1:2]), counts[-1]
    print(f"windows (bare, guarded alternating, then the gate): {counts}")
    per = CALLS * RUNS
    added = (guarded - bare) / per
    print(f"{ns.framework}: instructions per tool call ({CALLS} calls x {RUNS} runs)")
    print(f"  framework alone       {bare / per:12,.0f}")
    print(f"  framework + plugin    {guarded / per:12,.0f}")
    share = added / (bare / per)
    print(f"  added by the plugin   {added:12,.0f}  ({share:.1%} of the framework's)")
    print(f"  the gate's check      {gate / per:12,.0f}  ({gate / bare:.1%} of the framework's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
