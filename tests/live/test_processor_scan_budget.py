"""A run's budget of output text (``run_scan_bytes``), live: bounded, and as the replay has it."""

from __future__ import annotations

import json

import pytest
from stall_pipeline import make_pipeline

from otel_stall import StallPolicy, analyse_spans
from otel_stall.core import chanting
from otel_stall.core.policy import MIN_RUN_SCAN_BYTES
from otel_stall.live.enriched import span_record


def _output(text: str) -> str:
    return json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": text}]}])


@pytest.mark.slow
def test_a_run_of_many_large_outputs_reads_its_budget_and_agrees_with_the_replay() -> None:
    """Forty 300 KB outputs, then the same message five times: live reads 1 MiB, no more.

    Once the run has read its budget, live does not read later outputs at all
    (its detector's count stops), and its findings and verdict are the replay's,
    which reads every output and lets the detector drop those past the budget.
    """
    policy = StallPolicy(run_scan_bytes=MIN_RUN_SCAN_BYTES)
    pipe = make_pipeline(policy=policy)
    texts = [f"answer {i} " + "z " * 150_000 for i in range(40)]
    texts += ["the very same long message " * 12_000] * 5
    with pipe.tracer.start_as_current_span(
        "invoke_agent writer",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"},
    ) as agent:
        run = pipe.processor.run_for(agent.get_span_context())
        for text in texts:
            with pipe.tracer.start_as_current_span(
                "chat m", attributes={"gen_ai.operation.name": "chat"}
            ) as model:
                model.set_attribute("gen_ai.output.messages", _output(text))
        assert run is not None
        assert run.detector is not None
        scanned = run.detector.scanned_bytes
    pipe.provider.force_flush()
    assert MIN_RUN_SCAN_BYTES <= scanned <= MIN_RUN_SCAN_BYTES + chanting.SCAN_BYTES
    live = [(f.kind, f.action) for f in pipe.findings]
    records = [span_record(s) for s in pipe.spans()]
    (result,) = analyse_spans(records, policy).values()
    (report,) = result.reports
    assert [(f.kind, f.action) for f in report.findings] == live
    assert not any(f.kind == "monologue" for f in report.findings)  # its repeats went unread
