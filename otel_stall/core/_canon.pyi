"""Types of the compiled canonicaliser (``_canon.c``)."""

from collections.abc import Callable

def canonical(
    raw: bytes,
    volatile: tuple[bytes, ...],
    hasher: Callable[[bytes], str] | None,
    run_folders: bool,
    /,
) -> tuple[bytes, bool, tuple[str, ...] | None] | None:
    """Canonical bytes of the JSON text ``raw``, whether it is empty, and its items; or ``None``.

    ``raw`` is strict UTF-8 (``str.encode()``); ``volatile`` holds the lower-case
    ASCII key names to drop at any depth, without ``_`` and ``-`` (keys match
    them ignoring case, ``_`` and ``-``). ``run_folders``: fold per-run temp
    folder names too (the results' rule). ``None``: the text holds something
    the compiled pass does not know; the Python reference does it. The items:
    ``hasher`` applied to the canonical bytes of each item of a list result (a
    JSON array, or the first of ``ITEM_KEYS`` that the top-level object holds as
    a list), whose spans are noted while the bytes are written; ``None`` where
    ``hasher`` is ``None`` or the value is no list result.
    """
