"""What a model span says of its outcome: failure class, token usage and output hashes.

Pure functions from a span's attribute mapping (and status) to the
:class:`~otel_stall.core.records.ModelCall` fields that the failure-loop and
wasted-cost rules read. Kept apart from the convention table so that the
table can change without touching these readings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from otel_stall.core import chanting
from otel_stall.core.chanting import ChantScan
from otel_stall.semconv import ErrorAttributes as Err
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import OpenInferenceAttributes as OI

_INPUT_TOKEN_KEYS: Final = (
    GenAI.USAGE_INPUT_TOKENS,
    OI.LLM_TOKEN_COUNT_PROMPT,
    GenAI.USAGE_PROMPT_TOKENS,
)
_OUTPUT_TOKEN_KEYS: Final = (
    GenAI.USAGE_OUTPUT_TOKENS,
    OI.LLM_TOKEN_COUNT_COMPLETION,
    GenAI.USAGE_COMPLETION_TOKENS,
)
_TOTAL_TOKEN_KEYS: Final = (OI.LLM_TOKEN_COUNT_TOTAL,)

OUTCOME_KEYS: Final = frozenset(
    {Err.ERROR_TYPE, *_INPUT_TOKEN_KEYS, *_OUTPUT_TOKEN_KEYS, *_TOTAL_TOKEN_KEYS}
)
"""What these readings need of a model span beyond its role and model name, whose payloads
a gateway need not keep: it keeps only these attributes of a model span it forwards."""


def _count(value: Any) -> int | None:
    """A token count from an int, a float or numeric text; ``None`` for anything else."""
    if type(value) is bool:
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    try:
        number = int(float(str(value).strip()))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number >= 0 else None


def _first_count(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            count = _count(value)
            if count is not None:
                return count
    return None


def token_usage(attrs: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """``(input, output)`` tokens as captured; ``None`` where not captured (not 0).

    A span with only a total counts it as input, so the sum stays right.
    """
    read = _first_count(attrs, _INPUT_TOKEN_KEYS)
    written = _first_count(attrs, _OUTPUT_TOKEN_KEYS)
    if read is None and written is None:
        return _first_count(attrs, _TOTAL_TOKEN_KEYS), None
    return read, written


def failure(attrs: Mapping[str, Any], status_message: str = "") -> str | None:
    """What makes two failures "the same": ``error.type``, else the status message."""
    error_type = attrs.get(Err.ERROR_TYPE)
    if error_type is not None and str(error_type):
        return str(error_type)
    return status_message or None


OUTPUT_DIGEST_KEY: Final = "otel_stall.output.digest"
"""Where a gateway keeps :func:`output_digest` of a model span it forwards (not the text)."""
OUTPUT_CHANT_KEY: Final = "otel_stall.output.chant"
"""Where a gateway keeps the :class:`ChantScan` of a model span it forwards (hashes only)."""
_OI_OUTPUT_PREFIX: Final = "llm.output_messages."
_TL_COMPLETION_PREFIX: Final = "gen_ai.completion."
OUTPUT_KEY_PREFIXES: Final = (GenAI.OUTPUT_MESSAGES, _OI_OUTPUT_PREFIX, _TL_COMPLETION_PREFIX)
"""Every attribute :func:`output_text` reads starts with one of these."""


_SAID_PARTS: Final = frozenset({"text", "reasoning", "thinking"})
"""Part types that are the model's own words: its answer and its reasoning. A model that
thinks the same thing again and again is as stuck as one that says it (monologue, chanting)."""


def _part_text(part: Mapping[str, Any]) -> str:
    """A text or reasoning part's words: ``content``, else ``thinking`` or ``text``."""
    for key in ("content", "thinking", "text"):
        value = part.get(key)
        if isinstance(value, str):
            return value
    return ""


def _parts_text(message: Any) -> list[str]:
    """The words of one GenAI message: its text and reasoning parts (or a plain ``content``)."""
    if not isinstance(message, Mapping) or message.get("role", "assistant") != "assistant":
        return []
    parts = message.get("parts")
    if isinstance(parts, list):
        return [
            _part_text(p) for p in parts if isinstance(p, Mapping) and p.get("type") in _SAID_PARTS
        ]
    content = message.get("content")
    return [content] if isinstance(content, str) else []


def _genai_text(value: Any) -> list[str] | None:
    """``gen_ai.output.messages``: JSON text or a decoded list of messages."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list):
        return None
    return [text for message in value for text in _parts_text(message)]


def _flattened_text(attrs: Mapping[str, Any], prefix: str, suffixes: tuple[str, ...]) -> list[str]:
    """Flattened message attributes (OpenInference, OpenLLMetry), in key order."""
    return [
        str(value)
        for key, value in sorted(attrs.items())
        if key.startswith(prefix) and key.endswith(suffixes) and "role" not in key
    ]


def _flattened(attrs: Mapping[str, Any]) -> list[str]:
    """OpenInference's and OpenLLMetry's flattened output, if a key of theirs is there.

    One pass over the keys first: most model spans hold neither, and the sorted
    reads would sort every attribute of the span twice for nothing.
    """
    prefixes = (_OI_OUTPUT_PREFIX, _TL_COMPLETION_PREFIX)
    for key in attrs:
        if key.startswith(prefixes):
            break
    else:
        return []
    texts = _flattened_text(attrs, _OI_OUTPUT_PREFIX, (".message.content", ".text"))
    return texts + _flattened_text(attrs, _TL_COMPLETION_PREFIX, (".content",))


def _blocks_text(blocks: list[Any]) -> list[str]:
    """Content blocks: ``{"text": ...}`` (Strands, Bedrock), text or reasoning parts, text."""
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            text = block.get("text")
            if isinstance(text, str):
                texts.append(text)
            elif "role" in block or "parts" in block:
                texts += _message_text(block)
            elif block.get("type") in _SAID_PARTS:
                texts.append(_part_text(block))
    return texts


def _choice_text(value: Any) -> list[str]:
    """A ``gen_ai.choice`` event's message, in any form frameworks write it.

    Strands' content blocks, the GenAI event body (``{"message": {"role":
    "assistant", "content": ...}}``), a message, or plain text.
    """
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return [value]
        if not isinstance(decoded, (list, dict)):
            return [value]
        value = decoded
    if isinstance(value, list):
        return _blocks_text(value)
    if isinstance(value, Mapping):
        inner = value.get("message")
        return _choice_text(inner) if inner is not None else _message_text(value)
    return []


def _message_text(message: Mapping[str, Any]) -> list[str]:
    """An event's message: its parts, its text content, or its content blocks."""
    content = message.get("content")
    if isinstance(content, list) and message.get("role", "assistant") == "assistant":
        return _blocks_text(content)
    return _parts_text(message)


def output_text(attrs: Mapping[str, Any], choices: Sequence[Any] = ()) -> str | None:
    """The assistant's text in a model span, where captured; ``None`` without content.

    Attributes first (``gen_ai.output.messages``, OpenInference, OpenLLMetry),
    then ``choices``: the ``gen_ai.choice`` event messages the conventions found
    (Strands' default layout, the GenAI event form).
    """
    texts = (
        _genai_text(attrs.get(GenAI.OUTPUT_MESSAGES)) if GenAI.OUTPUT_MESSAGES in attrs else None
    )
    if texts is None:
        texts = _flattened(attrs)
    if not any(texts) and choices:
        texts = [text for choice in choices for text in _choice_text(choice)]
    text = " ".join(t for t in texts if t)
    return text or None


def _digest(text: str) -> str:
    return chanting.digest(text)


def output_digest(attrs: Mapping[str, Any], choices: Sequence[Any] = ()) -> str | None:
    """A hash of the normalised assistant text (whitespace collapsed, case folded), or ``None``.

    Only the hash is kept: the text itself never leaves the span.
    """
    kept = attrs.get(OUTPUT_DIGEST_KEY)
    if isinstance(kept, str):
        return kept
    text = output_text(attrs, choices)
    return None if text is None else _digest(text)


def output_hashes(
    attrs: Mapping[str, Any], choices: Sequence[Any] = (), limit: int = chanting.SCAN_BYTES
) -> tuple[str | None, ChantScan | None]:
    """The monologue digest and the chanting scan of a model span's output, text read once.

    A gateway's kept values (:data:`OUTPUT_DIGEST_KEY`, :data:`OUTPUT_CHANT_KEY`)
    stand for the text it did not keep.
    """
    kept = attrs.get(OUTPUT_DIGEST_KEY)
    if isinstance(kept, str):
        chant = attrs.get(OUTPUT_CHANT_KEY)
        return kept, chant if isinstance(chant, ChantScan) else None
    text = output_text(attrs, choices)
    if text is None:
        return None, None
    return chanting.read(text, limit)
