"""Import cost in instructions: ``import otel_stall`` against ``import opentelemetry.sdk.trace``.

The clock's figures are ``bench_import.py``'s (CPU of fresh interpreters,
interleaved). This counts the same cases under ``valgrind --tool=callgrind``,
whole processes, start-up included, as a user pays it: an instruction count
does not move with the load of a shared machine. Run with another checkout's
interpreter, it counts that checkout's code.

    .venv/bin/python bench/import_instructions.py
"""

from __future__ import annotations

import sys

import callgrind
from budgets import BUDGETS, record

CASES = (
    ("python -c pass", "pass"),
    ("import opentelemetry.sdk.trace", "import opentelemetry.sdk.trace"),
    ("import otel_stall", "import otel_stall"),
)


def main() -> int:
    print("## Import cost in instructions (callgrind)\n")
    if not callgrind.available():
        print("valgrind is not installed here: no instruction counts.\n")
        return 0
    counts = {}
    for label, code in CASES:
        print(f"import: callgrind, {label}", file=sys.stderr, flush=True)
        counts[label] = callgrind.count([sys.executable, "-c", code], 0)[0]
    budget = BUDGETS["import"]
    ratio = counts["import otel_stall"] / counts["import opentelemetry.sdk.trace"]
    print("Every instruction of a fresh interpreter running each case, start-up included.\n")
    print("| case | instructions |")
    print("|---|---:|")
    for label, _ in CASES:
        print(f"| `{label}` | {counts[label] / 1e6:,.0f}M |")
    print(
        f"| `import otel_stall` / `import opentelemetry.sdk.trace` ({budget.text}) "
        f"| **{ratio:.2f}x** |\n"
    )
    record("import", instructions=ratio)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
