"""``failure_loop``: the same call failing the same way ``failure_loop_at`` times in a row.

Decisions:

- "The same way": the same error class where the source names one, else the
  same result (the error's text). A call whose arguments or error are unknown
  cannot be told apart from another, so it ends the loop (leans to continue).
- It escalates: retrying the call unchanged will fail again.
- Once escalated, the live gate refuses the loop's next try (the same call),
  and a call recorded as refused by it yields the gate's finding again, so
  live and replay report the same thing. A refusal neither extends nor ends
  the loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Action, Finding, Kind
from otel_stall.core.rules.base import (
    ERROR,
    KNOWN,
    REFUSED,
    Facts,
    Rule,
    Streak,
    streak_finding,
)

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(tool: str, count: int, first_seq: int) -> str:
    """The same call failing the same way several times in a row."""
    return (
        f"`{tool}` failed {count} times in a row with the same arguments and the same error "
        f"(since step {first_seq}). Retrying it unchanged will fail again: change the "
        "arguments or the approach, or report the failure."
    )


def refused_message(tool: str, count: int, first_seq: int) -> str:
    """The gate refuses the next try of a call that keeps failing the same way."""
    return (
        f"Refused: `{tool}` with these arguments failed {count} times in a row with the same "
        f"error (since step {first_seq}); it would fail again. Change the arguments or the "
        "approach, or report the failure."
    )


class FailureLoop(Rule):
    """The same call failing the same way ``failure_loop_at`` times in a row escalates."""

    __slots__ = ("call_signature", "error", "streak")
    kind = Kind.FAILURE_LOOP

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.call_signature: str | None = None
        """Call signature and error of the current loop's calls."""
        self.error: str | None = None
        self.streak = Streak()

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        call = facts.call
        streak = self.streak
        if call.status is not ERROR and not streak.count:
            return state  # the common case: no failure, no loop under way
        digests = facts.digests
        error = call.error or digests.result_digest
        if call.status is not ERROR or error is None or digests.arguments not in KNOWN:
            if call.status is REFUSED:
                refusal = self.gate(
                    call.tool, digests.call_signature, facts.seq, run.round_number(), run
                )
                if refusal is not None:
                    findings.append(refusal)
            else:
                streak.reset()
            return state
        if streak.count and (digests.call_signature, error) != (self.call_signature, self.error):
            streak.reset()
        self.call_signature, self.error = digests.call_signature, error
        if streak.bump(facts.seq) != self.policy.failure_loop_at:
            return state
        findings.append(
            streak_finding(
                Kind.FAILURE_LOOP,
                Action.ESCALATE,
                call.tool,
                digests.call_signature,
                streak,
                facts.seq,
                run.round_number(),
                message(call.tool, streak.count, streak.first_seq),
                streak.second_seq,  # the first repeated failure
            )
        )
        return state

    def gate(
        self, tool: str, call_signature: str, seq: int, number: int, run: RunDetector
    ) -> Finding | None:
        """A refusal of ``call_signature`` if it is the call of an escalated failure loop."""
        streak = self.streak
        if streak.count < self.policy.failure_loop_at or call_signature != self.call_signature:
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
            refused_message(tool, streak.count, streak.first_seq),
        )

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        return super().nbytes() + 72
