"""A simulated agent, traced with the real SDK, and its narration: ``otel-stall demo``.

It emits OTel GenAI spans the way an instrumented agent framework does
(``invoke_agent`` > ``chat`` > ``execute_tool``, plus a plain HTTP client span
under a tool), with content capture on. The ``researcher`` run loops: it
re-fetches the same page and gets the same text back; the ``planner`` run
makes progress. Tests use the same agent, so the demo is what is tested.

Given a :class:`~otel_stall.live.guard.StallGuard`, the researcher does what a
guarded agent does: it asks the gate before each tool call, records a refused
call as a refused span instead of running it, and stops as soon as the run's
verdict reaches ``break``. Without one it loops for its rounds, unguarded.

:func:`run_live_demo` is what ``otel-stall demo`` prints while both agents run
live; the command (``otel_stall.cli.demo``) then replays the capture.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Tracer

from otel_stall.core.escape import printable
from otel_stall.core.records import Finding
from otel_stall.live.guard import Refusal, StallDetected, StallGuard
from otel_stall.semconv import StallAttributes

__all__ = [
    "LIVE_ROUNDS",
    "PAGE_URL",
    "Step",
    "run_live_demo",
    "run_looping_agent",
    "run_progressing_agent",
]

PAGE_URL: Final = "https://docs.example.com/otel/spans"
_PAGE = {"url": PAGE_URL, "text": "Spans describe one operation."}
LIVE_ROUNDS: Final = 12
"""The most rounds the guarded researcher tries in ``otel-stall demo``; the gate stops it sooner."""


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call the researcher asked for, and what the gate said."""

    round: int
    tool: str
    arguments: dict[str, Any]
    refusal: Refusal | None = None
    """Set when the gate refused the call: it did not run, and the model gets the message."""


OnStep = Callable[[Step], None]


def _tool(tracer: Tracer, name: str, args: dict[str, Any], result: Any) -> None:
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(args),
        },
    ) as span:
        with tracer.start_as_current_span(
            "GET", kind=SpanKind.CLIENT, attributes={"http.request.method": "GET"}
        ) as http:
            http.set_attribute("http.response.status_code", 200)
        span.set_attribute("gen_ai.tool.call.result", json.dumps(result))


def _refused_tool(tracer: Tracer, name: str, args: dict[str, Any]) -> None:
    """A call the gate refused: it did not run, so its span has no result and no HTTP child."""
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.arguments": json.dumps(args),
            StallAttributes.REFUSED: True,
        },
    ):
        pass


def _chat(tracer: Tracer, model: str = "demo-model") -> None:
    with tracer.start_as_current_span(
        f"chat {model}",
        kind=SpanKind.CLIENT,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": model},
    ):
        pass


def _call(
    tracer: Tracer,
    guard: StallGuard | None,
    step: Step,
    result: Any,
    on_step: OnStep | None,
) -> None:
    """Ask the gate (if any), then run the call or record its refusal."""
    refusal = None if guard is None else guard.before_call(step.tool, step.arguments)
    if refusal is None:
        _tool(tracer, step.tool, step.arguments, result)
    else:
        _refused_tool(tracer, step.tool, step.arguments)
        step = Step(step.round, step.tool, step.arguments, refusal)
    if on_step is not None:
        on_step(step)


def run_looping_agent(
    tracer: Tracer | None = None,
    rounds: int = 6,
    *,
    guard: StallGuard | None = None,
    on_step: OnStep | None = None,
) -> StallDetected | None:
    """A researcher that searches once, then fetches the same page again and again.

    With ``guard``, ``rounds`` is the most it tries: it stops as soon as the
    gate says ``break`` and returns the :class:`StallDetected` that stopped it
    (its message is the guidance the model gets). Without one it always runs
    ``rounds`` fetches and returns ``None``.
    """
    tracer = tracer or trace.get_tracer("otel_stall.demo")
    stopped = None
    with tracer.start_as_current_span(
        "invoke_agent researcher",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
    ):
        _chat(tracer)
        search = Step(1, "search", {"query": "otel span basics"})
        _call(tracer, guard, search, {"hits": [PAGE_URL]}, on_step)
        for n in range(rounds):
            _chat(tracer)
            stopped = _stalled(guard)
            if stopped is not None:
                break
            _call(tracer, guard, Step(n + 2, "fetch", {"url": PAGE_URL}), _PAGE, on_step)
        if stopped is None:
            _chat(tracer)
    return stopped


def _stalled(guard: StallGuard | None) -> StallDetected | None:
    """Whether the gate says stop, asked as a round starts (the model's answer closed the last)."""
    if guard is None:
        return None
    try:
        guard.raise_if_stalled()
    except StallDetected as stalled:
        return stalled
    return None


def run_progressing_agent(tracer: Tracer | None = None, rounds: int = 4) -> None:
    """A planner whose every round brings something new."""
    tracer = tracer or trace.get_tracer("otel_stall.demo")
    with tracer.start_as_current_span(
        "invoke_agent planner",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    ):
        for page in range(1, rounds + 1):
            _chat(tracer)
            _tool(tracer, "list_issues", {"page": page}, {"issues": [f"#{page * 10}"]})
        _chat(tracer)


# -- the narrated demo (``otel-stall demo``) ---------------------------------------


def run_live_demo(
    capture: str, export_otlp: str | None, stdout: IO[str], *, width: int | None = None
) -> None:
    """The guarded researcher and the planner, live: each round as it happens, then the findings.

    Spans go to ``capture`` (OTLP/JSON lines) and, given ``export_otlp``, to that
    endpoint; ``width`` is the findings' line width (``None``: the terminal's).
    """
    provider, processor, findings = live_pipeline(capture, export_otlp)
    tracer = provider.get_tracer("otel_stall.demo")
    stdout.write(
        "A simulated researcher agent that loops on one page, and a planner that makes\n"
        "progress, traced with the OpenTelemetry SDK through StallSpanProcessor. The\n"
        "researcher asks the live gate (StallGuard) before each tool call.\n\nresearcher\n"
    )
    narrator = _Narrator(stdout)
    stopped = run_looping_agent(tracer, LIVE_ROUNDS, guard=processor.guard, on_step=narrator.step)
    if stopped is not None:
        narrator.stopped(stopped)
    run_progressing_agent(tracer)
    stdout.write(
        "planner\n  rounds 1..4  list_issues, pages 1 to 4: each result new, never stopped\n"
    )
    provider.shutdown()
    print_live_findings(findings, narrator.arguments, stdout, width)


class _Narrator:
    """Prints the researcher's rounds: what ran, what the gate refused, and the message."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.told: set[str] = set()
        self.arguments: dict[str, str] = {}
        """Each tool's arguments as its spans carry them (JSON text), for the previews."""

    def step(self, step: Step) -> None:
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

    def stopped(self, stalled: StallDetected) -> None:
        from otel_stall.offline.stall_facts import wasted

        report = stalled.report
        self.out.write(
            f"  stopped: the run reached {report.verdict.value}; the model is told:\n"
            f"      {printable(str(stalled))}\n"
        )
        if report.wasted_calls is not None:
            self.out.write(
                f"  the stall began at call {report.onset_seq}; wasted since: {wasted(report)}\n"
            )


def live_pipeline(capture: str, export_otlp: str | None) -> tuple[Any, Any, list[Finding]]:
    """Both demos' wiring: an SDK provider, the processor, the capture (and an OTLP export).

    Returns the provider, the processor and the list its findings are appended to.
    """
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    from otel_stall.live.capture import OtlpJsonLinesSpanExporter
    from otel_stall.live.processor import StallSpanProcessor

    findings: list[Finding] = []
    downstream: list[Any] = [SimpleSpanProcessor(OtlpJsonLinesSpanExporter(capture))]
    if export_otlp:
        downstream.append(BatchSpanProcessor(_sdk_exporter(export_otlp)))
    processor = StallSpanProcessor(*downstream, on_finding=findings.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor, findings


def print_live_findings(
    findings: Sequence[Finding], arguments: dict[str, str], stdout: IO[str], width: int | None
) -> None:
    """The live findings, one line per rule and call, as the replay report prints them."""
    from rich.console import Console

    from otel_stall.offline.preview import argument_preview
    from otel_stall.offline.report import collapse_findings, finding_text

    stdout.write("\nLive findings, one line per rule and call:\n")
    console = Console(file=stdout, highlight=False, soft_wrap=False, width=width)
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
