"""The stall policy: every threshold the detector applies, in one frozen value.

Defaults follow the reference designs: warn and allow one re-plan at 3
unchanged repeats, break at 5, escalate failures, and one shared limit of 5
for the three "tries that go nowhere" rules (rounds without a new fact,
rounds in which every call was refused, and failure streaks). Each of the
three can still be overridden on its own.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from otel_stall.core.config import (
    ConfigError,
    check,
    env_field,
    parse_bool,
    parse_int,
    parse_names,
    parse_optional_int,
    resolve,
)
from otel_stall.core.signing import Normaliser, Signer
from otel_stall.core.volatile import DEFAULT_VOLATILE_KEYS, parse_result_keys, parse_volatile_keys

RUN_SCAN_BYTES: Final = 16 * 1024 * 1024
"""Default of ``run_scan_bytes``: 64 outputs read to the per-output bound (256 KiB)."""
MIN_RUN_SCAN_BYTES: Final = 1024 * 1024
"""The least ``run_scan_bytes`` accepted: four outputs read to the per-output bound."""


class DuplicateMode(str, enum.Enum):
    """How ``duplicate_call`` decides that a call should not run again."""

    RUN = "run"
    """Refuse a call whose tool and arguments already ran anywhere in this run."""
    CONSECUTIVE = "consecutive"
    """Refuse only the Nth back-to-back identical call (the chat check)."""
    OFF = "off"

    def __str__(self) -> str:
        return self.value


def _parse_thresholds(text: str) -> dict[str, tuple[int, int]]:
    """``search=3:5,deploy=2:3`` into ``{"search": (3, 5), "deploy": (2, 3)}``."""
    out: dict[str, tuple[int, int]] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        tool, sep, spec = item.partition("=")
        warn, colon, brk = spec.partition(":")
        if not (sep and colon and tool.strip()):
            raise ValueError(f"{item!r} is not TOOL=WARN:BREAK")
        out[tool.strip()] = (int(warn), int(brk))
    return out


def _parse_mode(text: str) -> DuplicateMode:
    """``run``, ``consecutive`` or ``off``, in any case."""
    return DuplicateMode(text.strip().lower())


def _names(value: Iterable[str] | str) -> frozenset[str]:
    return parse_names(value) if isinstance(value, str) else frozenset(value)


def _matches(tool: str, names: frozenset[str]) -> bool:
    if not names:
        return False  # the common case, on every tool call
    if tool in names:
        return True
    return any(any(c in n for c in "*?[") and fnmatch.fnmatchcase(tool, n) for n in names)


@dataclass(frozen=True)
class StallPolicy:
    """Thresholds and tool lists. Build it directly, or with :meth:`from_env`."""

    warn_at: int = env_field(3, "WARN_AT", parse_int, "a whole number such as 3")
    """Back-to-back identical signatures that warn and allow one re-plan."""
    break_at: int = env_field(5, "BREAK_AT", parse_int, "a whole number above WARN_AT")
    """Back-to-back identical signatures that break the loop."""
    repeat_window: int | None = env_field(
        10, "REPEAT_WINDOW", parse_optional_int, "a whole number, or 'off'"
    )
    """``warn_at`` identical signatures within this many calls warn, back to back or not.

    ``None`` (``off``): only back-to-back identical signatures count.
    """
    tool_thresholds: Mapping[str, tuple[int, int]] = env_field(
        None, "TOOL_THRESHOLDS", _parse_thresholds, "'tool=WARN:BREAK,...' such as 'search=3:5'"
    )
    """Per-tool ``(warn_at, break_at)``: search and deploy deserve different limits."""
    no_progress_limit: int = env_field(5, "NO_PROGRESS_LIMIT", parse_int, "a whole number")
    """The shared default for the three rules below."""
    no_new_facts_rounds: int | None = env_field(
        None, "NO_NEW_FACTS_ROUNDS", parse_optional_int, "a whole number"
    )
    refused_rounds: int | None = env_field(
        None, "REFUSED_ROUNDS", parse_optional_int, "a whole number"
    )
    failure_streak: int | None = env_field(
        None, "FAILURE_STREAK", parse_optional_int, "a whole number"
    )
    failure_loop_at: int = env_field(3, "FAILURE_LOOP_AT", parse_int, "a whole number such as 3")
    """The same call, or the model, failing the same way this many times in a row escalates."""
    cycle_warn_at: int = env_field(3, "CYCLE_WARN_AT", parse_int, "a whole number such as 3")
    """Full periods of a cycle of 2 to ``max_cycle_length`` calls that warn."""
    cycle_break_at: int = env_field(
        5, "CYCLE_BREAK_AT", parse_int, "a whole number at or above CYCLE_WARN_AT"
    )
    """Full periods of a cycle that break the loop."""
    max_cycle_length: int = env_field(
        5, "MAX_CYCLE_LENGTH", parse_int, "a whole number from 1 (off) to 20"
    )
    """The longest cycle looked for; 1 leaves cycles to the repeat rule. Memory is O(this)."""
    chanting: bool = env_field(True, "CHANTING", parse_bool, "true or false")
    """Look for a chunk of text repeated close together in the model's output."""
    chant_repeats: int = env_field(
        10, "CHANT_REPEATS", parse_int, "a whole number such as 10 (at least 2)"
    )
    """Times one chunk (8 words) must occur within 2,000 characters of output to warn."""
    run_scan_bytes: int = env_field(
        RUN_SCAN_BYTES, "RUN_SCAN_BYTES", parse_int, "a number of bytes, at least 1048576"
    )
    """How much model output text one run's monologue and chanting rules read in all (16 MiB).

    Each output is read up to ``Conventions.output_scan_bytes``; once a run has
    read this much, its later outputs are not read at all, so a run of endless
    large outputs costs bounded CPU on its text (issue 27)."""
    item_novelty: bool = env_field(True, "ITEM_NOVELTY", parse_bool, "true or false")
    """A list result is new only if it holds an item not seen before in the run."""
    near_duplicates: bool = env_field(False, "NEAR_DUPLICATES", parse_bool, "true or false")
    """A result within ``near_duplicate_bits`` of one seen in the run (its 64-bit SimHash
    over 3-word shingles) is no new fact: noise in free text (a timestamp, an id) is not
    news. Off by default: it changes the verdict of healthy traces (see the concepts page)."""
    near_duplicate_bits: int = env_field(
        3, "NEAR_DUPLICATE_BITS", parse_int, "a whole number from 0 to 32, such as 3"
    )
    """Bits two results' sketches may differ by and still be near duplicates."""
    duplicate_mode: DuplicateMode = env_field(
        DuplicateMode.RUN, "DUPLICATE_MODE", _parse_mode, "run, consecutive or off"
    )
    duplicate_consecutive_limit: int = env_field(
        3, "DUPLICATE_CONSECUTIVE_LIMIT", parse_int, "a whole number such as 3"
    )
    exempt_tools: frozenset[str] = env_field(
        frozenset(), "EXEMPT_TOOLS", parse_names, "comma-separated tool names or globs"
    )
    """Tools that repeat by protocol (polling, waiting on a subagent)."""
    approval_tools: frozenset[str] = env_field(
        frozenset(), "APPROVAL_TOOLS", parse_names, "comma-separated tool names or globs"
    )
    """Tools with approved side effects: every result of theirs is a new fact."""
    max_tool_calls: int | None = env_field(
        None, "MAX_TOOL_CALLS", parse_optional_int, "a whole number, or 'off'"
    )
    max_rounds: int | None = env_field(
        None, "MAX_ROUNDS", parse_optional_int, "a whole number, or 'off'"
    )
    overloaded_allowance: int = env_field(
        3, "OVERLOADED_ALLOWANCE", parse_int, "a whole number such as 3"
    )
    """Overloaded calls per run that do not count against ``max_tool_calls``."""
    max_remembered_calls: int | None = env_field(
        10_000, "MAX_REMEMBERED_CALLS", parse_optional_int, "a whole number, or 'off'"
    )
    """Distinct calls and results a run remembers for the repeat, duplicate and novelty rules.

    Every that many calls, older ones are forgotten, so a run that never ends
    (a loop nobody stops) holds bounded memory; ``None`` remembers everything.
    """
    volatile_keys: tuple[str, ...] = env_field(
        DEFAULT_VOLATILE_KEYS, "VOLATILE_KEYS", parse_volatile_keys, "'ts,nonce' or '+extra_key'"
    )
    result_volatile_keys: Mapping[str, tuple[str, ...]] = env_field(
        None,
        "RESULT_VOLATILE_KEYS",
        parse_result_keys,
        "'TOOL=+KEY,-KEY;...' such as 'ping=-latency'",
    )
    """Per tool (a name or glob; ``*`` for every tool), keys added to (``+took``) or removed
    from (``-latency``) the volatile keys of its results, whose defaults add timings and
    per-call ids (:data:`~otel_stall.core.volatile.RESULT_VOLATILE_KEYS`) to ``volatile_keys``."""
    scrub_values: bool = env_field(False, "SCRUB_VALUES", parse_bool, "true or false")
    native: bool = env_field(True, "NATIVE", parse_bool, "true or false")
    """Sign with the compiled canonicaliser where built. Off: the same digests, slower."""
    signer: Signer = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        # A read-only view: the policy is frozen, its per-tool table too.
        given = self.tool_thresholds or {}
        thresholds = {str(k): (int(v[0]), int(v[1])) for k, v in given.items()}
        set_(self, "tool_thresholds", MappingProxyType(thresholds))
        set_(self, "exempt_tools", _names(self.exempt_tools))
        set_(self, "approval_tools", _names(self.approval_tools))
        set_(self, "duplicate_mode", DuplicateMode(self.duplicate_mode))
        set_(self, "volatile_keys", parse_volatile_keys(self.volatile_keys))
        result_keys = parse_result_keys(self.result_volatile_keys)
        set_(self, "result_volatile_keys", MappingProxyType(result_keys))
        self._validate()
        normaliser = Normaliser(self.volatile_keys, self.scrub_values, native=self.native)
        set_(
            self,
            "signer",
            Signer(
                normaliser,
                self.item_novelty,
                sketch=self._sketch(),
                result_keys=tuple(result_keys.items()),
            ),
        )

    def _validate(self) -> None:
        check(self.warn_at >= 1, "warn_at", "must be at least 1 (try 3)")
        check(
            self.break_at >= self.warn_at,
            "break_at",
            f"must be at least warn_at ({self.warn_at}); raise break_at or lower warn_at",
        )
        for tool, (warn, brk) in self.tool_thresholds.items():
            check(
                1 <= warn <= brk,
                "tool_thresholds",
                f"{tool}={warn}:{brk} needs 1 <= WARN <= BREAK, e.g. {tool}=3:5",
            )
        check(self.failure_loop_at >= 1, "failure_loop_at", "must be at least 1 (try 3)")
        check(self.cycle_warn_at >= 2, "cycle_warn_at", "must be at least 2 (try 3)")
        check(
            self.cycle_break_at >= self.cycle_warn_at,
            "cycle_break_at",
            f"must be at least cycle_warn_at ({self.cycle_warn_at})",
        )
        check(self.chant_repeats >= 2, "chant_repeats", "must be at least 2 (try 10)")
        check(
            type(self.run_scan_bytes) is int and self.run_scan_bytes >= MIN_RUN_SCAN_BYTES,
            "run_scan_bytes (OTEL_STALL_RUN_SCAN_BYTES)",
            f"{self.run_scan_bytes!r} is not a number of bytes of at least {MIN_RUN_SCAN_BYTES}; "
            f"give one such as {RUN_SCAN_BYTES}, or leave it unset for 16 MiB",
        )
        check(1 <= self.max_cycle_length <= 20, "max_cycle_length", "must be 1 (off) to 20")
        for name in ("no_progress_limit", "duplicate_consecutive_limit"):
            check(getattr(self, name) >= 1, name, "must be at least 1 (the default is 5 or 3)")
        for name in ("no_new_facts_rounds", "refused_rounds", "failure_streak"):
            value = getattr(self, name)
            check(
                value is None or value >= 1,
                name,
                "must be at least 1, or None for the shared limit",
            )
        for name in ("repeat_window", "max_tool_calls", "max_rounds", "max_remembered_calls"):
            value = getattr(self, name)
            check(value is None or value >= 1, name, "must be at least 1, or None for no limit")
        check(0 <= self.near_duplicate_bits <= 32, "near_duplicate_bits", "must be 0 to 32 (try 3)")
        check(self.overloaded_allowance >= 0, "overloaded_allowance", "must be 0 or more")

    def _sketch(self) -> Callable[[Any], int | None] | None:
        """The near-duplicate rule's sketch, made where digests are made, when it is on."""
        if not self.near_duplicates:
            return None
        from otel_stall.core.rules import near_duplicate

        return near_duplicate.sketch

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> StallPolicy:
        """Resolve each setting from ``explicit``, then ``OTEL_STALL_*``, then the default."""
        return resolve(cls, explicit, environ)

    def thresholds_for(self, tool: str) -> tuple[int, int]:
        """``(warn_at, break_at)`` for ``tool``."""
        return self.tool_thresholds.get(tool, (self.warn_at, self.break_at))

    def is_exempt(self, tool: str) -> bool:
        """Whether policy exempts ``tool`` from the repeat and duplicate checks."""
        return _matches(tool, self.exempt_tools)

    def needs_approval(self, tool: str) -> bool:
        """Whether policy marks ``tool`` as approval-gated (side effects)."""
        return _matches(tool, self.approval_tools)

    @property
    def no_new_facts_limit(self) -> int:
        """Rounds in a row with only already-seen results that end the run."""
        return self.no_new_facts_rounds or self.no_progress_limit

    @property
    def refused_rounds_limit(self) -> int:
        """Rounds in a row in which every call was refused that end the run."""
        return self.refused_rounds or self.no_progress_limit

    @property
    def failure_limit(self) -> int:
        """Failures in a row of one tool that escalate."""
        return self.failure_streak or self.no_progress_limit


__all__ = ["ConfigError", "DuplicateMode", "StallPolicy"]
