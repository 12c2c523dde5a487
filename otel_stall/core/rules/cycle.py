"""``cycle``: a sequence of 2 to ``max_cycle_length`` calls repeating back to back.

Decisions:

- It compares full signatures, as ``repeat`` does, of calls that can be
  compared. A refused call is the gate's act, not part of a cycle (it neither
  continues nor ends one); an exempt or approval tool's result is always new,
  so it ends every cycle.
- For each period k, it counts the calls in a row equal to the call k before,
  and fires at full periods: ``cycle_warn_at`` periods warn, ``cycle_break_at``
  break. Only a primitive period fires (A B A B is the 2-cycle's, not the
  4-cycle's; k identical calls are the repeat rule's): one loop is reported once.
- Its finding's tool names every tool of one period, each once, in the cycle's
  order (``get_weather, get_time``): a label naming one of them hides the loop.
  The stall began with the second period, the first call that brought nothing.
- Memory is O(``max_cycle_length``) per run: a ring of the last signatures (and
  their tools) and one count per period.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, Kind
from otel_stall.core.rules.base import CONTINUE, REFUSED, SLOT_BYTES, Facts, Rule

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(length: int, periods: int, first_seq: int, action: Action) -> str:
    """A sequence of calls repeating back to back with the same results."""
    head = (
        f"Stall: the same {length} calls have run {periods} times over in the same order, "
        f"with the same results each time (since step {first_seq})."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: write your answer from what you have gathered."
    return (
        head + " Those results are already in the conversation: use them, or take a "
        "different approach. You may re-plan once."
    )


class Cycle(Rule):
    """Cycles of 2 to ``max_cycle_length`` calls: warn, then break, at full periods."""

    __slots__ = ("cycling", "fired", "ring", "runs", "tools")
    kind = Kind.CYCLE

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        length = policy.max_cycle_length
        self.ring: deque[str | None] = deque([None] * length, maxlen=length)
        """The last ``max_cycle_length`` signatures (``None``: a call that cannot be compared)."""
        self.tools: deque[str] = deque([""] * length, maxlen=length)
        """The tools of the calls in ``ring``: a cycle's label names every tool in it."""
        self.runs = [0] * (length + 1)
        """Index k: how many calls in a row matched the signature k calls before."""
        self.fired = [CONTINUE] * (length + 1)
        """Index k: the most severe finding of the current period-k cycle."""
        self.cycling = False
        """Whether any of ``runs`` is above 0."""

    def on_call(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge one tool call by its facts; return the row's state."""
        if facts.call.status is REFUSED:  # the gate's act: not part of a cycle
            return state
        # An exempt or approval tool's result is always new: it ends any cycle.
        looped = None if facts.exempt or facts.approval else facts.signature
        if looped is None or facts.repeat_of is None:  # cannot continue a cycle: the common case
            self.ring.append(looped)
            self.tools.append(facts.call.tool)
            if self.cycling:
                self._end()
            return state
        state = self._periods(facts, looped, run, state, findings)
        self.ring.append(looped)
        self.tools.append(facts.call.tool)
        return state

    def under_way(self) -> bool:
        """Whether a whole period of some cycle has matched (the apart-repeat rule asks)."""
        runs = self.runs
        return any(runs[k] >= k for k in range(2, len(runs)))

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        size = len(self.runs)
        return super().nbytes() + 2 * 640 + 2 * (56 + SLOT_BYTES * size)

    def _end(self) -> None:
        """Every count of calls matching those k back restarts."""
        self.cycling = False
        runs, fired = self.runs, self.fired
        for k in range(len(runs)):
            runs[k] = 0
            fired[k] = CONTINUE

    def _periods(
        self,
        facts: Facts,
        signature: str,
        run: RunDetector,
        state: Action,
        findings: list[Finding],
    ) -> Action:
        """For each k, count the calls in a row equal to the call k before; fire at periods.

        The ring holds the last calls; this one is not in it yet. Only a repeated
        signature gets here. Returns the row's state.
        """
        ring, runs, fired = self.ring, self.runs, self.fired
        policy = self.policy
        cycling = False
        for k in range(2, len(ring) + 1):
            if ring[-k] != signature:
                runs[k] = 0
                fired[k] = CONTINUE
                continue
            cycling = True
            matched = runs[k] = runs[k] + 1
            if matched < (policy.cycle_warn_at - 1) * k or not _primitive(ring, k, signature):
                continue
            periods = matched // k + 1
            action = Action.BREAK if periods >= policy.cycle_break_at else Action.WARN
            state = action if ACTION_SEVERITY[action] > ACTION_SEVERITY[state] else state
            if ACTION_SEVERITY[action] > ACTION_SEVERITY[fired[k]]:
                fired[k] = action
                seq = facts.seq
                first_seq = seq - matched - k + 1
                findings.append(
                    Finding(
                        Kind.CYCLE,
                        action,
                        self._label(k, matched, facts.call.tool),
                        signature,
                        periods,
                        first_seq,
                        seq,
                        run.round_number(),
                        message(k, periods, first_seq, action),
                        first_seq + k,  # the second period: its first call brought nothing
                    )
                )
        self.cycling = cycling
        return state

    def _label(self, k: int, matched: int, tool: str) -> str:
        """The tools of one period, each once, from the cycle's first: ``get_weather, get_time``.

        The period is the last k calls, the current one (``tool``, not in the ring yet)
        last; ``matched`` calls matched the one k before, so the cycle began at the
        ``(-matched) % k``-th of them.
        """
        tools = [self.tools[-i] for i in range(k - 1, 0, -1)] + [tool]
        start = -matched % k
        return ", ".join(dict.fromkeys(tools[start:] + tools[:start]))


def _primitive(ring: deque[str | None], k: int, signature: str) -> bool:
    """Whether the last k signatures (the newest not stored yet) repeat no shorter period.

    A period-4 match of A B A B is the 2-cycle's, and k identical calls are the
    repeat rule's: one loop is reported once.
    """
    block = [ring[i - k] for i in range(1, k)] + [signature]
    for d in range(1, k):
        if k % d == 0 and all(block[i] == block[i - d] for i in range(d, k)):
            return False
    return True
