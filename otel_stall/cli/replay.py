"""``otel-stall replay``: analyse stored spans, report the runs, optionally re-export them.

Exit codes: 0 clean; 1 a run at or above ``--fail-on``; 2 bad usage or input
that could not be read. Bad input never hides results: every readable file
is reported, and the errors are listed with their file and line or offset.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Final

from otel_stall.cli.common import (
    EXIT_OK,
    EXIT_STALL,
    EXIT_USAGE,
    UsageError,
    add_input_arguments,
    add_policy_arguments,
    conventions_from_args,
    no_spans,
    policy_from_args,
    print_errors,
)
from otel_stall.cli.report import add_report_arguments, render

__all__ = ["add_replay_arguments", "cmd_replay"]

PROGRESS_MIN_BYTES: Final = 4 << 20
"""Inputs larger than this get a progress bar on stderr (when stderr is a terminal)."""
FAIL_ON: Final = ("warn", "escalate", "break")
"""``--fail-on`` choices: the verdicts, mildest first."""


# -- progress -------------------------------------------------------------------------


def _input_bytes(paths: Sequence[str]) -> int:
    total = 0
    for path in paths:
        if os.path.isfile(path):
            total += os.path.getsize(path)
        elif os.path.isdir(path):
            for root, _, files in os.walk(path):
                for name in files:
                    with contextlib.suppress(OSError):
                        total += os.path.getsize(os.path.join(root, name))
    return total


@contextlib.contextmanager
def _progress(paths: Sequence[str], label: str) -> Iterator[Callable[[int], None] | None]:
    total = _input_bytes(paths)
    if total < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (
        TextColumn(label),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


# -- replay ---------------------------------------------------------------------------


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall replay``."""
    from otel_stall.offline.deadline import seconds_argument

    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="file, directory, - (stdin), or a trace store's URL (Jaeger, Tempo, Phoenix)",
    )
    add_report_arguments(parser)
    add_policy_arguments(parser)
    parser.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="warn",
        help="exit 1 when a run's verdict is at or above this (default: warn)",
    )
    parser.add_argument("--out", metavar="FILE", help="write every span, enriched, as OTLP/JSON")
    parser.add_argument(
        "--export-otlp",
        metavar="URL",
        help="send every span, enriched: gRPC, or HTTP/protobuf for http(s)://.../v1/traces",
    )
    parser.add_argument(
        "--export-deadline",
        type=seconds_argument,
        metavar="SECONDS",
        help="give --export-otlp this long in all, retries included (default: "
        "$OTEL_STALL_EXPORT_DEADLINE, else 600)",
    )
    parser.add_argument(
        "--full-attributes",
        action="store_true",
        help="--out/--export: write the stall.* attributes at their defaults too",
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="strip raw arguments and results from --out/--export, and previews from the report",
    )
    add_input_arguments(parser)
    from otel_stall.cli.store import add_store_arguments

    add_store_arguments(parser)


def _refuse_writing_over_inputs(args: argparse.Namespace) -> None:
    """Files replay writes must not be inputs: checked before anything is opened for writing.

    ``--out`` must not be inside an input directory either, where it would be
    read as input; the report (``--report``) is not a span file, so it may.
    """
    if args.out:
        _refuse_over_inputs("--out", args.out, args.paths, inside=True)
    report = getattr(args, "report", None)
    if report:
        _refuse_over_inputs("--report", report, args.paths, inside=False)


def _refuse_over_inputs(flag: str, out: str, paths: Sequence[str], *, inside: bool) -> None:
    from otel_stall.offline.readers import STDIN

    target = os.path.realpath(out)
    for path in paths:
        if path == STDIN:
            continue
        real = os.path.realpath(path)
        if inside and os.path.isdir(real) and os.path.commonpath([real, target]) == real:
            raise UsageError(
                f"{flag} {out} is inside the input directory {path}: it would be read as "
                "input; write it elsewhere"
            )
        if real == target or _same_file(out, path):
            raise UsageError(f"{flag} {out} is the input {path}: refusing to overwrite it")


def _same_file(a: str, b: str) -> bool:
    """Two names of one file (a hard link), if both exist."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def cmd_replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Replay stored spans, report the runs, optionally re-export them enriched."""
    from otel_stall.core.records import Verdict
    from otel_stall.offline.replay import Replayer, spooled_stdin

    policy = policy_from_args(args)
    _refuse_writing_over_inputs(args)
    from otel_stall.cli.store import spooled_store

    with spooled_store(args, stderr) as (inputs, url_labels), spooled_stdin(inputs) as spooled:
        paths, labels = spooled[0], spooled[1] | url_labels
        with _progress(paths, "reading") as progress:
            conventions = conventions_from_args(args)
            replayer = Replayer(
                policy,
                conventions,
                progress=progress,
                pause_gc=True,
                max_message=args.max_message_mib,
                full_attributes=args.full_attributes,
            )
            result = replayer.analyse(
                paths, labels=labels, keep_enrichment=bool(args.out or args.export_otlp)
            )
        export_failed = False
        if args.out:
            try:
                with _progress(paths, "writing") as progress:
                    replayer.progress = progress
                    replayer.write_json_lines(
                        result, paths, args.out, redact=args.redact, labels=labels
                    )
            except OSError as exc:
                raise UsageError(f"--out {args.out}: {exc.strerror or exc}") from None
        if args.export_otlp:
            with _progress(paths, "exporting") as progress:
                replayer.progress = progress
                sender = replayer.export(
                    result,
                    paths,
                    args.export_otlp,
                    redact=args.redact,
                    labels=labels,
                    deadline=args.export_deadline,
                )
            for message in sender.errors:
                print(f"otel-stall: export: {message}", file=stderr)
            export_failed = sender.failed > 0
    render(result, args, stdout)
    print_errors(result.errors, stderr, result.skipped)
    empty = no_spans(result, args.paths, stderr)
    if result.errors or export_failed or empty:
        return EXIT_USAGE
    if result.worst.severity >= Verdict(args.fail_on).severity:
        return EXIT_STALL
    return EXIT_OK
