"""One run's state machine: tool calls in, ledger rows, findings and a verdict out.

The detector knows nothing of OpenTelemetry. It is fed :class:`ToolCall` and
:class:`ModelCall` records in the order the agent made them, by the live
processor, the replay and the gateway alike.

Rounds: a model call plus the tool calls after it. A run that has no model
calls treats each tool call as its own round. Round-level rules (no new facts,
all calls refused, round budget) are evaluated when a round closes: at the
next model call, or at :meth:`RunDetector.finish`.

Every unclear case leans toward "new fact" and "continue": a loop that runs a
little longer is still stopped by failures and budgets, while a healthy run
that was wrongly cut off cannot be brought back.

Deliberate decisions, in rule order:

- ``repeat`` counts back-to-back identical *full* signatures, and only for
  calls with status ``ok`` whose arguments and result were both captured and
  fingerprinted (:attr:`Digests.comparable`). Failed calls escalate through
  ``failures`` instead (reference 000), and calls without content cannot be
  told apart, so they are never repeats (nor do they raise the stall score).
  Approval tools are still subject to it: the same side effect five times with
  the same answer is a loop.
- ``duplicate_call`` needs known arguments: two calls whose arguments were not
  captured may well differ. Only calls that ran and succeeded are "already
  executed": retrying after an error or an overload is legitimate. Exempt and
  approval tools are left out (an approval tool's repeat is a new side effect).
  A call recorded with status ``refused`` that is a duplicate still yields the
  ``duplicate_call`` finding, so a run refused by the live gate and the same
  run replayed from its spans report the same thing. A call that already ran
  in the same round (a batch run one call after another) counts too: by the
  time the model reads the refusal, the earlier result is beside it.
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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any, Final, NamedTuple

from otel_stall.core import messages
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

_FAILED = (Status.ERROR, Status.OVERLOADED)


@dataclass(frozen=True, slots=True)
class Observation:
    """What one tool call produced: its ledger row and any findings it fired."""

    row: LedgerRow
    findings: tuple[Finding, ...] = ()


@dataclass(slots=True)
class _Round:
    number: int
    first_seq: int = 0
    last: LedgerRow | None = None
    calls: int = 0
    ran: int = 0
    new_fact: bool = False
    overloaded: bool = False


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


class _ToolInfo(NamedTuple):
    """What the policy says about one tool name, looked up once per run."""

    exempt: bool
    approval: bool
    warn_at: int
    break_at: int


# Records built on the hot path.
_new_row: Final = LedgerRow
_new_finding: Final = Finding
_new_observation: Final = Observation
_new_report: Final = RunReport
_new_round: Final = _Round
_SEVERITY: Final = ACTION_SEVERITY
_VERDICT_OF: Final = {action: Verdict.of(action) for action in Action}
"""``Verdict.of`` as a lookup: it runs once per finding."""
_VERDICT_RANK: Final = {verdict: verdict.severity for verdict in Verdict}
_CONTINUE: Final = Action.CONTINUE
_OK: Final = Status.OK
_ERROR: Final = Status.ERROR
_REFUSED: Final = Status.REFUSED
_OVERLOADED: Final = Status.OVERLOADED
_PRESENT: Final = Content.PRESENT
_EMPTY: Final = Content.EMPTY


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
    _repeats: int = field(default=0, init=False)
    """Calls that repeated an earlier full signature, for the stall score."""
    _fired: int = field(default=0, init=False)
    """Findings so far."""
    _latest: dict[Action, tuple[int, Finding]] = field(default_factory=dict, init=False)
    """The latest finding of each action, numbered as they fired: the report keeps
    them when ``keep`` drops them, so the run's worst finding stays in it."""
    # Plain ints in these four dicts, not [first, count] pairs: a pair is one more
    # object for the garbage collector to track and traverse, for every call of the run.
    _first_seen: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> seq of its first occurrence."""
    _occurrences: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> occurrences, for those seen more than once."""
    _executed: dict[str, int] = field(default_factory=dict, init=False)
    """Call signature -> seq of the first call that ran and succeeded."""
    _executions: dict[str, int] = field(default_factory=dict, init=False)
    """Call signature -> occurrences, for executed calls made again."""
    _fingerprints: dict[str, None] = field(default_factory=dict, init=False)
    """Result digests seen (a dict, not a set: it is forgotten oldest first)."""
    _last_signature: str | None = field(default=None, init=False)
    _consecutive: int = field(default=0, init=False)
    _repeat_fired: Action = field(default=Action.CONTINUE, init=False)
    _last_call: str | None = field(default=None, init=False)
    _call_consecutive: int = field(default=0, init=False)
    _round: _Round | None = field(default=None, init=False)
    _rounds: int = field(default=0, init=False)
    _model_driven: bool = field(default=False, init=False)
    _no_new_facts: _Streak = field(default_factory=_Streak, init=False)
    _refused: _Streak = field(default_factory=_Streak, init=False)
    _failures: dict[str, _Streak] = field(default_factory=dict, init=False)
    _budget_calls: int = field(default=0, init=False)
    _overloaded_exempted: int = field(default=0, init=False)
    _overloaded_rounds: int = field(default=0, init=False)
    _budget_fired: bool = field(default=False, init=False)
    _verdict: Verdict = field(default=Verdict.OK, init=False)
    _tuned_for: StallPolicy | None = field(default=None, init=False, repr=False)
    _tool_info: dict[str, _ToolInfo] = field(default_factory=dict, init=False, repr=False)
    _run_mode: bool = field(default=True, init=False, repr=False)
    _call_limit: int | None = field(default=None, init=False, repr=False)
    _forget_at: int = field(default=0, init=False, repr=False)
    """The seq at which the oldest remembered signatures are forgotten next (0: never)."""

    def __post_init__(self) -> None:
        self._rows = deque(maxlen=self.keep)
        self._findings = deque(maxlen=self.keep)

    # -- feeding -------------------------------------------------------------

    def feed(self, event: Event) -> tuple[Finding, ...]:
        """Feed any event; return the findings it fired."""
        if isinstance(event, ModelCall):
            return self.model_call(event)
        return self.tool_call(event).findings

    def model_call(self, call: ModelCall | None = None) -> tuple[Finding, ...]:
        """A model call closes the current round and opens the next."""
        findings = self._close_round()
        self._model_driven = True
        opened = self._open_round()
        if opened:
            findings += opened
        if findings:  # most model calls fire nothing
            self._record(findings)
        return findings

    def tool_call(self, call: ToolCall, digests: Digests | None = None) -> Observation:
        """Record one tool call; ``digests`` may be computed beforehand, outside any lock.

        The hot path of the whole package (one call per tool span): the common
        case is inlined, and only a rule that fires calls out to build its finding.
        """
        policy = self.policy
        if policy is not self._tuned_for:
            self._tune(policy)
        findings: list[Finding] = []
        current = self._round
        if current is None or not self._model_driven:
            # Without model calls each tool call is a round, closed as it ends: none is open.
            if current is not None:
                findings += self._close_round()
            findings += self._open_round()
            current = self._round
            assert current is not None
        tool, status = call.tool, call.status
        if digests is None:
            digests = policy.signer.sign(tool, call.arguments, call.result, status)
        rows = self._rows
        seq = self._calls = self._calls + 1
        if seq == self._forget_at:
            self._forget()
        signature = digests.signature
        info = self._tool_info.get(tool)
        if info is None:
            info = self._tool_info[tool] = _ToolInfo(
                policy.is_exempt(tool), policy.needs_approval(tool), *policy.thresholds_for(tool)
            )
        exempt = call.exempt or info.exempt
        approval = call.approval or info.approval
        args_content, result_content = digests.arguments, digests.result
        args_known = args_content is _PRESENT or args_content is _EMPTY
        comparable = args_known and (result_content is _PRESENT or result_content is _EMPTY)

        repeat_of: int | None = None
        count = consecutive = 1
        if comparable:
            first = self._first_seen.get(signature)
            if first is None:
                self._first_seen[signature] = seq
            else:
                occurrences = self._occurrences
                occurrences[signature] = count = occurrences.get(signature, 1) + 1
                repeat_of = first
                self._repeats += 1
            if signature == self._last_signature:
                consecutive = self._consecutive + 1
            self._last_signature = signature
        else:
            self._last_signature = None
        self._consecutive = consecutive
        if consecutive == 1:
            self._repeat_fired = _CONTINUE

        # Novelty: did this call bring a fact not seen before? Unclear leans to yes.
        if status is _REFUSED or status is _OVERLOADED:
            new_fact = False
        elif exempt or approval or result_content is not _PRESENT:
            new_fact = True
        else:
            fingerprint = digests.result_digest
            assert fingerprint is not None
            fingerprints = self._fingerprints
            new_fact = fingerprint not in fingerprints
            if new_fact:
                fingerprints[fingerprint] = None

        state = _CONTINUE
        if comparable and not exempt and status is _OK and consecutive >= info.warn_at:
            state = self._repeat(call, digests, seq, consecutive, findings, info)
        call_signature = digests.call_signature
        same = self._call_consecutive + 1 if call_signature == self._last_call else 1
        self._last_call, self._call_consecutive = call_signature, same
        if not exempt and not approval and args_known:
            if self._run_mode and call_signature not in self._executed:
                if status is _OK:
                    self._executed[call_signature] = seq
            else:
                self._duplicate(call, digests, seq, same, findings)
        if status is _OK:
            if self._failures:
                self._failures.pop(tool, None)
        elif status is _ERROR or status is _OVERLOADED:
            self._failure(call, digests, seq, findings)
        if status is not _REFUSED:
            if status is _OVERLOADED or self._call_limit is not None:
                self._budget(status, current, seq, call, digests, findings)
            else:  # what _budget does for a call that ran, with no call budget
                self._budget_calls += 1

        action = state
        if findings:
            for finding in findings:
                if _SEVERITY[finding.action] > _SEVERITY[action]:
                    action = finding.action
        row = _new_row(
            seq,
            tool,
            signature,
            call_signature,
            digests.result_digest,
            repeat_of,
            count,
            consecutive,
            new_fact,
            current.number,
            status,
            action,
            call.span_id,
        )
        rows.append(row)
        current.calls += 1
        current.last = row
        if current.first_seq == 0:
            current.first_seq = seq
        if status is not _REFUSED:
            current.ran += 1
            if new_fact:
                current.new_fact = True
        if not self._model_driven:
            closing = self._close_round()
            if closing:
                findings += closing
                worst = action
                for finding in closing:
                    if _SEVERITY[finding.action] > _SEVERITY[worst]:
                        worst = finding.action
                row = _with_action(row, worst)
                rows[-1] = row
        if findings:
            self._record(findings)
            return _new_observation(row, tuple(findings))
        return _new_observation(row, ())

    def _tune(self, policy: StallPolicy) -> None:
        """Read the policy's settings once: it is frozen, and the hot path reads them often."""
        self._tuned_for = policy
        self._tool_info = {}
        self._run_mode = policy.duplicate_mode is DuplicateMode.RUN
        self._call_limit = policy.max_tool_calls
        memory = policy.max_remembered_calls
        self._forget_at = 0 if memory is None else self._calls + memory + 1

    def _forget(self) -> None:
        """Every ``max_remembered_calls`` calls, forget signatures older than the newest that many.

        Bounds a long run's memory. Oldest means first seen (or first run): a call
        made again after that many others counts as new for the repeat,
        duplicate and novelty rules. Periodic rather than per insert, to keep
        the hot path to one comparison; the replay forgets at the same calls.
        """
        memory = self.policy.max_remembered_calls
        assert memory is not None
        self._forget_at = self._calls + memory
        self._first_seen = _newest(self._first_seen, memory)
        self._executed = _newest(self._executed, memory)
        self._fingerprints = _newest(self._fingerprints, memory)
        first_seen, executed = self._first_seen, self._executed
        self._occurrences = {k: v for k, v in self._occurrences.items() if k in first_seen}
        self._executions = {k: v for k, v in self._executions.items() if k in executed}

    def check_call(
        self,
        tool: str,
        arguments: Any,
        *,
        exempt: bool = False,
        approval: bool = False,
        digests: Digests | None = None,
    ) -> Finding | None:
        """The live gate: a refusal if running ``tool(arguments)`` now would be a duplicate.

        Does not change any state; the call is recorded when its span ends
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
        if policy.duplicate_mode is DuplicateMode.RUN:
            first_seq = self._executed.get(call_signature)
            if first_seq is None:
                return None
            return _new_finding(
                Kind.DUPLICATE_CALL,
                Action.REFUSE,
                tool,
                call_signature,
                self._executions.get(call_signature, 1) + 1,
                first_seq,
                seq,
                number,
                messages.duplicate(tool, first_seq),
            )
        same = self._call_consecutive + 1 if call_signature == self._last_call else 1
        if same < policy.duplicate_consecutive_limit:
            return None
        first = seq - same + 1
        return _new_finding(
            Kind.DUPLICATE_CALL,
            Action.REFUSE,
            tool,
            call_signature,
            same,
            first,
            seq,
            number,
            messages.duplicate_in_a_row(tool, same),
        )

    def finish(self) -> RunReport:
        """Close the last round and return the final report."""
        closing = self._close_round()
        if closing:
            self._record(closing)
        return self.report()

    # -- reading -------------------------------------------------------------

    @property
    def verdict(self) -> Verdict:
        """The most severe action so far (``refuse`` counts as ``warn``)."""
        return self._verdict

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
        """A snapshot of the run: verdict, stall score, findings and ledger."""
        calls = self._calls
        # Built as rows are: the replay makes one report per run.
        return _new_report(
            self.run_key,
            self._verdict,
            self._repeats / calls if calls else 0.0,
            calls,
            self._rounds,
            self.findings,
            tuple(self._rows),
            {},
        )

    # -- rules ---------------------------------------------------------------

    def _repeat(
        self,
        call: ToolCall,
        digests: Digests,
        seq: int,
        consecutive: int,
        findings: list[Finding],
        info: _ToolInfo,
    ) -> Action:
        """Back-to-back identical calls: warn (one re-plan) at ``warn_at``, break at ``break_at``.

        Fires when a threshold is crossed rather than hit exactly, so a streak
        that began on calls exempt by their own flag still fires once.
        """
        if consecutive >= info.break_at:
            state = Action.BREAK
        elif consecutive >= info.warn_at:
            state = Action.WARN
        else:
            return Action.CONTINUE
        if _SEVERITY[state] > _SEVERITY[self._repeat_fired]:
            self._repeat_fired = state
            first_seq = seq - consecutive + 1
            findings.append(
                _new_finding(
                    Kind.REPEAT,
                    state,
                    call.tool,
                    digests.signature,
                    consecutive,
                    first_seq,
                    seq,
                    self._round_number(),
                    messages.repeat(call.tool, consecutive, first_seq, state),
                )
            )
        return state

    def _duplicate(
        self, call: ToolCall, digests: Digests, seq: int, same: int, findings: list[Finding]
    ) -> None:
        policy, status, call_signature = self.policy, call.status, digests.call_signature
        if policy.duplicate_mode is DuplicateMode.OFF:
            return
        if policy.duplicate_mode is DuplicateMode.CONSECUTIVE:
            if same >= policy.duplicate_consecutive_limit:
                findings.append(
                    _new_finding(
                        Kind.DUPLICATE_CALL,
                        Action.REFUSE,
                        call.tool,
                        call_signature,
                        same,
                        seq - same + 1,
                        seq,
                        self._round_number(),
                        messages.duplicate_in_a_row(call.tool, same),
                    )
                )
            return
        number = self._round_number()
        first_seq = self._executed.get(call_signature)
        if first_seq is not None:
            executions = self._executions
            executions[call_signature] = count = executions.get(call_signature, 1) + 1
            findings.append(
                _new_finding(
                    Kind.DUPLICATE_CALL,
                    Action.REFUSE,
                    call.tool,
                    call_signature,
                    count,
                    first_seq,
                    seq,
                    number,
                    messages.duplicate(call.tool, first_seq),
                )
            )
        elif status is Status.OK:
            self._executed[call_signature] = seq

    def _failure(self, call: ToolCall, digests: Digests, seq: int, findings: list[Finding]) -> None:
        status = call.status
        if status is Status.OK:
            self._failures.pop(call.tool, None)
            return
        if status not in _FAILED:
            return
        streak = self._failures.setdefault(call.tool, _Streak())
        if streak.bump(seq) == self.policy.failure_limit:
            findings.append(
                _new_finding(
                    Kind.FAILURES,
                    Action.ESCALATE,
                    call.tool,
                    digests.signature,
                    streak.count,
                    streak.first_seq,
                    seq,
                    self._round_number(),
                    messages.failures(call.tool, streak.count, streak.first_seq),
                )
            )

    def _budget(
        self,
        status: Status,
        current: _Round,
        seq: int,
        call: ToolCall,
        digests: Digests,
        findings: list[Finding],
    ) -> None:
        if status is Status.REFUSED:
            return
        if (
            status is Status.OVERLOADED
            and self._overloaded_exempted < self.policy.overloaded_allowance
        ):
            self._overloaded_exempted += 1
            current.overloaded = True
            return
        self._budget_calls += 1
        limit = self.policy.max_tool_calls
        if limit is not None and self._budget_calls > limit and not self._budget_fired:
            self._budget_fired = True
            findings.append(
                _new_finding(
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

    def _open_round(self) -> tuple[Finding, ...]:
        self._rounds += 1
        self._round = _new_round(self._rounds, 0, None, 0, 0, False, False)
        limit = self.policy.max_rounds
        if limit is None or self._budget_fired:
            return ()
        allowed = limit + self._overloaded_rounds
        if self._rounds <= allowed:
            return ()
        self._budget_fired = True
        last = self._rows[-1] if self._rows else None
        finding = _new_finding(
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
        current, self._round = self._round, None
        if current is None or current.last is None:
            return ()
        last = current.last
        if current.overloaded:
            self._overloaded_rounds += 1
        if current.ran == 0:
            streak, kind = self._refused, Kind.REFUSED_ROUNDS
            limit = self.policy.refused_rounds_limit
        else:
            self._refused.count = 0
            if current.new_fact:
                self._no_new_facts.count = 0
                return ()
            streak, kind = self._no_new_facts, Kind.NO_NEW_FACTS
            limit = self.policy.no_new_facts_limit
        if streak.bump(current.first_seq) != limit:
            return ()
        message = (
            messages.refused_rounds(limit)
            if kind is Kind.REFUSED_ROUNDS
            else messages.no_new_facts(limit, streak.first_seq)
        )
        finding = _new_finding(
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
        return (finding,)

    # -- helpers -------------------------------------------------------------

    def _round_number(self) -> int:
        return self._round.number if self._round else self._rounds

    def _record(self, findings: Iterable[Finding]) -> None:
        verdict = self._verdict
        for finding in findings:
            self._findings.append(finding)
            self._fired += 1
            implied = _VERDICT_OF[finding.action]
            if _VERDICT_RANK[implied] > _VERDICT_RANK[verdict]:
                verdict = implied
            self._latest[finding.action] = (self._fired, finding)
        self._verdict = verdict


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


def _with_action(row: LedgerRow, action: Action) -> LedgerRow:
    return replace(row, action=action)


def _newest(entries: dict[str, Any], count: int) -> dict[str, Any]:
    """The ``count`` most recently inserted entries (a new dict when some are dropped)."""
    excess = len(entries) - count
    if excess <= 0:
        return entries
    return dict(islice(entries.items(), excess, None))


def stall_score(rows: Iterable[LedgerRow]) -> float:
    """Rows that repeat an earlier full signature, divided by all rows (0.0 for none)."""
    total = repeats = 0
    for row in rows:
        total += 1
        repeats += row.repeat_of is not None
    return repeats / total if total else 0.0


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


def iter_findings(reports: Iterable[RunReport]) -> Iterator[Finding]:
    """Every finding of every report, in order."""
    for report in reports:
        yield from report.findings
