"""The framework fixtures are whole and readable; their verdicts are the conventions' tests.

Each file under ``tests/frameworks/<framework>/`` is listed once in
``manifest.toml`` and each listed file exists, holds OTLP/JSON lines, and
replays without input errors. What otel-stall should say about each (verdict,
runs, tool calls) is in the manifest, for the conventions rewrite to test.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_stall import replay

tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
HERE = Path(__file__).parent
MANIFEST: list[dict[str, Any]] = tomllib.loads((HERE / "manifest.toml").read_text())["fixture"]
KEYS = {"path", "framework", "version", "layout", "scenario", "verdict", "runs", "tool_calls"}


def test_manifest_lists_every_fixture_once() -> None:
    """Every captured file has exactly one manifest entry and every entry a file."""
    listed = [entry["path"] for entry in MANIFEST]
    on_disk = sorted(str(p.relative_to(HERE)) for p in HERE.glob("*/*/*.jsonl"))
    assert sorted(listed) == on_disk


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["path"] for e in MANIFEST])
def test_fixture_entry_is_complete(entry: dict[str, Any]) -> None:
    """An entry names its framework, version, layout, scenario and expectations."""
    assert entry.keys() >= KEYS
    assert entry["verdict"] in {"ok", "warn", "escalate", "break"}
    assert entry["runs"] >= 1
    assert entry["tool_calls"] >= 1


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["path"] for e in MANIFEST])
def test_fixture_replays_without_input_errors(entry: dict[str, Any]) -> None:
    """Each fixture is OTLP/JSON lines that the replay reads span by span."""
    path = HERE / entry["path"]
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert lines
    assert all("resourceSpans" in line for line in lines)
    result = replay(str(path))
    assert result.errors == []
    assert result.spans > 0
