"""#27 item 3, as the attack: one huge model output must not cost the app's thread much."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from otel_stall import ConfigError, Conventions, StallPolicy
from otel_stall.conventions import SpanRecord, model_content
from otel_stall.core import chanting
from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import MIN_RUN_SCAN_BYTES, RUN_SCAN_BYTES

PHRASE = "The agent keeps thinking about the same problem again and again today. "


def _attrs(text: str) -> dict[str, str]:
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return {"gen_ai.output.messages": json.dumps([message])}


def test_a_10_mb_output_is_read_within_the_bound() -> None:
    """A 10 MB chanting output still chants, and reading it holds a few times the bound."""
    text = (PHRASE * 150_000)[:10_000_000]
    attrs = _attrs(text)
    tracemalloc.start()
    try:
        said, scan = model_content.output_hashes(attrs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scan is not None
    assert scan.peak >= 10
    assert said is not None
    # The JSON text is parsed once (10 MB); the scan adds a few times the 256 KB bound,
    # not tens of times the output (the unbounded scan peaked at 280 MB).
    assert peak < 3 * len(text) + 40 * chanting.SCAN_BYTES


def test_outputs_that_differ_past_the_bound_keep_different_digests() -> None:
    """The text past the bound is still hashed: two long outputs that differ there differ."""
    head = "word " * (chanting.SCAN_BYTES // 5 + 10)
    assert chanting.digest(head + "one") != chanting.digest(head + "two")


def test_an_output_within_the_bound_keeps_its_digest() -> None:
    """Up to the bound the digest is the normalised text's: case and spacing do not count."""
    assert chanting.digest("Same   Words\nhere") == chanting.digest("same words here")


def test_a_cut_output_is_not_carried_into_the_next() -> None:
    """Its end was not read, so the next output cannot continue its last window."""
    _, scan = chanting.read(PHRASE * 10, limit=100)
    assert not scan.whole
    assert len(scan.tail) == 0


def test_the_bound_is_a_setting() -> None:
    """``OTEL_STALL_OUTPUT_SCAN_BYTES`` bounds the scan: chanting past it is not read.

    A chanting passage that starts after 8 KB of distinct prose chants under the
    default bound and not under a 4 KiB one; a bound under 1 KiB is refused.
    """
    prose = " ".join(f"word{i}" for i in range(1_500))
    attrs = _attrs(prose + " " + PHRASE * 20)
    assert len(prose) > 8_192
    default = Conventions.from_env({})
    small = Conventions.from_env({"OTEL_STALL_OUTPUT_SCAN_BYTES": "4096"})
    _, wide = model_content.output_hashes(attrs, (), default.output_scan_bytes)
    _, narrow = model_content.output_hashes(attrs, (), small.output_scan_bytes)
    assert wide is not None
    assert wide.peak >= 10
    assert narrow is not None
    assert narrow.peak < 10
    with pytest.raises(ConfigError, match="OTEL_STALL_OUTPUT_SCAN_BYTES"):
        Conventions.from_env({"OTEL_STALL_OUTPUT_SCAN_BYTES": "10"})


# -- the run's budget: the text all of a run's outputs may have read -----------------------


def _model_span(index: int, text: str) -> SpanRecord:
    """A chat span of one run's agent span, its output ``text``."""
    start = 1_000 + 10 * index
    attrs: dict[str, object] = {"gen_ai.operation.name": "chat", **_attrs(text)}
    return SpanRecord("t" * 32, f"{index + 1:016x}", "a" * 16, "chat m", start, start + 5, attrs)


def _agent_span(calls: int) -> SpanRecord:
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "writer"}
    return SpanRecord("t" * 32, "a" * 16, None, "invoke_agent writer", 0, 10**9 + calls, attrs)


def _run(texts: list[str], policy: StallPolicy) -> tuple[set[str], int]:
    """The finding kinds of one run of model outputs, and the text its detector read."""
    conventions = Conventions()
    detector = RunDetector(policy)
    for index, text in enumerate(texts):
        model = conventions.read(_model_span(index, text)).model
        assert model is not None
        detector.model_call(model)
        detector.model_ended(model)
    kinds = {str(f.kind) for f in detector.finish().findings}
    return kinds, detector.scanned_bytes


def test_a_run_reads_at_most_its_budget_of_output_text() -> None:
    """Many large outputs: the run's detector reads its budget's worth, then no more.

    Each output is read to the per-output bound (256 KiB); once a run has read
    ``run_scan_bytes`` (here the least accepted, 1 MiB), later outputs are
    dropped unread: what the run holds and reads stays bounded, however long it goes.
    """
    policy = StallPolicy(run_scan_bytes=MIN_RUN_SCAN_BYTES)
    big = [
        f"output {i} " + "x " * 150_000 for i in range(8)
    ]  # 300 KB each, all distinct: twice the budget
    _, scanned = _run(big, policy)
    assert scanned >= MIN_RUN_SCAN_BYTES
    assert scanned <= MIN_RUN_SCAN_BYTES + chanting.SCAN_BYTES


def test_outputs_past_the_budget_are_not_judged() -> None:
    """The same long message written again and again after the budget is spent is not read.

    With room left it is a monologue; with the budget spent by earlier outputs,
    the repeats are never read, so nothing fires on them.
    """
    same = "the same long answer " * 15_000
    spent = [f"distinct {i} " + "y " * 150_000 for i in range(4)]
    roomy, _ = _run([*spent, *[same] * 5], StallPolicy())
    tight, _ = _run([*spent, *[same] * 5], StallPolicy(run_scan_bytes=MIN_RUN_SCAN_BYTES))
    assert "monologue" in roomy
    assert "monologue" not in tight


def test_the_run_budget_is_a_setting_with_a_floor() -> None:
    """``OTEL_STALL_RUN_SCAN_BYTES`` sets it; under 1 MiB is refused, saying how to fix it."""
    assert StallPolicy.from_env({}).run_scan_bytes == RUN_SCAN_BYTES
    set_ = StallPolicy.from_env({"OTEL_STALL_RUN_SCAN_BYTES": "2097152"})
    assert set_.run_scan_bytes == 2 * 1024 * 1024
    with pytest.raises(ConfigError, match=r"OTEL_STALL_RUN_SCAN_BYTES.*at least 1048576"):
        StallPolicy.from_env({"OTEL_STALL_RUN_SCAN_BYTES": "4096"})
