"""Settings of the live processor: explicit argument, then ``OTEL_STALL_*``, then default.

The detection thresholds live in :class:`~otel_stall.core.policy.StallPolicy` and the
span-mapping markers in :class:`~otel_stall.conventions.Conventions`; this
module holds what only the live pipeline needs: memory bounds, redaction, the
kill switch and error handling. All three read the same ``OTEL_STALL_*``
namespace, so an operator can configure a deployed agent without code changes.

Environment variables read by the processor (see ``ENV_VARS`` for the full set):

============================  ==========  ==============================================
variable                      default     meaning
============================  ==========  ==============================================
OTEL_STALL_ENABLED            true        false: forward every span untouched
OTEL_STALL_REDACT             false       strip raw arguments/results, keep digests
OTEL_STALL_MAX_RUNS           10000       runs tracked at once (oldest evicted first)
OTEL_STALL_RUN_TTL_SECONDS    3600        a run idle this long is finished and dropped
OTEL_STALL_MAX_TRACKED_SPANS  100000      open spans whose ancestry is remembered
OTEL_STALL_MAX_STATE_BYTES    268435456   estimated bytes of runs and spans held at once
OTEL_STALL_RUN_REPORT_SIZE    1000        ledger rows and findings a live run's report keeps
OTEL_STALL_LIVE_EVENTS        true        add ``stall.detected`` to the open run span
OTEL_STALL_EVENT_SIGNAL       span        ``stall.detected`` as span events, logs, logs/dup
OTEL_STALL_FULL_ATTRIBUTES    false       write ``stall.*`` attributes at their defaults too
OTEL_STALL_RAISE_ERRORS       (auto)      re-raise internal errors; auto = under pytest
OTEL_STALL_INSTRUMENT         false       under ``opentelemetry-instrument``: wrap its exporters
============================  ==========  ==============================================
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from otel_stall.core.config import (
    ConfigError,
    check,
    env_field,
    parse_bool,
    parse_float,
    parse_int,
    resolve,
)
from otel_stall.live.log_events import SIGNALS, EventSignal, parse_signal

PYTEST_ENV: Final = "PYTEST_CURRENT_TEST"
"""Set by pytest while a test runs: internal errors are re-raised there by default."""


def _parse_optional_bool(text: str) -> bool | None:
    """``auto`` (or empty) means decide at run time; otherwise a boolean."""
    if text.strip().lower() in ("", "auto"):
        return None
    return parse_bool(text)


@dataclass(frozen=True)
class ProcessorSettings:
    """How the live processor runs. Build it directly or with :meth:`from_env`."""

    enabled: bool = env_field(True, "ENABLED", parse_bool, "true or false")
    """Off: every span is forwarded untouched, with no detection (a kill switch)."""
    redact: bool = env_field(False, "REDACT", parse_bool, "true or false")
    """Strip raw arguments, results and messages from exported copies; keep the digests."""
    max_runs: int = env_field(10_000, "MAX_RUNS", parse_int, "a whole number such as 10000")
    """Runs tracked at once; beyond it the least recently active run is finished early."""
    run_ttl_seconds: float = env_field(
        3600.0, "RUN_TTL_SECONDS", parse_float, "a number of seconds such as 3600"
    )
    """A run with no activity for this long is finished and dropped (its span never ended)."""
    max_tracked_spans: int = env_field(
        100_000, "MAX_TRACKED_SPANS", parse_int, "a whole number such as 100000"
    )
    """Open spans whose run ancestry is remembered; the oldest are forgotten beyond it."""
    max_state_bytes: int = env_field(
        256 << 20, "MAX_STATE_BYTES", parse_int, "a whole number of bytes such as 268435456"
    )
    """Estimated bytes the processor's runs and tracked spans hold at once (256 MiB).

    A count bounds nothing on its own: a run's detector grows with its calls (up
    to ``run_report_size`` rows and the policy's ``max_remembered_calls``). Beyond
    this, the least recently active runs are finished early; tracked spans get at
    most a quarter of it. See ``stats().bytes_held``.
    """
    run_report_size: int = env_field(
        1000, "RUN_REPORT_SIZE", parse_int, "a whole number such as 1000"
    )
    """Ledger rows and findings a run's report keeps (the newest), for the guard.

    The latest finding of each action is kept too, so the guard names the worst.
    Each tool span already carries its own row; counts, the stall score and the
    verdict cover the whole run. Bounds the memory of a run that never ends.
    """
    live_events: bool = env_field(True, "LIVE_EVENTS", parse_bool, "true or false")
    """Add ``stall.detected`` events to the run span while it is open."""
    event_signal: EventSignal = env_field(
        "span", "EVENT_SIGNAL", parse_signal, "span, logs or logs/dup"
    )
    """Where ``stall.detected`` goes: span events, log-based events (the Logs API), or both.

    OpenTelemetry is deprecating span events in favour of log records with an
    event name; ``logs/dup`` eases the move, as the semantic conventions' own
    opt-in does.
    """
    full_attributes: bool = env_field(False, "FULL_ATTRIBUTES", parse_bool, "true or false")
    """Write every ``stall.*`` attribute, those at their default too (omitted by default).

    Absent means the default the attributes reference gives (``stall.repeat.count``
    1, ``stall.new_fact`` true, ``stall.action`` continue, ...): each omitted
    attribute costs the OTLP exporter about 16k instructions per span to encode.
    For backends or queries that cannot treat a missing attribute as its default.
    """
    raise_errors: bool | None = env_field(
        None, "RAISE_ERRORS", _parse_optional_bool, "true, false or auto"
    )
    """Re-raise internal errors instead of failing open; ``None`` means only under pytest."""
    instrument: bool = env_field(False, "INSTRUMENT", parse_bool, "true or false")
    """Under ``opentelemetry-instrument``: wrap the exporters it set up (read only there).

    Off by default, so that installing otel-stall changes nobody's auto-instrumented
    telemetry unasked. See :mod:`otel_stall.live.auto_instrument`.
    """

    def __post_init__(self) -> None:
        check(self.max_runs >= 1, "max_runs", "must be at least 1 (the default is 10000)")
        check(
            self.run_ttl_seconds > 0,
            "run_ttl_seconds",
            "must be a positive number of seconds (the default is 3600)",
        )
        check(
            self.max_tracked_spans >= 1,
            "max_tracked_spans",
            "must be at least 1 (the default is 100000)",
        )
        check(
            self.max_state_bytes >= 1 << 20,
            "max_state_bytes",
            "must be at least 1048576 (1 MiB; the default is 268435456)",
        )
        check(
            self.run_report_size >= 1,
            "run_report_size",
            "must be at least 1 (the default is 1000)",
        )
        check(
            self.event_signal in SIGNALS,
            "event_signal",
            f"must be one of {', '.join(SIGNALS)} (the default is span)",
        )

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **explicit: Any
    ) -> ProcessorSettings:
        """Resolve each setting from ``explicit``, then ``OTEL_STALL_*``, then the default."""
        return resolve(cls, explicit, environ)

    @property
    def should_raise(self) -> bool:
        """Whether an internal error is re-raised right now (``auto``: under pytest)."""
        if self.raise_errors is None:
            return PYTEST_ENV in os.environ
        return self.raise_errors


def _env_vars() -> dict[str, str]:
    """Every ``OTEL_STALL_*`` variable otel-stall reads, with what it expects."""
    from otel_stall.conventions import Conventions
    from otel_stall.core.policy import StallPolicy

    out: dict[str, str] = {}
    for cls in (StallPolicy, Conventions, ProcessorSettings):
        for f in fields(cls):
            env = f.metadata.get("env")
            if env:
                out[env] = f.metadata["hint"]
    return out


ENV_VARS: Final[Mapping[str, str]] = _env_vars()
"""``OTEL_STALL_*`` variable -> the kind of value it takes, for docs and error messages."""

__all__ = ["ENV_VARS", "ConfigError", "ProcessorSettings"]
