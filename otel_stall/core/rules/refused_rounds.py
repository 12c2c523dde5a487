"""``refused_rounds``: ``refused_rounds_limit`` rounds in a row in which every call was refused.

Decisions:

- A separate counter from ``no_new_facts``: a model that keeps asking for
  refused calls is not reading the refusals, whatever facts it had before.
- A round in which any call ran ends the streak.
- It breaks, once per streak, when the round that reaches the limit closes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Finding, Kind, LedgerRow
from otel_stall.core.rules.base import Round, Rule, Streak, round_finding

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(rounds: int) -> str:
    """Rounds in which every call was refused."""
    return (
        f"Every tool call was refused in {rounds} rounds in a row. Stop repeating refused calls: "
        "answer from what you have, or take a different approach."
    )


class RefusedRounds(Rule):
    """Rounds in a row in which every call was refused break."""

    __slots__ = ("streak",)
    kind = Kind.REFUSED_ROUNDS

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.streak = Streak()

    def on_round_close(self, closed: Round, last: LedgerRow, run: RunDetector) -> Finding | None:
        """Judge a round as it closes."""
        streak = self.streak
        if closed.ran:
            streak.reset()
            return None
        limit = self.policy.refused_rounds_limit
        if streak.bump(closed.first_seq) != limit:
            return None
        return round_finding(Kind.REFUSED_ROUNDS, streak, closed, last, message(limit))
