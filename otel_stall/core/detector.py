"""One run's state machine: tool calls in, ledger rows, findings and a verdict out.

The detector knows nothing of OpenTelemetry. It is fed :class:`ToolCall` and
:class:`ModelCall` records in the order the agent made them, by the live
processor, the replay and the gateway alike.

Rounds: a model call plus the tool calls after it. A run that has no model
calls treats each tool call as its own round. Round-level rules (no new facts,
all calls refused, round budget) are evaluated when a round closes: at the
next model call, or at :meth:`RunDetector.finish`.

The rules live in :mod:`otel_stall.core.rules`, one module each, with their
state, message, thresholds and deliberate decisions. :meth:`RunDetector.tool_call`
works out a call's :class:`~otel_stall.core.rules.base.Facts` once (its signature
if it can be compared, how often and how many times in a row it occurred,
whether it brought a new fact), then asks the rules in
:data:`~otel_stall.core.rules.RULES` order, which is the order of their findings.

Every unclear case leans toward "new fact" and "continue": a loop that runs a
little longer is still stopped by failures and budgets, while a healthy run
that was wrongly cut off cannot be brought back.

Deliberate decisions of the detector itself (each rule's are in its module):

- Findings fire once, when a threshold is crossed; a streak that goes on does
  not fire again until it has reset. A row's ``action`` reflects the state at
  that row (the 6th back-to-back repeat still says ``break``). Round-level
  findings fire when the round closes; a row, once returned, is never
  rewritten, so that the live processor and the replay attach identical
  attributes. In a run without model calls each tool call closes its own
  round, so its row carries the action.
- A refusal (``duplicate_call``, a failure loop's gate) is what the gate did,
  not evidence of a stall: it stays out of the verdict.
- The stall began at the first call that brought nothing new in the evidence
  of the finding that first raised the verdict to ``warn`` or above; waste runs
  from there to the run's end (:mod:`otel_stall.core.waste`).
- Memory is bounded: the report keeps the newest ``keep`` rows and findings,
  and every ``max_remembered_calls`` calls the oldest signatures are forgotten
  (items as soon as they exceed twice that). :attr:`RunDetector.nbytes`
  estimates every cache the run holds, rules' included, for the live run
  table's ``max_state_bytes``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from otel_stall.core.policy import DuplicateMode, StallPolicy
from otel_stall.core.records import (
    ABSENT,
    ACTION_SEVERITY,
    Action,
    Event,
    Finding,
    LedgerRow,
    ModelCall,
    RunKey,
    RunReport,
    Status,
    ToolCall,
    Verdict,
)
from otel_stall.core.rules import GATES, RULES
from otel_stall.core.rules.acknowledgement import acknowledgements
from otel_stall.core.rules.base import (
    CONTINUE,
    ENTRY_BYTES,
    KNOWN,
    WARN_SEVERITY,
    Facts,
    Round,
    Rule,
    newest,
)
from otel_stall.core.rules.novelty import Novelty
from otel_stall.core.signing import Digests
from otel_stall.core.waste import Waste

_REFUSE: Final = Action.REFUSE
_REFUSED_STATUS: Final = Status.REFUSED
_OK: Final = Status.OK
_R = TypeVar("_R", bound=Rule)

ROW_BYTES: Final = 232
"""Estimated bytes of one kept ledger row (a slotted record of 13 fields and its deque
slot; its digests are shared with the signature dicts)."""
FINDING_BYTES: Final = 480
"""Estimated bytes of one kept finding, its guidance message included."""
DETECTOR_BYTES: Final = 1200
"""Estimated bytes of an empty detector: its own slots, deques, dicts and hook tuples."""


@dataclass(slots=True)
class Observation:
    """What one tool call produced: its ledger row and any findings it fired."""

    row: LedgerRow
    findings: tuple[Finding, ...] = ()


def _having(rules: tuple[Rule, ...], hook: str) -> tuple[Any, ...]:
    """The rules that define ``hook``: a hook a rule leaves alone is never called."""
    default = getattr(Rule, hook)
    return tuple(rule for rule in rules if getattr(type(rule), hook) is not default)


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
    _findings: deque[Finding] | tuple[()] = field(default=(), init=False)
    """The kept findings; made at the first (a deque's first block is about 600 bytes, and
    most runs fire nothing)."""
    _rules: tuple[Rule, ...] = field(init=False)
    """One instance of each rule of :data:`RULES`, in order."""
    _on_call: tuple[Rule, ...] = field(init=False)
    _on_repeated: tuple[Rule, ...] = field(init=False)
    """The rules a repeated call asks, in order: those of ``_on_call`` and those judging
    repeats only."""
    _on_model_end: tuple[Rule, ...] = field(init=False)
    _on_round_open: tuple[Rule, ...] = field(init=False)
    _on_round_close: tuple[Rule, ...] = field(init=False)
    _refiners: tuple[Rule, ...] = field(init=False)
    """The rules that may overrule a fresh result's novelty."""
    _novelty: Novelty = field(init=False)
    _acks: frozenset[str] | None = field(default=None, init=False)
    """The policy's acknowledgement digests, looked up the first time a run needs them."""
    scanned_bytes: int = field(default=0, init=False)
    """Output text the run's outputs had read, against ``policy.run_scan_bytes``."""
    _facts: Facts = field(init=False)
    """The facts of the call being judged (one object, filled in per call)."""
    _new_fact_seq: int = field(default=0, init=False)
    """The seq of the latest call that brought a new fact."""
    _changed_seq: int = field(default=0, init=False)
    """The seq of the latest exempt or approval call that ran: the world may have changed."""
    _calls: int = field(default=0, init=False)
    """Tool calls so far: the seq of the last one."""
    _rounds: int = field(default=0, init=False)
    """Rounds opened so far: the number of the last one."""
    _round: Round | None = field(default=None, init=False)
    _model_driven: bool = field(default=False, init=False)
    # The ledger's counts. Plain ints in the signature dicts, not [first, count] pairs: a
    # pair is one more object for the garbage collector to track and traverse, for every
    # call of the run.
    _first_seen: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> seq of its first occurrence."""
    _occurrences: dict[str, int] = field(default_factory=dict, init=False)
    """Full signature -> occurrences, for those seen more than once."""
    _repeats: int = field(default=0, init=False)
    """Calls that repeated an earlier full signature, for the stall score."""
    _last_signature: str | None = field(default=None, init=False)
    _consecutive: int = field(default=0, init=False)
    _last_call: str | None = field(default=None, init=False)
    _call_consecutive: int = field(default=0, init=False)
    # wasted cost: from the stall's onset (see the module's decisions) to the run's end
    _waste: Waste = field(default_factory=Waste, init=False)
    _end_ns: int = field(default=0, init=False)
    """The latest end of any call so far: the run's end, for the wasted time."""
    _now_ns: int = field(default=0, init=False)
    """When the event being fed happened: a stall that starts with it starts then."""
    # findings and verdict
    _fired: int = field(default=0, init=False)
    """Findings so far."""
    _latest: dict[Action, tuple[int, Finding]] = field(default_factory=dict, init=False)
    """The latest finding of each action, numbered as they fired: the report keeps
    them when ``keep`` drops them, so the run's worst finding stays in it."""
    _worst: Action = field(default=CONTINUE, init=False)
    """The most severe action of any finding so far: it makes the verdict."""

    def __post_init__(self) -> None:
        self._rows = deque(maxlen=self.keep)
        policy = self.policy
        rules = self._rules = tuple(rule(policy) for rule in RULES if rule.enabled(policy))
        self._on_call = on_call = _having(rules, "on_call")
        # The repeat rules found once, not once per rule (bench_replay, binary: detector
        # creation 1.05 s of a 15.4 s profile, 0.34 s of it these lookups).
        on_repeat = _having(rules, "on_repeat")
        self._on_repeated = tuple(rule for rule in rules if rule in on_call or rule in on_repeat)
        self._on_model_end = _having(rules, "on_model_end")
        self._on_round_open = _having(rules, "on_round_open")
        self._on_round_close = _having(rules, "on_round_close")
        self._refiners = _having(rules, "refine_novelty")
        self._novelty = Novelty(policy.max_remembered_calls)
        self._facts = Facts(Round(0))

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
        """A model call's outcome: its failure, its output (monologue, chanting), its tokens.

        Fed when the call ends, in the order calls end, after :meth:`model_call`.
        """
        if call.chant is not None or call.output is not None:
            call = self._within_scan_budget(call)
        fired = [f for rule in self._on_model_end if (f := rule.on_model_end(call, self))]
        findings = tuple(fired)
        if findings:  # a stall that begins here begins with this call, which is wasted
            self._record(findings, call.start_ns)
        self._count_model_call(call)
        return findings

    def delegate_ended(
        self, agent: str | None, verdict: Verdict, end_ns: int
    ) -> tuple[Finding, ...]:
        """A sub-agent run this run spawned ended: ``delegate_stalled`` if it stalled.

        Fed when the child run ends, in time order among this run's calls.
        """
        self._now_ns = end_ns
        self._end_ns = max(self._end_ns, end_ns)
        fired = tuple(f for rule in self._rules if (f := rule.on_delegate(agent, verdict, self)))
        if fired:
            self._record(fired)
        return fired

    def tool_call(self, call: ToolCall, digests: Digests | None = None) -> Observation:
        """Record one tool call; ``digests`` may be computed beforehand, outside any lock.

        Works out the call's facts once, then asks the rules in their fixed
        order; the row carries the most severe action among them.
        """
        findings, current = self._round_for_call()
        policy = self.policy
        if digests is None:
            digests = policy.signer.sign(call.tool, call.arguments, call.result, call.status)
        seq = self._next_seq()
        exempt = call.exempt or policy.is_exempt(call.tool)
        approval = call.approval or policy.needs_approval(call.tool)
        # The full signature only where it tells calls apart: see Digests.comparable.
        comparable = digests.arguments in KNOWN and digests.result in KNOWN
        signature = digests.signature if comparable else None
        repeat_of, count = self._occurrence(signature, seq)
        new_fact = self._novelty.judge(call.status, digests, exempt or approval)
        if new_fact is None:  # a result never seen whole: refining rules may overrule it
            new_fact = not self._refiners or self._refined(digests)
        elif not new_fact and repeat_of is None and signature is not None:
            new_fact = self._acknowledged(digests)  # a bare "done" to a new call: progress
        if new_fact:
            self._new_fact_seq = seq
        if self._waste.onset is None and (
            not new_fact or repeat_of is not None or call.status is not _OK
        ):
            self._waste.mark(seq, call.start_ns)  # a stall may have begun here
        if (exempt or approval) and call.status is not _REFUSED_STATUS:
            self._changed_seq = seq
        facts = self._facts
        facts.call, facts.digests, facts.seq, facts.round = call, digests, seq, current
        facts.signature, facts.repeat_of, facts.count = signature, repeat_of, count
        facts.consecutive = consecutive = self._back_to_back(signature)
        facts.same = self._same_call_in_a_row(digests.call_signature)
        facts.exempt, facts.approval, facts.new_fact = exempt, approval, new_fact
        # The run's clock: inline, as every call pays for it (a method call costs more).
        end = self._now_ns = call.end_ns
        if end > self._end_ns:  # noqa: PLR1730 - a compare is cheaper than max()
            self._end_ns = end
        if call.status is _REFUSED_STATUS and repeat_of is None:
            self._repeats += 1  # a refused call is a repeat the gate stopped
        state = CONTINUE
        # One pass over the rules, in order; a repeat also asks those judging repeats only.
        if repeat_of is None:
            for rule in self._on_call:
                state = rule.on_call(facts, self, state, findings)
        else:
            for rule in self._on_repeated:
                state = rule.on_repeated(facts, self, state, findings)
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
        escalated (:data:`~otel_stall.core.rules.GATES`). Does not change any
        state; the call is recorded when its span ends (with status ``refused``
        if the caller followed the refusal, which then records the same
        finding). ``digests`` may come from :func:`gate_digests` beforehand,
        outside any lock; ``exempt`` and ``approval`` are then ignored.
        """
        if digests is None:
            digests = gate_digests(self.policy, tool, arguments, exempt=exempt, approval=approval)
        if digests is None or not digests.arguments.known:
            return None
        seq = self._calls + 1
        number = self._round.number if self._round else self._rounds + 1
        for gate in GATES:
            rule = self.rule(gate)
            refusal = (
                None if rule is None else rule.gate(tool, digests.call_signature, seq, number, self)
            )
            if refusal is not None:
                return refusal
        return None

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
        """The verdict's quarter of [0, 1), placed in it by the share of repeated or refused calls.

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

    @property
    def calls(self) -> int:
        """Tool calls so far: the seq of the last one."""
        return self._calls

    @property
    def last_row(self) -> LedgerRow | None:
        """The latest kept ledger row, if any."""
        return self._rows[-1] if self._rows else None

    @property
    def nbytes(self) -> int:
        """Estimated bytes the run's state holds, every cache included.

        Rows, findings, signatures, novelty's digests and each rule's state: what
        the live run table counts for ``max_state_bytes``.
        """
        held = DETECTOR_BYTES + ROW_BYTES * len(self._rows) + FINDING_BYTES * len(self._findings)
        held += ENTRY_BYTES * (len(self._first_seen) + len(self._occurrences))
        held += self._novelty.nbytes
        held += self._waste.nbytes
        for rule in self._rules:
            held += rule.nbytes()
        return held

    @property
    def new_fact_seq(self) -> int:
        """The seq of the latest call that brought a new fact (0: none yet)."""
        return self._new_fact_seq

    @property
    def changed_seq(self) -> int:
        """The seq of the latest exempt or approval call that ran (0: none yet)."""
        return self._changed_seq

    def _acknowledged(self, digests: Digests) -> bool:
        """Whether a result seen before is a bare acknowledgement (see its module)."""
        acks = self._acks
        if acks is None:
            acks = self._acks = acknowledgements(self.policy.signer)
        return digests.result_digest in acks

    def _refined(self, digests: Digests) -> bool:
        """Whether every refining rule still calls a result with a fresh digest new."""
        return all(rule.refine_novelty(digests, self) for rule in self._refiners)

    def rule(self, kind: type[_R]) -> _R | None:
        """The run's instance of the rule class ``kind``, if the run has it."""
        for rule in self._rules:
            if type(rule) is kind:
                return rule
        return None

    def round_number(self) -> int:
        """The open round's number (the last one's when none is open)."""
        return self._round.number if self._round else self._rounds

    def latest(self, action: Action) -> Finding | None:
        """The latest finding of ``action`` so far."""
        latest = self._latest.get(action)
        return None if latest is None else latest[1]

    def remembers(self, signature: str) -> bool:
        """Whether the full signature is still remembered (not forgotten for the bound)."""
        return signature in self._first_seen

    def in_a_row(self, call_signature: str) -> int:
        """How many calls in a row would have ``call_signature`` with one more."""
        return self._call_consecutive + 1 if call_signature == self._last_call else 1

    def report(self) -> RunReport:
        """A snapshot of the run: verdict, stall score, findings, ledger and wasted cost."""
        return RunReport(
            self.run_key,
            self.verdict,
            self.stall_score,
            self._calls,
            self._rounds,
            self.findings,
            tuple(self._rows),
            {},
            **self._waste.wasted(self._calls, self._end_ns),
        )

    # -- a tool call's facts ---------------------------------------------------

    def _round_for_call(self) -> tuple[list[Finding], Round]:
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
        first_seen = self._first_seen = newest(self._first_seen, memory)
        self._occurrences = {k: v for k, v in self._occurrences.items() if k in first_seen}
        self._novelty.forget(memory)
        for rule in self._rules:
            rule.forget(memory, self)

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

    def _same_call_in_a_row(self, call_signature: str) -> int:
        """Count the call in the run of identical tool-and-arguments calls; return its length."""
        same = self.in_a_row(call_signature)
        self._last_call, self._call_consecutive = call_signature, same
        return same

    def _within_scan_budget(self, call: ModelCall) -> ModelCall:
        """The call as the text rules see it: without its output once the run's budget is spent.

        Charged here, in the order outputs are fed, so live, replay and the
        gateway drop the same outputs whichever of them read the text.
        """
        if self.scanned_bytes >= self.policy.run_scan_bytes:
            return replace(call, output=None, chant=None)
        if call.chant is not None:
            self.scanned_bytes += call.chant.scanned
        return call

    def _count_model_call(self, call: ModelCall) -> None:
        """The run's clock, its model calls and their tokens (the wasted cost reads them)."""
        self._now_ns = call.end_ns
        self._end_ns = max(self._end_ns, call.end_ns)
        self._waste.count(call)

    def _add_row(self, row: LedgerRow, current: Round, findings: list[Finding]) -> Observation:
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

    # -- rounds ----------------------------------------------------------------

    def _open_round(self) -> tuple[Finding, ...]:
        """Open the next round, through the rules that judge a round's opening (budget)."""
        self._rounds += 1
        self._round = Round(self._rounds)
        fired: tuple[Finding, ...] = ()
        for rule in self._on_round_open:  # a loop, not a generator: rounds are frequent
            finding = rule.on_round_open(self)
            if finding is not None:
                fired += (finding,)
        return fired

    def _close_round(self) -> tuple[Finding, ...]:
        """Close the open round, if it had tool calls, through the round-level rules."""
        current, self._round = self._round, None
        if current is None or current.last is None:
            return ()
        last = current.last
        fired: tuple[Finding, ...] = ()
        for rule in self._on_round_close:
            finding = rule.on_round_close(current, last, self)
            if finding is not None:
                fired += (finding,)
        return fired

    def _record(self, findings: Sequence[Finding], moment_ns: int | None = None) -> None:
        """Keep the findings, numbered, and the latest of each action; track the worst action.

        A refusal (``duplicate_call``, a failure loop's gate) is what the gate did, not
        evidence of a stall: it stays out of the verdict. The finding that first raises
        the verdict to ``warn`` fixes the onset; ``moment_ns`` is when a stall that
        begins where it fired began (default: now).
        """
        kept = self._findings
        if not kept:
            kept = self._findings = deque(kept, maxlen=self.keep)
        for finding in findings:
            kept.append(finding)
            self._fired += 1
            self._latest[finding.action] = (self._fired, finding)
            if finding.action is not _REFUSE:
                self._worst = _worst(self._worst, (finding,))
                waste = self._waste
                if waste.onset is None and ACTION_SEVERITY[self._worst] >= WARN_SEVERITY:
                    now = self._now_ns if moment_ns is None else moment_ns
                    current = (self._facts.seq, self._facts.call.start_ns)
                    waste.fix(finding.onset_seq, self._calls, current, now)


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


def _worst(action: Action, findings: Iterable[Finding]) -> Action:
    """The most severe of ``action`` and the findings' actions (the first of equals)."""
    for finding in findings:
        if ACTION_SEVERITY[finding.action] > ACTION_SEVERITY[action]:
            action = finding.action
    return action


def stall_score(rows: Iterable[LedgerRow], verdict: Verdict) -> float:
    """The run report's ``stall.score``, from a run's ledger rows and its verdict.

    ``(severity + repeats / rows) / 4``, severity 0 (ok) to 3 (break), repeats
    the rows that repeat an earlier full signature or were refused (a refused
    call is a repeat the gate stopped before it ran): each verdict has its
    quarter of [0, 1), so a ``break`` never scores below a ``warn``, and within
    one verdict a run that repeated more scores higher. The verdict is an
    argument because rows alone do not carry it (round-level findings fire
    after their rows are returned). One definition with
    :attr:`RunDetector.stall_score`, which counts the whole run's rows.
    """
    total = repeats = 0
    for row in rows:
        total += 1
        repeats += row.repeat_of is not None or row.status is _REFUSED_STATUS
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
