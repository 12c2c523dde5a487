"""The detector's input and output records.

Spans are turned into these small, OpenTelemetry-free values at the edge
(:mod:`otel_stall.conventions`), so the live processor, the offline replay and
the gateway all feed the very same detector.

They are plain slots dataclasses: values that compare, copy, pickle and
``dataclasses.replace`` as any dataclass does. The records made once per tool
call (:class:`ToolCall`, :class:`ModelCall`, :class:`LedgerRow`,
:class:`Finding`) are not frozen: a frozen dataclass's constructor stores each
field through ``object.__setattr__``, which measured 4 to 5 times the cost of
plain slot stores, about 50,000 instructions per tool span across the records
it builds. Treat them as values all the same: nothing in otel-stall changes a
record once it is built. :class:`RunReport`, made once per run, is frozen.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Final

from otel_stall.core.chanting import ChantScan


class Status(str, enum.Enum):
    """How a tool call ended."""

    OK = "ok"
    ERROR = "error"
    REFUSED = "refused"
    """A guard refused the call before it ran: it produced nothing."""
    OVERLOADED = "overloaded"
    """The tool server hit a rate or capacity limit: a failure that returned nothing."""

    def __str__(self) -> str:
        return self.value


class Action(str, enum.Enum):
    """What the policy tells the agent to do, ordered by :data:`ACTION_SEVERITY`."""

    CONTINUE = "continue"
    REFUSE = "refuse"
    WARN = "warn"
    ESCALATE = "escalate"
    BREAK = "break"

    def __str__(self) -> str:
        return self.value


ACTION_SEVERITY: Final[dict[Action, int]] = {
    Action.CONTINUE: 0,
    Action.REFUSE: 1,
    Action.WARN: 2,
    Action.ESCALATE: 3,
    Action.BREAK: 4,
}


class Kind(str, enum.Enum):
    """Which rule produced a finding."""

    REPEAT = "repeat"
    DUPLICATE_CALL = "duplicate_call"
    NO_NEW_FACTS = "no_new_facts"
    REFUSED_ROUNDS = "refused_rounds"
    FAILURES = "failures"
    BUDGET = "budget"
    FAILURE_LOOP = "failure_loop"
    """The same call failing the same way several times in a row."""
    MODEL_FAILURE_LOOP = "model_failure_loop"
    """Model calls failing the same way several times in a row."""
    CYCLE = "cycle"
    """A sequence of 2 to ``max_cycle_length`` calls repeating back to back."""
    MONOLOGUE = "monologue"
    """The model saying the same thing again and again, with no new fact between."""
    CHANTING = "chanting"
    """A chunk of text repeated close together in the model's output."""
    DELEGATE_STALLED = "delegate_stalled"
    """A sub-agent run this run spawned ended at ``warn`` or above."""

    def __str__(self) -> str:
        return self.value


class Verdict(str, enum.Enum):
    """A run's overall outcome: the most severe action seen (``refuse`` counts as ``warn``)."""

    OK = "ok"
    WARN = "warn"
    ESCALATE = "escalate"
    BREAK = "break"

    def __str__(self) -> str:
        return self.value

    @property
    def severity(self) -> int:
        """Rank for comparisons and ``--fail-on``: ok < warn < escalate < break."""
        return _VERDICT_SEVERITY[self]

    @classmethod
    def of(cls, action: Action) -> Verdict:
        """The verdict a single action implies."""
        if action is Action.BREAK:
            return cls.BREAK
        if action is Action.ESCALATE:
            return cls.ESCALATE
        if action in (Action.WARN, Action.REFUSE):
            return cls.WARN
        return cls.OK


_VERDICT_SEVERITY: Final[dict[Verdict, int]] = {
    Verdict.OK: 0,
    Verdict.WARN: 1,
    Verdict.ESCALATE: 2,
    Verdict.BREAK: 3,
}


class _Absent:
    """Marks content that was not captured, which is not the same as empty content."""

    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""Arguments or a result whose content was not captured (content capture off, redacted)."""

RunKey = Hashable
"""Identifies one agent invocation; the caller chooses it (trace id, agent span id, ...)."""


def session_run_key(session: str) -> tuple[str, str]:
    """The run key of a session's run, live and in replay: its calls span many traces."""
    return ("session", session)


def handoff_run_key(run_key: tuple[str | None, ...], agent: str) -> tuple[str | None, ...]:
    """The run key of the run a handoff gave to ``agent``, within the run ``run_key``."""
    return (*run_key, agent)


@dataclass(slots=True)
class ToolCall:
    """One tool call as the detector sees it: no spans, no OpenTelemetry types.

    ``arguments`` and ``result`` may be JSON text, already-decoded values
    (dicts, lists, scalars, as from an OTLP kvlist) or :data:`ABSENT`.
    """

    tool: str
    arguments: Any = ABSENT
    result: Any = ABSENT
    status: Status = Status.OK
    run_key: RunKey = None
    seq: int | None = None
    """The source's own sequence number, if it has one; the ledger numbers calls itself."""
    call_id: str | None = None
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    exempt: bool = False
    """The tool repeats by design (polling, wait-for-subagent): no repeat or duplicate checks."""
    approval: bool = False
    """The tool has side effects that an admin approves: every result counts as new."""
    error: str | None = None
    """The failure's class (``error.type``) where the source names one: failure loops compare it."""


@dataclass(slots=True)
class ModelCall:
    """A model (chat, completion) call: it opens a new round in its run."""

    run_key: RunKey = None
    span_id: str | None = None
    start_ns: int = 0
    end_ns: int = 0
    model: str | None = None
    status: Status = Status.OK
    error: str | None = None
    """The failure's class or message: model failure loops compare it."""
    input_tokens: int | None = None
    """Tokens the call read, where captured (``None``: not captured, which is not 0)."""
    output_tokens: int | None = None
    output: str | None = None
    """A hash of the normalised assistant text, where output content was captured."""
    chant: ChantScan | None = None
    """The output's chunk hashes for the chanting rule, where output content was captured."""


Event = ToolCall | ModelCall
"""What the detector consumes, in the order the agent made the calls."""


@dataclass(slots=True)
class LedgerRow:
    """One tool call's line in the progress ledger."""

    seq: int
    tool: str
    signature: str
    """Hash of tool, normalised arguments, result digest and status."""
    call_signature: str
    """Hash of tool and normalised arguments: what a guard compares before execution."""
    result_digest: str | None
    """Hash of the normalised result; ``None`` when the result was not captured."""
    repeat_of: int | None
    """``seq`` of the first row with the same ``signature``, or ``None`` for a first occurrence."""
    count: int
    """Occurrences of ``signature`` so far in this run, this one included."""
    consecutive: int
    """Length of the current back-to-back run of this ``signature``."""
    new_fact: bool
    round: int
    status: Status
    action: Action
    span_id: str | None = None


@dataclass(slots=True)
class Finding:
    """A stall report: what fired, where, and a message written for the model."""

    kind: Kind
    action: Action
    tool: str
    signature: str
    count: int
    first_seq: int
    seq: int
    round: int
    message: str
    onset_seq: int = 0
    """Where the stall began by this finding's evidence: its first call that brought nothing
    new (the first repeat, the second period of a cycle, the first repeated failure, the
    first round of a streak). 0: where it fired (a model call, a budget, a delegate)."""


@dataclass(frozen=True, slots=True)
class RunReport:
    """Everything the detector knows about one run: verdict, findings and the ledger."""

    run_key: RunKey
    verdict: Verdict
    stall_score: float
    tool_calls: int
    rounds: int
    findings: tuple[Finding, ...] = ()
    """Every finding, or the newest the detector keeps (the live processor bounds them)."""
    ledger: tuple[LedgerRow, ...] = ()
    """Every row, or the newest the detector keeps; ``tool_calls`` counts them all."""
    attributes: dict[str, Any] = field(default_factory=dict)
    """Free-form context from the edge (trace id, agent name); the detector ignores it."""
    wasted_calls: int | None = None
    """Tool calls from the stall's onset to the run's end, the onset call included;
    ``None`` for a run that never stalled. The onset is :attr:`Finding.onset_seq` of the
    finding that first raised the verdict to ``warn`` or above."""
    wasted_tokens: int | None = None
    """Model tokens (input and output) of the model calls after the onset; ``None`` when
    none were captured."""
    wasted_seconds: float | None = None
    """Wall time from the onset call's start to the run's last call's end; ``None`` without
    a stall."""
    wasted_model_calls: int | None = None
    """Model calls that ended after the onset call started; ``None`` without a stall."""
    onset_seq: int | None = None
    """The seq of the call the stall began at (one past the last tool call when it began at
    a model call after it); ``None`` without a stall."""

    @property
    def detected(self) -> bool:
        """Whether any rule fired: what tail sampling keeps."""
        return bool(self.findings)
