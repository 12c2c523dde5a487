"""A user's own conventions, in a TOML file of the built-ins' form.

One ``[[convention]]`` table per instrumentation, with the fields of
:class:`~otel_stall.conventions.mappings.SpanConvention`::

    [[convention]]
    name = "acme-agents"
    roles = { "acme.kind" = { step = "tool", think = "model", run = "agent" } }
    tool_name_keys = ["acme.tool"]
    arguments_keys = ["acme.args"]
    result_keys = ["acme.out"]
    # result_events = [["acme.result", "value"]]

Every mistake is reported with the file, the key and how to fix it, because a
mapping that is silently ignored is the silence this file exists to end.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from otel_stall.conventions.builtin import Conventions
from otel_stall.conventions.mappings import ROLE_NAMES, SpanConvention
from otel_stall.core.config import ConfigError

tomllib = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")

_KEY_LISTS: Final = (
    "tool_name_keys",
    "arguments_keys",
    "result_keys",
    "tool_name_prefixes",
    "model_keys",
    "session_keys",
    "markers",
    "marker_prefixes",
    "error_flags",
)
_SETS: Final = ("fold_case", "synthetic_spans", "synthetic_tools", "placeholders")
_PAIRS: Final = (
    "marker_values",
    "arguments_events",
    "result_events",
    "step_markers",
    "present",
    "session_marks",
    "handoff_tools",
)
_KNOWN: Final = frozenset({"name", "roles", "content_switch", *_KEY_LISTS, *_SETS, *_PAIRS})


class MappingError(ConfigError):
    """A conventions file that cannot be used: names the file, the key and the fix."""

    def __init__(self, path: str, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{path}: {key}: {problem}. Fix: {fix}")
        self.path = path
        self.key = key


def conventions_from_file(path: str | Path | None) -> Conventions:
    """The conventions plus a mapping file's (``--conventions``); else from the environment."""
    if not path:
        return Conventions.from_env()
    return Conventions.from_env(mappings=load_conventions(path))


def load_conventions(path: str | Path) -> tuple[SpanConvention, ...]:
    """Every ``[[convention]]`` of a TOML file; :class:`MappingError` on any mistake."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise MappingError(
            where, "(file)", f"cannot be read ({exc.strerror})", "name a readable TOML file"
        ) from None
    except UnicodeDecodeError as exc:  # issue 27: a traceback before
        fix = "save the file as UTF-8"
        raise MappingError(where, "(file)", f"not UTF-8 text (byte {exc.start})", fix) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MappingError(
            where, "(syntax)", f"not TOML ({exc})", "correct the TOML syntax"
        ) from None
    except RecursionError:  # 50,000 levels of [[[...: a traceback before (issue 27)
        fix = "a mapping needs a few levels of nesting at most"
        raise MappingError(where, "(syntax)", "nested too deeply to read", fix) from None
    tables = data.get("convention")
    if not isinstance(tables, list) or not tables:
        raise MappingError(
            where,
            "convention",
            "no [[convention]] table",
            "add one [[convention]] table per library",
        )
    return tuple(_convention(where, i, table) for i, table in enumerate(tables))


def _convention(path: str, index: int, table: Any) -> SpanConvention:
    at = f"convention[{index}]"
    if not isinstance(table, dict):
        raise MappingError(path, at, "is not a table", "write it as [[convention]] with keys below")
    unknown = sorted(set(table) - _KNOWN)
    if unknown:
        raise MappingError(
            path, f"{at}.{unknown[0]}", "unknown key", f"use one of: {', '.join(sorted(_KNOWN))}"
        )
    name = table.get("name", f"{path}#{index}")
    fields: dict[str, Any] = {"name": _text(path, f"{at}.name", name)}
    if "content_switch" in table:
        fields["content_switch"] = _text(path, f"{at}.content_switch", table["content_switch"])
    fields["roles"] = _roles(path, f"{at}.roles", table.get("roles", {}))
    for key in _KEY_LISTS:
        if key in table:
            fields[key] = tuple(_texts(path, f"{at}.{key}", table[key]))
    for key in _SETS:
        if key in table:
            fields[key] = frozenset(_texts(path, f"{at}.{key}", table[key]))
    for key in _PAIRS:
        if key in table:
            fields[key] = _pairs(path, f"{at}.{key}", table[key], role=key == "present")
    if not fields["roles"] and "present" not in fields:
        raise MappingError(
            path,
            f"{at}.roles",
            "no role rule: no span would be recognised",
            'add roles = { "your.kind.key" = { your_tool_value = "tool" } }',
        )
    return SpanConvention(**fields)


def _roles(path: str, at: str, value: Any) -> dict[str, dict[str, str]]:
    if not isinstance(value, Mapping):
        raise MappingError(
            path, at, "is not a table", 'write roles = { "key" = { value = "tool" } }'
        )
    out: dict[str, dict[str, str]] = {}
    for key, values in value.items():
        if not isinstance(values, Mapping):
            raise MappingError(
                path, f"{at}.{key}", "is not a table", f'write "{key}" = {{ value = "tool" }}'
            )
        out[key] = {str(v): _role(path, f"{at}.{key}.{v}", r) for v, r in values.items()}
    return out


def _role(path: str, at: str, value: Any) -> str:
    if value not in ROLE_NAMES:
        raise MappingError(
            path, at, f"unknown role {value!r}", f"use one of {', '.join(ROLE_NAMES)}"
        )
    return str(value)


def _text(path: str, at: str, value: Any) -> str:
    if not isinstance(value, str):
        raise MappingError(path, at, f"expected a string, got {type(value).__name__}", "quote it")
    return value


def _texts(path: str, at: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError(path, at, "expected a list of strings", 'write ["a", "b"]')
    return list(value)


def _pairs(path: str, at: str, value: Any, *, role: bool) -> tuple[tuple[str, str], ...]:
    second = "role" if role else "attribute"
    if not isinstance(value, list) or not all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v) for v in value
    ):
        raise MappingError(
            path, at, "expected a list of string pairs", f'write [["key", "{second}"]]'
        )
    if role:
        for i, (_, r) in enumerate(value):
            _role(path, f"{at}[{i}]", r)
    return tuple((a, b) for a, b in value)


__all__ = ["MappingError", "conventions_from_file", "load_conventions"]
