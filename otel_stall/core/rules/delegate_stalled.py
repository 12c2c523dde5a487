"""``delegate_stalled``: a sub-agent run this run spawned ended at ``warn`` or above.

Decisions:

- A delegate that ended at ``warn`` or above went round in circles; the
  parent that handed it the task is stuck too unless it re-plans (OpenHands
  calls the parent stuck). It warns, once per stalled delegate.
- The parent learns it when the child run ends, in time order among its own
  calls: live, the child's run span ends before the parent's; replay and the
  gateway order it by the child's end.
- None of the framework sub-agent or handoff runs that end well changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Action, Finding, Kind, Verdict
from otel_stall.core.rules.base import Rule

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(agent: str, verdict: str) -> str:
    """A sub-agent this run handed a task to ended stalled."""
    return (
        f"Stall: the agent you handed a task to ({agent}) ended stuck (verdict {verdict}): it "
        "went round in circles without finishing. Handing it the same task again will loop "
        "again: re-plan instead. Split the task, give it what it was missing, or do it "
        "another way."
    )


class DelegateStalled(Rule):
    """A stalled sub-agent run warns its parent, once per delegate."""

    __slots__ = ("stalled",)
    kind = Kind.DELEGATE_STALLED

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.stalled = 0
        """Sub-agent runs of this run that ended at warn or above."""

    def on_delegate(self, agent: str | None, verdict: Verdict, run: RunDetector) -> Finding | None:
        """Judge a sub-agent run that ended."""
        if verdict.severity < Verdict.WARN.severity:
            return None
        self.stalled += 1
        name = agent or "a sub-agent"
        calls = run.calls
        return Finding(
            Kind.DELEGATE_STALLED,
            Action.WARN,
            name,
            "",
            self.stalled,
            calls,
            calls,
            run.round_number(),
            message(name, verdict.value),
        )
