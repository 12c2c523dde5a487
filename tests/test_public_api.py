"""The package's public surface: ``__all__``, typing marker and import cost."""

from __future__ import annotations

from importlib import resources

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
