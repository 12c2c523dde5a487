"""Shared test fixtures: keep this small, several test modules rely on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import hypothesis_profiles  # noqa: F401  (registers and loads the profile)
import pytest
from otlp_sink import OtlpSink

from otel_stall import ModelCall, ToolCall, load_events

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures_dir() -> Path:
    """The directory of hand-made JSONL traces."""
    return FIXTURES


@pytest.fixture
def trace_events() -> Callable[[str], list[ToolCall | ModelCall]]:
    """Load a fixture trace by stem (``"loop"``), failing the test on any bad line."""

    def load(stem: str) -> list[ToolCall | ModelCall]:
        result = load_events(FIXTURES / f"{stem}.jsonl")
        assert result.errors == []
        return result.events

    return load


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    """A loopback OTLP gRPC receiver that counts what the gateway forwards."""
    with OtlpSink() as running:
        yield running
