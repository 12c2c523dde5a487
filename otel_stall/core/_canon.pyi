"""Types of the compiled canonicaliser and signer (``_canon.c``)."""

from typing import Any

def canonical(raw: bytes, volatile: tuple[bytes, ...], /) -> tuple[bytes, bool] | None:
    """Canonical bytes of the JSON text ``raw`` and whether it is empty, or ``None``."""

def sign(
    tool: str,
    arguments: str,
    result: str,
    status: str,
    volatile: tuple[bytes, ...],
    calls: dict[tuple[str, bytes], tuple[str, Any]],
    results: dict[bytes, tuple[str | None, Any]],
    limit: int,
    present: Any,
    empty: Any,
    status_type: type[str],
    /,
) -> tuple[str, str, str, Any, Any] | None:
    """``Signer.sign`` for text arguments and result: its three digests and two contents.

    Returns ``(call_signature, result_digest, signature, arguments content,
    result content)`` as the Python path computes them, reading and filling the
    signer's ``calls`` and ``results`` caches (cleared when ``limit`` entries
    are reached) as that path does; ``present`` and ``empty`` are the contents
    to store, ``status_type`` the status enum whose members sign as their
    value. ``None``: take the Python path (a lone surrogate, a payload the
    compiled pass hands back, a status that is neither ``str`` nor
    ``status_type``, a cached digest of ``None``); only cache entries that
    path would write the same may have been added. The entries it writes are
    untracked by the cyclic GC, so ``present`` and ``empty`` must never refer
    back to a cache (enum members do not).
    """
