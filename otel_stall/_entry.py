"""The ``otel-stall`` command's entry point: a Ctrl-C while it is still loading exits 130 quietly.

The command imports a good deal (OpenTelemetry, protobuf, rich) before
:func:`otel_stall.cli.main` can catch anything; a ``KeyboardInterrupt`` raised
in those imports printed a traceback (issue 27). This module imports nothing
until it can catch it. (The package root must stay light for this to cover
everything: its imports run first.)
"""

from __future__ import annotations

import sys

__all__ = ["main"]

EXIT_INTERRUPTED = 130
"""The shell's code for a Ctrl-C (128 + SIGINT)."""


def main() -> int:
    """Import the command line and run it; a Ctrl-C at any point is exit 130, no traceback."""
    try:
        from otel_stall.cli import main as run

        return run()
    except KeyboardInterrupt:
        sys.stderr.flush()
        return EXIT_INTERRUPTED
