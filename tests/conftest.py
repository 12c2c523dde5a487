"""Shared test fixtures: keep this small, several test modules rely on it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from otlp_sink import OtlpSink

from otel_stall.core.records import ModelCall, ToolCall
from otel_stall.offline.jsonl import load_events

FIXTURES = Path(__file__).parent / "fixtures"

# Hypothesis profiles. `ci` (with CI=true, as .ci/run sets): the same examples on every run and
# every machine (derandomized), a fixed modest budget, no example database left in the clone.
# `dev` (otherwise): fresh random examples each run, failures remembered in .hypothesis/.
# Neither has a deadline or the too_slow health check: on a shared, noisy machine a timing must
# not decide pass or fail. A test's own @settings(max_examples=...) wins over either profile.
# `pytest --hypothesis-profile=NAME` picks one explicitly.
settings.register_profile(
    "ci",
    max_examples=50,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


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
