"""Frameworks' final-answer tools: the tool an agent calls to finish is not a call.

Some frameworks end a run through a tool of their own (smolagents'
``final_answer``, BeeAI's ``final_answer``, DSPy ReAct's ``finish``). Its span
looks like any tool span, but it is the answer: counted as a call, it would
add a call, a round and a "new fact" to every run. A tool name alone is not
enough (a user's own tool may be called ``finish``), so each entry names its
tool and what only the framework's own tool carries: its class as the span
name, its description, or its fixed result. Data only; :func:`is_final_answer`
reads it on tool spans.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import OpenInferenceAttributes as OI
from otel_stall.semconv import TraceloopAttributes as TL


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """One framework's terminal tool: its name and the marks that tell it from a user's tool."""

    framework: str
    tool: str
    """The tool's name, as the span's tool-name key gives it."""
    span_names: frozenset[str] = frozenset()
    """Span names (the tool's class, as OpenInference names tool spans) that mark it alone."""
    classes: frozenset[str] = frozenset()
    """The tool's class, where a span names it (``metadata.class_name``, OpenInference BeeAI)."""
    descriptions: tuple[str, ...] = ()
    """Texts the framework's own tool description starts with."""
    results: frozenset[str] = frozenset()
    """The fixed result the framework's own tool returns."""


FINAL_ANSWERS: Final = (
    FinalAnswer(
        "smolagents",
        "final_answer",
        span_names=frozenset({"FinalAnswerTool"}),
        descriptions=("Provides a final answer to the given problem",),
    ),
    FinalAnswer(
        "BeeAI RequirementAgent",
        "final_answer",
        span_names=frozenset({"FinalAnswerTool"}),
        classes=frozenset({"FinalAnswerTool"}),
        descriptions=("Sends the final answer to the user",),
        results=frozenset({"Message has been sent"}),
    ),
    FinalAnswer(
        "DSPy ReAct",
        "finish",
        span_names=frozenset({"finish.__call__", "finish.acall"}),
        descriptions=("Marks the task as complete",),
        results=frozenset({"Completed."}),
    ),
)
"""Read from each framework's source: smolagents ``FinalAnswerTool`` (span named after
the class), BeeAI ``agents/requirement/utils/_tool.py`` ``FinalAnswerTool``, DSPy
``predict/react.py`` (``tools["finish"]``, returns ``"Completed."``; OpenInference names a
DSPy tool's span ``<tool>.__call__`` / ``<tool>.acall`` and sets no tool name, and ReAct's
``finish`` replaces any user tool of that name, so the span name alone tells it)."""

SPAN_NAMES: Final = frozenset(name for entry in FINAL_ANSWERS for name in entry.span_names)
"""Span names that mark a final answer whatever the tool name."""
_BY_TOOL: Final[Mapping[str, tuple[FinalAnswer, ...]]] = {
    tool: tuple(e for e in FINAL_ANSWERS if e.tool == tool)
    for tool in {e.tool for e in FINAL_ANSWERS}
}
TOOL_NAME_KEYS: Final = (GenAI.TOOL_NAME, OI.TOOL_NAME, TL.ENTITY_NAME)
"""Where a tool span names its tool (the built-in conventions' name keys)."""
DESCRIPTION_KEYS: Final = (GenAI.TOOL_DESCRIPTION, OI.TOOL_DESCRIPTION)
"""Where a tool span carries its tool's description."""
RESULT_KEYS: Final = (OI.OUTPUT_VALUE, GenAI.TOOL_CALL_RESULT, TL.ENTITY_OUTPUT)
"""Where a tool span carries its result."""
CLASS_KEYS: Final = ("metadata.class_name",)
"""Where a tool span names its tool's class (OpenInference's BeeAI instrumentation)."""


def is_final_answer(name: str, attributes: Mapping[str, Any], tool: str | None = None) -> bool:
    """Whether a tool span is a framework's final answer, not a call.

    ``tool``: the tool's name, if the caller has read it (else read here, or taken
    from the span's name when no key names it).
    """
    if name in SPAN_NAMES:
        return True
    if tool is None:
        tool = _text(attributes, TOOL_NAME_KEYS) or name.rpartition(" ")[2]
    entries = _BY_TOOL.get(tool)
    if entries is None:
        return False
    cls = _text(attributes, CLASS_KEYS)
    description = _text(attributes, DESCRIPTION_KEYS)
    result = _text(attributes, RESULT_KEYS)
    if result is not None:
        result = result.strip().strip('"')
    for entry in entries:
        if name in entry.span_names or (cls is not None and cls in entry.classes):
            return True
        if description is not None and description.startswith(entry.descriptions):
            return True
        if result is not None and result in entry.results:
            return True
    return False


def _text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = attributes.get(key)
        if type(value) is str:
            return value
    return None


__all__ = ["FINAL_ANSWERS", "FinalAnswer", "is_final_answer"]
