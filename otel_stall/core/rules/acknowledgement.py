"""Acknowledgements: a bare "done" answered to a call with new arguments is progress.

Not a rule of its own: it refines a call's novelty, as
:mod:`otel_stall.core.rules.novelty` does. A write, a send or a save often
answers with the same few bytes every time (``"write complete"``,
``{"status": "ok"}``, ``{"success": true}``, ``true``). By their digests alone
thirty writes to thirty files bring one fact and twenty-nine repeats, and
``no_new_facts`` would break an agent doing honest work.

Decisions:

- A result that is a bare acknowledgement, answered to a call whose tool,
  arguments and outcome were not seen before in the run, is a new fact: the
  call did something new, and the acknowledgement is all a tool has to say
  about it. Unclear cases lean to "new fact".
- The same call with the same arguments and the same acknowledgement is a
  repeat as before: the repeat, cycle and duplicate rules judge it, and it
  brings nothing new.
- A call whose arguments were not captured cannot be told apart from the last
  one, so its acknowledgement stays what its digest says.
- Empty results (``null``, ``""``, ``{}``, ``false``) already count as new
  (see novelty); this covers the rest, by a fixed vocabulary
  (:data:`STATUS_WORDS`, :data:`PHRASES`, in the shapes of :func:`shapes`),
  compared by digest: one set look-up, and only for results already seen.
- The vocabulary's digests are worked out once per :class:`Signer` (a few
  milliseconds), the first time a run asks, so a result is compared exactly as
  it was signed; at most :data:`CACHED_SIGNERS` signers are remembered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from otel_stall.core.records import ABSENT, Status
from otel_stall.core.signing import Signer

__all__ = ["PHRASES", "STATUS_WORDS", "acknowledgements", "shapes"]

STATUS_WORDS: Final = (
    "ok",
    "okay",
    "done",
    "success",
    "successful",
    "succeeded",
    "complete",
    "completed",
    "written",
    "saved",
    "created",
    "updated",
    "deleted",
    "removed",
    "sent",
    "accepted",
    "acknowledged",
    "applied",
    "stored",
    "committed",
    "queued",
)
"""One-word statuses a tool answers with when it has nothing else to say."""

PHRASES: Final = (
    "write complete",
    "write completed",
    "write successful",
    "write succeeded",
    "file written",
    "file saved",
    "file updated",
    "file created",
    "file deleted",
    "written successfully",
    "saved successfully",
    "updated successfully",
    "created successfully",
    "deleted successfully",
    "completed successfully",
    "sent successfully",
    "operation successful",
    "operation completed",
    "message sent",
    "changes saved",
)
"""Short fixed sentences of the same meaning."""

_STATUS_KEYS: Final = ("status", "result", "message")
_FLAG_KEYS: Final = ("success", "ok", "acknowledged", "done", "completed")
CACHED_SIGNERS: Final = 64
"""Signers whose acknowledgement digests are remembered (a policy has one)."""

_CACHE: dict[int, tuple[Signer, frozenset[str]]] = {}


def _spellings(text: str) -> tuple[str, ...]:
    """A word or phrase as tools write it: lower, Capitalised or UPPER case."""
    return (text, text.capitalize(), text.upper())


def shapes() -> Iterator[Any]:
    """Every acknowledgement value recognised: bare, under a status key, or a true flag."""
    yield True
    for key in _FLAG_KEYS:
        yield {key: True}
        for word in ("ok", "success", "done"):
            yield {key: True, "status": word}
    for text in (*STATUS_WORDS, *PHRASES):
        for spelled in _spellings(text):
            yield spelled
            yield spelled + "."
            for key in _STATUS_KEYS:
                yield {key: spelled}


def acknowledgements(signer: Signer) -> frozenset[str]:
    """The result digests of every shape in :func:`shapes`, as ``signer`` signs results."""
    found = _CACHE.get(id(signer))
    if found is not None and found[0] is signer:
        return found[1]
    digests = frozenset(
        digest
        for value in shapes()
        if (digest := signer.sign("", ABSENT, value, Status.OK).result_digest) is not None
    )
    if len(_CACHE) >= CACHED_SIGNERS:
        _CACHE.clear()
    _CACHE[id(signer)] = (signer, digests)  # the signer is held: its id is not reused
    return digests
