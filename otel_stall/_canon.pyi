"""Types of the compiled canonicaliser (``_canon.c``)."""

def canonical(
    raw: bytes, volatile: tuple[bytes, ...], temp_roots: bool, /
) -> tuple[bytes, bool] | None:
    """Canonical bytes of the JSON text ``raw`` and whether it is empty, or ``None``."""
