r"""Text from spans is data: it never drives a terminal, forges a line, or becomes HTML.

Tool names, arguments, agent names and session ids come from whoever wrote the
spans. Printed raw, an ESC sequence sets the window title, clears the screen or
plants a hyperlink; a newline forges a report line; ``<script>`` in a Markdown
report becomes HTML where it is rendered (issue 27). Every text format
(the table, Markdown, ``explain``, ``compare``, the demo's narration) passes such
values through :func:`printable`, and Markdown through :func:`markdown`; JSON
escapes for itself and the HTML page escapes with ``html.escape``.

Control characters are shown, not dropped, so two names that differ only in
them still differ: C0 and C1 controls and DEL as ``\xNN`` (``\n``, ``\r``,
``\t`` by name), and the Unicode controls that reorder or break lines (bidi
overrides and isolates, line and paragraph separators) as ``\uNNNN``. Text with
none of them (nearly all) is returned as it is, after one ``isprintable`` scan.
"""

from __future__ import annotations

from typing import Final

__all__ = ["markdown", "printable"]


def _controls() -> dict[int, str]:
    table = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
    table.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
    reordering = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
    table.update({c: f"\\u{c:04x}" for c in (0x2028, 0x2029, *reordering)})
    return table


_PRINTABLE: Final = str.maketrans(_controls())
_MARKDOWN: Final = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        **{c: "\\" + c for c in "\\`*_[]|#!~"},
    }
)
"""HTML's three specials as entities (no tag survives), Markdown's own punctuation
backslash-escaped (no link, emphasis, code span or table cell is opened or closed)."""


def printable(text: object) -> str:
    """``text`` on one line with every control character shown as an escape, never sent."""
    value = str(text)
    return value if value.isprintable() else value.translate(_PRINTABLE)


def markdown(text: object) -> str:
    """``text`` as inert Markdown: :func:`printable`, then no HTML and no Markdown syntax.

    Safe anywhere in a line, a table cell included; inside ``<code>`` it shows as typed.
    Not for a backtick code span, where a renderer shows escapes literally.
    """
    return printable(text).translate(_MARKDOWN)
