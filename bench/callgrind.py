"""Instruction counts of marked windows of a process, by ``valgrind --tool=callgrind``.

Under valgrind the interpreter's start-up and imports (gRPC's above all) take a
minute or more; counting two runs of different lengths and taking the
difference pays that twice per measurement. Instead the measured process marks
each window it wants counted: :func:`window` calls ``getppid()`` as it opens
(callgrind zeroes its counters there, ``--zero-before``) and ``getpgrp()`` as
it closes (callgrind dumps them, ``--dump-before``). Neither the interpreter nor
the SDK nor gRPC calls either function, so each window is one dump holding the
instructions of every thread of the process between the two calls. One process
under valgrind then measures several workloads, one window each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

SUMMARY = re.compile(rb"^summary: (\d+)", re.MULTILINE)


def available() -> bool:
    """Whether valgrind is installed here."""
    return shutil.which("valgrind") is not None


@contextmanager
def window() -> Iterator[None]:
    """Mark a window to count (no cost outside valgrind: two system calls)."""
    os.getppid()
    try:
        yield
    finally:
        os.getpgrp()


def count(command: Sequence[str], windows: int, env: dict[str, str] | None = None) -> list[int]:
    """Run ``command`` under callgrind: the instructions of each of its ``windows`` windows.

    With ``windows`` 0, the whole process's count, start-up included. Hash
    randomisation is fixed so that runs repeat their counts. Fails (raises
    SystemExit) if the command fails or marks a different number of windows.
    """
    with tempfile.TemporaryDirectory(prefix="otel-stall-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        full = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            "--zero-before=getppid",
            "--dump-before=getpgrp",
            *command,
        ]
        done = subprocess.run(
            full,
            capture_output=True,
            env={**(env or os.environ), "PYTHONHASHSEED": "0"},
            check=False,
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-3000:]
            raise SystemExit(
                f"{' '.join(command)} failed under valgrind ({done.returncode}):\n{tail}"
            )
        parts = sorted(Path(tmp).glob("callgrind.out.*"), key=lambda p: int(p.suffix[1:]))
        if not windows:
            parts = [out]
        counts = []
        for part in parts:
            found = SUMMARY.search(part.read_bytes())
            if found is None:
                raise SystemExit(f"no instruction summary in callgrind's dump {part.name}")
            counts.append(int(found.group(1)))
    if len(counts) != max(windows, 1):
        raise SystemExit(f"{' '.join(command)}: {len(counts)} windows counted, {windows} expected")
    return counts
