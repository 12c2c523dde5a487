"""Run every benchmark, each in its own process, and write their output as ``docs/performance.md``.

A fresh interpreter per script keeps one benchmark's warm caches, threads and
memory from skewing the next. Each script prints a markdown section (shown
here as it runs); the page is a header naming the date and the machine, a
short guide to reading it, and those sections, in order. ``--quick`` is
passed on to every script for a fast run, and the page says it was one; it
skips the callgrind counts, which take minutes per pipeline under valgrind.
``--before DIR`` also runs the processor benchmarks with another checkout's
interpreter (``DIR/.venv/bin/python``, which imports that checkout's code), each
section right after this checkout's, so the page shows the two side by side.
Exits non-zero if any script failed, after running them all; the page then
says which.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGE = ROOT / "docs" / "performance.md"

COMPARABLE = frozenset({"bench_processor_wiring.py", "bench_processor_instructions.py"})
"""The scripts that use only the package root's API, so they run against an older checkout."""

SCRIPTS = (
    ("bench_processor_wiring.py", ()),
    ("bench_processor_instructions.py", ()),
    ("bench_detector.py", ()),
    ("bench_chanting.py", ()),
    ("bench_replay.py", ("--rss", "164000")),
    ("bench_gateway.py", ()),
)
"""In page order, with the arguments a full run adds."""

SLOW = {
    "bench_processor_instructions.py": "## Live processor: instructions per span (callgrind)\n\n"
    "Not measured in this quick run: under valgrind each pipeline takes minutes. "
    "`make bench` counts them.\n"
}
"""Scripts a quick run skips, with what the page says in their place."""

GUIDE = """\
## How to read this

- Every ratio compares two things measured side by side in one run, interleaved
  (A, B, B, A, ...), so a burst of load from elsewhere on the machine lands on both.
  Absolute times depend on the machine and on what else ran on it; compare the ratios.
- A budget is a ceiling on a ratio; *pass* or *miss* is this run's ratio against it.
  The processor's budgets compare an application's CPU time with otel-stall and without
  it, in the wiring users run: a batch processor and the OTLP/gRPC exporter sending to
  a receiver in another process. Non-tool spans must cost at most 5% more, tool spans
  with 1.4 KB of arguments and result at most 50% more, a looping run at most 60%.
- CPU time on a shared machine is noisy: the brackets give the interquartile range.
  Instruction counts (callgrind) hardly move from run to run, so they show small
  changes the clock cannot; but they weigh every instruction alike, and the
  interpreter's run slower than compiled code's, so their ratio is not the clock's.
- Replay and the detector are compared with the cost of only parsing the same input:
  the least any reader of these spans must pay.
- To measure another checkout (an older commit, say) beside this one, build its `.venv`
  and run `.venv/bin/python bench/run_all.py --before OTHER`, or run one processor
  benchmark with its interpreter: `OTHER/.venv/bin/python bench/bench_processor_wiring.py`.
"""


def machine() -> str:
    """The machine and the versions the figures were measured with."""
    model = ""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(
                (
                    line.split(":", 1)[1].strip()
                    for line in cpuinfo
                    if line.startswith("model name")
                ),
                "",
            )
    except OSError:
        pass
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
        f"{os.cpu_count()} cores{f' ({model})' if model else ''}, "
        f"{platform.system()} {platform.release()}, "
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


def run(script: str, arguments: list[str], python: str = sys.executable) -> tuple[int, str]:
    """Run one script; show its output as it comes and return its exit code and output."""
    print(f"== {script} ({python})", file=sys.stderr, flush=True)
    start = time.perf_counter()
    process = subprocess.Popen(
        [python, str(HERE / script), *arguments],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        print(line, end="", flush=True)
        lines.append(line)
    code = process.wait()
    elapsed = time.perf_counter() - start
    print(f"== {script}: exit {code} in {elapsed:.0f} s\n", file=sys.stderr, flush=True)
    return code, "".join(lines)


def earlier(output: str, checkout: Path) -> str:
    """A section from another checkout's code, its heading saying which."""
    heading, _, rest = output.strip().partition("\n")
    commit = commit_of(checkout)
    return f"{heading}: earlier code (`{checkout}`{f' at {commit}' if commit else ''})\n{rest}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a fast, rougher run")
    parser.add_argument("--out", type=Path, default=PAGE, help=f"default {PAGE.relative_to(ROOT)}")
    parser.add_argument(
        "--before", type=Path, metavar="DIR", help="also run the processor benchmarks on DIR's code"
    )
    options = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    sections: list[str] = []
    failed: list[str] = []
    for script, full in SCRIPTS:
        if options.quick and script in SLOW:
            sections.append(SLOW[script])
            continue
        arguments = ["--quick"] if options.quick else list(full)
        code, output = run(script, arguments)
        sections.append(output.strip() + "\n")
        if code != 0:
            failed.append(script)
            sections.append(f"**`bench/{script}` failed (exit {code}).**\n")
        if options.before is not None and script in COMPARABLE:
            python = options.before.resolve() / ".venv" / "bin" / "python"
            code, output = run(script, arguments, str(python))
            sections.append(earlier(output, options.before.resolve()))
            if code != 0:
                failed.append(f"{script} ({options.before})")
                sections.append(
                    f"**`bench/{script}` on `{options.before}` failed (exit {code}).**\n"
                )
    command = "`make bench BENCH_ARGS=--quick` (a fast, rougher run)" if options.quick else ""
    header = (
        "# Performance\n\n"
        "<!-- Generated by bench/run_all.py (`make bench`): edit the benchmarks, not this. -->\n\n"
        f"Measured on {started:%Y-%m-%d} with {command or '`make bench`'}: {machine()}.\n"
    )
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text("\n".join([header, GUIDE, *sections]), encoding="utf-8")
    print(f"wrote {options.out}", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
