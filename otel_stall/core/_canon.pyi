"""Types of the compiled canonicaliser (``_canon.c``)."""

def canonical(raw: bytes, volatile: tuple[bytes, ...], /) -> tuple[bytes, bool] | None:
    """Canonical bytes of the JSON text ``raw`` and whether it is empty, or ``None``.

    ``raw`` is strict UTF-8 (``str.encode()``); ``volatile`` holds the lower-case
    ASCII key names to drop at any depth. ``None``: the text holds something
    the compiled pass does not know; the Python reference does it.
    """
