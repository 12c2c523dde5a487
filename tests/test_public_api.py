"""The package's public surface: ``__all__``, typing marker and import cost."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib import resources
from typing import Final

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


HEAVY: Final = (
    "grpc",
    "google.protobuf",
    "opentelemetry",
    "rich",
    "orjson",
    "xxhash",
    "zstandard",
    "h11",
)
"""Libraries that cost the package's import most of its time; each loads on first use only."""


def modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (then printing them)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return set(json.loads(proc.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    """The heavy libraries (or their submodules) among ``modules``."""
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))


def test_import_loads_no_heavy_library() -> None:
    """``import otel_stall`` loads none of grpc, protobuf, the SDK, rich...: names load on use."""
    loaded = modules_after("import otel_stall")
    assert heavy_in(loaded) == []
    assert {m for m in loaded if m.startswith("otel_stall.")} == {"otel_stall._version"}


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_the_command_line_starts_without_heavy_libraries(flag: str) -> None:
    """``otel-stall --version`` and ``--help`` load no library a command needs: it runs."""
    loaded = modules_after(
        f"from otel_stall.cli import main\nassert main([{flag!r}]) == 0\nprint()"
    )
    assert heavy_in(loaded) == []
    assert not any(m.startswith(("otel_stall.offline", "otel_stall.live")) for m in loaded)


def test_a_command_loads_what_it_needs() -> None:
    """A command's arguments and modules load when it is the one parsed (``replay --help``)."""
    loaded = modules_after(
        "from otel_stall.cli import main\nassert main(['replay', '--help']) == 0\nprint()"
    )
    assert "otel_stall.offline.readers" in loaded


def test_a_public_name_loads_its_home_on_use() -> None:
    """Using a name imports what it needs (so the test above can fail, and laziness resolves)."""
    loaded = modules_after("import otel_stall\notel_stall.StallSpanProcessor")
    assert "otel_stall.live.processor" in loaded
    assert "opentelemetry.sdk.trace" in heavy_in(loaded)


def test_every_public_name_is_its_home_object() -> None:
    """Each lazy name is the very object its home module defines, and ``dir()`` lists it."""
    for name in otel_stall.__all__:
        value = getattr(otel_stall, name)
        home = getattr(value, "__module__", None)
        if isinstance(value, type) or callable(value):
            assert home is not None
            assert getattr(importlib.import_module(home), name, value) is value
    assert set(otel_stall.__all__) <= set(dir(otel_stall))


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name the package does not have raises AttributeError (``hasattr`` and mypy rely on it)."""
    name = "no_such_name"
    with pytest.raises(AttributeError, match=name):
        getattr(otel_stall, name)
    assert not hasattr(otel_stall, name)
