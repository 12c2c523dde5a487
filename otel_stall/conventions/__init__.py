"""The edge: spans in, :class:`~otel_stall.core.records.ToolCall` / ``ModelCall`` out.

Each instrumentation (OTel GenAI, OpenInference, OpenLLMetry, Google ADK, MCP, a
user's own mapping) spells tool, model and agent spans its own way; this package
turns all of them into the same records, so the live processor, replay and the
gateway feed one detector.
"""

from otel_stall.conventions.builtin import (
    CONTENT_KEYS,
    OUTPUT_EVENTS,
    ROLE_KEYS,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    Conventions,
    CustomConvention,
    Role,
    SpanRecord,
    agent_name,
    is_agent_span_name,
    is_role_span_name,
    looks_agent_like,
)
from otel_stall.conventions.reading import PLAIN, Reading

__all__ = [
    "CONTENT_KEYS",
    "OUTPUT_EVENTS",
    "PLAIN",
    "ROLE_KEYS",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "Conventions",
    "CustomConvention",
    "Reading",
    "Role",
    "SpanRecord",
    "agent_name",
    "is_agent_span_name",
    "is_role_span_name",
    "looks_agent_like",
]
