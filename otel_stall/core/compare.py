"""Cross-run comparison: whether two runs of the same task loop on the same call.

The "two models" test: run the stalled task again (another model,
another seed) and compare the two ledgers. A loop signature found in both
runs points at what the runs share, the prompt or the tool schema. A loop in
only one run points at that run's model. The comparison uses full signatures
(tool, normalised arguments, result, status), which do not depend on the
model, only on the calls it made and what came back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from otel_stall.core.records import Kind, LedgerRow, RunKey, RunReport

__all__ = [
    "Comparison",
    "Conclusion",
    "LoopSignature",
    "Wasted",
    "compare_runs",
    "looping_signatures",
]


class Conclusion(str, enum.Enum):
    """What the overlap of two runs' loops suggests."""

    PROMPT_OR_SCHEMA = "prompt_or_schema"
    """Both runs loop on the same call: the prompt or the tool schema is the likely cause."""
    MODEL = "model"
    """Only one run loops: that run's model behaviour is the likely cause."""
    DIFFERENT_LOOPS = "different_loops"
    """Both runs loop, on different calls: each model loops its own way."""
    NO_LOOP = "no_loop"
    """Neither run loops."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class LoopSignature:
    """One looping signature and how often each run made that call."""

    signature: str
    tool: str
    count_a: int
    """Occurrences in run A (0 when A never made the call)."""
    count_b: int
    """Occurrences in run B (0 when B never made the call)."""


@dataclass(frozen=True, slots=True)
class Wasted:
    """What one run's loop cost after its stall began (see :class:`RunReport`)."""

    calls: int
    """Tool calls from the stall's onset on, the onset call included."""
    tokens: int | None
    """``None`` when the run's token usage was not captured."""
    seconds: float
    model_calls: int = 0
    """Model calls that ended after the onset call started."""
    from_seq: int | None = None
    """The seq the stall began at."""

    @classmethod
    def of(cls, report: RunReport) -> Wasted | None:
        """The run's wasted cost, or ``None`` for a run that never stalled."""
        if report.wasted_calls is None:
            return None
        return cls(
            report.wasted_calls,
            report.wasted_tokens,
            report.wasted_seconds or 0.0,
            report.wasted_model_calls or 0,
            report.onset_seq,
        )


@dataclass(frozen=True, slots=True)
class Comparison:
    """The loops two runs share, the loops each has alone, and what that suggests."""

    run_a: RunKey
    run_b: RunKey
    shared: tuple[LoopSignature, ...]
    only_a: tuple[LoopSignature, ...]
    only_b: tuple[LoopSignature, ...]
    conclusion: Conclusion
    wasted_a: Wasted | None = None
    """What run A's loop cost; ``None`` when A never stalled."""
    wasted_b: Wasted | None = None

    @property
    def explanation(self) -> str:
        """One sentence for a person reading the comparison."""
        if self.conclusion is Conclusion.PROMPT_OR_SCHEMA:
            tools = ", ".join(sorted({s.tool for s in self.shared}))
            return (
                f"Both runs loop on the same call ({tools}): look at the prompt or the tool "
                "schema, which both runs share."
            )
        if self.conclusion is Conclusion.MODEL:
            which = "A" if self.only_a else "B"
            return f"Only run {which} loops: look at that run's model behaviour."
        if self.conclusion is Conclusion.DIFFERENT_LOOPS:
            return "Both runs loop, but on different calls: each model loops its own way."
        return "Neither run loops."


def looping_signatures(report: RunReport, min_count: int = 3) -> dict[str, int]:
    """Signatures that loop in ``report``, with how many times each occurred.

    A signature loops when a ``repeat`` or ``cycle`` finding names it, or when it occurs at
    least ``min_count`` times in the ledger, back to back or not. Calls whose
    content was not captured never repeat in the ledger, so they never loop:
    two runs without content capture do not "share" a loop.
    """
    counts = _counts(report.ledger)
    repeats = {f.signature for f in report.findings if f.kind in _LOOP_KINDS}
    return {s: n for s, n in counts.items() if n >= min_count or s in repeats}


def compare_runs(a: RunReport, b: RunReport, min_count: int = 3) -> Comparison:
    """Compare the loops of two runs of the same task (see :func:`looping_signatures`)."""
    if min_count < 2:
        raise ValueError(f"min_count must be at least 2 (a loop repeats), got {min_count}")
    counts_a, counts_b = _counts(a.ledger), _counts(b.ledger)
    loops_a, loops_b = looping_signatures(a, min_count), looping_signatures(b, min_count)
    tools = {f.signature: f.tool for f in (*a.findings, *b.findings)}
    tools.update((row.signature, row.tool) for row in (*a.ledger, *b.ledger))

    def entry(signature: str) -> LoopSignature:
        count_a, count_b = counts_a.get(signature, 0), counts_b.get(signature, 0)
        return LoopSignature(signature, tools.get(signature, ""), count_a, count_b)

    shared = tuple(entry(s) for s in loops_a if s in loops_b)
    only_a = tuple(entry(s) for s in loops_a if s not in loops_b)
    only_b = tuple(entry(s) for s in loops_b if s not in loops_a)
    if shared:
        conclusion = Conclusion.PROMPT_OR_SCHEMA
    elif only_a and only_b:
        conclusion = Conclusion.DIFFERENT_LOOPS
    elif only_a or only_b:
        conclusion = Conclusion.MODEL
    else:
        conclusion = Conclusion.NO_LOOP
    return Comparison(
        a.run_key, b.run_key, shared, only_a, only_b, conclusion, Wasted.of(a), Wasted.of(b)
    )


_LOOP_KINDS = frozenset({Kind.REPEAT, Kind.CYCLE})


def _counts(ledger: tuple[LedgerRow, ...]) -> dict[str, int]:
    """Occurrences per signature, in order of first appearance."""
    counts: dict[str, int] = {}
    for row in ledger:
        counts[row.signature] = max(counts.get(row.signature, 0), row.count)
    return counts
