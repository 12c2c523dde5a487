"""``repeat``: back-to-back identical calls with identical results.

Decisions:

- It counts back-to-back identical *full* signatures (tool, arguments, result,
  status), and only for calls with status ``ok`` whose arguments and result
  were both captured and fingerprinted (:attr:`Digests.comparable`). Failed
  calls escalate through ``failures`` instead (a failing tool is escalated, not
  retried), and calls without content cannot be told apart, so they are never
  repeats (nor do they raise the stall score).
- Approval tools are still subject to it: the same side effect five times with
  the same answer is a loop. Exempt tools are not (they repeat by protocol).
- ``warn_at`` warns (and allows one re-plan), ``break_at`` breaks, per tool
  through ``tool_thresholds``. It fires when a threshold is crossed rather
  than hit exactly, so a streak that began on calls exempt by their own flag
  still fires once; a streak that goes on does not fire again until it resets.
  The row carries the streak's state (the 6th repeat still says ``break``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, Kind
from otel_stall.core.rules.base import CONTINUE, OK, Facts, Rule, repeat_state

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(tool: str, count: int, first_seq: int, action: Action) -> str:
    """Back-to-back identical calls with identical results."""
    head = (
        f"Stall: `{tool}` was called {count} times in a row with the same arguments and "
        f"returned the same result each time (first at step {first_seq})."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: write your answer from what you have gathered."
    return (
        head + " That result is already in the conversation: use it, or change the arguments "
        "or the approach. You may re-plan once."
    )


class Repeat(Rule):
    """Back-to-back identical calls: warn (one re-plan) at ``warn_at``, break at ``break_at``."""

    __slots__ = ("fired",)
    kind = Kind.REPEAT

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.fired = CONTINUE
        """The most severe repeat finding of the current streak (the apart rule sets it too:
        its warn is the streak's)."""

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        consecutive = facts.consecutive
        if consecutive == 1:
            self.fired = CONTINUE  # a new streak: it may fire again
        call = facts.call
        signature = facts.signature
        if signature is None or facts.exempt or call.status is not OK:
            return state
        action = repeat_state(self.policy, call.tool, consecutive)
        if ACTION_SEVERITY[action] > ACTION_SEVERITY[self.fired]:
            self.fired = action
            seq = facts.seq
            first_seq = seq - consecutive + 1
            findings.append(
                Finding(
                    Kind.REPEAT,
                    action,
                    call.tool,
                    signature,
                    consecutive,
                    first_seq,
                    seq,
                    run.round_number(),
                    message(call.tool, consecutive, first_seq, action),
                    first_seq + 1,  # the first repeat: the first call that brought nothing
                )
            )
        return action
