"""Every file otel-stall writes is written whole or not at all (issue 21, issue 27).

:func:`replacing` hands out a hidden temporary file beside the target and
renames it over the target only once everything is written: a full disk, a
file-size limit or an interrupt leaves the previous file as it was, never half
a report. The temporary file is hidden (``.NAME.RANDOM.tmp``), so a replay of
the folder never reads it, and it is in the target's own folder, so the rename
is atomic (one file system). One helper for ``--out``, ``-o/--report`` and
anything else that writes a file; the live capture exporter appends as spans
end, so it cannot (a capture is a log, not a document).

A target that exists and is not a regular file (``/dev/stdout``, a FIFO) is
written directly, since it cannot be replaced.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shutil
from collections.abc import Iterator
from typing import IO

__all__ = ["replacing", "replacing_text"]


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[IO[bytes]]:
    """A binary stream whose bytes replace ``path`` once the ``with`` block ends without error.

    On any error the temporary file is removed and the error raised: the old
    file, if any, is untouched. The new file keeps the old one's permissions.
    """
    target = os.path.realpath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        with open(target, "wb") as direct:
            yield direct
        return
    directory, name = os.path.split(target)
    fd, temporary = _create_hidden(directory, name)
    try:
        with os.fdopen(fd, "wb") as stream:
            yield stream
        if os.path.exists(target):
            shutil.copymode(target, temporary)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def replacing_text(path: str | os.PathLike[str]) -> Iterator[IO[str]]:
    """:func:`replacing` for UTF-8 text (a report)."""
    with replacing(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            yield text
            text.flush()
        finally:
            text.detach()  # the binary stream is replacing's to close


def _create_hidden(directory: str, name: str) -> tuple[int, str]:
    """Create ``.NAME.RANDOM.tmp`` in ``directory`` with the usual permissions (umask applies)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        temporary = os.path.join(directory or ".", f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(temporary, flags, 0o666), temporary
        except FileExistsError:
            continue
