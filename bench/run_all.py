"""Run every benchmark, each in its own process, and write their output as ``docs/performance.md``.

A fresh interpreter per script keeps one benchmark's warm caches, threads and
memory from skewing the next. Each script prints a markdown section (shown
here as it runs) and records its budget rows (``budgets.record``); the page is
a header naming the date, the core count and the versions (never the machine's
name, folders or kernel), a summary of every budget row beside its budget and
floor with what it means for a user, then the sections, in order. ``--quick``
is passed on to every script for a fast run, and the page says it was one.
``--before DIR`` also runs the comparable benchmarks with another checkout's
interpreter (``DIR/.venv/bin/python``, which imports that checkout's code),
each right after this checkout's, and the gateway and import benchmarks with
DIR side by side in their own rounds, so the summary shows both. The load
average is noted beside every section: CPU ratios on a loaded machine move,
instruction counts do not. Exits non-zero if any script failed, after running
them all; the page then says which.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGE = ROOT / "docs" / "performance.md"
DASH = "\N{EN DASH}"

sys.path.insert(0, str(HERE))
from budgets import BUDGETS, read  # noqa: E402

COMPARABLE = frozenset(
    {
        "bench_processor_wiring.py",
        "bench_processor_instructions.py",
        "bench_processor_memory.py",
        "import_instructions.py",
        "bench_replay.py",
    }
)
"""Scripts that use only the package root's API: run with another checkout's interpreter."""

SIDE_BY_SIDE = {"bench_gateway.py": "--baseline", "bench_import.py": "--before"}
"""Scripts that run another tree in their own rounds, and the flag that names it."""

SCRIPTS = (
    ("bench_processor_wiring.py", ()),
    ("bench_processor_instructions.py", ()),
    ("bench_processor_memory.py", ()),
    ("bench_replay.py", ("--rss", "164000")),
    ("bench_gateway.py", ()),
    ("bench_import.py", ()),
    ("import_instructions.py", ()),
    ("bench_detector.py", ()),
    ("bench_chanting.py", ()),
    ("bench_gate.py", ()),
)
"""In page order, with the arguments a full run adds. A script not in this checkout is skipped."""

QUICK = {"bench_replay.py": ("--rss", "164000")}
"""What a quick run adds: every budget row is measured, if roughly."""

GUIDE = """\
## How to read this

- Every ratio compares things measured side by side in one run, interleaved, so a
  burst of load from elsewhere on the machine lands on all of them. Absolute times
  depend on the machine and on what else ran on it; compare the ratios.
- The live processor is measured in the wiring users run: `TracerProvider` → otel-stall's
  `StallSpanProcessor` → `BatchSpanProcessor` → the OTLP/gRPC exporter → a receiver in
  another process. The ratio is the application's CPU time with otel-stall over without it.
- The *floor* is the least a stall detector must do, measured in the same wiring and
  the same run: a minimal processor (`bench/workloads.py`, `FloorProcessor`) that
  canonicalises and hashes each tool call's arguments and result (orjson with sorted
  keys, xxhash), counts calls and repeats per run and sets 4 attributes. Replay's floor
  is parsing the file and reading the fields the replay needs.
- CPU time on a shared machine is noisy: the brackets give the interquartile range, and
  each section notes the load average while it ran. Instruction counts (callgrind) hardly
  move from run to run, so they show small changes the clock cannot; but they weigh every
  instruction alike, and the interpreter's run slower than compiled code's, so their
  ratio is not the clock's.
- To measure another checkout (an older commit, say) beside this one, build its `.venv`
  and run `.venv/bin/python bench/run_all.py --before OTHER`, or run one processor
  benchmark with its interpreter: `OTHER/.venv/bin/python bench/bench_processor_wiring.py`.
"""


def machine() -> str:
    """The core count and the versions the figures were measured with (not the machine's name)."""
    versions = {
        name: importlib.metadata.version(name) for name in ("otel-stall", "opentelemetry-sdk")
    }
    commit = commit_of(ROOT)
    valgrind = "valgrind " + (
        subprocess.run(["valgrind", "--version"], capture_output=True, text=True, check=False)
        .stdout.strip()
        .removeprefix("valgrind-")
        if shutil.which("valgrind")
        else "not installed"
    )
    return (
        f"{os.cpu_count()} cores, {platform.system()}, "
        f"Python {platform.python_version()}, OpenTelemetry SDK {versions['opentelemetry-sdk']}, "
        f"otel-stall {versions['otel-stall']}{f' at commit {commit}' if commit else ''}, "
        f"{valgrind}"
    )


def commit_of(checkout: Path) -> str:
    """A checkout's short commit, or an empty string."""
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def run(
    script: str, arguments: list[str], results: Path, python: str = sys.executable
) -> tuple[int, str]:
    """Run one script; show its output as it comes and return its exit code and output.

    The output ends with the load average before and after: what else the machine ran.
    """
    print(f"== {script}{'' if python == sys.executable else ' (other checkout)'}", file=sys.stderr)
    start = time.perf_counter()
    load = os.getloadavg()[0]
    process = subprocess.Popen(
        [python, str(HERE / script), *arguments],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCH_RESULTS": str(results)},
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    code = process.wait()
    elapsed = time.perf_counter() - start
    print(f"== {script}: exit {code} in {elapsed:.0f} s\n", file=sys.stderr, flush=True)
    lines.append(
        f"\n*Load average (1 min) {load:.1f} as this section began, "
        f"{os.getloadavg()[0]:.1f} as it ended, on {os.cpu_count()} cores.*\n"
    )
    return code, "".join(lines)


def earlier(output: str, checkout: Path) -> str:
    """A section from another checkout's code, its heading saying which (by commit, not path)."""
    heading, _, rest = output.strip().partition("\n")
    commit = commit_of(checkout)
    return f"{heading}: earlier code{f' (commit {commit})' if commit else ''}\n{rest}\n"


IMPORT_ROW = re.compile(r"^\| `import otel_stall` / `import opentelemetry\.sdk\.trace`.*$", re.M)
IMPORT_CPU = re.compile(r"^\| import (otel_stall|opentelemetry\.sdk\.trace) \|(.*)$", re.M)


def import_rows(output: str) -> dict[str, dict[str, float]]:
    """``bench_import.py``'s ratios, by checkout column (its table, as it prints it)."""
    found = IMPORT_ROW.search(output)
    header = re.search(r"^\| case \|(.*)\|$", output, re.M)
    if found is None or header is None:
        return {}
    names = [name.strip() for name in header.group(1).split("|")]
    cells = found.group(0).strip("|").split("|")[1:]
    ratios = [float(re.sub(r"[^0-9.].*$", "", cell.strip()) or "nan") for cell in cells]
    seconds: dict[str, list[float]] = {}
    for match in IMPORT_CPU.finditer(output):
        seconds[match.group(1)] = [
            float(cell.strip().split()[0]) for cell in match.group(2).strip(" |").split("|")
        ]
    rows = {}
    for i, name in enumerate(names):
        row = {"value": ratios[i]} if i < len(ratios) else {}
        if len(seconds) == 2 and i < len(seconds["otel_stall"]):
            added = seconds["otel_stall"][i] - seconds["opentelemetry.sdk.trace"][i]
            row["added_ms"] = added * 1000
        rows["before" if name == "before" else "this"] = row
    return rows


def verdict(key: str, value: float | None) -> str:
    """Within the budget, or by how much it is over, in words."""
    if value is None:
        return "not measured"
    budget = BUDGETS[key]
    if budget.met(value):
        return "within"
    if budget.at_most:
        return f"over, by {value / budget.limit - 1:.0%}"
    return f"short, at {value / budget.limit:.0%} of it"


def figure(key: str, row: dict[str, Any]) -> str:
    """One row's measured value as the table spells it: ``1.23``, ``41,000 spans/s``."""
    value = row.get("value")
    if value is None:
        return DASH
    unit = BUDGETS[key].unit
    if unit == "x":
        return f"{value:.2f}"
    return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def cells(key: str, row: dict[str, Any]) -> list[str]:
    """Clock, instructions and floor cells of one checkout's row."""
    instr = row.get("instructions")
    unit = BUDGETS[key].unit
    floor = []
    if isinstance(row.get("floor"), float):
        floor.append(
            f"{row['floor']:.1f} {unit}" if unit in ("KB", "MB") else f"{row['floor']:.2f}"
        )
    if row.get("instructions_floor"):
        floor.append(f"{row['instructions_floor']:.2f} instr.")
    return [
        f"**{figure(key, row)}**" if row.get("value") is not None else DASH,
        f"{instr:.2f}" if instr else DASH,
        " / ".join(floor) or DASH,
    ]


def summary(this: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]] | None) -> str:
    """The budget table beside the results (and another checkout's), then what they mean."""
    lines = ["## Budgets and results\n"]
    lines.append(
        "Every row of the budget table (issue #26), measured in this run. *Clock* is the "
        "CPU-time figure the budget limits (or spans/s, or bytes); *instructions* is the same "
        "ratio counted by callgrind; the *floor* is the same measure for the minimal processor "
        "or the parse floor (clock, then instructions): the least any such tool must pay. "
        "The sections below give the details.\n"
    )
    head, rule = "| path | budget |", "|---|---:|"
    if before is not None:
        head += " before: clock | before: instructions | before: floor |"
        rule += "---:|---:|---:|"
    lines += [head + " clock | instructions | floor | |", rule + "---:|---:|---:|---|"]
    for key, budget in BUDGETS.items():
        row = this.get(key, {})
        parts = [budget.path, budget.text]
        if before is not None:
            parts += cells(key, before.get(key, {}))
        parts += [*cells(key, row), verdict(key, row.get("value"))]
        lines.append("| " + " | ".join(parts) + " |")
    sides = [before] if before is not None else []
    ledger = [side.get("replay.json", {}) for side in [*sides, this]]
    if any(row.get("ledger") for row in ledger):
        parts = ["a user's own 40-line orjson + xxhash script, over the OTLP/JSON floor", DASH]
        for row in ledger:
            parts += [
                f"{row['ledger']:.2f}" if row.get("ledger") else DASH,
                f"{row['instructions_ledger']:.2f}" if row.get("instructions_ledger") else DASH,
                DASH,
            ]
        lines.append("| " + " | ".join([*parts, "for comparison"]) + " |")
    return "\n".join([*lines, "", *meaning(this)]) + "\n"


def meaning(rows: dict[str, dict[str, Any]]) -> list[str]:
    """What the numbers cost a user, in plain words."""
    out = ["## What it costs you\n"]
    tool = rows.get("wiring.tool", {})
    if tool.get("micros_call") is not None:
        micros = tool["micros_call"]
        out.append(
            f"- **Per tool call, live:** otel-stall adds about **{micros:.0f} µs of CPU** to a "
            "tool call with 1.4 KB of arguments and result, in the wiring users run (batch "
            "processor, OTLP/gRPC exporter). A tool call that does I/O (a web search, a "
            "database query, an HTTP API) takes milliseconds to seconds: on a 10 ms call this "
            f"is {micros / 100:.1f}% of its time, on a 1 s call {micros / 10000:.3f}%. The "
            "ratio in the table is against creating and exporting the span alone, which is "
            "cheap; it says nothing of the call's own cost."
        )
    loop = rows.get("wiring.looping", {})
    if loop.get("micros_call") is not None:
        out.append(
            f"- **In a loop,** each round (a model call and a repeated tool call) costs about "
            f"{loop['micros_call']:.0f} µs more; each round a loop wastes costs seconds and "
            "tokens."
        )
    chat, plain = rows.get("wiring.chat", {}), rows.get("wiring.non_tool", {})
    if chat.get("micros_span") is not None and plain.get("micros_span") is not None:
        out.append(
            f"- **Model calls** cost about {chat['micros_span']:.0f} µs of CPU more per `chat` "
            "span (a model call itself takes hundreds of milliseconds). **Ordinary spans** "
            f"(HTTP, database) cost about {max(plain['micros_span'], 0):.1f} µs more, against "
            f"{plain.get('without_span', 0):.0f} µs to create and export one."
        )
    memory = rows.get("memory.open_run", {})
    if memory.get("value") is not None:
        out.append(
            f"- **Memory:** an open agent run of 10 tool calls holds about "
            f"{memory['value']:.1f} KB, so 1,000 agents running at once hold about "
            f"{memory['value']:.0f} MB. A run's state goes when it ends, and is capped by "
            "count, bytes and age."
        )
    return [*out, *meaning_offline(rows), ""]


def meaning_offline(rows: dict[str, dict[str, Any]]) -> list[str]:
    """Replay, the gateway and the import, in plain words."""
    out = []
    binary, rss = rows.get("replay.binary", {}), rows.get("replay.rss", {})
    if binary.get("micros_span") is not None:
        peak = (
            f", with a peak of {rss['value']:.0f} MB for {rss.get('spans', 0):,} spans"
            if rss.get("value")
            else ""
        )
        out.append(
            f"- **Replay:** beyond parsing the capture, replay costs about "
            f"{binary['micros_span']:.0f} µs of CPU per span (binary): a million-span capture "
            f"takes about {binary['micros_span']:.0f} s more than reading it{peak}."
        )
    mix, agent = rows.get("gateway.mix", {}), rows.get("gateway.agent", {})
    if mix.get("per_core") is not None:
        per_core = mix["per_core"]
        passing = mix.get("per_core_pass")
        out.append(
            "- **Collector tier (gateway):** with detection on, one core handles about "
            f"**{per_core:,.0f} spans/s** of traffic that is 10% agent traces"
            + (f" (pass-through alone: {passing:,.0f})" if passing else "")
            + f"; a tier receiving 100,000 spans/s of such traffic needs about "
            f"{100_000 / per_core:.1f} cores for the gateway's CPU."
            + (
                f" All-agent traffic: about {agent['per_core']:,.0f} spans/s per core."
                if agent.get("per_core")
                else ""
            )
        )
    imports = rows.get("import", {})
    if imports.get("added_ms") is not None:
        out.append(
            f"- **Start-up:** `import otel_stall` costs about {abs(imports['added_ms']):.0f} ms of "
            f"CPU {'more' if imports['added_ms'] >= 0 else 'less'} than importing the "
            "OpenTelemetry SDK, once per process (the package loads the SDK only when used)."
        )
    return out


def run_scripts(
    options: argparse.Namespace, before: Path | None, tmp: Path
) -> tuple[list[str], list[str], dict[str, dict[str, float]]]:
    """Every script (and the comparable ones on ``before``): sections, failures, import rows."""
    sections: list[str] = []
    failed: list[str] = []
    imports: dict[str, dict[str, float]] = {}
    for script, full in SCRIPTS:
        if not (HERE / script).exists():
            print(f"== {script}: not in this checkout, skipped", file=sys.stderr)
            continue
        arguments = ["--quick", *QUICK.get(script, ())] if options.quick else list(full)
        if before is not None and script in SIDE_BY_SIDE:
            arguments += [SIDE_BY_SIDE[script], str(before)]
        code, output = run(script, arguments, tmp / "this.jsonl")
        sections.append(output.strip() + "\n")
        if script == "bench_import.py":
            imports = import_rows(output)
        if code != 0:
            failed.append(script)
            sections.append(f"**`bench/{script}` failed (exit {code}).**\n")
        if before is not None and script in COMPARABLE:
            python = before / ".venv" / "bin" / "python"
            code, output = run(script, arguments, tmp / "before.jsonl", str(python))
            sections.append(earlier(output, before))
            if code != 0:
                failed.append(f"{script} (other checkout)")
                sections.append(f"**`bench/{script}` on the other checkout failed.**\n")
    return sections, failed, imports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a fast, rougher run")
    parser.add_argument("--out", type=Path, default=PAGE, help=f"default {PAGE.relative_to(ROOT)}")
    parser.add_argument(
        "--before", type=Path, metavar="DIR", help="also run the comparable benchmarks on DIR"
    )
    options = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    before = options.before.resolve() if options.before is not None else None
    with tempfile.TemporaryDirectory(prefix="otel-stall-bench-") as tmp:
        sections, failed, imports = run_scripts(options, before, Path(tmp))
        this, other = read(str(Path(tmp) / "this.jsonl")), read(str(Path(tmp) / "before.jsonl"))
    for key in [key for key in this if key.startswith("before:")]:  # a side-by-side script's
        other.setdefault(key.removeprefix("before:"), {}).update(this.pop(key))
    for tree, rows in (("this", this), ("before", other)):
        rows.setdefault("import", {}).update(imports.get(tree, {}))
    command = "`make bench BENCH_ARGS=--quick` (a fast, rougher run)" if options.quick else ""
    header = (
        "# Performance\n\n"
        "<!-- Generated by bench/run_all.py (`make bench`): edit the benchmarks, not this. -->\n\n"
        f"Measured on {started:%Y-%m-%d} with {command or '`make bench`'}: {machine()}.\n"
    )
    page = [header, summary(this, other if before is not None else None), GUIDE, *sections]
    options.out.parent.mkdir(parents=True, exist_ok=True)
    temporary = options.out.with_name(options.out.name + ".tmp")
    temporary.write_text("\n".join(page), encoding="utf-8")
    temporary.replace(options.out)
    print(f"wrote {options.out}", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
