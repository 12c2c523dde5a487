"""The replay page's example output is what the replay prints now, so it cannot go stale.

``docs/replay.md`` shows the golden capture's looping researcher as the table prints it.
The block follows an ``<!-- output: ... -->`` marker; for a deliberate change of output,
``python tests/offline/test_doc_examples.py --update`` rewrites it (read the diff).
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from rich.console import Console

from otel_stall import replay
from otel_stall.offline.report import render_table

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "replay.md"
GOLDEN = ROOT / "tests" / "golden" / "formats" / "otlp.jsonl"
MARKER = "<!-- output: the golden capture's researcher"
BLOCK = re.compile(re.escape(MARKER) + r"[^\n]*\n```text\n(.*?)```\n", re.DOTALL)


def researcher_block() -> str:
    """The table's block of the golden capture's researcher run, its ledger included."""
    out = io.StringIO()
    render_table(replay(str(GOLDEN)), Console(file=out, width=200, color_system=None))
    lines = [line.rstrip() for line in out.getvalue().splitlines()]
    start = lines.index("break    researcher")
    end = lines.index("", start)
    return "\n".join(lines[start:end]) + "\n"


def documented_block() -> str:
    """The block the page shows after its marker."""
    found = BLOCK.search(PAGE.read_text(encoding="utf-8"))
    assert found is not None, f"{PAGE.name} lost its {MARKER!r} block"
    return found.group(1)


def test_the_replay_page_shows_what_the_replay_prints() -> None:
    """The page's researcher block is the table's, line for line."""
    assert documented_block() == researcher_block()


def test_the_example_shows_the_one_onset_and_waste() -> None:
    """The block says where the stall began and what it wasted, as the page's text explains."""
    block = researcher_block()
    assert "stalled from seq 3" in block
    assert "wasted since the stall began: 5 tool calls, 5 model calls" in block


def update() -> None:
    """Rewrite the page's block with what the replay prints now."""
    text = PAGE.read_text(encoding="utf-8")
    found = BLOCK.search(text)
    assert found is not None
    text = text[: found.start(1)] + researcher_block() + text[found.end(1) :]
    PAGE.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/offline/test_doc_examples.py --update")
    update()
