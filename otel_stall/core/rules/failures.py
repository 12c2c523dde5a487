"""``failures``: one tool failing ``failure_limit`` times in a row escalates.

Decisions:

- It counts per tool: ``error`` and ``overloaded`` extend the tool's streak,
  only that tool's success resets it, and a refused call does neither.
- It escalates rather than breaks: a failing tool is a tool failure to report,
  not a loop to cut off, and retrying it will not help.
- It fires once per streak, when the streak reaches the limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Action, Finding, Kind
from otel_stall.core.rules.base import (
    ENTRY_BYTES,
    ERROR,
    OK,
    OVERLOADED,
    Facts,
    Rule,
    Streak,
    streak_finding,
)

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(tool: str, count: int, first_seq: int) -> str:
    """A failure streak of one tool."""
    return (
        f"`{tool}` failed {count} times in a row (since step {first_seq}). This is a tool "
        "failure, not a stall: escalate instead of retrying."
    )


class Failures(Rule):
    """One tool failing ``failure_limit`` times in a row escalates; its success resets it."""

    __slots__ = ("failing",)
    kind = Kind.FAILURES

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.failing: dict[str, Streak] = {}
        """Tool -> its current failure streak."""

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        call = facts.call
        status = call.status
        if status is OK:
            if self.failing:
                self.failing.pop(call.tool, None)
            return state
        if status is not ERROR and status is not OVERLOADED:
            return state
        streak = self.failing.get(call.tool)
        if streak is None:
            streak = self.failing[call.tool] = Streak()
        if streak.bump(facts.seq) != self.policy.failure_limit:
            return state
        findings.append(
            streak_finding(
                Kind.FAILURES,
                Action.ESCALATE,
                call.tool,
                facts.digests.signature,
                streak,
                facts.seq,
                run.round_number(),
                message(call.tool, streak.count, streak.first_seq),
                streak.second_seq,
            )
        )
        return state

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        return super().nbytes() + 64 + (ENTRY_BYTES + 56) * len(self.failing)
