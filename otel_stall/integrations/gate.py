"""The gate every framework integration asks: one decision per tool call and per model turn.

Each integration module (``otel_stall.integrations.<framework>``) is a thin
adapter: it turns its framework's hook (a guardrail, a middleware, a callback)
into :meth:`ToolGate.before_tool`, :meth:`ToolGate.after_tool` and
:meth:`ToolGate.before_model`, and turns the :class:`Decision` back into what
that framework understands (a replaced tool result, tools removed, an extra
message). The rules, the thresholds and the guidance text are the detector's:
no integration writes its own.

Which run a call belongs to, in order:

1. the live processor's run of the current span, when a
   :class:`~otel_stall.live.processor.StallSpanProcessor` is installed and the
   framework's own instrumentation made spans it has seen (the processor then
   records every call from the spans, and the gate only asks it);
2. otherwise the gate's own run state, keyed by the framework's run id (or the
   current trace), fed by :meth:`ToolGate.after_tool`. So the gate works with no
   OpenTelemetry set up at all, and with a framework whose spans the processor
   never sees.

Deliberate decisions:

- Fail open: an internal error allows the call and is logged once per kind
  (under pytest it surfaces, as in the processor).
- A refusal is recorded as a refused call (``stall.refused`` on a tool span in
  the processor's run, ``Status.REFUSED`` in the gate's own), so the
  refused-rounds rule sees a model that keeps asking.
- A warning is handed out once per finding: the model is told, not nagged.
- Own run state is bounded by count and idle time, like the processor's run
  table; :meth:`ToolGate.end_run` frees a run at once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace

from otel_stall.core.detector import RunDetector, gate_digests
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import ABSENT, Action, Finding, Status, ToolCall, Verdict
from otel_stall.live.fork import reset_in_child
from otel_stall.live.guard import worst_finding
from otel_stall.live.settings import PYTEST_ENV
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import GenAIOperation as Op
from otel_stall.semconv import StallAttributes

logger = logging.getLogger("otel_stall.integrations")

_REFUSE: Final = Action.REFUSE
_STOPS: Final = frozenset({Action.BREAK, Action.ESCALATE})

BREAK_MESSAGE: Final = (
    "The tools are no longer available: this run has stopped making progress. "
    "Write your final answer now from what you have already gathered."
)
"""Told to the model at ``break`` (and ``escalate``) when the finding has no message of its own."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What the gate says of one call or one model turn, and what to tell the model."""

    action: Action = Action.CONTINUE
    message: str | None = None
    """Guidance written for the model; ``None`` for ``continue``."""
    finding: Finding | None = None

    @property
    def refused(self) -> bool:
        """The tool must not run; give the model :attr:`message` as its result."""
        return self.action is _REFUSE

    @property
    def stops(self) -> bool:
        """The run should end: take the tools away, or stop it the framework's way."""
        return self.action in _STOPS

    @property
    def warns(self) -> bool:
        """The call runs, and the model should read :attr:`message` on its next turn."""
        return self.action is Action.WARN


ALLOW: Final = Decision()


def answer_now(decision: Decision) -> str:
    """What the model is told when its tools are taken away: the guidance, then the stop.

    The finding's own text may still suggest another approach; :data:`BREAK_MESSAGE`
    after it says there is none left but to answer.
    """
    message = decision.message or BREAK_MESSAGE
    return message if message == BREAK_MESSAGE else f"{message} {BREAK_MESSAGE}"


@dataclass(slots=True)
class _OwnRun:
    detector: RunDetector
    lock: threading.Lock = field(default_factory=threading.Lock)
    told: int = 0
    """How many of the detector's findings were already handed out."""
    touched: float = 0.0


def _decision(finding: Finding) -> Decision:
    if finding.action in _STOPS:
        return Decision(finding.action, finding.message or BREAK_MESSAGE, finding)
    return Decision(finding.action, finding.message, finding)


class ToolGate:
    """One gate per agent process (or per agent), shared by every run it sees.

    ``processor`` is the live processor to ask; by default the one
    :func:`otel_stall.install` put on the global provider, looked up on each
    call (it may be installed after the gate is made). ``policy`` is the gate's
    own runs' policy (the processor's when there is one; else
    ``StallPolicy.from_env()``). ``own_state`` keeps the gate's own run state
    even with a processor installed (its policy is still the processor's): for
    calls whose spans reach the processor without their arguments, such as an
    MCP client's (its spans name the method, the server's name only the tool),
    where the processor's run would never see a call repeat.
    """

    def __init__(
        self,
        processor: Any = None,
        *,
        policy: StallPolicy | None = None,
        max_runs: int = 1024,
        idle_seconds: float = 3600.0,
        own_state: bool = False,
    ) -> None:
        self._processor = processor
        self._policy = policy
        self._own_state = own_state
        self._runs: OrderedDict[Hashable, _OwnRun] = OrderedDict()
        self._lock = threading.Lock()
        self._max_runs = max_runs
        self._idle = idle_seconds
        self._errors: set[str] = set()
        self._live_told: OrderedDict[Hashable, int] = OrderedDict()
        """Per processor run: how many of its findings were already handed out."""
        reset_in_child(self)

    def _after_fork(self) -> None:
        """New locks in a forked child: another thread may have held one at the fork."""
        self._lock = threading.Lock()
        for own in self._runs.values():
            own.lock = threading.Lock()

    # -- which run ------------------------------------------------------------

    def processor(self) -> Any:
        """The live processor asked for runs: the given one, or the global provider's."""
        if self._processor is not None:
            return self._processor
        from otel_stall.live.install import installed_on

        return installed_on(trace.get_tracer_provider())

    @property
    def policy(self) -> StallPolicy:
        """The policy of the gate's own runs (the processor's when one is installed)."""
        processor = self.processor()
        if processor is not None:
            return processor.policy  # type: ignore[no-any-return]
        if self._policy is None:
            self._policy = StallPolicy.from_env()
        return self._policy

    def _live_run(self) -> Any:
        """The processor's run of the current span, if it has state (and the gate may ask it).

        The span first: without one (no OpenTelemetry set up) the processor's
        lookup, a lock and the global provider's, is skipped on every call.
        """
        if self._own_state:
            return None
        ctx = trace.get_current_span().get_span_context()
        if not ctx.is_valid:
            return None
        processor = self.processor()
        if processor is None:
            return None
        run = processor.run_for(ctx)
        return run if run is not None and run.detector is not None else None

    def _own(self, run: Hashable | None) -> _OwnRun:
        key = run if run is not None else self._current_trace()
        now = time.monotonic()
        with self._lock:
            own = self._runs.get(key)
            if own is None:
                own = _OwnRun(RunDetector(self.policy, run_key=str(key), keep=64), touched=now)
                self._runs[key] = own
                self._trim(now)
            else:
                self._runs.move_to_end(key)
            own.touched = now
            return own

    @staticmethod
    def _current_trace() -> Hashable:
        ctx = trace.get_current_span().get_span_context()
        return ("trace", ctx.trace_id) if ctx.is_valid else ("process", None)

    def _trim(self, now: float) -> None:
        while len(self._runs) > self._max_runs:
            self._runs.popitem(last=False)
        while self._runs:
            oldest = next(iter(self._runs.values()))
            if now - oldest.touched <= self._idle:
                break
            self._runs.popitem(last=False)

    def end_run(self, run: Hashable) -> None:
        """Forget the gate's own state of ``run`` (the framework's run ended)."""
        with self._lock:
            self._runs.pop(run, None)

    @property
    def open_runs(self) -> int:
        """Runs the gate holds state for (its own, not the processor's)."""
        with self._lock:
            return len(self._runs)

    # -- decisions -------------------------------------------------------------

    def before_tool(
        self, tool: str, args: Any, *, run: Hashable | None = None, exempt: bool = False
    ) -> Decision:
        """Refuse a call that already ran in this run, or stop a run at ``break``.

        Never raises: on an internal error the call is allowed (fail open).
        """
        try:
            return self._before_tool(tool, args, run, exempt)
        except Exception as exc:
            self._failed("before_tool", exc)
            return ALLOW

    def _before_tool(self, tool: str, args: Any, run: Hashable | None, exempt: bool) -> Decision:
        live = self._live_run()
        if live is not None:
            return self._before_live(live, tool, args, exempt)
        own = self._own(run)
        digests = gate_digests(own.detector.policy, tool, args, exempt=exempt)
        with own.lock:
            stopped = self._stopped(own)
            if stopped is not None:
                return stopped
            if digests is None:
                return ALLOW
            finding = own.detector.check_call(tool, args, digests=digests)
            if finding is None or finding.action is not _REFUSE:
                return ALLOW
            own.detector.tool_call(ToolCall(tool, args, ABSENT, Status.REFUSED))
            own.told = own.detector.finding_count
        return _decision(finding)

    def _before_live(self, live: Any, tool: str, args: Any, exempt: bool) -> Decision:
        stopped = self._live_stop()
        if stopped is not None:
            return stopped
        refusal = self.processor().guard.before_call(tool, args, exempt=exempt)
        if refusal is None:
            return ALLOW
        self._record_refusal(tool, args)
        return _decision(refusal.finding)

    def _live_stop(self) -> Decision | None:
        """The stop of the processor's run of the current span, once it reached escalate."""
        status = self.processor().guard.verdict()
        if status.report is None or status.verdict.severity < Verdict.ESCALATE.severity:
            return None
        worst = worst_finding(status.report.findings)
        return _decision(worst) if worst is not None else Decision(Action.BREAK, BREAK_MESSAGE)

    @staticmethod
    def _record_refusal(tool: str, args: Any) -> None:
        """A refused tool span in the current run: the call never ran, but was asked for.

        When the framework asks from inside its own span of this call (ADK's
        ``execute_tool <name>``), that span is marked refused: a second span would
        record the call twice, once refused and once as a call that returned the
        refusal. A framework that makes no span for a call it cancels (Strands)
        gets this one.
        """
        import json

        current = trace.get_current_span()
        if _is_tool_span(current, tool):
            current.set_attribute(StallAttributes.REFUSED, True)
            return
        try:
            text = args if isinstance(args, str) else json.dumps(args, default=str)
        except (TypeError, ValueError):
            text = repr(args)
        tracer = trace.get_tracer("otel_stall.integrations")
        attributes: dict[str, str | bool] = {
            GenAI.OPERATION_NAME: Op.EXECUTE_TOOL,
            GenAI.TOOL_NAME: tool,
            GenAI.TOOL_CALL_ARGUMENTS: text,
            StallAttributes.REFUSED: True,
        }
        with tracer.start_as_current_span(f"{Op.EXECUTE_TOOL} {tool}", attributes=attributes):
            pass

    def after_tool(
        self,
        tool: str,
        args: Any,
        result: Any,
        *,
        run: Hashable | None = None,
        error: BaseException | str | None = None,
        exempt: bool = False,
    ) -> Decision:
        """Record a call that ran; a warning or a stop the model should hear of, once.

        With the processor's run the span records the call; the gate only reads
        the findings it has not handed out yet. Never raises.
        """
        try:
            return self._after_tool(tool, args, result, run, error, exempt)
        except Exception as exc:
            self._failed("after_tool", exc)
            return ALLOW

    def _after_tool(
        self,
        tool: str,
        args: Any,
        result: Any,
        run: Hashable | None,
        error: BaseException | str | None,
        exempt: bool,
    ) -> Decision:
        if self._live_run() is not None:
            return ALLOW
        own = self._own(run)
        error_type = None if error is None else _error_type(error)
        call = ToolCall(
            tool,
            args,
            result if error is None else str(error),
            Status.OK if error is None else Status.ERROR,
            exempt=exempt,
            error=error_type,
        )
        with own.lock:
            own.detector.tool_call(call)
            return self._news(own)

    def before_model(self, *, run: Hashable | None = None) -> Decision:
        """Before the model's next turn: ``stops`` means give it no tools now.

        Opens a new round in the gate's own run. Never raises.
        """
        try:
            live = self._live_run()
            if live is not None:
                stopped = self._live_stop()
                return stopped if stopped is not None else self._live_news(live)
            own = self._own(run)
            with own.lock:
                own.detector.model_call()
                stopped = self._stopped(own)
                return stopped if stopped is not None else self._news(own)
        except Exception as exc:
            self._failed("before_model", exc)
            return ALLOW

    def _live_news(self, live: Any) -> Decision:
        """A warning the processor's run fired since the last model turn, handed out once.

        The tool's span ends after the framework's hook returned, so ``after_tool``
        cannot see it; the next model turn can.
        """
        key = (live.trace_id, live.span_id, live.session)
        with live.lock:
            count = live.detector.finding_count
            findings = live.detector.findings
        with self._lock:
            told = self._live_told.pop(key, 0)
            self._live_told[key] = count
            while len(self._live_told) > self._max_runs:
                self._live_told.popitem(last=False)
        return _fresh(findings, count - told) if count > told else ALLOW

    @staticmethod
    def _stopped(own: _OwnRun) -> Decision | None:
        """The run's stop, if its verdict reached ``break`` or ``escalate``."""
        latest = own.detector.latest(Action.BREAK) or own.detector.latest(Action.ESCALATE)
        return None if latest is None else _decision(latest)

    @staticmethod
    def _news(own: _OwnRun) -> Decision:
        """The most severe finding not handed out yet (a refusal was handed out already)."""
        count = own.detector.finding_count
        new, own.told = count - own.told, count
        return _fresh(own.detector.findings, new) if new > 0 else ALLOW

    def _failed(self, where: str, exc: Exception) -> None:
        kind = f"{where}: {type(exc).__name__}"
        if kind not in self._errors:
            self._errors.add(kind)
            logger.error("otel-stall gate: %s failed; the call is allowed", where, exc_info=exc)
        if PYTEST_ENV in os.environ:  # as the processor: under pytest, errors surface
            raise exc


def _is_tool_span(span: Any, tool: str) -> bool:
    """Whether ``span`` is a recording span of a call of ``tool`` (by its name or attribute)."""
    if not span.is_recording():
        return False
    if getattr(span, "name", None) == f"{Op.EXECUTE_TOOL} {tool}":
        return True
    attributes = getattr(span, "attributes", None) or {}
    return attributes.get(GenAI.TOOL_NAME) == tool and (
        attributes.get(GenAI.OPERATION_NAME) in (None, Op.EXECUTE_TOOL)
    )


def _fresh(findings: Sequence[Finding], new: int) -> Decision:
    """The most severe of the ``new`` newest findings, refusals aside (they were told already).

    The newest are always kept, last, however the detector bounds its findings.
    """
    worst = worst_finding(f for f in findings[-new:] if f.action is not _REFUSE)
    return ALLOW if worst is None else _decision(worst)


def _error_type(error: BaseException | str) -> str:
    return type(error).__name__ if isinstance(error, BaseException) else str(error)


_DEFAULT: Final = ToolGate()  # cheap: it looks for the processor only when asked


def default_gate() -> ToolGate:
    """The process's shared gate, used by integrations given no gate of their own."""
    return _DEFAULT


__all__ = ["ALLOW", "BREAK_MESSAGE", "Decision", "ToolGate", "answer_now", "default_gate"]
