"""The ``otel-stall`` command line: one module per command, wired into one parser here.

Exit codes: 0 clean; 1 a run at or above ``--fail-on``; 2 bad usage or input
that could not be read. Bad input never hides results: every readable file
is reported, and the errors are listed with their file and line or offset.

Each subcommand is a module (``replay``, ``compare``, ``demo``, ``serve``,
``explain``) with a ``cmd_*`` function and an ``add_*_arguments`` function,
registered in :data:`COMMANDS`; another command is one more module and one
more entry. A subcommand's arguments are added only when it is the one
parsed, and the modules import what a command needs when it runs, so
``otel-stall --version`` and ``--help`` load neither grpc nor the SDK.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import IO, Any

from otel_stall.cli.common import EXIT_OK, EXIT_USAGE, UsageError
from otel_stall.cli.compare import add_compare_arguments, cmd_compare
from otel_stall.cli.demo import add_demo_arguments, cmd_demo
from otel_stall.cli.explain import add_explain_arguments, cmd_explain
from otel_stall.cli.replay import add_replay_arguments, cmd_replay
from otel_stall.cli.serve import add_serve_arguments, cmd_serve

__all__ = ["COMMANDS", "build_parser", "cmd_compare", "cmd_demo", "cmd_replay", "main"]

Command = Callable[[argparse.Namespace, IO[str], IO[str]], int]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Command]] = {
    "replay": ("analyse stored OTLP or JSONL files", add_replay_arguments, cmd_replay),
    "compare": ("compare the loops of two runs", add_compare_arguments, cmd_compare),
    "demo": ("run a simulated looping agent, live then replayed", add_demo_arguments, cmd_demo),
    "serve": ("run the OTLP gateway (detect, enrich, forward)", add_serve_arguments, cmd_serve),
    "explain": (
        "show how each span is read: role, tool, where arguments/result/status come from",
        add_explain_arguments,
        cmd_explain,
    ),
}
"""Subcommands: name -> (help, add-arguments, command). ``serve`` registers here too."""


class _CommandParser(argparse.ArgumentParser):
    """A subcommand's parser that adds its arguments the first time it is used.

    argparse hands a subcommand's arguments to its parser's ``parse_known_args``
    (3.10 to 3.13 alike), and prints its help through ``format_help``; until
    then the command's arguments, and what they import, are not needed.
    """

    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None

    def _complete(self) -> None:
        add, self.add_arguments = self.add_arguments, None
        if add is not None:
            add(self)

    def parse_known_args(self, *args: Any, **kwargs: Any) -> Any:
        self._complete()
        return super().parse_known_args(*args, **kwargs)

    def format_help(self) -> str:
        self._complete()
        return super().format_help()

    def format_usage(self) -> str:
        self._complete()
        return super().format_usage()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    from otel_stall import __version__

    parser = argparse.ArgumentParser(
        prog="otel-stall", description="Catch AI agents stuck in tool loops from their spans."
    )
    parser.add_argument("--version", action="version", version=f"otel-stall {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_CommandParser
    )
    for name, (help_text, add_arguments, command) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        child.add_arguments = add_arguments
        child.set_defaults(handler=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (never raises for bad input)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error (or --help)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    stdout, stderr = sys.stdout, sys.stderr
    try:
        code: int = args.handler(args, stdout, stderr)
    except UsageError as exc:
        print(f"otel-stall: {exc}", file=stderr)
        return EXIT_USAGE
    except MemoryError:
        # Caps bound each message, not a whole input's runs: say so, never a traceback
        # (nor exit 1, which means "stall found").
        print(
            "otel-stall: out of memory: the input is too large for this machine "
            "(--max-message-mib caps one message; split the input to replay it in parts)",
            file=stderr,
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    stdout.flush()
    return code
