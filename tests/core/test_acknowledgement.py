"""Honest work is not a stall: a bare acknowledgement to a new call is progress (issue 28 item 2).

Thirty writes to thirty files answered "write complete" are thirty things done, not one
fact and twenty-nine repeats. The same write with the same arguments is still a repeat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from stall_pipeline import STYLES, Agent, Call

from otel_stall import (
    Kind,
    ModelCall,
    OtlpJsonLinesSpanExporter,
    Replayer,
    StallPolicy,
    StallSpanProcessor,
    ToolCall,
    Verdict,
    detect,
)
from otel_stall.core.rules.acknowledgement import acknowledgements
from otel_stall.semconv import StallAttributes as S

ACKS: list[Any] = [
    "write complete",
    "Write complete.",
    {"status": "ok"},
    {"success": True},
    '{"status": "OK"}',
    True,
    None,
    "",
    {"result": "saved"},
]


@pytest.mark.parametrize("ack", ACKS, ids=[repr(a) for a in ACKS])
def test_thirty_distinct_writes_answered_with_an_acknowledgement_stay_ok(ack: Any) -> None:
    """30 writes to 30 files, one per round, each answered with the same acknowledgement."""
    events: list[Any] = []
    for n in range(30):
        events += [ModelCall(), ToolCall("write_file", {"path": f"out/{n}.txt", "text": n}, ack)]
    (report,) = detect(events)
    assert report.verdict is Verdict.OK, report.findings
    assert all(row.new_fact for row in report.ledger)


def test_a_two_pass_batch_of_distinct_writes_stays_ok() -> None:
    """Two passes over ten files (a draft, then the final text), five writes per round."""
    events: list[Any] = []
    for text in ("draft", "final"):
        for batch in range(2):
            events.append(ModelCall())
            events += [
                ToolCall("write_file", {"path": f"{n}.md", "text": text}, "write complete")
                for n in range(batch * 5, batch * 5 + 5)
            ]
    (report,) = detect(events)
    assert report.verdict is Verdict.OK, report.findings


def test_the_same_write_repeated_still_breaks() -> None:
    """The same write with the same arguments and the same answer is a repeat: it breaks."""
    write = ToolCall("write_file", {"path": "out.txt", "text": "x"}, "write complete")
    (report,) = detect([write] * 6)
    assert report.verdict is Verdict.BREAK
    assert {f.kind for f in report.findings} >= {Kind.REPEAT}
    assert [row.new_fact for row in report.ledger] == [True] + [False] * 5


def test_a_result_that_only_looks_like_a_status_is_no_acknowledgement() -> None:
    """Reworded searches returning the same real text still break: only bare statuses count."""
    events: list[Any] = []
    for n in range(6):
        events += [ModelCall(), ToolCall("search", {"q": f"take {n}"}, "Spans describe work.")]
    (report,) = detect(events)
    assert report.verdict is Verdict.BREAK
    assert [f.kind for f in report.findings] == [Kind.NO_NEW_FACTS]


def test_acknowledgements_are_worked_out_once_per_signer() -> None:
    """The vocabulary's digests are remembered by signer, and differ for another normaliser."""
    policy = StallPolicy()
    first = acknowledgements(policy.signer)
    assert acknowledgements(policy.signer) is first
    assert policy.signer.sign("w", {}, {"status": "ok"}, "ok").result_digest in first
    assert (
        policy.signer.sign("w", {}, {"status": "ok", "bytes": 12}, "ok").result_digest not in first
    )


def test_distinct_acknowledged_writes_stay_ok_live_and_replayed(tmp_path: Path) -> None:
    """Through a real SDK pipeline: the live run span and its replay both say ok."""
    capture = tmp_path / "spans.jsonl"
    exported = InMemorySpanExporter()
    processor = StallSpanProcessor(
        SimpleSpanProcessor(exported), SimpleSpanProcessor(OtlpJsonLinesSpanExporter(str(capture)))
    )
    provider = TracerProvider()
    provider.add_span_processor(processor)
    agent = Agent(provider.get_tracer("writer"), STYLES[0], name="writer")
    with agent.run():
        for n in range(30):
            agent.round(Call("write_file", {"path": f"out/{n}.txt"}, "write complete"))
    provider.shutdown()
    (run,) = [s for s in exported.get_finished_spans() if s.name == "invoke_agent writer"]
    assert (run.attributes or {})[S.VERDICT] == "ok"
    (report,) = Replayer().analyse([str(capture)]).reports
    assert report.verdict is Verdict.OK
