"""StallPolicy: defaults, environment resolution and the errors that say how to fix them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from otel_stall import ConfigError, DuplicateMode, StallPolicy, Status
from otel_stall.core.volatile import DEFAULT_VOLATILE_KEYS


def test_defaults_follow_the_references() -> None:
    """Warn at 3, break at 5, one shared limit of 5, run-wide duplicates, budgets off."""
    policy = StallPolicy.from_env({})
    assert (policy.warn_at, policy.break_at) == (3, 5)
    assert (policy.no_new_facts_limit, policy.refused_rounds_limit, policy.failure_limit) == (
        5,
    ) * 3
    assert policy.duplicate_mode is DuplicateMode.RUN
    assert policy.duplicate_consecutive_limit == 3
    assert (policy.max_tool_calls, policy.max_rounds) == (None, None)
    assert policy.max_remembered_calls == 10_000
    assert policy.overloaded_allowance == 3
    assert policy.volatile_keys == DEFAULT_VOLATILE_KEYS
    assert policy.scrub_values is False
    assert policy == StallPolicy()


@pytest.mark.parametrize(
    ("env", "explicit", "field", "expected"),
    [
        pytest.param({}, {}, "warn_at", 3, id="default"),
        pytest.param({"OTEL_STALL_WARN_AT": "2"}, {}, "warn_at", 2, id="env-over-default"),
        pytest.param(
            {"OTEL_STALL_WARN_AT": "2"}, {"warn_at": 4}, "warn_at", 4, id="explicit-over-env"
        ),
        pytest.param(
            {"OTEL_STALL_WARN_AT": "2"}, {"warn_at": None}, "warn_at", 2, id="none-is-unset"
        ),
        pytest.param(
            {"OTEL_STALL_MAX_TOOL_CALLS": "40"}, {}, "max_tool_calls", 40, id="optional-int"
        ),
        pytest.param({"OTEL_STALL_MAX_ROUNDS": "off"}, {}, "max_rounds", None, id="off"),
        pytest.param(
            {"OTEL_STALL_MAX_REMEMBERED_CALLS": "off"},
            {},
            "max_remembered_calls",
            None,
            id="remember-everything",
        ),
        pytest.param(
            {"OTEL_STALL_DUPLICATE_MODE": " Consecutive "},
            {},
            "duplicate_mode",
            DuplicateMode.CONSECUTIVE,
            id="mode",
        ),
        pytest.param({"OTEL_STALL_SCRUB_VALUES": "yes"}, {}, "scrub_values", True, id="bool"),
        pytest.param({"OTEL_STALL_NATIVE": "off"}, {}, "native", False, id="native-off"),
        pytest.param(
            {"OTEL_STALL_EXEMPT_TOOLS": "poll, wait_*"},
            {},
            "exempt_tools",
            frozenset({"poll", "wait_*"}),
            id="names",
        ),
        pytest.param(
            {"OTEL_STALL_VOLATILE_KEYS": "+etag"},
            {},
            "volatile_keys",
            (*DEFAULT_VOLATILE_KEYS, "etag"),
            id="volatile-extend",
        ),
        pytest.param(
            {"OTEL_STALL_TOOL_THRESHOLDS": "search=3:5, deploy=1:2"},
            {},
            "tool_thresholds",
            {"search": (3, 5), "deploy": (1, 2)},
            id="thresholds",
        ),
        pytest.param({"OTEL_STALL_FAILURE_STREAK": "7"}, {}, "failure_limit", 7, id="override-one"),
        pytest.param(
            {"OTEL_STALL_NO_PROGRESS_LIMIT": "4"}, {}, "refused_rounds_limit", 4, id="shared"
        ),
    ],
)
def test_resolution_order(
    env: dict[str, str], explicit: dict[str, Any], field: str, expected: Any
) -> None:
    """An explicit argument wins over OTEL_STALL_*, which wins over the default."""
    assert getattr(StallPolicy.from_env(env, **explicit), field) == expected


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        pytest.param(
            {"OTEL_STALL_WARN_AT": "three"},
            ["OTEL_STALL_WARN_AT='three'", "whole number", "unset it"],
            id="not-a-number",
        ),
        pytest.param(
            {"OTEL_STALL_WARN_AT": "0"},
            ["warn_at", "at least 1", "OTEL_STALL_WARN_AT='0'"],
            id="too-small",
        ),
        pytest.param(
            {"OTEL_STALL_BREAK_AT": "2"},
            ["break_at", "raise break_at or lower warn_at", "OTEL_STALL_BREAK_AT"],
            id="break-below-warn",
        ),
        pytest.param(
            {"OTEL_STALL_DUPLICATE_MODE": "sometimes"}, ["run, consecutive or off"], id="mode"
        ),
        pytest.param({"OTEL_STALL_SCRUB_VALUES": "maybe"}, ["true or false"], id="bool"),
        pytest.param(
            {"OTEL_STALL_TOOL_THRESHOLDS": "search"},
            ["TOOL=WARN:BREAK", "search=3:5"],
            id="thresholds-shape",
        ),
        pytest.param(
            {"OTEL_STALL_TOOL_THRESHOLDS": "search=5:3"},
            ["search=5:3", "1 <= WARN <= BREAK"],
            id="thresholds-order",
        ),
        pytest.param(
            {"OTEL_STALL_MAX_TOOL_CALLS": "-1"},
            ["max_tool_calls", "None for no limit"],
            id="budget",
        ),
        pytest.param(
            {"OTEL_STALL_MAX_REMEMBERED_CALLS": "-5"},
            ["max_remembered_calls", "None for no limit"],
            id="memory",
        ),
        pytest.param(
            {"OTEL_STALL_OVERLOADED_ALLOWANCE": "-2"},
            ["overloaded_allowance", "0 or more"],
            id="allowance",
        ),
    ],
)
def test_errors_say_how_to_fix(env: dict[str, str], fragments: list[str]) -> None:
    """A bad value names the setting or variable and what to set it to."""
    with pytest.raises(ConfigError) as info:
        StallPolicy.from_env(env)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_unknown_explicit_setting_lists_the_valid_ones() -> None:
    """A misspelt keyword is rejected with the list of real settings."""
    with pytest.raises(ConfigError, match=r"unknown setting.*warn_att.*valid ones are.*warn_at"):
        StallPolicy.from_env({}, warn_att=3)


def test_direct_construction_validates() -> None:
    """Building the dataclass directly applies the same checks."""
    with pytest.raises(ConfigError, match="failure_streak"):
        StallPolicy(failure_streak=0)


def test_policy_is_frozen_and_its_table_read_only() -> None:
    """Neither the policy nor its per-tool thresholds can change after creation."""
    policy = StallPolicy(tool_thresholds={"search": (2, 4)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.warn_at = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        policy.tool_thresholds["search"] = (1, 1)  # type: ignore[index]


@pytest.mark.parametrize(
    ("tool", "expected"), [("search", (2, 4)), ("deploy", (1, 1)), ("read", (3, 5))]
)
def test_thresholds_for(tool: str, expected: tuple[int, int]) -> None:
    """Per-tool thresholds fall back to the global pair."""
    policy = StallPolicy(tool_thresholds={"search": (2, 4), "deploy": (1, 1)})
    assert policy.thresholds_for(tool) == expected


@pytest.mark.parametrize(
    ("names", "tool", "expected"),
    [
        ("poll", "poll", True),
        ("poll", "poll_job", False),
        ("poll*", "poll_job", True),
        ("wait_for_?", "wait_for_x", True),
        ("*.status", "jobs.status", True),
        ("", "poll", False),
    ],
)
def test_tool_lists_accept_names_and_globs(names: str, tool: str, expected: bool) -> None:
    """Exempt and approval lists match exact names or glob patterns."""
    policy = StallPolicy(exempt_tools=frozenset(names.split(",") if names else ()))
    assert policy.is_exempt(tool) is expected
    approvals = StallPolicy.from_env({"OTEL_STALL_APPROVAL_TOOLS": names})
    assert approvals.needs_approval(tool) is expected


def test_policy_signer_uses_its_normalisation() -> None:
    """The policy's volatile keys and scrub option reach the signer it carries."""
    policy = StallPolicy(volatile_keys=(*DEFAULT_VOLATILE_KEYS, "etag"))
    a = policy.signer.sign("t", {"x": 1, "etag": "a"}, None, Status.OK)
    b = policy.signer.sign("t", {"x": 1, "etag": "b", "ts": 3}, None, Status.OK)
    assert a == b
    plain = StallPolicy().signer.sign("t", {"x": 1, "etag": "b"}, None, Status.OK)
    assert plain.call_signature != a.call_signature
