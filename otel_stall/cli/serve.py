"""``otel-stall serve``: the OTLP gateway (its flags and server live in ``otel_stall.gateway``)."""

from __future__ import annotations

import argparse
from typing import IO

from otel_stall.cli.common import add_conventions_argument

__all__ = ["add_serve_arguments", "cmd_serve"]


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall serve`` (the gateway owns them)."""
    from otel_stall.gateway.flags import add_arguments

    add_arguments(parser)
    add_conventions_argument(parser)


def cmd_serve(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the OTLP gateway until SIGTERM (see ``otel_stall.gateway``)."""
    from otel_stall.gateway.server import run

    return run(args, stderr)
