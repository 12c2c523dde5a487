"""Import cost: ``import otel_stall`` and ``otel-stall --version`` against their floors.

Each case runs in a fresh interpreter and is timed by its CPU (user + system,
from the child's own rusage), not by the wall clock, so waiting on a loaded
machine does not count. The cases run interleaved, round after round, and
each reports its median, so a burst of load from elsewhere lands on all of
them alike. The ratios are what to read:

- ``import otel_stall`` over ``import opentelemetry.sdk.trace`` (the SDK a user
  imports anyway); the budget is 1.5x (#26);
- ``otel-stall --version`` over ``python -c pass`` (the interpreter alone).

``--before DIR`` also runs another checkout in the same rounds, side by side:
its interpreter (``DIR/.venv/bin/python``, which imports that checkout's code),
or, when DIR has no ``.venv``, this interpreter with ``PYTHONPATH=DIR`` (a source
tree such as ``git archive de1f316 | tar -x -C DIR``). Prints a markdown section.

    .venv/bin/python bench/bench_import.py [--quick] [--rounds N] [--before DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

BUDGET = 1.5
"""``import otel_stall`` may cost at most this many times ``import opentelemetry.sdk.trace``."""

CASES = (
    ("python -c pass", ("-c", "pass")),
    ("import opentelemetry.sdk.trace", ("-c", "import opentelemetry.sdk.trace")),
    ("import otel_stall", ("-c", "import otel_stall")),
    (
        "otel-stall --version",
        ("-c", "import sys; from otel_stall.cli import main; sys.exit(main())"),
    ),
)
"""What each round runs, by label: the arguments to the interpreter. ``--version`` runs
the console script's own code (``otel_stall.cli:main``) with the interpreter's flags."""


Checkout = tuple[str, str | None]
"""An interpreter, and the source tree to put on ``PYTHONPATH`` (``None``: its own install)."""


def cpu_seconds(checkout: Checkout, args: tuple[str, ...], extra: tuple[str, ...]) -> float:
    """The CPU time (user + system) of one fresh interpreter running ``args``."""
    python, source = checkout
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    if source is not None:
        env["PYTHONPATH"] = source
    process = subprocess.Popen(
        (python, *args, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=source or "/",  # ``-c`` puts the working directory first on sys.path
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{python} {' '.join(args)} exited {process.returncode}")
    return usage.ru_utime + usage.ru_stime


def measure(pythons: dict[str, Checkout], rounds: int) -> dict[tuple[str, str], float]:
    """Median CPU seconds per (checkout, case), all cases interleaved in every round."""
    samples: dict[tuple[str, str], list[float]] = {}
    for index in range(rounds):
        order = list(pythons.items())
        if index % 2:  # A, B, B, A: neither checkout always runs on a warmer cache
            order.reverse()
        for name, python in order:
            for label, args in CASES:
                extra = ("--version",) if label.endswith("--version") else ()
                samples.setdefault((name, label), []).append(cpu_seconds(python, args, extra))
    return {key: statistics.median(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 rounds instead of --rounds")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--before", metavar="DIR", help="another checkout, run side by side")
    args = parser.parse_args()
    rounds = 5 if args.quick else args.rounds
    pythons: dict[str, Checkout] = {"this checkout": (sys.executable, None)}
    if args.before:
        before = Path(args.before).resolve()
        venv = before / ".venv" / "bin" / "python"
        pythons["before"] = (str(venv), None) if venv.exists() else (sys.executable, str(before))
    medians = measure(pythons, rounds)
    print("## Import cost (CPU of a fresh interpreter)\n")
    print(f"Median of {rounds} interleaved rounds, CPU seconds (user + system).\n")
    names = list(pythons)
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for label, _ in CASES:
        cells = " | ".join(f"{medians[name, label]:.3f} s" for name in names)
        print(f"| {label} | {cells} |")
    sdk = {
        n: medians[n, "import otel_stall"] / medians[n, "import opentelemetry.sdk.trace"]
        for n in names
    }
    version = {n: medians[n, "otel-stall --version"] / medians[n, "python -c pass"] for n in names}
    cells = " | ".join(f"{sdk[n]:.2f}x ({'pass' if sdk[n] <= BUDGET else 'miss'})" for n in names)
    print(
        f"| `import otel_stall` / `import opentelemetry.sdk.trace` (budget {BUDGET}x) | {cells} |"
    )
    print(
        "| `otel-stall --version` / `python -c pass` | "
        + " | ".join(f"{version[n]:.2f}x" for n in names)
        + " |"
    )


if __name__ == "__main__":
    main()
