"""The replay library API: traces split across files, report-only memory mode, summaries."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from otel_stall import Replayer, ReplayResult, replay
from otel_stall.offline.report import run_json

GOLDEN = Path(__file__).parent.parent / "golden"
JSONL = GOLDEN / "formats" / "otlp.jsonl"


def _runs(result: ReplayResult) -> list[dict[str, object]]:
    return sorted((run_json(r) for r in result.reports), key=lambda r: str(r["trace_id"]))


def test_trace_split_across_files_in_reverse(tmp_path: Path) -> None:
    """Spans of one trace spread over several files, read last file first, give the same runs."""
    lines = JSONL.read_bytes().splitlines(keepends=True)
    paths = []
    for i, line in enumerate(reversed(lines)):
        path = tmp_path / f"part-{i}.jsonl"
        path.write_bytes(line)
        paths.append(str(path))
    split = Replayer().analyse(paths)
    whole = replay(str(JSONL))
    assert split.errors == []
    assert split.files == len(lines)
    assert _runs(split) == _runs(whole)


def test_report_only_mode_keeps_reports_but_not_enrichment() -> None:
    """keep_enrichment=False drops the per-span attributes; reports and counts are unchanged."""
    lean = Replayer().analyse([str(JSONL)], keep_enrichment=False)
    full = Replayer().analyse([str(JSONL)])
    assert lean.traces == {}
    assert len(full.traces) == 4
    assert lean.summary() == full.summary()
    assert _runs(lean) == _runs(full)


def test_summary_counts_verdicts_and_formats() -> None:
    """The summary lists every verdict, and each input's detected format is recorded."""
    result = Replayer().analyse([str(JSONL), str(GOLDEN / "formats" / "otlp.binpb")])
    summary = result.summary()
    assert summary["verdicts"] == {"ok": 1, "warn": 0, "escalate": 1, "break": 1}
    assert summary["files"] == 2
    assert summary["spans"] == 80
    assert summary["traces"] == 4  # the same traces in both files
    assert sorted(result.formats.values()) == ["otlp-json-lines", "otlp-proto"]
    assert result.worst.value == "break"


@pytest.mark.parametrize("was_enabled", [True, False], ids=["collector on", "collector off"])
@pytest.mark.parametrize("pause_gc", [True, False])
def test_replay_leaves_the_garbage_collector_as_it_found_it(
    was_enabled: bool, pause_gc: bool
) -> None:
    """pause_gc gives the same runs, and the collector ends in the state it started in."""
    (gc.enable if was_enabled else gc.disable)()
    try:
        result = Replayer(pause_gc=pause_gc).analyse([str(JSONL)])
        assert gc.isenabled() is was_enabled
    finally:
        gc.enable()
    assert _runs(result) == _runs(replay(str(JSONL)))
