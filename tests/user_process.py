"""Run Python as a user would: a new process without the test run's ``OTEL_*`` and ``PYTEST_*``.

The examples, ``install()`` on the global provider and ``opentelemetry-instrument``
all read the environment or change process-wide state, so their tests run them
in a process of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    launcher: Sequence[str] = (),
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """``[launcher] python args``, with ``env`` added to a clean environment; must exit 0."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST_"))}
    done = subprocess.run(
        [*launcher, sys.executable, *args],
        capture_output=True,
        text=True,
        env=clean | dict(env or {}),
        cwd=cwd,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done
