"""Run every ``bench/bench_*.py`` script in turn, each in its own process.

A fresh interpreter per script keeps one benchmark's warm caches, threads and
memory from skewing the next. Extra arguments are passed to every script.
Exits non-zero if any script failed, after running them all.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    extra = sys.argv[1:] if argv is None else argv
    scripts = sorted(HERE.glob("bench_*.py"))
    failed: list[str] = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script), *extra], cwd=HERE.parent)
        elapsed = time.perf_counter() - start
        print(f"== {script.name}: exit {code} in {elapsed:.1f} s\n", flush=True)
        if code != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    print(f"all {len(scripts)} benchmarks ran")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
