"""The batch analysis orders a trace's starts and ends itself: the arrival order never matters."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from otel_stall.conventions import SpanRecord
from otel_stall.core.policy import StallPolicy
from otel_stall.offline.analysis import analyse_spans
from otel_stall.otlp.decode import spans_from_json

FRAMEWORKS = Path(__file__).parent / "frameworks"
TRACES = sorted(
    p
    for pattern in ("*/*/handoff.jsonl", "*/*/subagent.jsonl", "*/*/loop.jsonl")
    for p in FRAMEWORKS.glob(pattern)
)
POLICY = StallPolicy()


def _records(path: Path) -> list[SpanRecord]:
    return [
        s for line in path.read_bytes().splitlines() for s in spans_from_json(orjson.loads(line))
    ]


def _outcome(records: list[SpanRecord]) -> list[tuple[object, ...]]:
    """Every run's key, verdict, findings and the ``stall.*`` attributes, by trace.

    The reports are listed in the order their runs' first calls arrived: compared as a set.
    """
    out: list[tuple[object, ...]] = []
    for trace_id, result in sorted(analyse_spans(records, POLICY).items()):
        runs = [
            (
                repr(r.run_key),
                r.verdict,
                r.tool_calls,
                [(f.kind, f.seq, f.action) for f in r.findings],
            )
            for r in result.reports
        ]
        out.append((trace_id, sorted(runs, key=repr)))
        out.append((trace_id, sorted((k, sorted(v.items())) for k, v in result.attributes.items())))
    return out


@pytest.mark.parametrize("path", TRACES, ids=[str(p.relative_to(FRAMEWORKS)) for p in TRACES])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_any_arrival_order_gives_the_same_runs(path: Path, data: st.DataObject) -> None:
    """Framework traces with handoffs, sub-agents and loops, spans shuffled: the same runs."""
    records = _records(path)
    shuffled = data.draw(st.permutations(records))
    assert _outcome(list(shuffled)) == _outcome(records)
