"""The package's layering: each mode imports only what sits below it.

``semconv`` < ``core`` < ``conventions`` < ``otlp``, ``metrics`` < ``live``,
``offline`` < ``gateway`` < ``cli``. ``live`` and ``offline`` never import each
other; what both need lives below them. ``core`` and ``conventions`` import no
OpenTelemetry at all, so the detector runs on plain records.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import otel_stall

PACKAGE = Path(otel_stall.__file__).parent

ALLOWED: dict[str, frozenset[str]] = {
    "semconv": frozenset(),
    "core": frozenset({"core", "semconv"}),
    "conventions": frozenset({"conventions", "core", "semconv"}),
    "otlp": frozenset({"otlp", "conventions", "core", "semconv"}),
    "metrics": frozenset({"core", "semconv", "_version"}),
    "live": frozenset({"live", "otlp", "metrics", "conventions", "core", "semconv", "_version"}),
    "offline": frozenset({"offline", "otlp", "conventions", "core", "semconv"}),
    "integrations": frozenset({"integrations", "live", "core", "semconv"}),
    "gateway": frozenset(
        {"gateway", "offline", "otlp", "metrics", "conventions", "core", "semconv", "_version"}
    ),
}
"""Which top-level parts of ``otel_stall`` each part may import. Parts not named here
(the package root, ``cli``, the demos, ``__main__``, ``_version``) sit on top."""

NO_OPENTELEMETRY = frozenset({"semconv", "core", "conventions"})
"""Parts that must not import OpenTelemetry at all."""


def part_of(module: str) -> str:
    """The top-level part of ``otel_stall`` a dotted module name belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(module: str, imports: set[str]) -> list[str]:
    """The imports of ``module`` that break the layering, as readable lines."""
    part = part_of(module)
    allowed = ALLOWED.get(part)
    if allowed is None:
        return []
    found = []
    for name in sorted(imports):
        if name.startswith("otel_stall.") and part_of(name) not in allowed:
            found.append(f"{module} imports {name}")
        elif name == "otel_stall":
            found.append(f"{module} imports the package root")
        elif part in NO_OPENTELEMETRY and name.split(".")[0] == "opentelemetry":
            found.append(f"{module} imports {name}")
    return found


def imports_of(path: Path) -> set[str]:
    """Every module a source file imports, at any depth (``TYPE_CHECKING`` included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "otel_stall":  # ``from otel_stall import x`` names modules too
                found.update(f"otel_stall.{alias.name}" for alias in node.names)
    return found


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of the package, by dotted name."""
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts)
        yield name.removesuffix(".__init__"), path


def test_every_module_respects_the_layering() -> None:
    """No module imports a part above its own, nor live and offline each other."""
    broken = [line for name, path in modules() for line in violations(name, imports_of(path))]
    assert broken == []


def test_every_part_is_layered() -> None:
    """Each subpackage and module of the package is either layered or one of the top modules."""
    top = {"", "cli", "demo", "demo_pydantic_ai", "__main__", "_entry", "_version"}
    parts = {part_of(name) for name, _ in modules()}
    assert parts - set(ALLOWED) - top == set()


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("otel_stall.live.processor", "otel_stall.offline.analysis"),
        ("otel_stall.offline.replay", "otel_stall.live.processor"),
        ("otel_stall.core.detector", "otel_stall.conventions"),
        ("otel_stall.core.detector", "opentelemetry.trace"),
        ("otel_stall.conventions.builtin", "opentelemetry.sdk.trace"),
        ("otel_stall.otlp.decode", "otel_stall.offline.analysis"),
        ("otel_stall.gateway.pipeline", "otel_stall.live.processor"),
        ("otel_stall.semconv", "otel_stall.core.records"),
    ],
)
def test_a_forbidden_import_is_caught(module: str, imported: str) -> None:
    """The check names an import that crosses the layering (so the test above can fail)."""
    assert violations(module, {imported}) == [f"{module} imports {imported}"]
