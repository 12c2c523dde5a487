"""``chanting``: one chunk of text repeated close together in the model's output.

The scan (chunks, hashes, windows, what is skipped) is
:mod:`otel_stall.core.chanting`'s; this rule judges the scans, output by output.

Decisions:

- ``chant_repeats`` occurrences warn, never more: text alone is not a loop
  that costs tool calls; the other rules stop one.
- The last output's closing chunks count only when no tool call came between
  (a tool call is the agent acting: its next text is about something new).
- A chant that goes on from output to output fires once; an output that does
  not chant ends it. An output that was not scanned ends the carry.
- ``chanting = false`` turns the rule off. Memory: at most one window of
  chunk hashes per run (16 KB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from otel_stall.core import chanting
from otel_stall.core.chanting import NO_CHUNKS
from otel_stall.core.records import Action, Finding, Kind, ModelCall
from otel_stall.core.rules.base import Rule

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy


def message(count: int) -> str:
    """The model's output repeating one passage over and over."""
    return (
        f"Stall: your output repeats the same passage ({count} times, close together). "
        "Stop repeating it: say what you need or what is blocking you, take a different "
        "step, or finish."
    )


class Chanting(Rule):
    """A chunk seen ``chant_repeats`` times within a window, in an output or carried over."""

    __slots__ = ("calls", "carry", "chanting")
    kind = Kind.CHANTING

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.carry = NO_CHUNKS
        """The last output's closing window of chunks, for the next output to continue."""
        self.calls = -1
        """Tool calls so far when the carry was written: a tool call since ends it."""
        self.chanting = False
        """Whether the last output chanted: a chant that goes on fires once."""

    def on_model_end(self, call: ModelCall, run: RunDetector) -> Finding | None:
        """Judge a model call as it ends."""
        scan = call.chant
        if scan is None or not self.policy.chanting:
            if self.carry:
                self.carry = NO_CHUNKS  # an output not read: the next cannot continue it
            return None
        calls = run.calls
        carry = self.carry if self.calls == calls else NO_CHUNKS
        peak, chunk = scan.peak, scan.chunk
        if carry and scan.head:
            joined, joined_chunk = chanting.across(carry, scan.head)
            if joined > peak:
                peak, chunk = joined, joined_chunk
        self.carry = chanting.carried(carry, scan)
        self.calls = calls
        if peak < self.policy.chant_repeats:
            self.chanting = False
            return None
        if self.chanting:
            return None
        self.chanting = True
        return Finding(
            Kind.CHANTING,
            Action.WARN,
            call.model or "the model",
            f"{chunk:016x}",
            peak,
            calls,
            calls,
            run.round_number(),
            message(peak),
        )

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        carry = self.carry
        return super().nbytes() + (0 if not carry else 2 * 80 + carry.nbytes)
