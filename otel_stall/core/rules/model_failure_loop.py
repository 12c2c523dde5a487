"""``model_failure_loop``: the model failing the same way ``failure_loop_at`` times in a row.

Decisions:

- The first ``overloaded_allowance`` overloaded model calls of a run are
  retries, not a loop: they neither count nor end the streak.
- A failure without a class or message cannot be compared: it ends the streak.
- It escalates: retrying unchanged will fail again (OpenHands waits for 10;
  three of the same is enough evidence here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core.records import Action, Finding, Kind, ModelCall
from otel_stall.core.rules.base import OK, OVERLOADED, REFUSED, Rule, Streak, streak_finding

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(model: str, count: int) -> str:
    """Model calls failing the same way several times in a row."""
    return (
        f"The model call ({model}) failed {count} times in a row with the same error. "
        "Retrying unchanged will fail again: shorten the context, wait, or stop and report it."
    )


class ModelFailureLoop(Rule):
    """The model failing the same way ``failure_loop_at`` times in a row escalates."""

    __slots__ = ("error", "overloads", "streak")
    kind = Kind.MODEL_FAILURE_LOOP

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.error: str | None = None
        self.streak = Streak()
        self.overloads = 0
        """Overloaded model calls so far: the first ``overloaded_allowance`` are retries."""

    def on_model_end(self, call: ModelCall, run: RunDetector) -> Finding | None:
        """Judge a model call as it ends."""
        streak = self.streak
        status = call.status
        if status is OK or status is REFUSED:
            streak.reset()
            return None
        if status is OVERLOADED and self.overloads < self.policy.overloaded_allowance:
            self.overloads += 1
            return None
        error = call.error
        if error is None or (streak.count and error != self.error):
            streak.reset()
            if error is None:
                return None
        self.error = error
        calls = run.calls
        if streak.bump(calls) != self.policy.failure_loop_at:
            return None
        model = call.model or "the model"
        return streak_finding(
            Kind.MODEL_FAILURE_LOOP,
            Action.ESCALATE,
            model,
            "",
            streak,
            calls,
            run.round_number(),
            message(model, streak.count),
        )
