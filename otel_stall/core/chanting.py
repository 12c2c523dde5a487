"""Chanting: one chunk of text coming back again and again in the model's output.

A model that degenerates repeats a phrase, a sentence or a paragraph within
one response, or carries the repetition over into the next response. The
``monologue`` rule sees whole messages repeated; this sees the pieces.

The design, and why:

- **A chunk is** :data:`CHUNK_WORDS` **consecutive words** (whitespace split,
  case folded), taken at every word. Word boundaries come from the text, so a
  repeated passage gives the same chunks wherever it starts, whatever its
  length: no alignment to a fixed character grid is needed, and a text of *n*
  words costs *n* hashes, not one per character. Eight words (about fifty
  characters of English) is a clause: long enough that ordinary prose does not
  repeat it by chance, short enough that a repeated sentence holds one whole.
  Text without spaces (a divider, a base64 blob, or a script written without
  spaces) makes no chunks, so it never chants; that is the price of the word
  boundaries.
- **Chanting is** one chunk seen ``chant_repeats`` times (policy, 10 by
  default) within :data:`WINDOW_CHARS` characters of text. The window keeps
  repeats that are far apart (a summary line under each of several long
  sections) out. Ten, because nine copies of a sentence between two structural
  lines is something gemini-cli's own suite calls healthy (``tests/peers``).
- **Structure is not prose.** Markdown structure repeats by design: fenced code
  (between ```` ``` ```` marks, anywhere in a line) is skipped; a table row (a
  line starting with ``|`` or holding two), a list item (``-``, ``*``, ``+``,
  ``1.``, ``1)``), a heading, a quote or a divider line is skipped and ends
  the prose before it: counting starts again after it. So a table, a list of
  similar items or a code block never chants, and nine copies, a list item,
  nine copies is not ten.
- **Across outputs,** the chunks of the last window of one output are carried
  to the next output, when no tool call came between (a tool call is the agent
  acting: its next text is about something new). A response cut off at its
  token limit and continued keeps chanting where it left off.
- **Only hashes are kept** (xxh3, as signing uses), with each chunk's offset,
  packed in arrays (16 bytes a chunk): never the text. A scan holds at most
  the chunks of two windows (the output's first and last :data:`WINDOW_CHARS`),
  and a run carries at most one window: at most ``WINDOW_CHARS / 2`` chunks
  (a word and its space take at least two characters), 16 KB, whatever the
  length of the run. A gateway counts a scan's bytes against its buffer.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import add, sub
from typing import Final

from xxhash import xxh3_64_hexdigest, xxh3_64_intdigest

CHUNK_WORDS: Final = 8
"""Words in a chunk: a clause, about fifty characters of English."""
WINDOW_CHARS: Final = 2000
"""How close together the repeats of a chunk must be, in characters of normalised text
(bytes of UTF-8: characters, for English; whitespace runs count as one)."""


SCAN_BYTES: Final = 256 * 1024
"""Default bound on the characters of one model output that are normalised and scanned
(``StallPolicy.output_scan_bytes``): a 10 MB output costs what 256 KB does."""

_FENCE: Final = "```"
_STRUCTURE: Final = re.compile(
    r"\s*(?:[-*+]\s|\d{1,9}[.)]\s|#{1,6}(?:\s|$)|>|\||(?:[-*_=]\s*){3,}$)"
)
"""A list item, heading, quote, table row or divider line (matched at the line's start)."""


@dataclass(frozen=True, slots=True)
class Stretch:
    """Chunks of one stretch of prose, packed: 16 bytes a chunk, not a tuple each.

    ``offsets[i]`` is where chunk ``i`` starts (see :data:`WINDOW_CHARS`),
    ``hashes[i]`` its hash; offsets ascend.
    """

    offsets: array[int] = field(default_factory=lambda: array("q"))
    hashes: array[int] = field(default_factory=lambda: array("Q"))

    def __len__(self) -> int:
        return len(self.hashes)

    @property
    def nbytes(self) -> int:
        """Bytes the packed chunks take: for a gateway's memory accounting."""
        return 16 * len(self.hashes)


NO_CHUNKS: Final = Stretch()
"""The empty stretch (never changed: stretches are replaced, not extended)."""


@dataclass(frozen=True, slots=True)
class ChantScan:
    """What one output's text says for the chanting rule: hashes and offsets, no text.

    ``head`` holds the chunks before the output's first structural break (offsets
    from the output's start, at most :data:`WINDOW_CHARS` of them), ``tail`` those
    after its last break (offsets from its end, so negative, within the last
    :data:`WINDOW_CHARS`). ``whole``: no break at all, so head and tail are one
    stretch of prose that the next output may continue.
    """

    peak: int
    """The most times one chunk occurred within the window, inside this output."""
    chunk: int
    """That chunk's hash (0 when the output holds no chunk)."""
    length: int
    """Characters of normalised text: where the next output's offsets start."""
    head: Stretch = NO_CHUNKS
    tail: Stretch = NO_CHUNKS
    whole: bool = True
    scanned: int = 0
    """Characters of the output that were read (normalised and scanned): what a run's
    scan budget (``StallPolicy.run_scan_bytes``) is charged."""

    @property
    def nbytes(self) -> int:
        """Bytes the scan's chunks take (at most two windows' worth)."""
        return self.head.nbytes + self.tail.nbytes


def _segments(text: str) -> Iterator[list[bytes] | None]:
    """The prose's words (UTF-8), stretch by stretch; ``None`` for each break between them.

    Code between fences is skipped, and structural lines split the prose.
    """
    for index, piece in enumerate(text.split(_FENCE)):
        if index:
            yield None  # a fence: whatever it opens or closes, the prose stops here
        if index % 2:
            continue  # inside a code block
        words: list[bytes] = []
        for line in piece.casefold().splitlines():
            if _STRUCTURE.match(line) or line.count("|") > 1:
                if words:
                    yield words
                    words = []
                yield None
            else:
                words += line.encode("utf-8", "surrogatepass").split()
        if words:
            yield words


def _hashes(words: list[bytes]) -> list[int]:
    """The hash of every run of :data:`CHUNK_WORDS` words, in order.

    Built by ``map`` and ``zip`` over the word list: no Python-level loop per
    word, which makes the scan several times cheaper than slicing and joining.
    """
    runs = zip(*(words[i:] for i in range(CHUNK_WORDS)), strict=False)  # the shortest ends
    return list(map(xxh3_64_intdigest, map(b" ".join, runs)))


def _offsets(words: list[bytes], start: int, count: int) -> list[int]:
    """Where each of the first ``count`` words starts: its length and a space per word."""
    lengths = accumulate(map(len, words[:count]), initial=start)
    return list(map(add, lengths, range(count)))


def _peak(offsets: Sequence[int], hashes: Sequence[int]) -> tuple[int, int]:
    """The most times one chunk occurs within a window ending at a chunk of this output.

    Offsets below zero are the carried chunks of an earlier output: they count
    toward a window but do not end one (they were judged with their output).
    Most prose repeats no chunk at all, so only repeated chunks are windowed.
    """
    counts = Counter(hashes)
    if not counts:
        return 0, 0
    top, most = counts.most_common(1)[0]
    if most == 1:
        return (1, top) if offsets[-1] >= 0 else (0, 0)
    spots: dict[int, list[int]] = {}
    for offset, digest in zip(offsets, hashes, strict=True):
        if counts[digest] > 1:
            spots.setdefault(digest, []).append(offset)
    peak, top = 1, hashes[-1]
    for digest, seen in spots.items():
        first = 0
        for last, offset in enumerate(seen):
            while seen[first] < offset - WINDOW_CHARS:
                first += 1
            if offset >= 0 and last - first >= peak:
                peak, top = last - first + 1, digest
    return peak, top


def scan(text: str) -> ChantScan:
    """Hash one output's prose into chunks and find its most repeated one."""
    peak, top, offset, broken = 0, 0, 0, False
    head = NO_CHUNKS
    offsets: list[int] = []
    hashes: list[int] = []
    for words in _segments(text):
        if words is None:
            broken, hashes = True, []
            continue
        hashes = _hashes(words)
        offsets = _offsets(words, offset, len(words) + 1)
        found, digest = _peak(offsets[: len(hashes)], hashes)
        if found > peak:
            peak, top = found, digest
        offset = offsets[-1]
        if not broken and not head:
            cut = bisect_left(offsets, WINDOW_CHARS, hi=len(hashes))
            head = Stretch(array("q", offsets[:cut]), array("Q", hashes[:cut]))
    # The last stretch's last window, from the output's end (none after a break).
    cut = bisect_left(offsets, offset - WINDOW_CHARS, hi=len(hashes))
    from_end = array("q", map(sub, offsets[cut : len(hashes)], repeat(offset)))
    tail = Stretch(from_end, array("Q", hashes[cut:])) if hashes else NO_CHUNKS
    return ChantScan(peak, top, offset, head, tail, not broken)


def read(text: str, limit: int = SCAN_BYTES) -> tuple[str, ChantScan]:
    """The monologue digest and the chanting scan of one output, at most ``limit`` read.

    Only the first ``limit`` characters are normalised and scanned: the cost
    stays linear and small whatever the output's size (#27). The rest is hashed
    as it is, in C, so two long outputs that differ past the bound still differ;
    a cut output is never carried into the next one (its end was not read).
    """
    found = scan(text[:limit])
    read_chars = min(len(text), limit)
    if len(text) > limit:
        found = ChantScan(
            found.peak, found.chunk, found.length, found.head, NO_CHUNKS, False, read_chars
        )
    else:
        found = ChantScan(
            found.peak, found.chunk, found.length, found.head, found.tail, found.whole, read_chars
        )
    return digest(text, limit), found


def digest(text: str, limit: int = SCAN_BYTES) -> str:
    """The monologue digest: the first ``limit`` characters normalised, the rest as is.

    Normalised: whitespace collapsed, case folded.
    """
    said = " ".join(text[:limit].split()).casefold().encode("utf-8", "surrogatepass")
    if len(text) > limit:
        rest = xxh3_64_hexdigest(text[limit:].encode("utf-8", "surrogatepass"))
        said += b"\x1f" + rest.encode()
    return xxh3_64_hexdigest(said)


def across(carry: Stretch, head: Stretch) -> tuple[int, int]:
    """``(peak, chunk)`` over the carried chunks of earlier outputs and this one's head.

    Only windows that end at one of this output's chunks count: the carried
    ones were judged with their own output.
    """
    return _peak(carry.offsets + head.offsets, carry.hashes + head.hashes)


def carried(carry: Stretch, output: ChantScan) -> Stretch:
    """What the next output continues from: this output's last window of prose.

    Offsets are from this output's end. Earlier outputs' chunks stay only while
    this one is unbroken prose and still within one window of its end.
    """
    if not output.whole or not carry:
        return output.tail
    shift = output.length
    cut = bisect_left(carry.offsets, shift - WINDOW_CHARS)
    if cut == len(carry):
        return output.tail
    kept = array("q", map(sub, carry.offsets[cut:], repeat(shift)))
    return Stretch(kept + output.tail.offsets, carry.hashes[cut:] + output.tail.hashes)


__all__ = [
    "CHUNK_WORDS",
    "NO_CHUNKS",
    "SCAN_BYTES",
    "WINDOW_CHARS",
    "ChantScan",
    "Stretch",
    "across",
    "carried",
    "digest",
    "read",
    "scan",
]
