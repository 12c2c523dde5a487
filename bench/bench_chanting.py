"""What reading a model span's output costs, with and without the chanting scan.

Chanting runs only on model calls whose output content was captured (tool
calls do not pay for it: ``bench_detector.py`` and ``detector_instructions.py``
measure those). Per output, side by side, interleaved, best of several
repeats of the process's CPU time (``time.process_time``):

  (a) the floor: ``json.loads`` of ``gen_ai.output.messages``;
  (m) what the monologue rule already paid: the output's text and its digest
      (``model_content.output_digest``);
  (c) both hashes of the output, as model spans are now read: the digest and
      the chanting scan (``model_content.output_hashes``).

Three sizes of output (words of prose, in paragraphs with a list and a code
block), healthy (no 8-word chunk repeats) and chanting (one sentence over and
over). Prints a markdown section; ``--quick`` runs fewer outputs and repeats.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

from otel_stall.conventions import model_content

WORDS = [
    "the",
    "a",
    "build",
    "test",
    "file",
    "config",
    "report",
    "deploy",
    "check",
    "next",
    "step",
    "we",
    "will",
    "is",
    "and",
    "of",
    "to",
]


def _healthy(rng: random.Random, words: int) -> str:
    """Prose in paragraphs, a short list and a code block; no chunk of 8 words repeats."""
    body = [f"{rng.choice(WORDS)}{n}" for n in range(words)]
    paragraphs = [" ".join(body[i : i + 60]) for i in range(0, words, 60)]
    return "\n\n".join(paragraphs) + "\n\n- one\n- two\n\n```\nx = 1\n```\n"


def _chanting(words: int) -> str:
    sentence = "The deploy is still pending, so I will wait a little longer. "
    return sentence * max(1, words // 12)


def _attributes(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return {"gen_ai.output.messages": json.dumps([message])}


def _timed(work: Callable[[dict[str, Any]], Any], outputs: list[dict[str, Any]]) -> float:
    start = time.process_time()
    for attrs in outputs:
        work(attrs)
    return time.process_time() - start


def _floor(attrs: dict[str, Any]) -> Any:
    return json.loads(attrs["gen_ai.output.messages"])


def times(words: int, chanting: bool, count: int, repeats: int) -> tuple[float, float, float]:
    """Per-output seconds of (a), (m) and (c), best of ``repeats`` interleaved."""
    rng = random.Random(words)
    texts = [_chanting(words) if chanting else _healthy(rng, words) for _ in range(count)]
    outputs = [_attributes(t) for t in texts]
    best = [float("inf")] * 3
    work = (_floor, model_content.output_digest, model_content.output_hashes)
    for _ in range(repeats):
        for i, step in enumerate(work):
            best[i] = min(best[i], _timed(step, outputs))
    return best[0] / count, best[1] / count, best[2] / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true")
    options = parser.parse_args(argv)
    count, repeats = (20, 3) if options.quick else (200, 7)
    print("## Model output: the chanting scan's cost per output\n")
    print("| output | (a) parse | (m) digest | (c) digest + scan | (c)/(m) | (c) per word |")
    print("|---|---|---|---|---|---|")
    for words in (50, 300, 1500):
        for chanting in (False, True):
            a, m, c = times(words, chanting, count, repeats)
            kind = "chanting" if chanting else "healthy"
            print(
                f"| {words} words, {kind} | {a * 1e6:.1f} µs | {m * 1e6:.1f} µs "
                f"| {c * 1e6:.1f} µs | {c / m:.1f}x | {c / words * 1e6:.2f} µs |"
            )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
