"""Replay a capture in code rather than through the CLI.

Run: ``.venv/bin/python examples/replay_file.py [PATH ...]``. Without a path it
replays the bundled reference fixture ``loop.jsonl``.
"""

from __future__ import annotations

import sys
from importlib import resources

from otel_stall import StallPolicy, replay


def main(argv: list[str]) -> int:
    paths = argv or [str(resources.files("otel_stall") / "examples" / "loop.jsonl")]
    result = replay(paths, policy=StallPolicy())
    for run in result.reports:
        print(run.verdict, f"{run.stall_score:.2f}", [f.kind.value for f in run.findings])
    for error in result.errors:
        print(error, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
