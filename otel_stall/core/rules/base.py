"""What every rule shares: a call's facts, the open round, a streak, and the hooks.

A rule is a class with ``__slots__`` holding its own state, its ``kind``, its
guidance message and the thresholds it reads from :class:`StallPolicy`. The
detector (:class:`~otel_stall.core.detector.RunDetector`) works out a call's
:class:`Facts` once and hands them to each rule's :meth:`Rule.on_call`, in the
order of :data:`otel_stall.core.rules.RULES`; that order is the order of the
findings. A rule overrides only the hooks it needs: the detector calls a hook
only on the rules that define it, so a hook a rule leaves alone costs nothing.

Guidance is written for the model, not for an operator: a bare code makes a
model give up ("blocked" reads as "impossible"), so each message says what is
already known and what to do next.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar, Final

from otel_stall.core.records import (
    ACTION_SEVERITY,
    Action,
    Finding,
    Kind,
    LedgerRow,
    ModelCall,
    Status,
    ToolCall,
    Verdict,
)
from otel_stall.core.signing import Content, Digests

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy

# Enum members that every tool call compares with, read once here. On CPython 3.11
# reading a member from its class (``Status.OK``) goes through ``EnumType.__getattr__``'s
# hook, about 1,000 instructions against 150 for a module global; a call compares about
# fifteen. Read from their classes they made the detector's own work per call (digests
# given) 2.2 times as costly (``bench/bench_detector.py --callgrind``). Members read only
# when a rule fires are read from their class.
OK: Final = Status.OK
ERROR: Final = Status.ERROR
REFUSED: Final = Status.REFUSED
OVERLOADED: Final = Status.OVERLOADED
PRESENT: Final = Content.PRESENT
KNOWN: Final = (Content.PRESENT, Content.EMPTY)
"""What :attr:`Content.known` accepts: content that has a digest to compare."""
CONTINUE: Final = Action.CONTINUE
WARN_SEVERITY: Final = ACTION_SEVERITY[Action.WARN]

SLOT_BYTES: Final = 8
"""Bytes of one slot (a pointer) of a rule's object, for :meth:`Rule.nbytes`."""
ENTRY_BYTES: Final = 120
"""Estimated bytes of one entry of a ``str -> int`` dict of 16-character hex digests: the
key string (65), its slot in the dict's tables (about 40 at a typical fill) and a share
of small ints (measured with tracemalloc on 10,000 entries: 118)."""


class Streak:
    """A counter of consecutive no-progress steps, where it started and where it repeated."""

    __slots__ = ("count", "first_seq", "second_seq")

    def __init__(self) -> None:
        self.count = 0
        self.first_seq = 0
        self.second_seq = 0
        """The second step's seq: a failure loop's first repeated failure, its onset."""

    def bump(self, seq: int) -> int:
        """Count one more step at ``seq``; return the streak's length."""
        count = self.count
        if count == 0:
            self.first_seq = seq
        elif count == 1:
            self.second_seq = seq
        self.count = count + 1
        return count + 1

    def reset(self) -> None:
        """End the streak: the next step starts a new one."""
        self.count = 0


class Round:
    """The open round: what the round-level rules read when it closes."""

    __slots__ = ("first_seq", "last", "new_fact", "number", "overloaded", "ran", "stale")

    def __init__(self, number: int) -> None:
        self.number = number
        self.first_seq = 0
        """The seq of its first tool call."""
        self.last: LedgerRow | None = None
        """Its latest row; ``None`` while it has no tool call."""
        self.ran = False
        """Whether any of its calls ran (was not refused)."""
        self.new_fact = False
        self.stale = False
        """Whether a call in it ran, did not fail with an error, and brought nothing new."""
        self.overloaded = False
        """Whether an overloaded call in it came off the call budget: it extends the round
        limit."""

    def add(self, row: LedgerRow) -> None:
        """Count one tool call's row in the round."""
        if self.last is None:
            self.first_seq = row.seq
        self.last = row
        if row.status is not REFUSED:
            self.ran = True
            if row.new_fact:
                self.new_fact = True
            elif row.status is not ERROR:
                self.stale = True


class Facts:
    """One tool call's facts, worked out once by the detector and read by every rule.

    One object per run, filled in for each call (building one per call cost about
    2k instructions more, ``bench/detector_instructions.py``): a rule reads it
    during its hook and keeps no reference to it.
    """

    __slots__ = (
        "approval",
        "call",
        "consecutive",
        "count",
        "digests",
        "exempt",
        "new_fact",
        "repeat_of",
        "round",
        "same",
        "seq",
        "signature",
    )

    def __init__(self, current: Round) -> None:
        self.call: ToolCall = _NO_CALL
        self.digests: Digests = _NO_DIGESTS
        self.seq = 0
        """The call's number in the run, from 1."""
        self.round = current
        self.signature: str | None = None
        """The full signature where it tells calls apart (:attr:`Digests.comparable`)."""
        self.repeat_of: int | None = None
        """The seq of the signature's first occurrence, on a repeat."""
        self.count = 1
        """Occurrences of the signature so far, this one included."""
        self.consecutive = 1
        """Calls in a row, this one included, with this signature."""
        self.same = 1
        """Calls in a row, this one included, with this tool and these arguments."""
        self.exempt = False
        """Exempt by the call's flag or the policy: repeats by protocol."""
        self.approval = False
        """An approval tool: every result of it is a new fact."""
        self.new_fact = True
        """Whether the call brought a fact not seen before in the run."""


_NO_CALL: Final = ToolCall("")
_NO_DIGESTS: Final = Digests("", None, "", Content.ABSENT, Content.ABSENT)


class Rule:
    """One detection rule: its state, kind, message and thresholds. Hooks default to no-ops.

    Subclasses set ``kind`` and ``__slots__`` and override the hooks they need.
    """

    __slots__ = ("policy",)
    kind: ClassVar[Kind]

    def __init__(self, policy: StallPolicy) -> None:
        self.policy = policy

    @classmethod
    def enabled(cls, policy: StallPolicy) -> bool:
        """Whether a run under ``policy`` has this rule at all (a rule off costs nothing)."""
        return True

    def __init_subclass__(cls) -> None:
        """Give the class its :meth:`on_repeated`: what a repeated call asks of it."""
        super().__init_subclass__()
        if cls.on_repeat is not Rule.on_repeat:
            if cls.on_call is not Rule.on_call:
                raise TypeError(f"{cls.__name__}: define on_call or on_repeat, not both")
            cls.on_repeated = cls.on_repeat  # type: ignore[method-assign]
        else:
            cls.on_repeated = cls.on_call  # type: ignore[method-assign]

    def on_repeated(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """What a repeated call asks of the rule: its ``on_repeat``, else its ``on_call``."""
        return state

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """A tool call: add findings to ``findings``; return the row's state so far."""
        return state

    def on_repeat(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """A tool call whose full signature occurred before, after every rule's ``on_call``.

        Most calls are no repeat: a rule that only judges repeats costs them nothing.
        """
        return state

    def gate(
        self, tool: str, call_signature: str, seq: int, number: int, run: RunDetector
    ) -> Finding | None:
        """The live gate: a refusal if running the call now would repeat in vain."""
        return None

    def refine_novelty(self, digests: Digests, run: RunDetector) -> bool:
        """Whether a result seen for the first time (by its digest) is still new by this rule.

        Asked only for results whose digest is new; ``False`` makes it no new fact.
        """
        return True

    def on_round_open(self, run: RunDetector) -> Finding | None:
        """A round opened (``run.rounds`` is its number)."""
        return None

    def on_round_close(self, closed: Round, last: LedgerRow, run: RunDetector) -> Finding | None:
        """A round that had tool calls closed; ``last`` is its last row."""
        return None

    def on_model_end(self, call: ModelCall, run: RunDetector) -> Finding | None:
        """A model call ended (its outcome, its output's digest and chanting scan)."""
        return None

    def on_delegate(self, agent: str | None, verdict: Verdict, run: RunDetector) -> Finding | None:
        """A sub-agent run this run spawned ended with ``verdict``."""
        return None

    def forget(self, memory: int, run: RunDetector) -> None:
        """Forget state older than the newest ``memory`` calls (see the detector's bound)."""

    def nbytes(self) -> int:
        """Estimated bytes of the rule's state, for the run's byte estimate."""
        return SLOT_BYTES * (len(self.__slots__) + len(Rule.__slots__)) + 16


def severer(action: Action, other: Action) -> Action:
    """The more severe of two actions (the first of equals)."""
    return other if ACTION_SEVERITY[other] > ACTION_SEVERITY[action] else action


def repeat_state(policy: StallPolicy, tool: str, consecutive: int) -> Action:
    """What ``consecutive`` identical calls of ``tool`` amount to, by its thresholds."""
    warn_at, break_at = policy.thresholds_for(tool)
    if consecutive >= break_at:
        return Action.BREAK
    if consecutive >= warn_at:
        return Action.WARN
    return CONTINUE


def streak_finding(
    kind: Kind,
    action: Action,
    tool: str,
    signature: str,
    streak: Streak,
    seq: int,
    number: int,
    message: str,
    onset_seq: int = 0,
) -> Finding:
    """A finding over ``streak``: its count and first call, up to call ``seq``, in a round."""
    return Finding(
        kind,
        action,
        tool,
        signature,
        streak.count,
        streak.first_seq,
        seq,
        number,
        message,
        onset_seq,
    )


def round_finding(
    kind: Kind, streak: Streak, closed: Round, last: LedgerRow, message: str
) -> Finding:
    """A round-level rule's break, reported at the round's last call."""
    return Finding(
        kind,
        Action.BREAK,
        last.tool,
        last.signature,
        streak.count,
        streak.first_seq,
        last.seq,
        closed.number,
        message,
        streak.first_seq,  # the stall began with the streak's first round
    )


def newest(entries: dict[str, Any], count: int) -> dict[str, Any]:
    """The ``count`` most recently inserted entries (a new dict when some are dropped)."""
    excess = len(entries) - count
    if excess <= 0:
        return entries
    return dict(islice(entries.items(), excess, None))
