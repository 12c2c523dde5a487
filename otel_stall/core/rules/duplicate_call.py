"""``duplicate_call``: refuse a call that already ran, or the Nth same call in a row.

Decisions:

- It needs known arguments: two calls whose arguments were not captured may
  well differ.
- Run mode (the default): only calls that ran and succeeded are "already
  executed"; retrying after an error or an overload is legitimate. A call
  that already ran in the same round (a batch run one call after another)
  counts too: by the time the model reads the refusal, the earlier result is
  beside it. Consecutive mode refuses only the ``duplicate_consecutive_limit``-th
  identical call in a row (the chat check).
- Exempt and approval tools are left out (an approval tool's repeat is a new
  side effect).
- A call recorded with status ``refused`` that is a duplicate still yields the
  finding, so a run refused by the live gate and the same run replayed from
  its spans report the same thing: the gate's refusal and the ledger's are
  one finding, built by one function.
- A refusal is what the gate did, not evidence of a stall: it stays out of
  the verdict (the detector's record step).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from otel_stall.core.policy import DuplicateMode
from otel_stall.core.records import Action, Finding, Kind
from otel_stall.core.rules.base import ENTRY_BYTES, KNOWN, OK, Facts, Rule, newest

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy

_RUN_MODE: Final = DuplicateMode.RUN
_CONSECUTIVE_MODE: Final = DuplicateMode.CONSECUTIVE


def message(tool: str, first_seq: int) -> str:
    """A call that already ran in this run."""
    return (
        f"Refused: `{tool}` already ran with these arguments at step {first_seq}, and its "
        "result is in the conversation. Use that result, or change the arguments or the approach."
    )


def message_in_a_row(tool: str, count: int) -> str:
    """The chat check: the Nth identical call in a row."""
    return (
        f"Refused: this would be call {count} in a row of `{tool}` with the same arguments. "
        "The earlier result is in the conversation: use that value, or use a different tool."
    )


class DuplicateCall(Rule):
    """Refuse a call that already ran and succeeded (run mode), or the Nth in a row."""

    __slots__ = ("executed", "executions")
    kind = Kind.DUPLICATE_CALL

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.executed: dict[str, int] = {}
        """Call signature -> seq of the first call that ran and succeeded."""
        self.executions: dict[str, int] = {}
        """Call signature -> occurrences, for executed calls made again."""

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        digests = facts.digests
        if facts.exempt or facts.approval or digests.arguments not in KNOWN:
            return state
        mode = self.policy.duplicate_mode
        call = facts.call
        if mode is _RUN_MODE:
            self._already_ran(
                call.tool, call.status is OK, digests.call_signature, facts, run, findings
            )
        elif mode is _CONSECUTIVE_MODE and facts.same >= self.policy.duplicate_consecutive_limit:
            findings.append(
                _in_a_row(
                    call.tool, digests.call_signature, facts.same, facts.seq, run.round_number()
                )
            )
        return state

    def gate(
        self, tool: str, call_signature: str, seq: int, number: int, run: RunDetector
    ) -> Finding | None:
        """The live gate's refusal by this rule, if any."""
        policy = self.policy
        if policy.duplicate_mode is _RUN_MODE:
            first_seq = self.executed.get(call_signature)
            if first_seq is None:
                return None
            count = self.executions.get(call_signature, 1) + 1
            return _ran_before(tool, call_signature, count, first_seq, seq, number)
        same = run.in_a_row(call_signature)
        if same < policy.duplicate_consecutive_limit:
            return None
        return _in_a_row(tool, call_signature, same, seq, number)

    def forget(self, memory: int, run: RunDetector) -> None:
        """Forget what is older than the run's bound."""
        executed = self.executed = newest(self.executed, memory)
        self.executions = {k: v for k, v in self.executions.items() if k in executed}

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        held = len(self.executed) + len(self.executions)
        return super().nbytes() + 128 + ENTRY_BYTES * held

    def _already_ran(
        self,
        tool: str,
        succeeded: bool,
        call_signature: str,
        facts: Facts,
        run: RunDetector,
        findings: list[Finding],
    ) -> None:
        """Run mode: refuse a call that already ran and succeeded; remember one succeeding now."""
        first_seq = self.executed.get(call_signature)
        if first_seq is None:
            if succeeded:
                self.executed[call_signature] = facts.seq
            return
        executions = self.executions
        count = executions[call_signature] = executions.get(call_signature, 1) + 1
        findings.append(
            _ran_before(tool, call_signature, count, first_seq, facts.seq, run.round_number())
        )


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
        message(tool, first_seq),
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
        message_in_a_row(tool, same),
    )
