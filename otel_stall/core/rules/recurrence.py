"""The repeat rule apart: ``warn_at`` identical calls within ``repeat_window`` calls warn.

Its findings are ``repeat`` findings: it is the same loop, seen with other calls
between (``ls``, a scroll, ``ls``, a scroll, ``ls``).

Decisions:

- An identical call with an identical result brought nothing the first one did
  not, whatever ran between, unless an exempt or approval tool ran since: it
  may have changed what a read returns, so every count starts again.
- It warns, never breaks: the back-to-back repeat, cycles and no-new-facts break.
- One loop is reported once: not where the back-to-back repeat or a cycle
  reports it (the row's state, a whole period of a cycle under way, or a repeat
  or cycle finding within the window), and once per signature.
- ``repeat_window = off`` restores back-to-back repeats only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from otel_stall.core.records import ACTION_SEVERITY, Action, Finding, Kind
from otel_stall.core.rules.base import (
    ENTRY_BYTES,
    OK,
    WARN_SEVERITY,
    Facts,
    Rule,
)
from otel_stall.core.rules.cycle import Cycle
from otel_stall.core.rules.repeat import Repeat

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy

_LOOP_KINDS: Final = (Kind.REPEAT, Kind.CYCLE)


def message(tool: str, count: int, first_seq: int) -> str:
    """The same call with the same result again, with other calls between."""
    return (
        f"Stall: `{tool}` has been called {count} times since step {first_seq} with the same "
        "arguments and returned the same result each time. Calling it again will not tell you "
        "anything new: use that result, or change the arguments or the approach. "
        "You may re-plan once."
    )


class Recurrence(Rule):
    """Identical calls apart: ``warn_at`` of them within ``repeat_window`` calls warn."""

    __slots__ = ("cleared", "recurring")
    kind = Kind.REPEAT

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.recurring: dict[str, tuple[int, ...] | None] = {}
        """Repeated full signature -> seqs of its latest occurrences (``None``: reported)."""
        self.cleared = 0
        """The exempt or approval call that last cleared ``recurring`` (its seq)."""

    def on_repeat(
        self, facts: Facts, run: RunDetector, state: Action, findings: list[Finding]
    ) -> Action:
        """Judge a repeated call: the ``warn_at``-th within the window warns."""
        signature = facts.signature
        if facts.call.status is not OK or facts.exempt or facts.approval or signature is None:
            return state
        changed = run.changed_seq
        if changed > self.cleared:
            self.cleared = changed
            self.recurring.clear()  # the world may have changed: reading again is new
        assert facts.repeat_of is not None
        return self._judge(facts, signature, facts.repeat_of, run, state, findings)

    def forget(self, memory: int, run: RunDetector) -> None:
        """Forget what is older than the run's bound."""
        if self.recurring:
            self.recurring = {k: v for k, v in self.recurring.items() if run.remembers(k)}

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        return super().nbytes() + 64 + (ENTRY_BYTES + 64) * len(self.recurring)

    def _judge(
        self,
        facts: Facts,
        signature: str,
        first_seq: int,
        run: RunDetector,
        state: Action,
        findings: list[Finding],
    ) -> Action:
        recurring = self.recurring
        before = recurring.get(signature, (first_seq,))
        if before is None or ACTION_SEVERITY[state] >= WARN_SEVERITY:
            recurring[signature] = None  # reported, by this rule or another
            return state
        window = self.policy.repeat_window
        if window is None:
            return state  # off: only back-to-back repeats count
        tool, seq = facts.call.tool, facts.seq
        warn_at = self.policy.thresholds_for(tool)[0]
        seqs = recurring[signature] = (*before, seq)[-warn_at:]
        if len(seqs) < warn_at or seq - seqs[0] >= window:
            return state
        recurring[signature] = None
        if _loop_reported(run, seq, window):
            return state
        if facts.consecutive > 1:
            repeat = run.rule(Repeat)
            if repeat is not None:
                repeat.fired = Action.WARN  # the same loop: its streak's warn is this one
        findings.append(
            Finding(
                Kind.REPEAT,
                Action.WARN,
                tool,
                signature,
                warn_at,
                seqs[0],
                seq,
                run.round_number(),
                message(tool, warn_at, seqs[0]),
                seqs[1] if seqs[0] == first_seq else seqs[0],  # the first repeat among them
            )
        )
        return Action.WARN


def _loop_reported(run: RunDetector, seq: int, window: int) -> bool:
    """Whether a cycle is under way, or a repeat or cycle finding fired within the window."""
    cycle = run.rule(Cycle)
    if cycle is not None and cycle.under_way():
        return True
    for action in (Action.WARN, Action.BREAK):
        finding = run.latest(action)
        if finding is not None and finding.kind in _LOOP_KINDS and seq - finding.seq < window:
            return True
    return False
