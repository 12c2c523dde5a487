"""Types of the compiled canonicaliser, signer and record builder (``_canon.c``)."""

from collections.abc import Callable
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
    path would write the same may have been added. The entries it writes are
    untracked by the cyclic GC, so ``present`` and ``empty`` must never refer
    back to a cache (enum members do not).
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
    @property
    def defaults(self) -> tuple[Any, ...]:
        """The values of the last fields when they are not given."""
    @property
    def fallback(self) -> Callable[..., Any]:
        """A constructor's ``__new__`` for what it does not build; absent on a plain builder."""
    @property
    def leaves(self) -> tuple[type, ...]:
        """Types whose instances, with leaf builtins, leave a record untracked; else absent."""
    def __call__(self, *values: Any, **keywords: Any) -> _T:
        """A plain builder: a ``cls`` with ``values`` stored in its slots, one per name, in order.

        A constructor (made with a fallback): called as ``(klass, *args, **kwargs)``.
        """

def builder(
    cls: type[_T],
    names: tuple[str, ...],
    defaults: tuple[Any, ...] = (),
    fallback: Callable[..., Any] | None = None,
    leaves: tuple[type, ...] | None = None,
    /,
) -> Builder[_T]:
    """A constructor that stores one value per name straight into ``cls``'s slots.

    ``cls`` must have no ``__dict__`` and its instances nothing but the named
    slots (and perhaps ``__weakref__``), each a writable member of ``cls`` or a
    base; ``defaults`` a tuple of at most ``len(names)`` values, for the last
    fields; ``fallback`` callable or ``None``; ``leaves`` a tuple of types or
    ``None``. Anything else raises ``TypeError`` here, never at call time.

    Without ``fallback``, it takes the values positionally, in field order,
    the defaulted ones optional; another number of values, or a keyword, raises
    ``TypeError``. With one, it is a ``__new__`` for ``cls`` (see
    :func:`install`), called as ``(klass, *args, **kwargs)``: it builds when
    ``klass`` is ``cls`` and the arguments bind to the fields as a dataclass's
    ``__init__`` binds them (in order, by name, none twice, every field without
    a default given), and returns ``fallback(klass, *args, **kwargs)`` for
    anything else.

    With ``leaves``, an instance whose every value is ``None``, an exact
    ``str``, ``int``, ``float`` or ``bool``, or of exactly one of those types
    is untracked by the cyclic garbage collector as it is built (see
    :func:`gc.is_tracked`). Only for types whose instances never refer back to
    such a record, as enum members (kept by their class for good): a cycle
    through an untracked record would never be collected.
    """

def install(constructor: Builder[Any], /) -> None:
    """Make ``constructor`` (made with a fallback) the ``__new__`` of its class.

    The class must have no ``__init__`` but ``object``'s. Where its metaclass is
    ``type``, calls of the class itself (not of subclasses) then reach the
    constructor without ``type.__call__`` in between, while it stays the
    class's ``__new__`` and no ``__init__`` is added; their results are unchanged.
    """
