"""Types of the compiled canonicaliser, signer and record builder (``_canon.c``)."""

from typing import Any, Generic, TypeVar, final

_T = TypeVar("_T")

def canonical(
    raw: bytes, volatile: tuple[bytes, ...], temp_roots: bool, /
) -> tuple[bytes, bool] | None:
    """Canonical bytes of the JSON text ``raw`` and whether it is empty, or ``None``."""

def sign(
    tool: str,
    arguments: str,
    result: str,
    status: str,
    volatile: tuple[bytes, ...],
    temp_roots: bool,
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
    path would write the same may have been added.
    """

@final
class Builder(Generic[_T]):
    """A constructor for one slots class, made by :func:`builder`."""

    @property
    def cls(self) -> type[_T]:
        """The class it builds."""
    @property
    def names(self) -> tuple[str, ...]:
        """The fields it stores, in argument order."""
    def __call__(self, *values: Any) -> _T:
        """A ``cls`` with ``values`` stored in its slots, one per name, in order."""

def builder(cls: type[_T], names: tuple[str, ...], /) -> Builder[_T]:
    """A constructor that stores one positional value per name straight into ``cls``'s slots.

    ``cls`` must have no ``__dict__`` and its instances nothing but the named
    slots (and perhaps ``__weakref__``), each a writable member of ``cls`` or a
    base; anything else raises ``TypeError`` here, never at call time. Calling
    it with another number of values, or with keywords, raises ``TypeError``.
    """
