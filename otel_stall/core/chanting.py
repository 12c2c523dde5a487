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
- **Only hashes are kept** (xxh3, as signing uses), with each chunk's
  character offset: never the text. A scan's record holds at most the chunks
  of two windows (the output's first and last :data:`WINDOW_CHARS`), and a run
  carries at most one window: at most ``WINDOW_CHARS / 2`` chunks (a word and
  its space take at least two characters), whatever the length of the run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from xxhash import xxh3_64_intdigest

CHUNK_WORDS: Final = 8
"""Words in a chunk: a clause, about fifty characters of English."""
WINDOW_CHARS: Final = 2000
"""How close together (in characters of text) the repeats of a chunk must be."""

Chunk = tuple[int, int]
"""``(offset, hash)``: where a chunk starts (characters of normalised text) and its hash."""

_FENCE: Final = "```"
_STRUCTURE: Final = re.compile(
    r"\s*(?:[-*+]\s|\d{1,9}[.)]\s|#{1,6}(?:\s|$)|>|\||(?:[-*_=]\s*){3,}$)"
)
"""A list item, heading, quote, table row or divider line (matched at the line's start)."""


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
    head: tuple[Chunk, ...] = ()
    tail: tuple[Chunk, ...] = ()
    whole: bool = True


class _Window:
    """How many times each chunk occurred in the last :data:`WINDOW_CHARS` characters.

    Bounded: an entry leaves once the text has moved a window past it.
    """

    __slots__ = ("counts", "order")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.order: list[Chunk] = []

    def add(self, offset: int, digest: int) -> int:
        """Count a chunk at ``offset``; return its occurrences within the window."""
        order, counts = self.order, self.counts
        if order and order[0][0] < offset - WINDOW_CHARS:
            self._expire(offset - WINDOW_CHARS)
        order.append((offset, digest))
        count = counts[digest] = counts.get(digest, 0) + 1
        return count

    def _expire(self, before: int) -> None:
        order, counts = self.order, self.counts
        gone = 0
        for offset, digest in order:
            if offset >= before:
                break
            gone += 1
            left = counts[digest] - 1
            if left:
                counts[digest] = left
            else:
                del counts[digest]
        del order[:gone]


def _segments(text: str) -> Iterator[list[str] | None]:
    """The prose's words, stretch by stretch; ``None`` for each break between stretches.

    Code between fences is skipped, and structural lines split the prose.
    """
    for index, piece in enumerate(text.split(_FENCE)):
        if index:
            yield None  # a fence: whatever it opens or closes, the prose stops here
        if index % 2:
            continue  # inside a code block
        words: list[str] = []
        for line in piece.casefold().splitlines():
            if _STRUCTURE.match(line) or line.count("|") > 1:
                if words:
                    yield words
                    words = []
                yield None
            else:
                words += line.split()
        if words:
            yield words


def _chunks(words: list[str], start: int) -> Iterator[Chunk]:
    """Every run of :data:`CHUNK_WORDS` words, hashed, with its offset."""
    offset = start
    for i in range(len(words) - CHUNK_WORDS + 1):
        text = " ".join(words[i : i + CHUNK_WORDS])
        yield offset, xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))
        offset += len(words[i]) + 1


def _length(words: list[str]) -> int:
    return sum(map(len, words)) + len(words)


def scan(text: str) -> ChantScan:
    """Hash one output's prose into chunks and find its most repeated one."""
    peak, top, offset, broken = 0, 0, 0, False
    head: list[Chunk] = []
    tail: list[Chunk] = []
    for words in _segments(text):
        if words is None:
            broken, tail = True, []
            continue
        window = _Window()
        tail = []
        for chunk in _chunks(words, offset):
            count = window.add(*chunk)
            if count > peak:
                peak, top = count, chunk[1]
            if not broken and chunk[0] < WINDOW_CHARS:
                head.append(chunk)
            tail.append(chunk)
        offset += _length(words)
    end = offset
    last = tuple((o - end, d) for o, d in tail if o >= end - WINDOW_CHARS)
    return ChantScan(peak, top, end, tuple(head), last, not broken)


def across(carry: Iterable[Chunk], head: Iterable[Chunk]) -> tuple[int, int]:
    """``(peak, chunk)`` over the carried chunks of earlier outputs and this one's head.

    Only counts reached by this output's chunks matter: the carried ones were
    judged with their own output.
    """
    window = _Window()
    for chunk in carry:
        window.add(*chunk)
    peak, top = 0, 0
    for chunk in head:
        count = window.add(*chunk)
        if count > peak:
            peak, top = count, chunk[1]
    return peak, top


def carried(carry: tuple[Chunk, ...], output: ChantScan) -> tuple[Chunk, ...]:
    """What the next output continues from: this output's last window of prose.

    Offsets are from this output's end. Earlier outputs' chunks stay only while
    this one is unbroken prose and still within one window of its end.
    """
    if not output.whole:
        return output.tail
    shift = output.length
    kept = tuple((o - shift, d) for o, d in carry if o - shift >= -WINDOW_CHARS)
    return kept + output.tail if kept else output.tail


__all__ = ["CHUNK_WORDS", "WINDOW_CHARS", "ChantScan", "Chunk", "across", "carried", "scan"]
