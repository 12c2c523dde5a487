"""The package's public surface: ``__all__``, typing marker and import cost."""

from __future__ import annotations

import ast
from importlib import resources

import pytest

import otel_stall


def test_all_names_resolve() -> None:
    """Every name in ``__all__`` is an attribute of the package."""
    missing = [name for name in otel_stall.__all__ if not hasattr(otel_stall, name)]
    assert missing == []


def test_all_is_unique() -> None:
    """``__all__`` names each export once (ruff's RUF022 keeps it sorted)."""
    names = list(otel_stall.__all__)
    assert len(names) == len(set(names))


def test_no_public_name_is_left_out() -> None:
    """Public classes and functions imported into the package are all in ``__all__``."""
    exported = set(otel_stall.__all__)
    public = {
        name
        for name, value in vars(otel_stall).items()
        if not name.startswith("_") and (isinstance(value, type) or callable(value))
    }
    assert public - exported == set()


def test_py_typed_is_shipped() -> None:
    """The PEP 561 marker is part of the package."""
    assert (resources.files("otel_stall") / "py.typed").is_file()


CORE = ("records", "signature", "policy", "detector", "messages", "compare", "jsonl", "errors")


def _imports(module: str) -> set[str]:
    source = (resources.files("otel_stall") / f"{module}.py").read_text(encoding="utf-8")
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", CORE)
def test_core_does_not_import_opentelemetry(module: str) -> None:
    """The detection core imports neither OpenTelemetry nor the edge modules."""
    imports = _imports(module)
    assert not {name for name in imports if name.startswith("opentelemetry")}
    internal = {
        name.removeprefix("otel_stall.") for name in imports if name.startswith("otel_stall.")
    }
    assert internal <= {*CORE, "_env", "_canon"}
