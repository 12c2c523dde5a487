"""``budget``: the tool-call budget (``max_tool_calls``) and the round limit (``max_rounds``).

Decisions:

- Refused calls did not run and cost nothing.
- The first ``overloaded_allowance`` overloaded calls do not count against
  ``max_tool_calls``, and each round that had one extends ``max_rounds`` by one:
  an overload is the provider's, not the agent's.
- The call that overspends the budget breaks, and so does the first round
  past the limit; the two budgets fire once between them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Action, Finding, Kind, LedgerRow
from otel_stall.core.rules.base import OVERLOADED, REFUSED, Facts, Round, Rule

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def call_message(limit: int) -> str:
    """The tool-call budget ran out."""
    return f"The tool-call budget of {limit} calls is spent. Write the answer from what you have."


def round_message(limit: int) -> str:
    """The round limit was reached."""
    return f"The limit of {limit} rounds is reached. Write the answer from what you have."


class Budgets(Rule):
    """``max_tool_calls``, then ``max_rounds``: the one that overspends first breaks, once."""

    __slots__ = ("calls", "fired", "overloaded_exempted", "overloaded_rounds")
    kind = Kind.BUDGET

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.calls = 0
        """Calls counted against ``max_tool_calls``."""
        self.overloaded_exempted = 0
        self.overloaded_rounds = 0
        self.fired = False

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        status = facts.call.status
        if status is REFUSED:
            return state
        if status is OVERLOADED and self.overloaded_exempted < self.policy.overloaded_allowance:
            self.overloaded_exempted += 1
            facts.round.overloaded = True
            return state
        self.calls += 1
        limit = self.policy.max_tool_calls
        if limit is None or self.fired or self.calls <= limit:
            return state
        self.fired = True
        findings.append(
            Finding(
                Kind.BUDGET,
                Action.BREAK,
                facts.call.tool,
                facts.digests.signature,
                self.calls,
                facts.seq,
                facts.seq,
                facts.round.number,
                call_message(limit),
                facts.seq,
            )
        )
        return state

    def on_round_close(self, closed: Round, last: LedgerRow, run: RunDetector) -> Finding | None:
        """Judge a round as it closes."""
        if closed.overloaded:
            self.overloaded_rounds += 1
        return None

    def on_round_open(self, run: RunDetector) -> Finding | None:
        """Judge a round as it opens."""
        limit = self.policy.max_rounds
        if limit is None or self.fired:
            return None
        allowed = limit + self.overloaded_rounds
        rounds = run.rounds
        if rounds <= allowed:
            return None
        self.fired = True
        last = run.last_row
        return Finding(
            Kind.BUDGET,
            Action.BREAK,
            last.tool if last else "",
            last.signature if last else "",
            rounds,
            rounds,
            run.calls,
            rounds,
            round_message(allowed),
        )
