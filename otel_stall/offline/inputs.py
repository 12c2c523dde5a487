"""Which files a replay reads, and how each is opened (issue 21, issue 27).

Directories are walked in sorted order, hidden entries left out; anything in
them that is not a regular file (a FIFO, a socket, a device) is skipped with a
note, since reading it could block for ever. Every file is opened without
blocking and checked to be regular before it is read, so one swapped for a FIFO
after the listing cannot hang a replay either.

A replay may read a file twice (``--out``, ``--export-otlp``). Each read goes to
the file's :class:`Snapshot`, its size when first opened: a live capture that
grows meanwhile is replayed as it was, the report and ``--out`` hold the same
spans, and a file replaced or rewritten between the passes is an error.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import IO, Any, Final

from otel_stall.core.errors import InputError

__all__ = [
    "NOT_REGULAR",
    "STDIN",
    "InputChanged",
    "Progress",
    "Snapshot",
    "expand_paths",
    "open_input",
    "open_snapshot",
]

STDIN: Final = "-"
Progress = Callable[[int], None]
"""Called with the number of raw bytes just read (for a progress bar)."""


def expand_paths(
    paths: Iterable[str],
    errors: list[InputError],
    skipped: list[InputError] | None = None,
) -> list[str]:
    """Files in argument order; directories recursively, sorted; ``-`` is stdin.

    Hidden files and directories (a leading dot) are left out, such as the
    temporary file an ``--out`` is being written to. So is anything in a
    directory that is not a regular file (a FIFO would block the replay for
    ever, a device never ends): each is noted in ``skipped`` (issue 27). Named
    on the command line, it is an error.
    """
    out: list[str] = []
    for path in paths:
        if path == STDIN or os.path.isfile(path):
            out.append(path)
        elif os.path.isdir(path):
            out += _directory_files(path, skipped)
        elif os.path.exists(path):
            errors.append(InputError(path, None, None, NOT_REGULAR))
        else:
            errors.append(InputError(path, None, None, "no such file or directory"))
    return out


NOT_REGULAR: Final = "not a regular file or directory"


def _directory_files(path: str, skipped: list[InputError] | None) -> list[str]:
    """The regular files under ``path``, sorted; the rest noted in ``skipped``."""
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith("."):
                continue
            file = os.path.join(root, name)
            if os.path.isfile(file):
                found.append(file)
            elif skipped is not None:
                skipped.append(InputError(file, None, None, "not a regular file"))
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as replay first opened it: both passes read its first ``size`` bytes, no more.

    A file that grows while it is replayed (a live capture) is read as it was:
    the report and ``--out`` hold the same spans. One that was replaced,
    shrank or was rewritten in place since cannot be read the same way again,
    and :func:`open_input` raises :class:`InputChanged`.
    """

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, info: os.stat_result) -> Snapshot:
        """The snapshot of an ``os.stat`` result."""
        return cls(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)

    def change(self, now: Snapshot) -> str | None:
        """How ``now`` differs from this snapshot so that its bytes are not the same; or None."""
        if (now.device, now.inode) != (self.device, self.inode):
            return "was replaced"
        if now.size < self.size:
            return f"shrank from {self.size:,} to {now.size:,} bytes"
        if now.size == self.size and now.mtime_ns != self.mtime_ns:
            return "was rewritten"
        return None


class InputChanged(OSError):
    """An input changed between replay's two passes: the second cannot match the first."""

    def __init__(self, error: InputError) -> None:
        super().__init__(str(error))
        self.error = error
        self.strerror = str(error)


def open_input(path: str, progress: Progress | None = None) -> IO[bytes]:
    """Open a file (or stdin for ``-``) as a binary stream; raises ``OSError``."""
    return open_snapshot(path, progress)[0]


def open_snapshot(
    path: str, progress: Progress | None = None, snapshot: Snapshot | None = None
) -> tuple[IO[bytes], Snapshot | None]:
    """Open a file (or stdin) as a binary stream, and the snapshot it is read to.

    A file is opened without blocking and refused unless it is a regular file,
    so a FIFO swapped in after the listing cannot hang the replay. Only the
    bytes it held when opened are read (or, given the ``snapshot`` pass one
    took, those); a file changed since that snapshot raises :class:`InputChanged`.
    """
    taken = None
    if path == STDIN:
        raw: IO[bytes] = sys.stdin.buffer
    else:
        raw, taken = _open_regular(path, snapshot)
    if progress is not None:
        raw = io.BufferedReader(_Counting(raw, progress), 1 << 16)
    return raw, taken


def _open_regular(path: str, snapshot: Snapshot | None) -> tuple[IO[bytes], Snapshot]:
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        now = Snapshot.of(info)
        if snapshot is not None:
            change = snapshot.change(now)
            if change is not None:
                message = (
                    f"{change} since replay read it, so --out or --export-otlp cannot match "
                    "the report; replay a copy that is not being written to"
                )
                raise InputChanged(InputError(path, None, None, message))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        taken = snapshot or now
        raw = _Snapshotted(io.FileIO(fd, "rb", closefd=True), taken)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(raw, 1 << 16), taken


class _Snapshotted(io.RawIOBase):
    """A file read up to its snapshot's size: bytes appended after it was opened are not read."""

    def __init__(self, raw: io.FileIO, snapshot: Snapshot) -> None:
        self._raw = raw
        self.snapshot = snapshot
        self._left = snapshot.size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        view = memoryview(buffer)[: self._left]
        n = self._raw.readinto(view) or 0
        self._left -= n
        return n

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        position = self._raw.seek(offset, whence)
        self._left = self.snapshot.size - position
        return position

    def tell(self) -> int:
        return self._raw.tell()

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Counting(io.RawIOBase):
    """Reports raw bytes read, so a progress bar can follow compressed files too."""

    def __init__(self, raw: IO[bytes], progress: Progress) -> None:
        self._raw = raw
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        if n:
            self._progress(n)
        return n
