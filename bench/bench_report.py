"""The replay report on a large capture: the people-facing table against the JSON report.

Generates a capture (default 200k spans, OTLP/JSON lines, with
``bench_replay``'s generator: 20-span agent traces whose search loops, so
every run is stalled) and runs ``otel-stall replay FILE --format F`` for each
format in a fresh process, alternating the formats, several times. Prints,
for each format, the best wall and CPU time (the process's user + system,
steadier on a shared machine), the lines it printed, and its ratio to JSON.
Issue #20's target: the default table costs no more than 1.5x the JSON report.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_replay import generate

ROOT = Path(__file__).resolve().parent.parent
FORMATS = {
    "json": ["--format", "json"],
    "table": ["--format", "table"],
    "markdown": ["--format", "markdown"],
    "html": ["--format", "html"],
}


def run_once(path: Path, args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and output lines of one ``otel-stall replay`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "otel_stall", "replay", str(path), *args],
        capture_output=True,
        check=False,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "120"},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"replay {args} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.count(b"\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--formats", default="json,table,markdown,html")
    args, _ = parser.parse_known_args(argv)
    formats = args.formats.split(",")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        _, jsonl = generate(Path(tmp), args.spans)
        size = jsonl.stat().st_size
        print(f"capture: {args.spans:,} spans, {size / 1e6:.1f} MB of OTLP/JSON lines")
        best: dict[str, tuple[float, float, int]] = {}
        for _ in range(args.repeat):
            for name in formats:  # alternated, so drift on a shared machine hits all alike
                wall, cpu, lines = run_once(jsonl, FORMATS[name])
                old = best.get(name)
                best[name] = (
                    min(wall, old[0]) if old else wall,
                    min(cpu, old[1]) if old else cpu,
                    lines,
                )
    json_wall, json_cpu, _ = best["json"]
    print(f"{'format':<10}{'wall s':>9}{'cpu s':>9}{'lines':>10}{'wall/json':>11}{'cpu/json':>10}")
    for name in formats:
        wall, cpu, lines = best[name]
        print(
            f"{name:<10}{wall:>9.2f}{cpu:>9.2f}{lines:>10,}"
            f"{wall / json_wall:>11.2f}{cpu / json_cpu:>10.2f}"
        )
    ratio = best["table"][1] / json_cpu if "table" in best else 0.0
    print(f"table/json CPU ratio: {ratio:.2f} (target <= 1.5)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
