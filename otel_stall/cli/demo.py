"""``otel-stall demo``: a looping agent through the SDK and the live gate, then replayed.

The agents and the narration live in :mod:`otel_stall.demo`; this command
picks the capture file, runs them, and reports the replay of what they sent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from typing import IO

from otel_stall.cli.common import EXIT_OK, EXIT_USAGE, print_errors
from otel_stall.cli.report import render, table_width

__all__ = ["add_demo_arguments", "cmd_demo"]


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall demo``."""
    parser.add_argument(
        "--capture",
        metavar="FILE",
        help="keep the captured spans in FILE (default: a temporary file, removed at the end)",
    )
    parser.add_argument(
        "--export-otlp",
        metavar="URL",
        help="also send the live, enriched spans to an OTLP endpoint (HTTP for .../v1/traces)",
    )
    parser.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    parser.add_argument(
        "--framework",
        choices=("simulated", "pydantic-ai", "auto"),
        default="simulated",
        help="the agents: simulated (default), a real pydantic-ai agent (pip install "
        "pydantic-ai-slim), or auto (pydantic-ai when installed, else simulated)",
    )


def cmd_demo(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run a looping agent through the SDK, the live processor and its gate, then replay it."""
    from otel_stall import demo_pydantic_ai
    from otel_stall.demo import run_live_demo
    from otel_stall.offline.replay import Replayer

    framework = getattr(args, "framework", "simulated")
    if framework == "pydantic-ai" and not demo_pydantic_ai.available():
        stderr.write(
            "otel-stall demo: pydantic-ai is not installed (pip install pydantic-ai-slim)\n"
        )
        return EXIT_USAGE
    if framework != "simulated" and demo_pydantic_ai.available():
        run_live_demo = demo_pydantic_ai.run_pydantic_ai_demo

    with contextlib.ExitStack() as cleanup:
        capture = args.capture
        if capture is None:
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="otel-stall-demo-"))
            capture = os.path.join(folder, "spans.jsonl")
        elif os.path.exists(capture):
            os.unlink(capture)
        started = time.perf_counter()
        run_live_demo(capture, args.export_otlp, stdout, width=table_width(stdout))
        kept = f" in {capture}" if args.capture else ""
        stdout.write(
            f"\nThe spans ({time.perf_counter() - started:.2f}s of agent work) were captured"
            f"{kept}; replayed offline they give the same verdicts:\n\n"
        )
        replayed = Replayer().analyse([capture])
        render(replayed, args, stdout)
    print_errors(replayed.errors, stderr)
    return EXIT_USAGE if replayed.errors else EXIT_OK
