"""Which keys normalisation drops: the names, their spellings, and a policy's edits per tool.

Kept apart from the signer so the vocabulary (documented in docs/concepts.md)
reads in one place; :mod:`otel_stall.core.signing` applies it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from otel_stall.core.config import ConfigError

__all__ = [
    "DEFAULT_VOLATILE_KEYS",
    "RESULT_VOLATILE_KEYS",
    "is_glob",
    "parse_result_keys",
    "parse_volatile_keys",
    "squash",
]

DEFAULT_VOLATILE_KEYS: Final[tuple[str, ...]] = (
    "ts",
    "timestamp",
    "request_id",
    "trace_id",
    "span_id",
    "nonce",
    "tool_call_id",
)
"""Keys dropped at any depth before hashing: they differ on every call by design.

``tool_call_id``: LangChain wraps every tool result in a message that carries
the model's call id, which made each result of a looping call look new."""

_TIMINGS: Final = ("duration", "elapsed", "latency", "elapsed_time", "execution_time")
_UNITS: Final = ("", "_ms", "_s", "_sec", "_seconds", "_us", "_ns")
RESULT_VOLATILE_KEYS: Final[tuple[str, ...]] = (
    *(f"{timing}{unit}" for timing in (*_TIMINGS, "response_time") for unit in _UNITS),
    "request_id",
    "x_request_id",
    "message_id",
    "run_id",
)
"""Keys dropped from results only, on top of the volatile keys: timings and per-call ids.

A result that differs from the last only in how long it took or in the id
its server gave the call is the same result (a page fetched again with a
fresh ``durationMs``). In arguments the same names are facts
(``wait(duration=5)``, ``get_run(run_id=...)``), so they stay there.
Matched as every volatile key is: ignoring case, ``_`` and ``-``, so
``durationMs``, ``duration_ms`` and ``duration-ms`` are one name. A policy adds
or removes names per tool (``StallPolicy.result_volatile_keys``)."""


def squash(name: str) -> str:
    """A key as volatile names match it: ``_`` and ``-`` dropped (``request-id``: ``requestid``)."""
    return name.replace("_", "").replace("-", "") if "_" in name or "-" in name else name


def is_glob(name: str) -> bool:
    """Whether a tool name in a policy is a pattern (``*``, ``?``, ``[``) rather than a name."""
    return any(c in name for c in "*?[")


def parse_volatile_keys(spec: str | Iterable[str]) -> tuple[str, ...]:
    """Accept ``"ts,nonce,*_at"`` or an iterable; ``+`` in front adds to the defaults."""
    if isinstance(spec, str):
        extend = spec.startswith("+")
        items = tuple(p.strip() for p in spec.lstrip("+").split(",") if p.strip())
        return DEFAULT_VOLATILE_KEYS + items if extend else items
    return tuple(spec)


def parse_result_keys(
    spec: str | Mapping[str, str | Iterable[str]] | None,
) -> dict[str, tuple[str, ...]]:
    """``"ping=-latency_ms;search=+took,-run_id"`` (or a mapping) into ``{tool: edits}``.

    A tool is a name or a glob (``*`` for every tool); each edit is ``+key``
    (added to its results' volatile keys; a bare ``key`` too) or ``-key``
    (removed, in any of its spellings).
    """
    if not spec:
        return {}
    if isinstance(spec, str):
        pairs = [part.partition("=") for part in spec.split(";") if part.strip()]
        if any(not sep or not tool.strip() for tool, sep, _ in pairs):
            raise ConfigError(f"result_volatile_keys: {spec!r} is not TOOL=+KEY,-KEY;...")
        entries: dict[str, str | Iterable[str]] = {t.strip(): e for t, _, e in pairs}
    else:
        entries = dict(spec)
    out: dict[str, tuple[str, ...]] = {}
    for tool, given in entries.items():
        edits = given.split(",") if isinstance(given, str) else list(given)
        done = tuple(e if e[0] in "+-" else "+" + e for e in (e.strip() for e in edits) if e)
        if not done or any(len(e) < 2 for e in done):
            raise ConfigError(f"result_volatile_keys: {tool} needs keys such as +took or -latency")
        out[str(tool)] = done
    return out
