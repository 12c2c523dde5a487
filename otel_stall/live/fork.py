"""One at-fork hook for every live object whose locks a forked child must not inherit.

A prefork server (gunicorn ``--preload``, celery) may fork while another thread
holds one of them: in the child that lock is never released, and the first
span to need it hangs (issue 27). An object registers itself with
:func:`reset_in_child`; in the child its ``_after_fork`` takes new locks. One
hook for the package, over a weak set, because a hook can never be
unregistered: one per object would keep every dead object alive.
"""

from __future__ import annotations

import os
import weakref
from typing import Final, Protocol

__all__ = ["Forkable", "reset_in_child"]


class Forkable(Protocol):
    """What the hook calls: reset whatever the parent's other threads may have held."""

    def _after_fork(self) -> None: ...


_LIVE: Final[weakref.WeakSet[Forkable]] = weakref.WeakSet()


def reset_in_child(obj: Forkable) -> None:
    """Have ``obj._after_fork()`` called in every child forked from now on, while it lives."""
    _LIVE.add(obj)


def _after_fork_in_child() -> None:
    for obj in list(_LIVE):
        obj._after_fork()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
