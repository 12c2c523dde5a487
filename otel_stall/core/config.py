"""Resolve frozen-dataclass settings: explicit argument, then ``OTEL_STALL_*``, then default.

Each field names its environment variable and parser in its metadata, so a
setting, its variable and its error message live in one place.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
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


# -- settings files ---------------------------------------------------------------------

_TOML_HINT = "correct the TOML syntax"


def read_settings_file(path: str, what: str, *, json_allowed: bool = True) -> dict[str, Any]:
    """A TOML (or JSON) settings file as a table; :class:`ConfigError` naming the file otherwise.

    ``what`` names the option (``--config``, ``--conventions``) in the message.
    Every way a file can be bad ends here as a message with the fix, never a
    traceback (issue 27): unreadable, not UTF-8 (with the byte offset), bad
    syntax, nested too deep for the parser (50,000 levels of ``[[[...``), or not
    a table at the top.
    """
    where = f"{what} {path}"
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise ConfigError(
            f"{where}: cannot read ({exc.strerror or exc}); name a readable file"
        ) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where}: not UTF-8 text (byte {exc.start}); save the file as UTF-8"
        ) from None
    is_json = json_allowed and (path.endswith(".json") or text.lstrip()[:1] == "{")
    kind = "JSON" if is_json else "TOML"
    try:
        obj = json.loads(text) if is_json else _toml().loads(text)
    except RecursionError:
        raise ConfigError(
            f"{where}: nested too deeply to read as {kind}; settings need a few levels at most"
        ) from None
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are both
        fix = "correct the JSON syntax" if is_json else _TOML_HINT
        raise ConfigError(f"{where}: invalid {kind} ({exc}); {fix}") from None
    if not isinstance(obj, dict):
        raise ConfigError(
            f"{where}: expected a table of settings at the top, not {kind} {type(obj).__name__}"
        )
    return obj


def _toml() -> Any:
    """The standard library's ``tomllib`` (3.11+), else its backport ``tomli``."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ConfigError("TOML needs the tomli package on Python 3.10; use JSON, or pip install tomli")


_NAME_LISTS = ("exempt_tools", "approval_tools")


def read_policy_file(path: str, what: str = "--config") -> dict[str, Any]:
    """``StallPolicy`` settings from a file: the top level, or its ``[policy]`` table.

    Lists of tool names must be lists in a file (a string is the environment's
    comma-separated form, and in a file it is a mistake: ``"abc"`` is no list).
    """
    obj = read_settings_file(path, what)
    section = obj.get("policy", obj)
    if not isinstance(section, dict):
        raise ConfigError(f"{what} {path}: policy: must be a table ([policy])")
    for key in _NAME_LISTS:
        value = section.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise ConfigError(
                f"{what} {path}: {key}: expected a list of tool names, got {value!r}; "
                f'write it as {key} = ["name", "glob*"]'
            )
    thresholds = section.get("tool_thresholds")
    if thresholds is not None and not isinstance(thresholds, dict):
        raise ConfigError(
            f"{what} {path}: tool_thresholds: expected a table, got {thresholds!r}; "
            "write it as tool_thresholds = { search = [3, 5] }"
        )
    return dict(section)
