"""``no_new_facts``: ``no_new_facts_limit`` rounds in a row whose calls brought nothing new.

Novelty is one of a call's facts (the detector works it out once, see
:mod:`otel_stall.core.rules.novelty`); this rule reads it per round.

Decisions:

- A round with one new fact anywhere is progress and ends the streak.
- A round in which every call was refused counts toward ``refused_rounds``
  instead and leaves this streak as it is.
- So does a round whose calls all failed with an error seen before: errors
  are the failure rules' evidence, and a tool that gives one generic error
  text for every failure is broken (escalate), not done (break). An
  overloaded call returned nothing at all: it still counts as no new fact.
- It breaks, once per streak, when the round that reaches the limit closes;
  the finding names that round's last call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Finding, Kind, LedgerRow
from otel_stall.core.rules.base import Round, Rule, Streak, round_finding

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(rounds: int, first_seq: int) -> str:
    """Rounds whose results had all been seen before."""
    return (
        f"No new facts in {rounds} rounds in a row (since step {first_seq}): every result had "
        "been seen before. Stop calling tools and write the answer from what you have gathered."
    )


class NoNewFacts(Rule):
    """Rounds in a row whose calls ran but brought no new fact break."""

    __slots__ = ("streak",)
    kind = Kind.NO_NEW_FACTS

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.streak = Streak()

    def on_round_close(self, closed: Round, last: LedgerRow, run: RunDetector) -> Finding | None:
        """Judge a round as it closes."""
        if not closed.ran:
            return None  # every call refused: refused_rounds judges it
        streak = self.streak
        if closed.new_fact:
            streak.reset()
            return None
        if not closed.stale:
            return None  # only failures, already seen: the failure rules judge those
        limit = self.policy.no_new_facts_limit
        if streak.bump(closed.first_seq) != limit:
            return None
        return round_finding(
            Kind.NO_NEW_FACTS, streak, closed, last, message(limit, streak.first_seq)
        )
