"""A short, printable preview of a tool call's arguments, for reports people read.

A finding says which call looped; the arguments say why (the same URL, the
same query). The preview is bounded (:data:`PREVIEW_CHARS`), made once per
call a finding names, and never printed under ``--redact``. It is made from at
most :data:`_SCAN_CHARS` characters of text, so a megabyte of arguments costs
no more than a short one.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from otel_stall.core.records import ABSENT

__all__ = ["PREVIEW_CHARS", "argument_preview", "preview_head"]

PREVIEW_CHARS: Final = 60
"""Longest preview, in characters, the ellipsis included."""
_SCAN_CHARS: Final = 160
"""Characters of the arguments' text kept and looked at: room for squeezed whitespace."""


def preview_head(arguments: Any) -> str | None:
    """What a preview is later made from: the start of the arguments' text (a slice).

    Cheap enough for every distinct call of a replay (a slice of the JSON
    text, which is how spans carry arguments); the printable preview is made
    only for the calls a finding names, by :func:`argument_preview`.
    """
    if arguments is ABSENT or arguments is None:
        return None
    text = arguments if isinstance(arguments, str) else _json_text(arguments)
    return text[:_SCAN_CHARS]


def argument_preview(arguments: Any) -> str | None:
    """At most :data:`PREVIEW_CHARS` printable characters of ``arguments``; ``None`` if absent.

    JSON text is shown as captured, other values as compact JSON. Runs of
    whitespace become one space, and control characters (a terminal escape in
    a hostile span) become spaces too. A :func:`preview_head` gives the same.
    """
    head = preview_head(arguments)
    if head is None:
        return None
    text = _printable(head)
    if not text:
        return None
    if len(text) > PREVIEW_CHARS:
        return text[: PREVIEW_CHARS - 1].rstrip() + "…"
    return text


def _json_text(value: Any) -> str:
    """Decoded arguments (an OTLP kvlist, say) as compact JSON; anything else as ``str``."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return str(value)


def _printable(text: str) -> str:
    """Whitespace squeezed, control characters dropped: one line that is safe to print."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else " " for c in text)
    return " ".join(text.split())
