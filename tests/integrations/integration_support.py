"""The real frameworks come with the `integrations` extra: without it, tests skip, except in CI."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require(module: str) -> None:
    """Skip the calling test (or test module) without ``module``; under ``CI=true`` fail instead.

    CI installs the extra, so a framework missing there is a broken setup, not a skip.
    """
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is missing: `make integrations` installs the integrations extra")
        pytest.skip(
            f"{module} is not installed (`make integrations` installs it)", allow_module_level=True
        )
