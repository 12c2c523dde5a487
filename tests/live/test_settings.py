"""ProcessorSettings: explicit > OTEL_STALL_* > default, and errors that say how to fix."""

from __future__ import annotations

import pytest

from otel_stall import ConfigError, ProcessorSettings, StallSpanProcessor
from otel_stall.live.settings import ENV_VARS


def test_defaults() -> None:
    """Without env or arguments the defaults apply."""
    s = ProcessorSettings.from_env({})
    assert (s.enabled, s.redact, s.live_events, s.raise_errors) == (True, False, True, None)
    assert (s.max_runs, s.run_ttl_seconds, s.max_tracked_spans) == (10_000, 3600.0, 100_000)
    assert s.run_report_size == 1000


def test_env_then_explicit() -> None:
    """OTEL_STALL_* overrides defaults; an explicit argument overrides the environment."""
    env = {
        "OTEL_STALL_REDACT": "true",
        "OTEL_STALL_MAX_RUNS": "7",
        "OTEL_STALL_RUN_TTL_SECONDS": "2.5",
        "OTEL_STALL_MAX_TRACKED_SPANS": "99",
        "OTEL_STALL_ENABLED": "off",
        "OTEL_STALL_LIVE_EVENTS": "no",
        "OTEL_STALL_RAISE_ERRORS": "false",
        "OTEL_STALL_RUN_REPORT_SIZE": "12",
    }
    s = ProcessorSettings.from_env(env)
    assert (s.redact, s.max_runs, s.run_ttl_seconds, s.max_tracked_spans) == (True, 7, 2.5, 99)
    assert s.run_report_size == 12
    assert (s.enabled, s.live_events, s.raise_errors) == (False, False, False)
    assert ProcessorSettings.from_env(env, max_runs=3, redact=False).max_runs == 3
    assert ProcessorSettings.from_env(env, redact=False).redact is False


@pytest.mark.parametrize(
    ("value", "expected"), [("auto", None), ("", None), ("1", True), ("no", False)]
)
def test_raise_errors_auto(value: str, expected: bool | None) -> None:
    """RAISE_ERRORS takes auto (decide under pytest) or a boolean."""
    assert ProcessorSettings.from_env({"OTEL_STALL_RAISE_ERRORS": value}).raise_errors is expected


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"OTEL_STALL_MAX_RUNS": "many"}, "OTEL_STALL_MAX_RUNS='many' is invalid"),
        ({"OTEL_STALL_REDACT": "maybe"}, "set it to true or false"),
        ({"OTEL_STALL_RUN_TTL_SECONDS": "soon"}, "a number of seconds"),
        ({"OTEL_STALL_EVENT_SIGNAL": "traces"}, "span, logs or logs/dup"),
    ],
)
def test_bad_env_values_say_how_to_fix(env: dict[str, str], fragment: str) -> None:
    """A bad variable names itself, what it expects, and the default."""
    with pytest.raises(ConfigError, match="unset it to use the default") as caught:
        ProcessorSettings.from_env(env)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"max_runs": 0}, "max_runs"),
        ({"run_ttl_seconds": 0}, "run_ttl_seconds"),
        ({"max_tracked_spans": 0}, "max_tracked_spans"),
        ({"run_report_size": 0}, "run_report_size"),
        ({"event_signal": "traces"}, "event_signal"),
    ],
)
def test_invalid_values_are_rejected(kwargs: dict[str, object], name: str) -> None:
    """Bounds that cannot work are refused with the setting's name."""
    with pytest.raises(ConfigError, match=name):
        ProcessorSettings(**kwargs)  # type: ignore[arg-type]


def test_unknown_setting_lists_valid_ones() -> None:
    """A misspelt setting is refused with the valid names."""
    with pytest.raises(ConfigError, match="max_runs"):
        ProcessorSettings.from_env({}, max_run=5)


def test_env_vars_document_every_knob() -> None:
    """ENV_VARS lists the processor, policy and convention variables."""
    for name in (
        "OTEL_STALL_ENABLED",
        "OTEL_STALL_REDACT",
        "OTEL_STALL_MAX_RUNS",
        "OTEL_STALL_RUN_TTL_SECONDS",
        "OTEL_STALL_MAX_TRACKED_SPANS",
        "OTEL_STALL_RUN_REPORT_SIZE",
        "OTEL_STALL_MAX_REMEMBERED_CALLS",
        "OTEL_STALL_LIVE_EVENTS",
        "OTEL_STALL_EVENT_SIGNAL",
        "OTEL_STALL_RAISE_ERRORS",
        "OTEL_STALL_WARN_AT",
        "OTEL_STALL_BREAK_AT",
        "OTEL_STALL_OVERLOADED_MARKERS",
        "OTEL_STALL_REFUSED_MARKERS",
    ):
        assert name in ENV_VARS


def test_processor_arguments_override_settings() -> None:
    """Constructor keywords win over a given settings object."""
    base = ProcessorSettings(max_runs=5, redact=False)
    processor = StallSpanProcessor(settings=base, redact=True, max_runs=9, run_ttl=1.5)
    assert (processor.settings.redact, processor.settings.max_runs) == (True, 9)
    assert processor.settings.run_ttl_seconds == 1.5
