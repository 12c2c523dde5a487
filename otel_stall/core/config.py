"""Resolve frozen-dataclass settings: explicit argument, then ``OTEL_STALL_*``, then default.

Each field names its environment variable and parser in its metadata, so a
setting, its variable and its error message live in one place.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

ENV_PREFIX = "OTEL_STALL_"


class ConfigError(ValueError):
    """A setting has a value that cannot work; the message says how to fix it."""


def env_field(
    default: Any,
    env: str,
    parse: Callable[[str], Any],
    hint: str,
) -> Any:
    """A dataclass field read from ``OTEL_STALL_<env>`` when not given explicitly."""
    meta = {"env": ENV_PREFIX + env, "parse": parse, "hint": hint}
    if isinstance(default, list | dict | set):
        raise TypeError("mutable defaults are not allowed")
    return dataclasses.field(default=default, metadata=meta)


def parse_int(text: str) -> int:
    """A whole number."""
    return int(text.strip())


def parse_optional_int(text: str) -> int | None:
    """A whole number, or empty / ``none`` / ``off`` for no limit."""
    text = text.strip().lower()
    return None if text in ("", "none", "off", "0") else int(text)


def parse_bool(text: str) -> bool:
    """``true``/``false`` and the usual spellings."""
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{text!r} is not a boolean")


def parse_names(text: str) -> frozenset[str]:
    """A comma-separated list of names or glob patterns."""
    return frozenset(p.strip() for p in text.split(",") if p.strip())


def parse_float(text: str) -> float:
    """A decimal number."""
    return float(text.strip())


def resolve(cls: type[T], explicit: Mapping[str, Any], environ: Mapping[str, str] | None) -> T:
    """Build ``cls`` from explicit values, then the environment, then field defaults."""
    environ = os.environ if environ is None else environ
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    settable = [name for name, f in fields.items() if f.init]
    unknown = set(explicit) - set(settable)
    if unknown:
        names = ", ".join(sorted(unknown))
        raise ConfigError(f"unknown setting(s) {names}; valid ones are {', '.join(settable)}")
    values: dict[str, Any] = {}
    from_env: dict[str, str] = {}
    for name in settable:
        f = fields[name]
        if name in explicit and explicit[name] is not None:
            values[name] = explicit[name]
            continue
        var = f.metadata.get("env")
        raw = environ.get(var) if var else None
        if raw is None:
            continue
        try:
            values[name] = f.metadata["parse"](raw)
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"{var}={raw!r} is invalid ({exc}): set it to {f.metadata['hint']}, "
                f"or unset it to use the default ({f.default!r})"
            ) from None
        from_env[name] = f"{var}={raw!r}"
    try:
        return cls(**values)
    except ConfigError as exc:
        # Name the variables the bad values came from: that is where the fix goes.
        sources = [text for name, text in from_env.items() if str(exc).startswith(name)]
        if not sources:
            raise
        raise ConfigError(f"{exc} (from {', '.join(sources)})") from None


def check(condition: bool, name: str, message: str) -> None:
    """Raise a :class:`ConfigError` that names the setting and how to fix it."""
    if not condition:
        raise ConfigError(f"{name}: {message}")
