"""Near-duplicate results: a result that differs from one already seen only by noise.

A timestamp, an id or a counter inside free text makes a result's digest new
every time, so a loop over the same page never runs out of "new facts". This
rule keeps a 64-bit SimHash of each new result (over 3-word shingles of its
lower-cased words) and calls a result whose sketch is within
``near_duplicate_bits`` bits of one already seen no new fact. It has no
finding of its own: ``no_new_facts`` stops the loop it reveals.

Decisions:

- SimHash, 64 bits: a few changed words in a long text move few bits, a
  different text moves about half of them. Shingles of 3 words, so word order
  counts. Only results of at least :data:`MIN_WORDS` words are sketched: in a
  short text one changed word is a large share, and may be the whole answer.
- Memory per run is fixed: the last :data:`SKETCHES` sketches, 8 bytes each.
- The sketch is made where digests are made (:attr:`Digests.sketch`, by
  :func:`sketch`, only while the rule is on), from the captured result.
- Off by default (``near_duplicates``): see ``docs/concepts.md`` for the
  healthy traces it would change.
"""

from __future__ import annotations

import re
from array import array
from typing import TYPE_CHECKING, Any, Final

import orjson
from xxhash import xxh3_64_intdigest

from otel_stall.core.rules.base import Rule
from otel_stall.core.signing import Digests

if TYPE_CHECKING:
    from otel_stall.core.detector import RunDetector
    from otel_stall.core.policy import StallPolicy

SKETCHES: Final = 64
"""Sketches a run remembers, newest first: 512 bytes."""
MIN_WORDS: Final = 24
"""Words a result needs to be sketched."""
SCAN_BYTES: Final = 64 * 1024
"""Bytes of a result read for its sketch."""
_WORD: Final = re.compile(rb"[a-z0-9]+")
_BITS: Final = tuple(bytes((b >> j) & 1 for b in range(256)) for j in range(8))
"""Per bit j of a byte: a translation table giving 1 where that bit is set."""


def sketch(result: Any) -> int | None:
    """The 64-bit SimHash of a result's word shingles, or ``None`` if it is too short."""
    if isinstance(result, bytes):
        blob = result
    elif isinstance(result, str):
        blob = result.encode("utf-8", "surrogatepass")
    else:
        try:
            blob = orjson.dumps(result, default=str)
        except (TypeError, orjson.JSONEncodeError):
            return None
    words = _WORD.findall(blob[:SCAN_BYTES].lower())
    if len(words) < MIN_WORDS:
        return None
    hashes = array(
        "Q", map(xxh3_64_intdigest, map(b" ".join, zip(words, words[1:], words[2:], strict=False)))
    )
    return _simhash(hashes.tobytes(), len(hashes))


def _simhash(packed: bytes, count: int) -> int:
    """Each bit set where most hashes have it set: counted column by column, in C."""
    out = 0
    for byte in range(8):
        column = packed[byte::8]
        for bit in range(8):
            if 2 * column.translate(_BITS[bit]).count(1) > count:
                out |= 1 << (8 * byte + bit)
    return out


class NearDuplicate(Rule):
    """A fresh result within ``near_duplicate_bits`` of a seen one is no new fact."""

    __slots__ = ("seen",)

    def __init__(self, policy: StallPolicy) -> None:
        super().__init__(policy)
        self.seen = array("Q")
        """The latest sketches, oldest first (at most :data:`SKETCHES`)."""

    @classmethod
    def enabled(cls, policy: StallPolicy) -> bool:
        """On only with ``near_duplicates``: off, a run holds no state of it."""
        return policy.near_duplicates

    def refine_novelty(self, digests: Digests, run: RunDetector) -> bool:
        """Whether the fresh result is still new by this rule."""
        mine = digests.sketch
        if mine is None:
            return True
        bits = self.policy.near_duplicate_bits
        seen = self.seen
        for other in seen:
            if (mine ^ other).bit_count() <= bits:
                return False
        seen.append(mine)
        if len(seen) > SKETCHES:
            del seen[0]
        return True

    def nbytes(self) -> int:
        """Estimated bytes of this rule's state."""
        return super().nbytes() + 80 + 8 * SKETCHES
