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
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, Final

from otel_stall.core.config import ConfigError
from otel_stall.core.errors import InputError
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import RunReport, Verdict
from otel_stall.offline.replay import Replayer, ReplayResult, spooled_stdin

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


def _toml_module() -> Any:
    """The standard library's ``tomllib`` (3.11+), else its backport ``tomli``."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def load_config(path: str) -> dict[str, Any]:
    """Read StallPolicy settings from a TOML or JSON file (a ``[policy]`` table is optional)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UsageError(f"--config {path}: cannot read ({exc.strerror or exc})") from None
    obj: Any
    if path.endswith(".json") or data.lstrip()[:1] == b"{":
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise UsageError(f"--config {path}: invalid JSON ({exc})") from None
    else:
        tomllib = _toml_module()
        if tomllib is None:
            raise UsageError(f"--config {path}: TOML needs tomli on Python 3.10; use JSON")
        try:
            obj = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"--config {path}: invalid TOML ({exc})") from None
    if not isinstance(obj, dict):
        raise UsageError(f"--config {path}: expected a table/object of policy settings")
    section = obj.get("policy", obj)
    if not isinstance(section, dict):
        raise UsageError(f"--config {path}: [policy] must be a table")
    return dict(section)


def policy_from_args(args: argparse.Namespace) -> StallPolicy:
    """Config file, then flags on top; ``OTEL_STALL_*`` fills what neither sets."""
    explicit: dict[str, Any] = load_config(args.config) if args.config else {}
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
        raise UsageError(f"policy: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise UsageError(f"policy: invalid setting ({exc})") from None


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
    parser.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        help="report format (default: table on a terminal, json otherwise)",
    )
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
        "--redact", action="store_true", help="strip raw arguments and results from --out/--export"
    )


def _print_errors(errors: Sequence[InputError], stderr: IO[str]) -> None:
    for error in errors:
        print(f"otel-stall: {error}", file=stderr)


def _render(result: ReplayResult, fmt: str, stdout: IO[str]) -> None:
    from otel_stall.offline.report import render_json, render_markdown, render_table

    if fmt == "json":
        stdout.write(render_json(result))
    elif fmt == "markdown":
        stdout.write(render_markdown(result))
    else:
        from rich.console import Console

        render_table(result, Console(file=stdout, highlight=False, soft_wrap=False))


def _default_format(stdout: IO[str]) -> str:
    isatty = getattr(stdout, "isatty", None)
    return "table" if isatty is not None and isatty() else "json"


def cmd_replay(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Replay stored spans, report the runs, optionally re-export them enriched."""
    policy = policy_from_args(args)
    with spooled_stdin(args.paths) as (paths, labels):
        with _progress(paths, "reading") as progress:
            replayer = Replayer(policy, progress=progress, pause_gc=True)
            result = replayer.analyse(
                paths, labels=labels, keep_enrichment=bool(args.out or args.export_otlp)
            )
        export_failed = False
        if args.out:
            try:
                with open(args.out, "wb") as out, _progress(paths, "writing") as progress:
                    replayer.progress = progress
                    replayer.write_json_lines(result, paths, out, redact=args.redact, labels=labels)
            except OSError as exc:
                raise UsageError(f"--out {args.out}: {exc.strerror or exc}") from None
        if args.export_otlp:
            with _progress(paths, "exporting") as progress:
                replayer.progress = progress
                sender = replayer.export(
                    result, paths, args.export_otlp, redact=args.redact, labels=labels
                )
            for message in sender.errors:
                print(f"otel-stall: export: {message}", file=stderr)
            export_failed = sender.failed > 0
    _render(result, args.format or _default_format(stdout), stdout)
    _print_errors(result.errors, stderr)
    if result.errors or export_failed:
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


def _pick_run(spec: str, policy: StallPolicy, stderr: IO[str]) -> RunReport:
    path, _, selector = spec.partition("#")
    if not os.path.exists(path) and "#" in spec:
        path, selector = spec, ""
    result = Replayer(policy).analyse([path])
    _print_errors(result.errors, stderr)
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
    a = _pick_run(args.a, policy, stderr)
    b = _pick_run(args.b, policy, stderr)
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
        stdout.write(f"conclusion: {comparison.conclusion.value}\n{comparison.explanation}\n")
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
                    f"  {name:7} {s.tool:20} {s.signature[:16]}  A x{s.count_a}  B x{s.count_b}\n"
                )
    return EXIT_OK if comparison.conclusion is Conclusion.NO_LOOP else EXIT_STALL


# -- demo -----------------------------------------------------------------------------


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``otel-stall demo``."""
    parser.add_argument(
        "--capture", metavar="FILE", help="where to write the captured spans (default: a temp file)"
    )
    parser.add_argument(
        "--export-otlp",
        metavar="URL",
        help="also send the live, enriched spans to an OTLP endpoint (HTTP for .../v1/traces)",
    )
    parser.add_argument("--format", choices=("table", "json", "markdown"), default="table")


def cmd_demo(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run a simulated looping agent through the SDK and the live processor, then replay it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from otel_stall.demo import run_looping_agent, run_progressing_agent
    from otel_stall.live.capture import OtlpJsonLinesSpanExporter
    from otel_stall.live.processor import StallSpanProcessor

    tmpdir = None
    capture = args.capture
    if capture is None:
        tmpdir = tempfile.mkdtemp(prefix="otel-stall-demo-")
        capture = os.path.join(tmpdir, "spans.jsonl")
    elif os.path.exists(capture):
        os.unlink(capture)

    def on_finding(report: Any) -> None:
        stdout.write(f"live: {report.kind.value} -> {report.action.value} on {report.tool}: ")
        stdout.write(f"{report.message}\n")
        stdout.flush()

    downstream: list[Any] = [SimpleSpanProcessor(OtlpJsonLinesSpanExporter(capture))]
    if args.export_otlp:
        downstream.append(BatchSpanProcessor(_sdk_exporter(args.export_otlp)))
    provider = TracerProvider()
    provider.add_span_processor(StallSpanProcessor(*downstream, on_finding=on_finding))
    tracer = provider.get_tracer("otel_stall.demo")
    stdout.write("Running a simulated researcher agent (it loops) and a planner (it does not)\n")
    started = time.perf_counter()
    run_looping_agent(tracer)
    run_progressing_agent(tracer)
    provider.shutdown()
    stdout.write(
        f"\nCaptured the spans to {capture} in {time.perf_counter() - started:.2f}s; "
        f"replaying them:\n\n"
    )
    replayed = Replayer().analyse([capture])
    _render(replayed, args.format, stdout)
    _print_errors(replayed.errors, stderr)
    return EXIT_USAGE if replayed.errors else EXIT_OK


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


def cmd_serve(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    """Run the OTLP gateway until SIGTERM (see ``otel_stall.gateway``)."""
    from otel_stall.gateway.server import run

    return run(args, stderr)


# -- entry point -----------------------------------------------------------------------

Command = Callable[[argparse.Namespace, IO[str], IO[str]], int]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Command]] = {
    "replay": ("analyse stored OTLP or JSONL files", add_replay_arguments, cmd_replay),
    "compare": ("compare the loops of two runs", add_compare_arguments, cmd_compare),
    "demo": ("run a simulated looping agent, live then replayed", add_demo_arguments, cmd_demo),
    "serve": ("run the OTLP gateway (detect, enrich, forward)", add_serve_arguments, cmd_serve),
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
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    stdout.flush()
    return code
