"""No module of the package is over 700 lines (the developers' guide, #26 item 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import otel_stall

PACKAGE = Path(otel_stall.__file__).parent
LIMIT: Final = 700


def lines_of(path: Path) -> int:
    """A file's length in lines, as ``wc -l`` counts them."""
    return path.read_bytes().count(b"\n")


def too_long(lengths: dict[str, int]) -> list[str]:
    """The modules over :data:`LIMIT`, readably."""
    return [
        f"{name}: {length} lines (limit {LIMIT})"
        for name, length in sorted(lengths.items())
        if length > LIMIT
    ]


def test_no_module_is_over_the_limit() -> None:
    """Every module of ``otel_stall/`` is at most 700 lines."""
    lengths = {
        path.relative_to(PACKAGE).as_posix(): lines_of(path) for path in PACKAGE.rglob("*.py")
    }
    assert lengths  # the package was found
    assert too_long(lengths) == []


def test_a_long_module_is_caught() -> None:
    """The check names a module over the limit and passes one at it (so it can fail)."""
    assert too_long({"a.py": LIMIT, "b.py": LIMIT + 1}) == ["b.py: 701 lines (limit 700)"]
