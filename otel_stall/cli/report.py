"""The replay report's flags and rendering, shared by ``replay`` and ``demo``.

One format chooser for both: ``--format``, else ``--report``'s extension, else
a table on a terminal and JSON for programs.
"""

from __future__ import annotations

import argparse
import os
from typing import IO, TYPE_CHECKING, Final

from otel_stall.cli.common import UsageError

if TYPE_CHECKING:
    from otel_stall.offline.replay import ReplayResult
    from otel_stall.offline.report import ReportOptions

__all__ = ["add_report_arguments", "render", "table_width"]

_FORMATS: Final = ("table", "json", "markdown", "html")
_SUFFIX_FORMATS: Final = {".html": "html", ".htm": "html", ".json": "json", ".md": "markdown"}


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """The report's output options (``replay``)."""
    group = parser.add_argument_group("report")
    group.add_argument(
        "--format",
        choices=_FORMATS,
        help="report format (default: from --report's extension, else table on a terminal "
        "and json otherwise); html is one self-contained page",
    )
    group.add_argument(
        "--all",
        dest="show_all",
        action="store_true",
        help="table, markdown, html: list every run, healthy ones too (default: stalled runs)",
    )
    group.add_argument(
        "--limit",
        type=_count,
        metavar="N",
        help="table, markdown, html: list at most N runs, worst first (default: 20; "
        "no cap with --all); json always has every run",
    )
    group.add_argument(
        "--trace-url",
        metavar="TEMPLATE",
        type=_trace_url,
        help="html: link each run to a trace UI; {trace_id} is replaced, e.g. "
        "http://jaeger:16686/trace/{trace_id}",
    )
    group.add_argument(
        "-o", "--report", metavar="FILE", help="write the report to FILE instead of stdout"
    )


def _count(text: str) -> int:
    """A whole number, 0 or more (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is below 0")
    return value


def _trace_url(text: str) -> str:
    """An http(s) URL holding ``{trace_id}`` (argparse names the flag in its error)."""
    if not text.lower().startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r} is not an http:// or https:// URL")
    if "{trace_id}" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no {{trace_id}}; put it where the trace id goes"
        )
    return text


def render(result: ReplayResult, args: argparse.Namespace, stdout: IO[str]) -> None:
    """Write the report in the asked format, to ``--report FILE`` or ``stdout``."""
    path = getattr(args, "report", None)
    fmt = getattr(args, "format", None) or _default_format(stdout, path)
    trace_url = getattr(args, "trace_url", None)
    if path is None:
        _write_report(result, fmt, _report_options(args), stdout, trace_url)
        return
    from otel_stall.core.files import replacing_text

    try:
        with replacing_text(path) as out:  # the old report stays if writing fails
            _write_report(result, fmt, _report_options(args), out, trace_url)
    except OSError as exc:
        raise UsageError(f"--report {path}: {exc.strerror or exc}") from None


def _report_options(args: argparse.Namespace) -> ReportOptions:
    from otel_stall.offline.report import ReportOptions

    return ReportOptions(
        show_all=bool(getattr(args, "show_all", False)),
        limit=getattr(args, "limit", None),
        redact=bool(getattr(args, "redact", False)),
    )


def _write_report(
    result: ReplayResult,
    fmt: str,
    options: ReportOptions,
    out: IO[str],
    trace_url: str | None = None,
) -> None:
    from otel_stall.offline import report

    if fmt == "json":
        out.write(report.render_json(result, options))
    elif fmt == "markdown":
        out.write(report.render_markdown(result, options))
    elif fmt == "html":
        from otel_stall.offline.html_report import render_html

        out.write(render_html(result, options, trace_url=trace_url))
    else:
        from rich.console import Console

        console = Console(file=out, highlight=False, soft_wrap=False, width=table_width(out))
        report.render_table(result, console, options)


def table_width(out: IO[str]) -> int | None:
    """A terminal's own width; 120 columns for a file or a pipe (rich would take 80)."""
    isatty = getattr(out, "isatty", None)
    if (isatty is not None and isatty()) or os.environ.get("COLUMNS"):
        return None
    return 120


def _default_format(stdout: IO[str], path: str | None = None) -> str:
    """From ``--report``'s extension; else table on a terminal and JSON for programs."""
    if path is not None:
        return _SUFFIX_FORMATS.get(os.path.splitext(path)[1].lower(), "table")
    isatty = getattr(stdout, "isatty", None)
    return "table" if isatty is not None and isatty() else "json"
