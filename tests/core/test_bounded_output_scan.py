"""#27 item 3, as the attack: one huge model output must not cost the app's thread much."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from otel_stall import ConfigError, Conventions
from otel_stall.conventions import model_content
from otel_stall.core import chanting

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
