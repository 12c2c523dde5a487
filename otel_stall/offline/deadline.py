"""The overall deadline of ``--export-otlp``: flag, then environment, then default (issue 27).

Its own module, so that the command line can parse the flag without importing gRPC.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Final

__all__ = ["DEADLINE_ENV", "DEFAULT_DEADLINE", "deadline_from_env", "seconds_argument"]

DEFAULT_DEADLINE: Final = 600.0
"""Seconds a whole export may take, retries included: ten minutes. A capture too big to send
in that time asks for more with ``--export-deadline``; a black hole is given up on sooner,
after one request's retries."""
DEADLINE_ENV: Final = "OTEL_STALL_EXPORT_DEADLINE"


def deadline_from_env(environ: Mapping[str, str] | None = None) -> float:
    """``OTEL_STALL_EXPORT_DEADLINE`` in seconds, else :data:`DEFAULT_DEADLINE`.

    Raises ``ValueError`` naming the variable and the fix for a bad value.
    """
    text = (os.environ if environ is None else environ).get(DEADLINE_ENV, "").strip()
    if not text:
        return DEFAULT_DEADLINE
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError(f"{DEADLINE_ENV}={text!r}: expected seconds above 0, e.g. 600")
    return value


def seconds_argument(text: str) -> float:
    """An argparse type for ``--export-deadline`` and the store's timeouts: seconds above 0.

    argparse names the flag in the error.
    """
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected seconds above 0, e.g. 10, got {text!r}")
    return value
