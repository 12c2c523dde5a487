"""What a model span says of its outcome: failure class and token usage.

Pure functions from a span's attribute mapping (and status) to the
:class:`~otel_stall.core.records.ModelCall` fields that the failure-loop and
wasted-cost rules read. Kept apart from the convention table so that the
table can change without touching these readings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

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
