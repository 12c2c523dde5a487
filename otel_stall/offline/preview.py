"""A short, printable preview of a tool call's arguments, for reports people read.

A finding says which call looped; the arguments say why (the same URL, the
same query). The preview is bounded (:data:`PREVIEW_CHARS`), kept once per
distinct call, and never printed under ``--redact``. It is made from at most
:data:`_SCAN_CHARS` characters of text, so a megabyte of arguments costs no
more than a short one.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from otel_stall.core.records import ABSENT

__all__ = ["PREVIEW_CHARS", "argument_preview"]

PREVIEW_CHARS: Final = 60
"""Longest preview, in characters, the ellipsis included."""
_SCAN_CHARS: Final = 4 * PREVIEW_CHARS
"""Characters of the arguments' text looked at: enough for the preview after squeezing spaces."""


def argument_preview(arguments: Any) -> str | None:
    """At most :data:`PREVIEW_CHARS` printable characters of ``arguments``; ``None`` if absent.

    JSON text is shown as captured, other values as compact JSON. Runs of
    whitespace become one space, and control characters (a terminal escape in
    a hostile span) become spaces too.
    """
    if arguments is ABSENT or arguments is None:
        return None
    text = arguments if isinstance(arguments, str) else _json_text(arguments)
    text = _printable(text[:_SCAN_CHARS])
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
