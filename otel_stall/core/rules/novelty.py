"""Novelty: whether a tool call brought a fact not seen before in the run.

Not a rule of its own: one of a call's :class:`~otel_stall.core.rules.base.Facts`,
worked out once by the detector and read by ``no_new_facts`` (per round) and
``monologue`` (a new fact ends a monologue). Rules that refine it (a result
that only looks new) hook in through :meth:`Rule.refine_novelty`.

Decisions:

- A refused or overloaded call brought nothing.
- An exempt or approval tool's result, and a result that is empty, was not
  captured or could not be fingerprinted, always counts as new: unclear leans
  to "new fact" and "continue". A loop that runs a little longer is still
  stopped by failures and budgets, while a healthy run that was wrongly cut
  off cannot be brought back.
- A result is new the first time its digest is seen. A list result
  (``item_novelty``) is new only if it holds an item not seen in the run:
  every item is remembered, so a later page that only overlaps is no news.
- Memory is bounded in entries, so in bytes: at most ``max_remembered_calls``
  result digests and ``max_remembered_calls`` item digests are held, the
  oldest forgotten first (a forgotten result or item counts as new again).
  Items are trimmed as soon as they exceed twice the bound, not only every
  ``max_remembered_calls`` calls: one call can bring thousands of items.
"""

from __future__ import annotations

from typing import Final

from otel_stall.core.records import Status
from otel_stall.core.rules.base import ENTRY_BYTES, OVERLOADED, PRESENT, REFUSED, newest
from otel_stall.core.signing import Digests

ITEM_BYTES: Final = 86
"""Estimated bytes of one remembered item digest (a ``dict`` entry with a ``None`` value:
the key string and its table slot; measured with tracemalloc over 20,000 items of
16-character digests: 85)."""


class Novelty:
    """The run's remembered result and item digests, and the judgement they give."""

    __slots__ = ("fingerprints", "items", "limit")

    def __init__(self, limit: int | None) -> None:
        self.fingerprints: dict[str, None] = {}
        """Result digests seen (a dict, not a set: it is forgotten oldest first)."""
        self.items: dict[str, None] = {}
        """Digests of list items seen in results (item novelty), forgotten oldest first."""
        self.limit = limit
        """``max_remembered_calls``: how many of each are kept (``None``: all)."""

    def judge(self, status: Status, digests: Digests, always_new: bool) -> bool | None:
        """New (``True``), not new (``False``), or new by a fresh result digest (``None``).

        ``None`` is the case a refining rule may overrule: the result was never
        seen whole. Unclear leans to new: see the module's decisions.
        """
        if status is REFUSED or status is OVERLOADED:
            return False
        if always_new or digests.result is not PRESENT:
            return True
        fingerprint = digests.result_digest
        assert fingerprint is not None
        if fingerprint in self.fingerprints:
            return False
        self.fingerprints[fingerprint] = None
        items = digests.items
        if not items:
            return None
        return None if self._new_item(items) else False

    def _new_item(self, items: tuple[str, ...]) -> bool:
        """Item novelty: a list result is new only if it holds an item not seen in the run."""
        seen = self.items
        before = len(seen)
        seen.update(dict.fromkeys(items))  # in C: no Python loop over the items
        grown = len(seen) > before
        limit = self.limit
        if limit is not None and len(seen) > 2 * limit:
            self.items = newest(seen, limit)
        return grown

    def forget(self, memory: int) -> None:
        """Keep the newest ``memory`` result and item digests."""
        self.fingerprints = newest(self.fingerprints, memory)
        self.items = newest(self.items, memory)

    @property
    def nbytes(self) -> int:
        """Estimated bytes held: both dicts and their entries."""
        return 2 * 64 + ENTRY_BYTES * len(self.fingerprints) + ITEM_BYTES * len(self.items)
