"""``monologue``: the same assistant message again and again, with no new fact between.

Decisions:

- Only the normalised message's hash is compared (whitespace collapsed, case
  folded); the text never reaches the detector.
- ``warn_at`` times warns, ``break_at`` times breaks, as repeats do (the
  policy's default thresholds: the model is no tool).
- A tool call that brought a new fact starts the count again: the model saying
  the same thing about something new is not a monologue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, Kind, ModelCall
from otel_stall.core.rules.base import CONTINUE, Rule, Streak, repeat_state, streak_finding

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(count: int, action: Action) -> str:
    """The model repeating the same message with nothing new between."""
    head = (
        f"Stall: you have written the same message {count} times in a row, and nothing new "
        "came in between."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: give your final answer now."
    return head + " Repeating it will not change the outcome: take a different step or finish."


class Monologue(Rule):
    """The same message ``warn_at`` times warns, ``break_at`` times breaks."""

    __slots__ = ("bumped", "fired", "said", "streak")
    kind = Kind.MONOLOGUE

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.said: str | None = None
        self.streak = Streak()
        self.fired = CONTINUE
        self.bumped = 0
        """Tool calls so far at the streak's latest message: a new fact after it ends it."""

    def on_model_end(self, call: ModelCall, run: RunDetector) -> Finding | None:
        """Judge a model call as it ends."""
        said = call.output
        if said is None:
            return None
        streak = self.streak
        if streak.count and run.new_fact_seq > self.bumped:
            streak.reset()  # a new fact between two messages: not a monologue
        if not streak.count or said != self.said:
            streak.reset()
            self.said, self.fired = said, CONTINUE
        calls = self.bumped = run.calls
        count = streak.bump(calls)
        action = repeat_state(self.policy, "", count)
        if ACTION_SEVERITY[action] <= ACTION_SEVERITY[self.fired]:
            return None
        self.fired = action
        return streak_finding(
            Kind.MONOLOGUE,
            action,
            call.model or "the model",
            said,
            streak,
            calls,
            run.round_number(),
            message(count, action),
        )

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        return super().nbytes() + 72 + 56
