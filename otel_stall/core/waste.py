"""A run's stall onset and what the stall wasted: one definition for every output.

The stall began at the first call that brought nothing new in the evidence of
the finding that first raised the verdict to ``warn`` or above
(:attr:`~otel_stall.core.records.Finding.onset_seq`): the first repeat of a
repeated call, the first round of a no-new-facts or refused-rounds streak, the
second period of a cycle, the first repeated failure of a failure loop. A
finding of a model call (monologue, chanting, a model failure loop), a budget
or a delegate begins it where it fired.

Waste runs from there to the run's end: the tool calls from the onset call on
(it included), the model calls that ended after it started and their tokens,
and the seconds from its start to the run's last call's end. Span attributes,
metrics, JSON, the table, Markdown, HTML and ``compare`` all read these.

Decisions:

- The onset call is in the past when the finding fires (a streak is judged at
  its fifth round), so until the onset each call that brought nothing new,
  failed or repeated leaves a :data:`Mark` of the run's model calls and tokens
  so far. Healthy calls leave none. At most :data:`MARKS` are kept: a streak
  longer than that counts its tool calls exactly, and its model calls, tokens
  and seconds from the oldest mark kept (a little less than they were).
- Once the onset is fixed, marks are dropped: the waste is then counts only.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from otel_stall.core.records import ModelCall

__all__ = ["MARKS", "Mark", "Waste"]

MARKS: Final = 64
"""Marks of possible onsets kept before a stall (see the module's decisions)."""
MARK_BYTES: Final = 120
"""Estimated bytes of one mark: a tuple of five ints and its deque slot."""

Mark = tuple[int, int, int, int, int]
"""A possible onset: (seq, start_ns, model calls, model calls with tokens, tokens) so far."""


class Waste:
    """One run's model-call counts, its possible onsets, and its onset once fixed."""

    __slots__ = ("marks", "model_calls", "onset", "token_calls", "tokens")

    def __init__(self) -> None:
        self.onset: Mark | None = None
        self.marks: deque[Mark] | None = None
        """Calls before the onset that brought nothing new: where a stall may have begun."""
        self.model_calls = 0
        """Model calls ended so far."""
        self.token_calls = 0
        """Model calls ended so far whose tokens were captured."""
        self.tokens = 0
        """Their tokens."""

    def count(self, call: ModelCall) -> None:
        """Count a model call that ended, and its tokens where captured."""
        self.model_calls += 1
        tokens = call.input_tokens, call.output_tokens
        if tokens != (None, None):
            self.token_calls += 1
            self.tokens += sum(t or 0 for t in tokens)

    def mark(self, seq: int, start_ns: int) -> None:
        """Mark a call where a stall may have begun: the run's model calls and tokens so far."""
        marks = self.marks
        if marks is None:
            marks = self.marks = deque(maxlen=MARKS)
        marks.append((seq, start_ns, self.model_calls, self.token_calls, self.tokens))

    def fix(self, seq: int, calls: int, current: tuple[int, int], moment_ns: int) -> None:
        """Fix the onset at call ``seq`` (0: at ``moment_ns``, before the next tool call).

        ``calls`` is the run's tool calls so far; ``current`` the (seq, start_ns) of
        the latest, which may be the onset without a mark (a budget's overspending call).
        """
        counts = (self.model_calls, self.token_calls, self.tokens)
        onset: Mark = (calls + 1, moment_ns, *counts)
        if 0 < seq <= calls:
            for mark in self.marks or ():
                if mark[0] >= seq:  # exact, or (a streak longer than MARKS) the oldest kept
                    onset = mark if mark[0] == seq else (seq, *mark[1:])
                    break
            else:
                if current[0] == seq:
                    onset = (seq, current[1], *counts)
        self.onset = onset
        self.marks = None

    def wasted(self, calls: int, end_ns: int) -> dict[str, Any]:
        """The report's ``wasted_*`` and ``onset_seq`` fields; empty without a stall."""
        onset = self.onset
        if onset is None:
            return {}
        seq, start_ns, models, token_calls, tokens = onset
        return {
            "wasted_calls": max(0, calls - seq + 1),
            "wasted_tokens": self.tokens - tokens if self.token_calls > token_calls else None,
            "wasted_seconds": max(0, end_ns - start_ns) / 1e9,
            "wasted_model_calls": self.model_calls - models,
            "onset_seq": seq,
        }

    @property
    def nbytes(self) -> int:
        """Estimated bytes held: the slots and the marks."""
        marks = self.marks
        return 96 + (0 if marks is None else 640 + MARK_BYTES * len(marks))
