"""One run's state machine: tool calls in, ledger rows, findings and a verdict out.

The detector knows nothing of OpenTelemetry. It is fed :class:`ToolCall` and
:class:`ModelCall` records in the order the agent made them, by the live
processor, the replay and the gateway alike.

Rounds: a model call plus the tool calls after it. A run that has no model
calls treats each tool call as its own round. Round-level rules (no new facts,
all calls refused, round budget) are evaluated when a round closes: at the
next model call, or at :meth:`RunDetector.finish`.

Each rule is one method. :meth:`RunDetector.tool_call` works out a call's
facts once (its signature if it can be compared, how often and how many times
in a row it occurred, whether it brought a new fact), then hands them to the
call-level rules in a fixed order, which is the order of their findings:
``repeat``, ``duplicate_call``, ``failures``, the call budget.
:meth:`RunDetector._close_round` runs the round-level rules.

Every unclear case leans toward "new fact" and "continue": a loop that runs a
little longer is still stopped by failures and budgets, while a healthy run
that was wrongly cut off cannot be brought back.

Deliberate decisions, in rule order:

- ``repeat`` counts back-to-back identical *full* signatures, and only for
  calls with status ``ok`` whose arguments and result were both captured and
  fingerprinted (:attr:`Digests.comparable`). Failed calls escalate through
  ``failures`` instead (a failing tool is escalated, not retried), and calls
  without content cannot be told apart, so they are never repeats (nor do they
  raise the stall score).
  Approval tools are still subject to it: the same side effect five times with
  the same answer is a loop. Apart, ``warn_at`` identical signatures within
  ``repeat_window`` calls warn (never break), whatever ran between, unless an
  exempt or approval tool ran since (it may have changed what a read returns).
- ``duplicate_call`` needs known arguments: two calls whose arguments were not
  captured may well differ. Only calls that ran and succeeded are "already
  executed": retrying after an error or an overload is legitimate. Exempt and
  approval tools are left out (an approval tool's repeat is a new side effect).
  A call recorded with status ``refused`` that is a duplicate still yields the
  ``duplicate_call`` finding, so a run refused by the live gate and the same
  run replayed from its spans report the same thing. A call that already ran
  in the same round (a batch run one call after another) counts too: by the
  time the model reads the refusal, the earlier result is beside it.
- Novelty, for ``no_new_facts``: a refused or overloaded call brought nothing;
  an exempt or approval tool's result, and a result that is empty, was not
  captured or could not be fingerprinted, always counts as new. A round with
  one new fact anywhere is progress; a round in which every call was refused
  counts toward ``refused_rounds`` instead and leaves the no-new-facts streak
  as it is. So does a round whose calls all failed with an error seen before:
  errors are the failure rules' evidence, and a tool that gives one generic
  error text for every failure is broken (escalate), not done (break). An
  overloaded call returned nothing at all: it still counts as no new fact.
- ``failures`` counts per tool: ``error`` and ``overloaded`` extend the tool's
  streak, only that tool's success resets it, and a refused call does neither.
- Budgets: refused calls did not run and cost nothing; the first
  ``overloaded_allowance`` overloaded calls do not count against
  ``max_tool_calls``, and each round that had one extends ``max_rounds`` by one.
  The call and round budgets fire once between them.
- Findings fire once, when a threshold is crossed; a streak that goes on does
  not fire again until it has reset. A row's ``action`` reflects the state at
  that row (the 6th back-to-back repeat still says ``break``). Round-level
  findings (``no_new_facts``, ``refused_rounds``, the round budget) fire when
  the round closes; a row, once returned, is never rewritten, so that the live
  processor and the replay attach identical attributes. In a run without model
  calls each tool call closes its own round, so its row carries the action.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Final

from otel_stall.core import chanting, messages
from otel_stall.core.chanting import NO_CHUNKS, ChantScan, Stretch
from otel_stall.core.policy import DuplicateMode, StallPolicy
from otel_stall.core.records import (
    ABSENT,
    ACTION_SEVERITY,
    Action,
    Event,
    Finding,
    Kind,
    LedgerRow,
    ModelCall,
    RunKey,
    RunReport,
    Status,
    ToolCall,
    Verdict,
)
from otel_stall.core.signing import Content, Digests

# Enum members that every tool call compares with, read once here. On CPython 3.11
# reading a member from its class (``Status.OK``) goes through ``EnumType.__getattr__``'s
# hook, about 1,000 instructions against 150 for a module global; a call compares about
# fifteen (``Digests.comparable`` alone reads four, hence ``_KNOWN``). Read from their
# classes they made the detector's own work per call (digests given) 2.2 times as
# costly, and a whole call (signing included) 40% more (``bench/bench_detector.py
# --callgrind``). Members read only when a rule fires are read from their class.
_OK: Final = Status.OK
_ERROR: Final = Status.ERROR
_REFUSED: Final = Status.REFUSED
_OVERLOADED: Final = Status.OVERLOADED
_PRESENT: Final = Content.PRESENT
_KNOWN: Final = (Content.PRESENT, Content.EMPTY)
"""What :attr:`Content.known` accepts: content that has a digest to compare."""
_CONTINUE: Final = Action.CONTINUE
_RUN_MODE: Final = DuplicateMode.RUN
_REFUSE: Final = Action.REFUSE
_WARN_SEVERITY: Final = ACTION_SEVERITY[Action.WARN]
_LOOP_KINDS: Final = (Kind.REPEAT, Kind.CYCLE)


@dataclass(slots=True)
class Observation:
    """What one tool call produced: its ledger row and any findings it fired."""

    row: LedgerRow
    findings: tuple[Finding, ...] = ()


@dataclass(slots=True)
class _Streak:
    """A counter of consecutive no-progress steps and where it started."""

    count: int = 0
    first_seq: int = 0

    def bump(self, seq: int) -> int:
        if self.count == 0:
            self.first_seq = seq
        self.count += 1
        return self.count

    def reset(self) -> None:
        self.count = 0


@dataclass(slots=True)
class _Round:
    """The open round: what the round-level rules read when it closes."""

    number: int
    first_seq: int = 0
    """The seq of its first tool call."""
    last: LedgerRow | None = None
    """Its latest row; ``None`` while it has no tool call."""
    ran: bool = False
    """Whether any of its calls ran (was not refused)."""
    new_fact: bool = False
    stale: bool = False
    """Whether a call in it ran, did not fail with an error, and brought nothing new."""
    overloaded: bool = False
    """Whether an overloaded call in it came off the call budget: it extends the round limit."""

    def add(self, row: LedgerRow) -> None:
        """Count one tool call's row in the round."""
        if self.last is None:
            self.first_seq = row.seq
        self.last = row
        if row.status is not _REFUSED:
            self.ran = True
            if row.new_fact:
                self.new_fact = True
            elif row.status is not _ERROR:
                self.stale = True


@dataclass(slots=True)
class RunDetector:
    """Detects stalls in one run. Not thread-safe: callers serialise per run.

    ``keep`` bounds what the run's report carries: the newest ``keep`` ledger
    rows and findings (``None``: all of them, as the replay needs to enrich
    every span). Counts, the stall score and the verdict always cover the whole
    run, and the latest finding of each action stays in the report. With a
    bound, and the policy's ``max_remembered_calls``, a run that never ends (a
    loop nobody stops) holds a fixed amount of memory.
    """

    policy: StallPolicy = field(default_factory=StallPolicy)
    run_key: RunKey = None
    keep: int | None = None
    _rows: deque[LedgerRow] = field(init=False)
    _findings: deque[Finding] = field(init=False)
    _calls: int = field(default=0, init=False)
    """Tool calls so far: the seq of the last one."""
    _rounds: int = field(default=0, init=False)
    """Rounds opened so far: the number of the last one."""
    _round: _Round | None = field(default=None, init=False)
    _model_driven: bool = field(default=False, init=False)
    # The ledger's counts. Plain ints in the four signature dicts, not [first, count]
    # pairs: a pair is one more object for the garbage collector to track and
    # traverse, for every call of the run.
    _first_seen: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> seq of its first occurrence."""
    _occurrences: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> occurrences, for those seen more than once."""
    _repeats: int = field(default=0, init=False)
    """Calls that repeated an earlier full signature, for the stall score."""
    _recurring: dict[str, tuple[int, ...] | None] = field(default_factory=dict, init=False)
    """Repeated full signature -> seqs of its latest occurrences (``None``: reported)."""
    _last_signature: str | None = field(default=None, init=False)
    _consecutive: int = field(default=0, init=False)
    # repeat
    _repeat_fired: Action = field(default=_CONTINUE, init=False)
    """The most severe repeat finding of the current streak."""
    # duplicate_call
    _executed: dict[str, int] = field(default_factory=dict, init=False)
    """Call signature -> seq of the first call that ran and succeeded."""
    _executions: dict[str, int] = field(default_factory=dict, init=False)
    """Call signature -> occurrences, for executed calls made again."""
    _last_call: str | None = field(default=None, init=False)
    _call_consecutive: int = field(default=0, init=False)
    # no_new_facts and refused_rounds
    _fingerprints: dict[str, None] = field(default_factory=dict, init=False)
    """Result digests seen (a dict, not a set: it is forgotten oldest first)."""
    _items: dict[str, None] = field(default_factory=dict, init=False)
    """Digests of list items seen in results (item novelty), forgotten as the results are."""
    _no_new_facts: _Streak = field(default_factory=_Streak, init=False)
    _refused: _Streak = field(default_factory=_Streak, init=False)
    # failures
    _failing: dict[str, _Streak] = field(default_factory=dict, init=False)
    """Tool -> its current failure streak."""
    # failure_loop: the same call failing the same way in a row
    _failed_call: str | None = field(default=None, init=False)
    """Call signature and error of the current failure loop's calls."""
    _failed_error: str | None = field(default=None, init=False)
    _failure_loop: _Streak = field(default_factory=_Streak, init=False)
    # model_failure_loop
    _model_error: str | None = field(default=None, init=False)
    _model_failing: _Streak = field(default_factory=_Streak, init=False)
    _model_overloads: int = field(default=0, init=False)
    """Overloaded model calls so far: the first ``overloaded_allowance`` are retries, not a loop."""
    # monologue: the model saying the same thing with no new fact between
    _said: str | None = field(default=None, init=False)
    _monologue: _Streak = field(default_factory=_Streak, init=False)
    _monologue_fired: Action = field(default=_CONTINUE, init=False)
    # chanting: at most one window of chunk hashes per run (core/chanting.py)
    _chant_carry: Stretch = field(default=NO_CHUNKS, init=False)
    """The last output's closing window of chunks, for the next output to continue."""
    _chant_calls: int = field(default=-1, init=False)
    """Tool calls so far when the carry was written: a tool call since ends it."""
    _chanting: bool = field(default=False, init=False)
    """Whether the last output chanted: a chant that goes on fires once."""
    # cycle: O(max_cycle_length) per run
    _ring: deque[str | None] = field(init=False)
    """The last ``max_cycle_length`` signatures (``None``: a call that cannot be compared)."""
    _cycle_runs: list[int] = field(init=False)
    """Index k: how many calls in a row matched the signature k calls before."""
    _cycle_fired: list[Action] = field(init=False)
    """Index k: the most severe finding of the current period-k cycle."""
    _cycling: bool = field(default=False, init=False)
    """Whether any of ``_cycle_runs`` is above 0."""
    _delegates_stalled: int = field(default=0, init=False)
    """Sub-agent runs of this run that ended at warn or above."""
    # wasted cost: from the first finding at warn or above to the run's end
    _onset_ns: int | None = field(default=None, init=False)
    _wasted_calls: int = field(default=0, init=False)
    _wasted_tokens: int | None = field(default=None, init=False)
    _end_ns: int = field(default=0, init=False)
    """The latest end of any call so far: the run's end, for the wasted time."""
    _now_ns: int = field(default=0, init=False)
    """When the event being fed happened: a stall that starts with it starts then."""
    # budgets
    _budget_calls: int = field(default=0, init=False)
    _overloaded_exempted: int = field(default=0, init=False)
    _overloaded_rounds: int = field(default=0, init=False)
    _budget_fired: bool = field(default=False, init=False)
    # findings and verdict
    _fired: int = field(default=0, init=False)
    """Findings so far."""
    _latest: dict[Action, tuple[int, Finding]] = field(default_factory=dict, init=False)
    """The latest finding of each action, numbered as they fired: the report keeps
    them when ``keep`` drops them, so the run's worst finding stays in it."""
    _worst: Action = field(default=_CONTINUE, init=False)
    """The most severe action of any finding so far: it makes the verdict."""

    def __post_init__(self) -> None:
        self._rows = deque(maxlen=self.keep)
        self._findings = deque(maxlen=self.keep)
        length = self.policy.max_cycle_length
        self._ring = deque([None] * length, maxlen=length)
        self._cycle_runs = [0] * (length + 1)
        self._cycle_fired = [_CONTINUE] * (length + 1)

    # -- feeding -------------------------------------------------------------

    def feed(self, event: Event) -> tuple[Finding, ...]:
        """Feed any event; return the findings it fired."""
        if isinstance(event, ModelCall):
            return self.model_call(event) + self.model_ended(event)
        return self.tool_call(event).findings

    def model_call(self, call: ModelCall | None = None) -> tuple[Finding, ...]:
        """A model call, as it starts, closes the current round and opens the next.

        Its outcome is known only when it ends: :meth:`model_ended`.
        """
        if call is not None:
            self._now_ns = call.start_ns
        findings = self._close_round()
        self._model_driven = True
        findings += self._open_round()
        if findings:  # most model calls fire nothing
            self._record(findings)
        return findings

    def model_ended(self, call: ModelCall) -> tuple[Finding, ...]:
        """A model call's outcome: its failure (model failure loop) and tokens (wasted cost).

        Fed when the call ends, in the order calls end, after :meth:`model_call`.
        """
        self._count_model_call(call)
        findings: tuple[Finding, ...] = ()
        if call.status is not _OK or self._model_failing.count:
            findings = self._model_failure_loop(call)
        if call.output is not None:
            findings += self._monologue_rule(call, call.output)
        if call.chant is not None and self.policy.chanting:
            findings += self._chanting_rule(call, call.chant)
        elif self._chant_carry:
            self._chant_carry = NO_CHUNKS  # an output not read: the next cannot continue it
        if findings:
            self._record(findings)
        return findings

    def delegate_ended(
        self, agent: str | None, verdict: Verdict, end_ns: int
    ) -> tuple[Finding, ...]:
        """A sub-agent run this run spawned ended: ``delegate_stalled`` if it stalled.

        A delegate that ended at ``warn`` or above went round in circles; the
        parent that handed it the task is stuck too unless it re-plans (OpenHands
        calls the parent stuck). Warns, once per stalled delegate. Fed when the
        child run ends, in time order among this run's calls: live, the
        child's run span ends before the parent's; replay and the gateway order
        it by the child's end.
        """
        self._now_ns = end_ns
        self._end_ns = max(self._end_ns, end_ns)
        if verdict.severity < Verdict.WARN.severity:
            return ()
        self._delegates_stalled += 1
        name = agent or "a sub-agent"
        finding = Finding(
            Kind.DELEGATE_STALLED,
            Action.WARN,
            name,
            "",
            self._delegates_stalled,
            self._calls,
            self._calls,
            self._round_number(),
            messages.delegate_stalled(name, verdict.value),
        )
        self._record((finding,))
        return (finding,)

    def tool_call(self, call: ToolCall, digests: Digests | None = None) -> Observation:
        """Record one tool call; ``digests`` may be computed beforehand, outside any lock.

        Works out the call's facts once, then runs the call-level rules in
        their fixed order; the row carries the most severe action among them.
        """
        findings, current = self._round_for_call()
        if digests is None:
            digests = self.policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        seq = self._next_seq()
        exempt = call.exempt or self.policy.is_exempt(call.tool)
        approval = call.approval or self.policy.needs_approval(call.tool)
        # The full signature only where it tells calls apart: see Digests.comparable.
        comparable = digests.arguments in _KNOWN and digests.result in _KNOWN
        signature = digests.signature if comparable else None
        repeat_of, count = self._occurrence(signature, seq)
        consecutive = self._back_to_back(signature)
        same = self._same_call_in_a_row(digests.call_signature)
        new_fact = self._novelty(call.status, digests, exempt or approval)

        # The run's clock and, after a stall's onset, one more wasted call: inline, as
        # every call pays for it (a method call costs more than these lines).
        end = self._now_ns = call.end_ns
        if end > self._end_ns:  # noqa: PLR1730 - a compare is cheaper than max()
            self._end_ns = end
        if self._onset_ns is not None:
            self._wasted_calls += 1
        if new_fact and self._monologue.count:
            self._monologue.reset()  # a new fact between two messages: not a monologue
        state = self._repeat(call, signature, seq, consecutive, exempt, findings)
        if call.status is not _REFUSED:  # a refusal is the gate's act: not part of a cycle
            # An exempt or approval tool's result is always new: it ends any cycle.
            looped = None if exempt or approval else signature
            if looped is None or repeat_of is None:  # cannot continue a cycle: the common case
                self._ring.append(looped)
                if self._cycling:
                    self._end_cycles()
                if looped is None and self._recurring and (exempt or approval):
                    self._recurring.clear()  # the world may have changed: reading again is new
            else:
                state = self._cycle_periods(call, looped, seq, state, findings)
                self._ring.append(looped)
                if call.status is _OK:
                    state = self._recurrence(call, looped, seq, repeat_of, state, findings)
        if not (exempt or approval):
            self._duplicate(call, digests, seq, same, findings)
        self._failures(call, digests, seq, findings)
        if call.status is _ERROR or self._failure_loop.count:
            self._failure_loop_rule(call, digests, seq, findings)
        self._budget(call, digests, seq, current, findings)

        row = LedgerRow(
            seq,
            call.tool,
            digests.signature,
            digests.call_signature,
            digests.result_digest,
            repeat_of,
            count,
            consecutive,
            new_fact,
            current.number,
            call.status,
            _worst(state, findings),
            call.span_id,
        )
        return self._add_row(row, current, findings)

    def check_call(
        self,
        tool: str,
        arguments: Any,
        *,
        exempt: bool = False,
        approval: bool = False,
        digests: Digests | None = None,
    ) -> Finding | None:
        """The live gate: a refusal if running ``tool(arguments)`` now would repeat in vain.

        That is a duplicate, or the next try of a call whose failure loop
        escalated. Does not change any state; the call is recorded when its span ends
        (with status ``refused`` if the caller followed the refusal, which then
        records the same finding). ``digests`` may come from :func:`gate_digests`
        beforehand, outside any lock; ``exempt`` and ``approval`` are then ignored.
        """
        policy = self.policy
        if digests is None:
            digests = gate_digests(policy, tool, arguments, exempt=exempt, approval=approval)
        if digests is None or not digests.arguments.known:
            return None
        seq = self._calls + 1
        number = self._round.number if self._round else self._rounds + 1
        call_signature = digests.call_signature
        if self._failure_loop.count:
            refusal = self._failure_loop_refusal(tool, call_signature, seq, number)
            if refusal is not None:
                return refusal
        if policy.duplicate_mode is DuplicateMode.RUN:
            first_seq = self._executed.get(call_signature)
            if first_seq is None:
                return None
            count = self._executions.get(call_signature, 1) + 1
            return _ran_before(tool, call_signature, count, first_seq, seq, number)
        same = self._in_a_row(call_signature)
        if same < policy.duplicate_consecutive_limit:
            return None
        return _in_a_row(tool, call_signature, same, seq, number)

    def finish(self) -> RunReport:
        """Close the last round and return the final report."""
        closing = self._close_round()
        if closing:
            self._record(closing)
        return self.report()

    # -- reading -------------------------------------------------------------

    @property
    def verdict(self) -> Verdict:
        """The most severe action among the stall evidence so far (refusals are not evidence)."""
        return Verdict.of(self._worst)

    @property
    def stall_score(self) -> float:
        """The verdict's quarter of [0, 1), placed in it by the share of repeated calls.

        The module's :func:`stall_score` over every call of the run (kept rows or not).
        """
        return _score(self.verdict, self._repeats, self._calls)

    @property
    def findings(self) -> tuple[Finding, ...]:
        """Every finding so far, in order (the newest ``keep``, after the latest of each action)."""
        window = self._findings
        dropped = self._fired - len(window)
        if not dropped:
            return tuple(window)
        older = sorted(kept for kept in self._latest.values() if kept[0] <= dropped)
        return (*(finding for _, finding in older), *window)

    @property
    def ledger(self) -> tuple[LedgerRow, ...]:
        """Every ledger row so far (the newest ``keep``), in order."""
        return tuple(self._rows)

    @property
    def finding_count(self) -> int:
        """Findings fired so far, kept or not."""
        return self._fired

    @property
    def rounds(self) -> int:
        """Rounds opened so far."""
        return self._rounds

    def report(self) -> RunReport:
        """A snapshot of the run: verdict, stall score, findings, ledger and wasted cost."""
        onset = self._onset_ns
        return RunReport(
            self.run_key,
            self.verdict,
            self.stall_score,
            self._calls,
            self._rounds,
            self.findings,
            tuple(self._rows),
            {},
            None if onset is None else self._wasted_calls,
            None if onset is None else self._wasted_tokens,
            None if onset is None else max(0, self._end_ns - onset) / 1e9,
        )

    # -- a tool call's facts ---------------------------------------------------

    def _round_for_call(self) -> tuple[list[Finding], _Round]:
        """The findings that opening the call's round fired, and the round.

        Without model calls each tool call is a round of its own, closed as the
        call is recorded: none is open, so one is opened for the call.
        """
        current = self._round
        if current is not None and self._model_driven:
            return [], current
        findings = [*self._close_round(), *self._open_round()]
        assert self._round is not None
        return findings, self._round

    def _next_seq(self) -> int:
        """Number the call; every ``max_remembered_calls`` calls, forget the oldest signatures."""
        seq = self._calls = self._calls + 1
        memory = self.policy.max_remembered_calls
        if memory is not None and seq > memory and (seq - 1) % memory == 0:
            self._forget(memory)
        return seq

    def _forget(self, memory: int) -> None:
        """Forget signatures older than the newest ``memory``.

        Bounds a long run's memory. Oldest means first seen (or first run): a call
        made again after that many others counts as new for the repeat,
        duplicate and novelty rules. Periodic rather than per insert, so that a
        call pays one comparison; the replay forgets at the same calls.
        """
        self._first_seen = _newest(self._first_seen, memory)
        self._executed = _newest(self._executed, memory)
        self._fingerprints = _newest(self._fingerprints, memory)
        self._items = _newest(self._items, memory)
        first_seen, executed = self._first_seen, self._executed
        self._occurrences = {k: v for k, v in self._occurrences.items() if k in first_seen}
        self._recurring = {k: v for k, v in self._recurring.items() if k in first_seen}
        self._executions = {k: v for k, v in self._executions.items() if k in executed}

    def _occurrence(self, signature: str | None, seq: int) -> tuple[int | None, int]:
        """The row's ``repeat_of`` and ``count``: the signature's first seq and its occurrences.

        ``signature`` is ``None`` for a call that cannot be compared: never a repeat.
        """
        if signature is None:
            return None, 1
        first = self._first_seen.setdefault(signature, seq)
        if first == seq:
            return None, 1
        count = self._occurrences[signature] = self._occurrences.get(signature, 1) + 1
        self._repeats += 1
        return first, count

    def _back_to_back(self, signature: str | None) -> int:
        """The row's ``consecutive``: calls in a row, this one included, with this signature."""
        again = signature is not None and signature == self._last_signature
        self._consecutive = self._consecutive + 1 if again else 1
        self._last_signature = signature
        return self._consecutive

    def _in_a_row(self, call_signature: str) -> int:
        """How many calls in a row would have ``call_signature`` with one more."""
        return self._call_consecutive + 1 if call_signature == self._last_call else 1

    def _same_call_in_a_row(self, call_signature: str) -> int:
        """Count the call in the run of identical tool-and-arguments calls; return its length."""
        same = self._in_a_row(call_signature)
        self._last_call, self._call_consecutive = call_signature, same
        return same

    def _novelty(self, status: Status, digests: Digests, always_new: bool) -> bool:
        """Whether the call brought a fact not seen before: its result's first occurrence.

        Unclear leans to yes: see the module's decisions.
        """
        if status is _REFUSED or status is _OVERLOADED:
            return False
        if always_new or digests.result is not _PRESENT:
            return True
        fingerprint = digests.result_digest
        assert fingerprint is not None
        if fingerprint in self._fingerprints:
            return False
        self._fingerprints[fingerprint] = None
        items = digests.items
        return True if not items else self._new_item(items)

    def _new_item(self, items: tuple[str, ...]) -> bool:
        """Item novelty: a list result is new only if it holds an item not seen in the run.

        Every item is remembered, so a later page that only overlaps is no news.
        """
        seen = self._items
        before = len(seen)
        seen.update(dict.fromkeys(items))  # in C: no Python loop over the items
        return len(seen) > before

    # -- call-level rules: each adds its findings to ``findings`` --------------

    def _repeat(
        self,
        call: ToolCall,
        signature: str | None,
        seq: int,
        consecutive: int,
        exempt: bool,
        findings: list[Finding],
    ) -> Action:
        """Back-to-back identical calls: warn (one re-plan) at ``warn_at``, break at ``break_at``.

        Returns the streak's state, which the row carries. Fires when a
        threshold is crossed rather than hit exactly, so a streak that began on
        calls exempt by their own flag still fires once.
        """
        if consecutive == 1:
            self._repeat_fired = _CONTINUE  # a new streak: it may fire again
        if signature is None or exempt or call.status is not _OK:
            return _CONTINUE
        state = self._repeat_state(call.tool, consecutive)
        if ACTION_SEVERITY[state] > ACTION_SEVERITY[self._repeat_fired]:
            self._repeat_fired = state
            first_seq = seq - consecutive + 1
            findings.append(
                Finding(
                    Kind.REPEAT,
                    state,
                    call.tool,
                    signature,
                    consecutive,
                    first_seq,
                    seq,
                    self._round_number(),
                    messages.repeat(call.tool, consecutive, first_seq, state),
                )
            )
        return state

    def _recurrence(
        self,
        call: ToolCall,
        signature: str,
        seq: int,
        first_seq: int,
        state: Action,
        findings: list[Finding],
    ) -> Action:
        """The repeat rule apart: ``warn_at`` identical calls within ``repeat_window`` warn.

        An identical call with an identical result brought nothing the first one
        did not, whatever ran between (``ls``, a scroll, ``ls``, a scroll, ``ls``),
        unless an exempt or approval tool ran since (it may have changed what a
        read returns, so the count starts again). Warns, never breaks: the
        back-to-back repeat, cycles and no-new-facts break. One loop is reported
        once: not where the repeat or a cycle reports it (the row's state, a
        whole period of a cycle under way, or their finding within the window),
        and once per signature. Only repeated signatures get here.
        """
        recurring = self._recurring
        before = recurring.get(signature, (first_seq,))
        if before is None or ACTION_SEVERITY[state] >= _WARN_SEVERITY:
            recurring[signature] = None  # reported, by this rule or another
            return state
        window = self.policy.repeat_window
        if window is None:
            return state  # off: only back-to-back repeats count
        warn_at = self.policy.thresholds_for(call.tool)[0]
        seqs = recurring[signature] = (*before, seq)[-warn_at:]
        if len(seqs) < warn_at or seq - seqs[0] >= window:
            return state
        recurring[signature] = None
        if self._loop_reported(seq, window):
            return state
        if self._consecutive > 1:
            self._repeat_fired = Action.WARN  # the same loop: its streak's warn is this one
        findings.append(
            Finding(
                Kind.REPEAT,
                Action.WARN,
                call.tool,
                signature,
                warn_at,
                seqs[0],
                seq,
                self._round_number(),
                messages.recurrence(call.tool, warn_at, seqs[0]),
            )
        )
        return Action.WARN

    def _loop_reported(self, seq: int, window: int) -> bool:
        """Whether a cycle is under way, or a repeat or cycle finding fired within the window."""
        runs = self._cycle_runs
        if any(runs[k] >= k for k in range(2, len(runs))):
            return True
        for action in (Action.WARN, Action.BREAK):
            latest = self._latest.get(action)
            if latest is None:
                continue
            finding = latest[1]
            if finding.kind in _LOOP_KINDS and seq - finding.seq < window:
                return True
        return False

    def _repeat_state(self, tool: str, consecutive: int) -> Action:
        """What ``consecutive`` identical calls of ``tool`` amount to, by its thresholds."""
        warn_at, break_at = self.policy.thresholds_for(tool)
        if consecutive >= break_at:
            return Action.BREAK
        if consecutive >= warn_at:
            return Action.WARN
        return _CONTINUE

    def _duplicate(
        self, call: ToolCall, digests: Digests, seq: int, same: int, findings: list[Finding]
    ) -> None:
        """``duplicate_call``: refuse a call that already ran, or the Nth same call in a row."""
        if digests.arguments not in _KNOWN:
            return
        mode = self.policy.duplicate_mode
        if mode is _RUN_MODE:
            self._already_ran(call, digests.call_signature, seq, findings)
        elif mode is DuplicateMode.CONSECUTIVE and same >= self.policy.duplicate_consecutive_limit:
            findings.append(
                _in_a_row(call.tool, digests.call_signature, same, seq, self._round_number())
            )

    def _already_ran(
        self, call: ToolCall, call_signature: str, seq: int, findings: list[Finding]
    ) -> None:
        """Run mode: refuse a call that already ran and succeeded; remember one succeeding now."""
        first_seq = self._executed.get(call_signature)
        if first_seq is None:
            if call.status is _OK:
                self._executed[call_signature] = seq
            return
        executions = self._executions
        count = executions[call_signature] = executions.get(call_signature, 1) + 1
        findings.append(
            _ran_before(call.tool, call_signature, count, first_seq, seq, self._round_number())
        )

    def _failures(
        self, call: ToolCall, digests: Digests, seq: int, findings: list[Finding]
    ) -> None:
        """One tool failing ``failure_limit`` times in a row escalates; its success resets it."""
        status = call.status
        if status is _OK:
            self._failing.pop(call.tool, None)
            return
        if status is not _ERROR and status is not _OVERLOADED:
            return
        streak = self._failing.setdefault(call.tool, _Streak())
        if streak.bump(seq) != self.policy.failure_limit:
            return
        message = messages.failures(call.tool, streak.count, streak.first_seq)
        findings.append(
            self._streak_finding(
                Kind.FAILURES, Action.ESCALATE, call.tool, digests.signature, streak, seq, message
            )
        )

    def _failure_loop_rule(
        self, call: ToolCall, digests: Digests, seq: int, findings: list[Finding]
    ) -> None:
        """The same call failing the same way ``failure_loop_at`` times in a row escalates.

        "The same way": the same error class where the source names one, else the
        same result (the error's text). A call whose arguments or error are unknown
        cannot be told apart from another, so it ends the loop (leans to continue).
        """
        streak = self._failure_loop
        error = call.error or digests.result_digest
        if call.status is not _ERROR or error is None or digests.arguments not in _KNOWN:
            if call.status is _REFUSED:
                self._failure_loop_refused(call, digests.call_signature, seq, findings)
            else:
                streak.reset()
            return
        if streak.count and (digests.call_signature, error) != (
            self._failed_call,
            self._failed_error,
        ):
            streak.reset()
        self._failed_call, self._failed_error = digests.call_signature, error
        if streak.bump(seq) != self.policy.failure_loop_at:
            return
        message = messages.failure_loop(call.tool, streak.count, streak.first_seq)
        findings.append(
            self._streak_finding(
                Kind.FAILURE_LOOP,
                Action.ESCALATE,
                call.tool,
                digests.call_signature,
                streak,
                seq,
                message,
            )
        )

    def _failure_loop_refused(
        self, call: ToolCall, call_signature: str, seq: int, findings: list[Finding]
    ) -> None:
        """A call the gate refused as the failure loop's next try: the gate's finding, again."""
        refusal = self._failure_loop_refusal(call.tool, call_signature, seq, self._round_number())
        if refusal is not None:
            findings.append(refusal)

    def _failure_loop_refusal(
        self, tool: str, call_signature: str, seq: int, number: int
    ) -> Finding | None:
        """A refusal of ``call_signature`` if it is the call of an escalated failure loop."""
        streak = self._failure_loop
        if streak.count < self.policy.failure_loop_at or call_signature != self._failed_call:
            return None
        return Finding(
            Kind.FAILURE_LOOP,
            Action.REFUSE,
            tool,
            call_signature,
            streak.count,
            streak.first_seq,
            seq,
            number,
            messages.failure_loop_refused(tool, streak.count, streak.first_seq),
        )

    def _monologue_rule(self, call: ModelCall, said: str) -> tuple[Finding, ...]:
        """The same assistant message again and again, with no new fact between.

        ``warn_at`` times warns, ``break_at`` times breaks, as repeats do. Only
        the normalised message's hash is compared; a tool call that brought a
        new fact starts the count again.
        """
        streak = self._monologue
        if not streak.count or said != self._said:
            streak.reset()
            self._said, self._monologue_fired = said, _CONTINUE
        count = streak.bump(self._calls)
        action = self._repeat_state("", count)
        if ACTION_SEVERITY[action] <= ACTION_SEVERITY[self._monologue_fired]:
            return ()
        self._monologue_fired = action
        model = call.model or "the model"
        message = messages.monologue(count, action)
        return (
            self._streak_finding(Kind.MONOLOGUE, action, model, said, streak, self._calls, message),
        )

    def _chanting_rule(self, call: ModelCall, scan: ChantScan) -> tuple[Finding, ...]:
        """A chunk of text repeated close together, in this output or carried over from the last.

        ``chant_repeats`` occurrences warn (never more: text alone is not a
        loop that costs tool calls; the other rules stop one). The last output's
        closing chunks count only when no tool call came between. A chant that
        goes on from output to output fires once; an output that does not chant
        ends it.
        """
        carry = self._chant_carry if self._chant_calls == self._calls else NO_CHUNKS
        peak, chunk = scan.peak, scan.chunk
        if carry and scan.head:
            joined, joined_chunk = chanting.across(carry, scan.head)
            if joined > peak:
                peak, chunk = joined, joined_chunk
        self._chant_carry = chanting.carried(carry, scan)
        self._chant_calls = self._calls
        if peak < self.policy.chant_repeats:
            self._chanting = False
            return ()
        if self._chanting:
            return ()
        self._chanting = True
        finding = Finding(
            Kind.CHANTING,
            Action.WARN,
            call.model or "the model",
            f"{chunk:016x}",
            peak,
            self._calls,
            self._calls,
            self._round_number(),
            messages.chanting(peak),
        )
        return (finding,)

    def _model_failure_loop(self, call: ModelCall) -> tuple[Finding, ...]:
        """The model failing the same way ``failure_loop_at`` times in a row escalates.

        The first ``overloaded_allowance`` overloaded model calls of a run are
        retries, not a loop: they neither count nor end the streak. A failure
        without a class or message cannot be compared: it ends the streak.
        """
        streak = self._model_failing
        if call.status is _OK or call.status is _REFUSED:
            streak.reset()
            return ()
        if call.status is _OVERLOADED and self._model_overloads < self.policy.overloaded_allowance:
            self._model_overloads += 1
            return ()
        error = call.error
        if error is None or (streak.count and error != self._model_error):
            streak.reset()
            if error is None:
                return ()
        self._model_error = error
        if streak.bump(self._calls) != self.policy.failure_loop_at:
            return ()
        model = call.model or "the model"
        message = messages.model_failure_loop(model, streak.count)
        return (
            self._streak_finding(
                Kind.MODEL_FAILURE_LOOP, Action.ESCALATE, model, "", streak, self._calls, message
            ),
        )

    def _end_cycles(self) -> None:
        """Every count of calls matching those k back restarts."""
        self._cycling = False
        runs, fired = self._cycle_runs, self._cycle_fired
        for k in range(len(runs)):
            runs[k] = 0
            fired[k] = _CONTINUE

    def _cycle_periods(
        self, call: ToolCall, signature: str, seq: int, state: Action, findings: list[Finding]
    ) -> Action:
        """Cycles: a sequence of 2 to ``max_cycle_length`` signatures repeating back to back.

        For each k, counts the calls in a row equal to the call k before (the
        ring holds the last calls; this one is not in it yet), and fires at full
        periods. Only a repeated signature gets here. Returns the row's state.
        """
        ring, runs, fired = self._ring, self._cycle_runs, self._cycle_fired
        size = len(ring)
        policy = self.policy
        cycling = False
        for k in range(2, size + 1):
            if ring[-k] != signature:
                runs[k] = 0
                fired[k] = _CONTINUE
                continue
            cycling = True
            matched = runs[k] = runs[k] + 1
            if matched < (policy.cycle_warn_at - 1) * k or not _primitive(ring, k, signature):
                continue
            periods = matched // k + 1
            action = Action.BREAK if periods >= policy.cycle_break_at else Action.WARN
            state = action if ACTION_SEVERITY[action] > ACTION_SEVERITY[state] else state
            if ACTION_SEVERITY[action] > ACTION_SEVERITY[fired[k]]:
                fired[k] = action
                first_seq = seq - matched - k + 1
                message = messages.cycle(k, periods, first_seq, action)
                findings.append(
                    Finding(
                        Kind.CYCLE,
                        action,
                        call.tool,
                        signature,
                        periods,
                        first_seq,
                        seq,
                        self._round_number(),
                        message,
                    )
                )
        self._cycling = cycling
        return state

    def _count_model_call(self, call: ModelCall) -> None:
        """The run's clock and, after a stall's onset, a wasted call and its tokens."""
        self._now_ns = call.end_ns
        self._end_ns = max(self._end_ns, call.end_ns)
        if self._onset_ns is None:
            return
        self._wasted_calls += 1
        tokens = call.input_tokens, call.output_tokens
        if tokens != (None, None):
            self._wasted_tokens = (self._wasted_tokens or 0) + sum(t or 0 for t in tokens)

    def _budget(
        self,
        call: ToolCall,
        digests: Digests,
        seq: int,
        current: _Round,
        findings: list[Finding],
    ) -> None:
        """``max_tool_calls``: the call that overspends it breaks, once (see the decisions)."""
        status = call.status
        if status is _REFUSED:
            return
        if status is _OVERLOADED and self._overloaded_exempted < self.policy.overloaded_allowance:
            self._overloaded_exempted += 1
            current.overloaded = True
            return
        self._budget_calls += 1
        limit = self.policy.max_tool_calls
        if limit is None or self._budget_fired or self._budget_calls <= limit:
            return
        self._budget_fired = True
        findings.append(
            Finding(
                Kind.BUDGET,
                Action.BREAK,
                call.tool,
                digests.signature,
                self._budget_calls,
                seq,
                seq,
                current.number,
                messages.call_budget(limit),
            )
        )

    def _add_row(self, row: LedgerRow, current: _Round, findings: list[Finding]) -> Observation:
        """Add the row to the ledger and its round, and record the call's findings.

        A round of its own (no model calls) closes here, before the row is
        returned: the row carries the round's outcome.
        """
        self._rows.append(row)
        current.add(row)
        if not self._model_driven:
            closing = self._close_round()
            if closing:
                findings += closing
                row = self._rows[-1] = replace(row, action=_worst(row.action, closing))
        if findings:
            self._record(findings)
        return Observation(row, tuple(findings))

    # -- rounds and round-level rules ------------------------------------------

    def _open_round(self) -> tuple[Finding, ...]:
        """Open the next round; the round budget breaks, once, on the first one past it."""
        self._rounds += 1
        self._round = _Round(self._rounds)
        limit = self.policy.max_rounds
        if limit is None or self._budget_fired:
            return ()
        allowed = limit + self._overloaded_rounds
        if self._rounds <= allowed:
            return ()
        self._budget_fired = True
        last = self._rows[-1] if self._rows else None
        finding = Finding(
            Kind.BUDGET,
            Action.BREAK,
            last.tool if last else "",
            last.signature if last else "",
            self._rounds,
            self._rounds,
            self._calls,
            self._rounds,
            messages.round_budget(allowed),
        )
        return (finding,)

    def _close_round(self) -> tuple[Finding, ...]:
        """Close the open round, if it had tool calls, through the round-level rules."""
        current, self._round = self._round, None
        if current is None or current.last is None:
            return ()
        if current.overloaded:
            self._overloaded_rounds += 1
        if current.ran:
            finding = self._no_new_facts_rule(current, current.last)
        else:
            finding = self._refused_rounds_rule(current, current.last)
        return () if finding is None else (finding,)

    def _no_new_facts_rule(self, current: _Round, last: LedgerRow) -> Finding | None:
        """``no_new_facts_limit`` rounds in a row whose calls ran but brought no new fact break.

        A round in which a call ran also ends a streak of refused rounds. A round
        whose calls all failed with errors seen before neither extends nor ends the
        streak: a failure is evidence for ``failures`` and ``failure_loop``, which
        escalate (report the broken tool) rather than break. A tool that answers
        every failure with one generic text would otherwise read as "no new facts".
        """
        self._refused.reset()
        streak = self._no_new_facts
        if current.new_fact:
            streak.reset()
            return None
        if not current.stale:
            return None  # only failures, already seen: the failure rules judge those
        limit = self.policy.no_new_facts_limit
        if streak.bump(current.first_seq) != limit:
            return None
        message = messages.no_new_facts(limit, streak.first_seq)
        return _round_finding(Kind.NO_NEW_FACTS, streak, current, last, message)

    def _refused_rounds_rule(self, current: _Round, last: LedgerRow) -> Finding | None:
        """``refused_rounds_limit`` rounds in a row in which every call was refused break."""
        limit = self.policy.refused_rounds_limit
        if self._refused.bump(current.first_seq) != limit:
            return None
        message = messages.refused_rounds(limit)
        return _round_finding(Kind.REFUSED_ROUNDS, self._refused, current, last, message)

    # -- helpers -------------------------------------------------------------

    def _streak_finding(
        self,
        kind: Kind,
        action: Action,
        tool: str,
        signature: str,
        streak: _Streak,
        seq: int,
        message: str,
    ) -> Finding:
        """A finding over ``streak``: its count and first call, up to call ``seq``, this round."""
        return Finding(
            kind,
            action,
            tool,
            signature,
            streak.count,
            streak.first_seq,
            seq,
            self._round_number(),
            message,
        )

    def _round_number(self) -> int:
        return self._round.number if self._round else self._rounds

    def _record(self, findings: Sequence[Finding]) -> None:
        """Keep the findings, numbered, and the latest of each action; track the worst action.

        A refusal (``duplicate_call``, a failure loop's gate) is what the gate did, not
        evidence of a stall: it stays out of the verdict.
        """
        for finding in findings:
            self._findings.append(finding)
            self._fired += 1
            self._latest[finding.action] = (self._fired, finding)
            if finding.action is not _REFUSE:
                self._worst = _worst(self._worst, (finding,))
        if self._onset_ns is None and ACTION_SEVERITY[self._worst] >= _WARN_SEVERITY:
            self._onset_ns = self._now_ns


def gate_digests(
    policy: StallPolicy, tool: str, arguments: Any, *, exempt: bool = False, approval: bool = False
) -> Digests | None:
    """What the live gate compares: the call signed before it has a result.

    ``None`` when the gate never refuses the call: the duplicate rule is off, or
    the tool is exempt or needs approval. Touches no run state, so the caller may
    sign outside any lock (signing reads the caller's objects: its code).
    """
    if exempt or approval or policy.duplicate_mode is DuplicateMode.OFF:
        return None
    if policy.is_exempt(tool) or policy.needs_approval(tool):
        return None
    return policy.signer.sign(tool, arguments, ABSENT, Status.OK)


def _ran_before(
    tool: str, call_signature: str, count: int, first_seq: int, seq: int, number: int
) -> Finding:
    """The run-mode refusal: the gate's and the ledger's are the same finding."""
    return Finding(
        Kind.DUPLICATE_CALL,
        Action.REFUSE,
        tool,
        call_signature,
        count,
        first_seq,
        seq,
        number,
        messages.duplicate(tool, first_seq),
    )


def _in_a_row(tool: str, call_signature: str, same: int, seq: int, number: int) -> Finding:
    """The consecutive-mode refusal: the gate's and the ledger's are the same finding."""
    return Finding(
        Kind.DUPLICATE_CALL,
        Action.REFUSE,
        tool,
        call_signature,
        same,
        seq - same + 1,
        seq,
        number,
        messages.duplicate_in_a_row(tool, same),
    )


def _round_finding(
    kind: Kind, streak: _Streak, current: _Round, last: LedgerRow, message: str
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
        current.number,
        message,
    )


def _worst(action: Action, findings: Iterable[Finding]) -> Action:
    """The most severe of ``action`` and the findings' actions (the first of equals)."""
    for finding in findings:
        if ACTION_SEVERITY[finding.action] > ACTION_SEVERITY[action]:
            action = finding.action
    return action


def _primitive(ring: deque[str | None], k: int, signature: str) -> bool:
    """Whether the last k signatures (the newest not stored yet) repeat no shorter period.

    A period-4 match of A B A B is the 2-cycle's, and k identical calls are the
    repeat rule's: one loop is reported once.
    """
    block = [ring[i - k] for i in range(1, k)] + [signature]
    for d in range(1, k):
        if k % d == 0 and all(block[i] == block[i - d] for i in range(d, k)):
            return False
    return True


def _newest(entries: dict[str, Any], count: int) -> dict[str, Any]:
    """The ``count`` most recently inserted entries (a new dict when some are dropped)."""
    excess = len(entries) - count
    if excess <= 0:
        return entries
    return dict(islice(entries.items(), excess, None))


def stall_score(rows: Iterable[LedgerRow], verdict: Verdict) -> float:
    """The run report's ``stall.score``, from a run's ledger rows and its verdict.

    ``(severity + repeats / rows) / 4``, severity 0 (ok) to 3 (break), repeats
    the rows that repeat an earlier full signature: each verdict has its
    quarter of [0, 1), so a ``break`` never scores below a ``warn``, and within
    one verdict a run that repeated more scores higher. The verdict is an
    argument because rows alone do not carry it (round-level findings fire
    after their rows are returned). One definition with
    :attr:`RunDetector.stall_score`, which counts the whole run's rows.
    """
    total = repeats = 0
    for row in rows:
        total += 1
        repeats += row.repeat_of is not None
    return _score(verdict, repeats, total)


def _score(verdict: Verdict, repeats: int, calls: int) -> float:
    """The stall score's one formula: see :func:`stall_score`."""
    share = repeats / calls if calls else 0.0
    return (verdict.severity + share) / 4


def detect(events: Iterable[Event], policy: StallPolicy | None = None) -> list[RunReport]:
    """Run the detector over events of any number of runs, grouped by ``run_key``.

    Events must be in the order the agent made them within each run; runs may
    interleave. Reports come back in the order each run was first seen.
    """
    policy = policy or StallPolicy()
    runs: dict[RunKey, RunDetector] = {}
    for event in events:
        detector = runs.get(event.run_key)
        if detector is None:
            detector = runs[event.run_key] = RunDetector(policy, event.run_key)
        detector.feed(event)
    return [d.finish() for d in runs.values()]
