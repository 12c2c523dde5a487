"""What the HTML report shows about each call beyond its ledger row: time, model turns, previews.

The ledger says what a call brought; a person reading a loop also asks how
long each call took and how much model work sat between two calls. The
replay already holds every call's times and every model call's token counts
(payload-free copies); :func:`call_facts` walks a run's calls in time order
once and sums the model turns before each tool call. It keeps four numbers
per call, so the report's cost grows with the calls listed, not with the
payloads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from otel_stall.core.records import LedgerRow, ModelCall, ToolCall
from otel_stall.core.signing import Digests
from otel_stall.offline.preview import preview_head

__all__ = ["CALL_FACTS_KEY", "HEADS_KEY", "call_facts", "keep_heads", "run_heads"]

CALL_FACTS_KEY: Final = "call_facts"
"""``RunReport.attributes`` key: :func:`call_facts`' result, by tool span id."""
HEADS_KEY: Final = "preview_heads"
"""``RunReport.attributes`` key: :func:`run_heads`' result."""

CallFacts = tuple[int, int, int, int | None]
"""Call duration (ns), model turns since the previous call, their time (ns), their tokens."""


def call_facts(
    keys: Iterable[tuple[int, int, str]],
    tools: Mapping[str, tuple[ToolCall, Any, Any, Any]],
    models: Mapping[str, tuple[int, Any, ModelCall]],
) -> dict[str, CallFacts]:
    """Per tool span id, its duration and the model turns that came since the previous call.

    ``keys`` are the run's (time, order, span id) in the order the detector
    was fed; a model span may appear twice (its start and its end), and is
    counted once. Tokens stay ``None`` when no turn before the call reported any.
    """
    facts: dict[str, CallFacts] = {}
    seen: set[str] = set()
    turns = turn_ns = 0
    tokens: int | None = None
    for _, _, span_id in keys:
        tool = tools.get(span_id)
        if tool is not None:
            call = tool[0]
            facts[span_id] = (max(call.end_ns - call.start_ns, 0), turns, turn_ns, tokens)
            turns = turn_ns = 0
            tokens = None
            continue
        model = models.get(span_id)
        if model is None or span_id in seen:
            continue
        seen.add(span_id)
        turns += 1
        turn = model[2]
        turn_ns += max(turn.end_ns - turn.start_ns, 0)
        used = (turn.input_tokens or 0) + (turn.output_tokens or 0)
        if turn.input_tokens is not None or turn.output_tokens is not None:
            tokens = (tokens or 0) + used
    return facts


def run_heads(rows: Iterable[LedgerRow], heads: Mapping[str, str] | None) -> dict[str, str]:
    """The preview heads of one run's calls: arguments by call signature, results by signature.

    The trace's heads are dropped once it is analysed; a run keeps only its
    own calls' (at most 160 characters each), for the report to preview.
    """
    if not heads:
        return {}
    out: dict[str, str] = {}
    for row in rows:
        for key in (row.call_signature, row.signature):
            head = heads.get(key)
            if head is not None:
                out[key] = head
    return out


def keep_heads(heads: dict[str, str] | None, call: ToolCall, digests: Digests) -> dict[str, str]:
    """``heads`` with this call's: its arguments' by call signature, its result's by signature.

    Once per distinct call (a slice of the text each), so a loop costs one
    head; the findings' previews and the HTML report's are made from them.
    """
    if heads is None:
        heads = {}
    for key, value in ((digests.call_signature, call.arguments), (digests.signature, call.result)):
        if key not in heads:
            head = preview_head(value)
            if head is not None:
                heads[key] = head
    return heads
