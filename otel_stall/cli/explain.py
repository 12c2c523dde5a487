"""``otel-stall explain``: how each span is read, for checking a convention mapping."""

from __future__ import annotations

import argparse
import json
from typing import IO, TYPE_CHECKING

from otel_stall.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_conventions_argument,
    conventions_from_args,
    print_errors,
)
from otel_stall.core.escape import printable

if TYPE_CHECKING:
    from otel_stall.core.errors import InputError

__all__ = ["add_explain_arguments", "cmd_explain"]


def add_explain_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall explain``."""
    parser.add_argument("paths", nargs="+", metavar="FILE", help="file, directory, or - (stdin)")
    parser.add_argument("--span", metavar="ID", help="only this span (hex span id)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    add_conventions_argument(parser)


def cmd_explain(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Print each span's role, tool name, and where its arguments, result and status came from."""
    from dataclasses import asdict

    from otel_stall.offline.explain import explanations

    conventions = conventions_from_args(args)
    errors: list[InputError] = []
    found = 0
    for explanation in explanations(args.paths, conventions, errors, args.span):
        found += 1
        if args.format == "json":
            stdout.write(json.dumps(asdict(explanation)) + "\n")
        else:
            stdout.write("\n".join(map(printable, explanation.lines())) + "\n")
    print_errors(errors, stderr)
    if args.span and not found:
        raise UsageError(f"span {args.span} not found")
    return EXIT_USAGE if errors else EXIT_OK
