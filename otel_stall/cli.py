"""The ``otel-stall`` command line: ``replay``, ``compare`` and ``demo``.

Exit codes: 0 clean; 1 a run at or above ``--fail-on``; 2 bad usage or input
that could not be read. Bad input never hides results: every readable file
is reported, and the errors are listed with their file and line or offset.

Each subcommand is one ``cmd_*`` function registered in :data:`COMMANDS`
with a ``add_*_arguments`` function; another module can add its own (the
gateway's ``serve``) the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, Final

from otel_stall.conventions import Conventions
from otel_stall.core.config import ConfigError, read_policy_file
from otel_stall.core.errors import InputError
from otel_stall.core.escape import printable
from otel_stall.core.files import replacing_text
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import RunReport, Verdict
from otel_stall.offline.deadline import export_deadline
from otel_stall.offline.readers import DEFAULT_MAX_MESSAGE, FORMATS_READ, MAX_MESSAGE, STDIN
from otel_stall.offline.replay import STDIN_LABEL, Replayer, ReplayResult, spooled_stdin

if TYPE_CHECKING:
    from otel_stall.offline.report import ReportOptions

__all__ = ["COMMANDS", "build_parser", "cmd_compare", "cmd_demo", "cmd_replay", "main"]

EXIT_OK: Final = 0
EXIT_STALL: Final = 1
EXIT_USAGE: Final = 2
PROGRESS_MIN_BYTES: Final = 4 << 20
"""Inputs larger than this get a progress bar on stderr (when stderr is a terminal)."""
_FAIL_ON = {"warn": Verdict.WARN, "escalate": Verdict.ESCALATE, "break": Verdict.BREAK}


class UsageError(Exception):
    """Bad arguments or settings: printed on stderr, exit code 2."""


# -- policy -------------------------------------------------------------------------


def load_config(path: str) -> dict[str, Any]:
    """Read StallPolicy settings from a TOML or JSON file (a ``[policy]`` table is optional)."""
    try:
        return read_policy_file(path)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def policy_from_args(args: argparse.Namespace) -> StallPolicy:
    """Config file, then flags on top; ``OTEL_STALL_*`` fills what neither sets."""
    config: dict[str, Any] = load_config(args.config) if args.config else {}
    explicit = dict(config)
    for key in ("exempt_tools", "approval_tools"):
        value = explicit.get(key)
        if isinstance(value, str):
            explicit[key] = [v.strip() for v in value.split(",") if v.strip()]
    if args.exempt:
        explicit["exempt_tools"] = [*explicit.get("exempt_tools", ()), *args.exempt]
    if args.approval:
        explicit["approval_tools"] = [*explicit.get("approval_tools", ()), *args.approval]
    if args.threshold is not None:
        explicit["break_at"] = args.threshold
    if args.warn_at is not None:
        explicit["warn_at"] = args.warn_at
    if "tool_thresholds" in explicit and isinstance(explicit["tool_thresholds"], dict):
        explicit["tool_thresholds"] = {
            str(k): tuple(v) for k, v in explicit["tool_thresholds"].items()
        }
    try:
        return StallPolicy.from_env(**explicit)
    except ConfigError as exc:
        flagged = {"break_at": args.threshold, "warn_at": args.warn_at}
        from_file = set(config) - {name for name, value in flagged.items() if value is not None}
        raise UsageError(f"policy: {_flag_names(str(exc), from_file)}") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"policy: invalid setting ({exc})") from None


_POLICY_FLAGS: Final = {"break_at": "--threshold", "warn_at": "--warn-at"}
"""Policy settings with a flag of their own, by setting name."""


def _flag_names(message: str, from_file: Iterable[str]) -> str:
    """Name each setting by its flag, unless the config file set it (then its name is right)."""
    for name, flag in _POLICY_FLAGS.items():
        if name not in from_file:
            message = re.sub(rf"\b{name}\b", flag, message)
    return message


def _add_policy_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("policy")
    group.add_argument(
        "--exempt", action="append", default=[], metavar="TOOL", help="tool that repeats by design"
    )
    group.add_argument(
        "--approval", action="append", default=[], metavar="TOOL", help="tool with side effects"
    )
    group.add_argument(
        "--threshold", type=int, metavar="N", help="back-to-back repeats that break (break_at)"
    )
    group.add_argument("--warn-at", type=int, metavar="N", help="back-to-back repeats that warn")
    group.add_argument("--config", metavar="FILE", help="TOML or JSON file of policy settings")
    add_conventions_argument(parser)


def add_conventions_argument(parser: argparse.ArgumentParser) -> None:
    """``--conventions FILE``: a TOML mapping for spans no built-in convention reads."""
    parser.add_argument(
        "--conventions",
        metavar="FILE",
        help="TOML mapping of your own span conventions, added to the built-ins "
        "(default: $OTEL_STALL_CONVENTIONS); see docs/frameworks.md",
    )


def conventions_from_args(args: argparse.Namespace) -> Conventions:
    """The built-in conventions plus ``--conventions FILE`` (or ``OTEL_STALL_CONVENTIONS``)."""
    from otel_stall.conventions.user import conventions_from_file

    try:
        return conventions_from_file(getattr(args, "conventions", None))
    except ConfigError as exc:
        raise UsageError(f"conventions: {exc}") from None


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
    parser.add_argument("paths", nargs="+", metavar="PATH", help="file, directory, or - (stdin)")
    _add_report_arguments(parser)
    _add_policy_arguments(parser)
    parser.add_argument(
        "--fail-on",
        choices=tuple(_FAIL_ON),
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
        type=export_deadline,
        metavar="SECONDS",
        help="give --export-otlp this long in all, retries included (default: "
        "$OTEL_STALL_EXPORT_DEADLINE, else 600)",
    )
    parser.add_argument(
        "--redact",
        action="store_true",
        help="strip raw arguments and results from --out/--export, and previews from the report",
    )
    _add_input_arguments(parser)


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-message-mib",
        type=_mebibytes,
        default=DEFAULT_MAX_MESSAGE,
        metavar="N",
        help="skip, with an error, any line, document or inflated message over N MiB "
        f"(default: {DEFAULT_MAX_MESSAGE >> 20}; it bounds memory on compression bombs)",
    )


def _mebibytes(text: str) -> int:
    """``--max-message-mib``: a whole number of MiB, 1 to 1024, as bytes."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_MESSAGE >> 20:
        raise argparse.ArgumentTypeError(f"expected a whole number from 1 to 1024, got {text!r}")
    return value << 20


def _print_errors(
    errors: Sequence[InputError], stderr: IO[str], skipped: Sequence[InputError] = ()
) -> None:
    """Input errors, then files skipped in directories (not errors: the exit code ignores them)."""
    for error in errors:
        print(f"otel-stall: {printable(error)}", file=stderr)
    for note in skipped:
        print(f"otel-stall: {printable(note)}; skipped", file=stderr)


def _no_spans(result: ReplayResult, paths: Sequence[str], stderr: IO[str]) -> bool:
    """Say so when the inputs hold no span (nor tool call) at all: that is bad input."""
    if result.spans or result.tool_call_events:
        return False
    where = ", ".join(STDIN_LABEL if p == STDIN else p for p in paths)
    print(f"otel-stall: no spans found in {where}; otel-stall reads {FORMATS_READ}", file=stderr)
    return True


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


_FORMATS: Final = ("table", "json", "markdown", "html")
_SUFFIX_FORMATS: Final = {".html": "html", ".htm": "html", ".json": "json", ".md": "markdown"}


def _add_report_arguments(parser: argparse.ArgumentParser) -> None:
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


def _render(result: ReplayResult, args: argparse.Namespace, stdout: IO[str]) -> None:
    """Write the report in the asked format, to ``--report FILE`` or ``stdout``."""
    path = getattr(args, "report", None)
    fmt = getattr(args, "format", None) or _default_format(stdout, path)
    if path is None:
        _write_report(result, fmt, _report_options(args), stdout)
        return
    try:
        with replacing_text(path) as out:  # the old report stays if writing fails
            _write_report(result, fmt, _report_options(args), out)
    except OSError as exc:
        raise UsageError(f"--report {path}: {exc.strerror or exc}") from None


def _report_options(args: argparse.Namespace) -> ReportOptions:
    from otel_stall.offline.report import ReportOptions

    return ReportOptions(
        show_all=bool(getattr(args, "show_all", False)),
        limit=getattr(args, "limit", None),
        redact=bool(getattr(args, "redact", False)),
    )


def _write_report(result: ReplayResult, fmt: str, options: ReportOptions, out: IO[str]) -> None:
    from otel_stall.offline import report

    if fmt == "json":
        out.write(report.render_json(result, options))
    elif fmt == "markdown":
        out.write(report.render_markdown(result, options))
    elif fmt == "html":
        from otel_stall.offline.html_report import render_html

        out.write(render_html(result, options))
    else:
        from rich.console import Console

        console = Console(file=out, highlight=False, soft_wrap=False, width=_table_width(out))
        report.render_table(result, console, options)


def _table_width(out: IO[str]) -> int | None:
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


def cmd_replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Replay stored spans, report the runs, optionally re-export them enriched."""
    policy = policy_from_args(args)
    _refuse_writing_over_inputs(args)
    with spooled_stdin(args.paths) as (paths, labels):
        with _progress(paths, "reading") as progress:
            conventions = conventions_from_args(args)
            replayer = Replayer(
                policy,
                conventions,
                progress=progress,
                pause_gc=True,
                max_message=args.max_message_mib,
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
    _render(result, args, stdout)
    _print_errors(result.errors, stderr, result.skipped)
    empty = _no_spans(result, args.paths, stderr)
    if result.errors or export_failed or empty:
        return EXIT_USAGE
    if result.worst.severity >= _FAIL_ON[args.fail_on].severity:
        return EXIT_STALL
    return EXIT_OK


# -- compare --------------------------------------------------------------------------


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall compare``."""
    parser.add_argument("a", metavar="A", help="FILE, or FILE#RUN (agent, run span or trace id)")
    parser.add_argument("b", metavar="B", help="FILE, or FILE#RUN")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument(
        "--min-count", type=int, default=3, help="occurrences that make a signature a loop"
    )
    _add_policy_arguments(parser)
    _add_input_arguments(parser)


def _pick_run(
    spec: str,
    policy: StallPolicy,
    max_message: int,
    stderr: IO[str],
    conventions: Conventions | None = None,
) -> RunReport:
    path, _, selector = spec.partition("#")
    if not os.path.exists(path) and "#" in spec:
        path, selector = spec, ""
    result = Replayer(policy, conventions, max_message=max_message).analyse([path])
    _print_errors(result.errors, stderr, result.skipped)
    if _no_spans(result, [path], stderr):
        raise UsageError(f"{spec}: nothing to compare")
    runs = result.reports
    if selector:
        runs = [
            r
            for r in runs
            if selector
            in (
                r.attributes.get("agent"),
                r.attributes.get("run_span_id"),
                r.attributes.get("trace_id"),
            )
        ]
    if not runs:
        raise UsageError(f"{spec}: no run found" + (f" matching {selector!r}" if selector else ""))
    if len(runs) > 1:
        chosen = max(runs, key=lambda r: (r.stall_score, r.tool_calls))
        print(
            f"otel-stall: {spec}: {len(runs)} runs; comparing the most stalled one "
            f"({chosen.attributes.get('agent')}, span {chosen.attributes.get('run_span_id')}); "
            "select another with FILE#AGENT, FILE#SPAN_ID or FILE#TRACE_ID",
            file=stderr,
        )
        return chosen
    return runs[0]


def _wasted_json(wasted: Any) -> dict[str, Any] | None:
    """A run's wasted cost in ``compare --format json``; ``null`` for a run that never stalled."""
    if wasted is None:
        return None
    return {"calls": wasted.calls, "tokens": wasted.tokens, "seconds": wasted.seconds}


def cmd_compare(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Compare the loops of two runs: shared loops point at the prompt or schema."""
    from otel_stall.core.compare import Conclusion, compare_runs

    policy = policy_from_args(args)
    conventions = conventions_from_args(args)
    a = _pick_run(args.a, policy, args.max_message_mib, stderr, conventions)
    b = _pick_run(args.b, policy, args.max_message_mib, stderr, conventions)
    comparison = compare_runs(a, b, min_count=args.min_count)
    sections = (
        ("shared", comparison.shared),
        ("only_a", comparison.only_a),
        ("only_b", comparison.only_b),
    )
    if args.format == "json":
        doc = {
            "a": {k: a.attributes.get(k) for k in ("trace_id", "run_span_id", "agent")},
            "b": {k: b.attributes.get(k) for k in ("trace_id", "run_span_id", "agent")},
            "conclusion": comparison.conclusion.value,
            "explanation": comparison.explanation,
            "wasted_a": _wasted_json(comparison.wasted_a),
            "wasted_b": _wasted_json(comparison.wasted_b),
            **{
                name: [
                    {
                        "signature": s.signature,
                        "tool": s.tool,
                        "count_a": s.count_a,
                        "count_b": s.count_b,
                    }
                    for s in sigs
                ]
                for name, sigs in sections
            },
        }
        stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        explanation = printable(comparison.explanation)
        stdout.write(f"conclusion: {comparison.conclusion.value}\n{explanation}\n")
        for name, wasted in (("A", comparison.wasted_a), ("B", comparison.wasted_b)):
            if wasted is not None:
                tokens = "not captured" if wasted.tokens is None else wasted.tokens
                stdout.write(
                    f"  wasted {name}: {wasted.calls} calls, tokens {tokens}, "
                    f"{wasted.seconds:.1f} s since the stall began\n"
                )
        for name, sigs in sections:
            for s in sigs:
                stdout.write(
                    f"  {name:7} {printable(s.tool):20} {s.signature[:16]}"
                    f"  A x{s.count_a}  B x{s.count_b}\n"
                )
    return EXIT_OK if comparison.conclusion is Conclusion.NO_LOOP else EXIT_STALL


# -- demo -----------------------------------------------------------------------------


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


_DEMO_ROUNDS: Final = 12
"""The most rounds the guarded researcher tries; the gate stops it well before."""


def cmd_demo(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run a looping agent through the SDK, the live processor and its gate, then replay it."""
    with contextlib.ExitStack() as cleanup:
        capture = args.capture
        if capture is None:
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="otel-stall-demo-"))
            capture = os.path.join(folder, "spans.jsonl")
        elif os.path.exists(capture):
            os.unlink(capture)
        started = time.perf_counter()
        _demo_live(capture, args.export_otlp, stdout)
        kept = f" in {capture}" if args.capture else ""
        stdout.write(
            f"\nThe spans ({time.perf_counter() - started:.2f}s of agent work) were captured"
            f"{kept}; replayed offline they give the same verdicts:\n\n"
        )
        replayed = Replayer().analyse([capture])
        _render(replayed, args, stdout)
    _print_errors(replayed.errors, stderr)
    return EXIT_USAGE if replayed.errors else EXIT_OK


def _demo_live(capture: str, export_otlp: str | None, stdout: IO[str]) -> None:
    """The guarded researcher and the planner, live: each round as it happens, then the findings."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from otel_stall.core.records import Finding
    from otel_stall.demo import run_looping_agent, run_progressing_agent
    from otel_stall.live.capture import OtlpJsonLinesSpanExporter
    from otel_stall.live.processor import StallSpanProcessor

    findings: list[Finding] = []
    downstream: list[Any] = [SimpleSpanProcessor(OtlpJsonLinesSpanExporter(capture))]
    if export_otlp:
        downstream.append(BatchSpanProcessor(_sdk_exporter(export_otlp)))
    processor = StallSpanProcessor(*downstream, on_finding=findings.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("otel_stall.demo")
    stdout.write(
        "A simulated researcher agent that loops on one page, and a planner that makes\n"
        "progress, traced with the OpenTelemetry SDK through StallSpanProcessor. The\n"
        "researcher asks the live gate (StallGuard) before each tool call.\n\nresearcher\n"
    )
    narrator = _Narrator(stdout)
    stopped = run_looping_agent(tracer, _DEMO_ROUNDS, guard=processor.guard, on_step=narrator.step)
    if stopped is not None:
        narrator.stopped(stopped)
    run_progressing_agent(tracer)
    stdout.write(
        "planner\n  rounds 1..4  list_issues, pages 1 to 4: each result new, never stopped\n"
    )
    provider.shutdown()
    _print_live_findings(findings, narrator.arguments, stdout)


class _Narrator:
    """Prints the researcher's rounds: what ran, what the gate refused, and the message."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.told: set[str] = set()
        self.arguments: dict[str, str] = {}
        """Each tool's arguments as its spans carry them (JSON text), for the previews."""

    def step(self, step: Any) -> None:
        self.arguments[step.tool] = json.dumps(step.arguments)
        call = f"  round {step.round:<3} {printable(step.tool)} {json.dumps(step.arguments)}"
        if step.refusal is None:
            self.out.write(f"{call}: ran\n")
        elif step.refusal.message in self.told:
            self.out.write(f"{call}: refused again\n")
        else:
            self.told.add(step.refusal.message)
            self.out.write(f"{call}: refused by the gate; the model is told:\n")
            self.out.write(f"      {printable(step.refusal.message)}\n")

    def stopped(self, stalled: Any) -> None:
        self.out.write(
            f"  stopped: the run reached {stalled.report.verdict.value}; the model is told:\n"
            f"      {printable(stalled)}\n"
        )


def _print_live_findings(
    findings: Sequence[Any], arguments: dict[str, str], stdout: IO[str]
) -> None:
    """The live findings, one line per rule and call, as the replay report prints them."""
    from rich.console import Console

    from otel_stall.offline.preview import argument_preview
    from otel_stall.offline.report import collapse_findings, finding_text

    stdout.write("\nLive findings, one line per rule and call:\n")
    console = Console(file=stdout, highlight=False, soft_wrap=False, width=_table_width(stdout))
    for line in collapse_findings(findings, lambda f: argument_preview(arguments.get(f.tool))):
        console.print(finding_text(line), no_wrap=True, overflow="ellipsis")


def _sdk_exporter(url: str) -> Any:
    """Live spans from the SDK go out with the SDK's own OTLP exporters."""
    from otel_stall.offline.send import is_http_url

    if is_http_url(url):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=url)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcExporter,
    )

    endpoint = url.split("://", 1)[-1]
    return GrpcExporter(endpoint=endpoint, insecure=not url.startswith("https://"))


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall serve`` (the gateway owns them)."""
    from otel_stall.gateway.flags import add_arguments

    add_arguments(parser)
    add_conventions_argument(parser)


def cmd_serve(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the OTLP gateway until SIGTERM (see ``otel_stall.gateway``)."""
    from otel_stall.gateway.server import run

    return run(args, stderr)


# -- explain --------------------------------------------------------------------------


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
    _print_errors(errors, stderr)
    if args.span and not found:
        raise UsageError(f"span {args.span} not found")
    return EXIT_USAGE if errors else EXIT_OK


# -- entry point -----------------------------------------------------------------------

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every registered subcommand."""
    from otel_stall import __version__

    parser = argparse.ArgumentParser(
        prog="otel-stall", description="Catch AI agents stuck in tool loops from their spans."
    )
    parser.add_argument("--version", action="version", version=f"otel-stall {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (help_text, add_arguments, command) in COMMANDS.items():
        child = sub.add_parser(name, help=help_text, description=help_text)
        add_arguments(child)
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
