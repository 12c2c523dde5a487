"""The edge: span attributes in, :class:`ToolCall` / :class:`ModelCall` out.

One :class:`Conventions` value understands OTel GenAI, MCP, OpenInference,
OpenLLMetry and Google ADK spans, plus user-supplied :class:`CustomConvention`
mappings. It works on a :class:`SpanRecord`, a plain value that the live
processor, the replay and the gateway all build, so the detector is fed the
same records whichever way the spans arrive.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from otel_stall.conventions import model_content
from otel_stall.core.config import env_field, parse_names, resolve
from otel_stall.core.records import ABSENT, ModelCall, RunKey, Status, ToolCall
from otel_stall.semconv import (
    ADKAttributes as ADK,
)
from otel_stall.semconv import (
    ErrorAttributes as Err,
)
from otel_stall.semconv import (
    GenAIAttributes as GenAI,
)
from otel_stall.semconv import (
    GenAIOperation as Op,
)
from otel_stall.semconv import (
    MCPAttributes as MCP,
)
from otel_stall.semconv import (
    OpenInferenceAttributes as OI,
)
from otel_stall.semconv import (
    StallAttributes as Stall,
)
from otel_stall.semconv import (
    TraceloopAttributes as TL,
)

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2


class Role(enum.IntEnum):
    """What a span is to the detector."""

    OTHER = 0
    TOOL = 1
    MODEL = 2
    AGENT = 3


@dataclass(slots=True)
class SpanRecord:
    """A finished span reduced to what the conventions read; no OpenTelemetry types.

    Ids are lower-case hex. ``status_code`` uses OTLP's numbers: 0 unset, 1 ok, 2 error.
    Attribute values are plain Python: str, bool, int, float, tuples/lists, dicts
    (an OTLP kvlist) or bytes.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    status_code: int = STATUS_UNSET
    status_message: str = ""


@dataclass(frozen=True, slots=True)
class CustomConvention:
    """A mapping for spans that no built-in convention covers.

    A span matches when ``attributes[role_key] == tool_value`` (or ``model_value``,
    ``agent_value``); the payload keys are tried in order.
    """

    role_key: str
    tool_value: str | None = None
    model_value: str | None = None
    agent_value: str | None = None
    tool_name_keys: tuple[str, ...] = ()
    arguments_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()


_MODEL_OPS: Final = frozenset({Op.CHAT, Op.TEXT_COMPLETION, Op.GENERATE_CONTENT})

_ROLE_BY_VALUE: Final[tuple[tuple[str, Mapping[str, Role], bool], ...]] = (
    (
        GenAI.OPERATION_NAME,
        {Op.EXECUTE_TOOL: Role.TOOL, Op.INVOKE_AGENT: Role.AGENT}
        | dict.fromkeys(_MODEL_OPS, Role.MODEL),
        False,
    ),
    (OI.SPAN_KIND, {"TOOL": Role.TOOL, "LLM": Role.MODEL, "AGENT": Role.AGENT}, True),
    (TL.SPAN_KIND, {"tool": Role.TOOL, "agent": Role.AGENT}, False),
    (MCP.METHOD_NAME, {MCP.TOOLS_CALL: Role.TOOL}, False),
    (TL.LLM_REQUEST_TYPE, {"chat": Role.MODEL, "completion": Role.MODEL}, False),
)
"""Role by an attribute's string value, in order of precedence: (key, value → role, fold case)."""

_ROLE_BY_PRESENCE: Final = ((ADK.TOOL_CALL_ARGS, Role.TOOL), (ADK.LLM_REQUEST, Role.MODEL))
"""Role by an attribute's mere presence (Google ADK), after every value rule."""
_TOOL_NAME_KEYS: Final = (GenAI.TOOL_NAME, OI.TOOL_NAME, TL.ENTITY_NAME)
_ARGUMENT_KEYS: Final = (
    GenAI.TOOL_CALL_ARGUMENTS,
    ADK.TOOL_CALL_ARGS,
    OI.INPUT_VALUE,
    TL.ENTITY_INPUT,
)
_RESULT_KEYS: Final = (
    GenAI.TOOL_CALL_RESULT,
    ADK.TOOL_RESPONSE,
    OI.OUTPUT_VALUE,
    TL.ENTITY_OUTPUT,
)
CONTENT_KEYS: Final = frozenset(
    (*_ARGUMENT_KEYS, *_RESULT_KEYS, GenAI.INPUT_MESSAGES, GenAI.OUTPUT_MESSAGES)
)
"""Raw payload attributes: what redaction strips from exported spans."""

ROLE_KEYS: Final = frozenset(
    {
        GenAI.OPERATION_NAME,
        OI.SPAN_KIND,
        TL.SPAN_KIND,
        MCP.METHOD_NAME,
        ADK.TOOL_CALL_ARGS,
        TL.LLM_REQUEST_TYPE,
        ADK.LLM_REQUEST,
    }
)
"""Every attribute :meth:`Conventions.role` reads (besides custom ``role_key`` values).

A span holding none of them is :attr:`Role.OTHER`: one set test instead of a
series of lookups, which on the SDK's attribute mapping each cost a raised
``KeyError``. Keep in step with :meth:`Conventions.role`.
"""

DEFAULT_OVERLOADED: Final = frozenset(
    {
        "429",
        "503",
        "overloaded",
        "rate_limit",
        "ratelimit",
        "rate_limited",
        "too_many_requests",
        "resource_exhausted",
        "ratelimiterror",
    }
)
DEFAULT_REFUSED: Final = frozenset({"refused", "permission_denied", "blocked"})
_OVERLOADED_GRPC: Final = frozenset({8, 14})


def _lower_set(value: Any) -> frozenset[str]:
    names = parse_names(value) if isinstance(value, str) else value
    return frozenset(str(v).lower() for v in names)


@dataclass(frozen=True)
class Conventions:
    """How spans map to records. Build it directly or with :meth:`from_env`."""

    overloaded_markers: frozenset[str] = env_field(
        DEFAULT_OVERLOADED, "OVERLOADED_MARKERS", parse_names, "comma-separated error types"
    )
    """``error.type`` values and HTTP statuses meaning rate-limited or overloaded."""
    refused_markers: frozenset[str] = env_field(
        DEFAULT_REFUSED, "REFUSED_MARKERS", parse_names, "comma-separated error types"
    )
    """``error.type`` values meaning a guard refused the call."""
    custom: tuple[CustomConvention, ...] = ()
    _custom_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overloaded_markers", _lower_set(self.overloaded_markers))
        object.__setattr__(self, "refused_markers", _lower_set(self.refused_markers))
        object.__setattr__(self, "custom", tuple(self.custom))
        object.__setattr__(self, "_custom_keys", tuple(c.role_key for c in self.custom))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> Conventions:
        """Resolve from explicit values, then ``OTEL_STALL_*``, then defaults."""
        return resolve(cls, explicit, environ)

    # -- classification (hot path: every span passes here) ------------------

    def role(self, attributes: Mapping[str, Any] | None) -> Role:
        """Classify a span by its attributes: the first convention that names a role wins."""
        if not attributes:
            return Role.OTHER
        get = attributes.get
        for key, roles, fold in _ROLE_BY_VALUE:
            value = get(key)
            if value is not None and isinstance(value, str):
                role = roles.get(value.upper() if fold else value)
                if role is not None:
                    return role
        for key, role in _ROLE_BY_PRESENCE:
            if key in attributes:
                return role
        if self._custom_keys:
            return self._custom_role(attributes)
        return Role.OTHER

    def _custom_role(self, attributes: Mapping[str, Any]) -> Role:
        for conv in self.custom:
            value = attributes.get(conv.role_key)
            if value is None:
                continue
            if value == conv.tool_value:
                return Role.TOOL
            if value == conv.model_value:
                return Role.MODEL
            if value == conv.agent_value:
                return Role.AGENT
        return Role.OTHER

    # -- records -------------------------------------------------------------

    def tool_call(self, span: SpanRecord, run_key: RunKey = None) -> ToolCall:
        """The :class:`ToolCall` a tool span describes."""
        return self.tool_call_from(
            span.attributes,
            span.name,
            span.span_id,
            span.start_ns,
            span.end_ns,
            span.status_code,
            run_key,
        )

    @property
    def role_keys(self) -> frozenset[str] | None:
        """Every attribute that can make a span more than plain, for a shortcut on plain spans.

        A span holding none of them is :attr:`Role.OTHER` to :meth:`role`.
        ``None`` when a subclass overrides :meth:`role`: its own rule may read any
        key, so every span must be asked.
        """
        if type(self).role is not Conventions.role:
            return None
        return ROLE_KEYS | {c.role_key for c in self.custom}

    @property
    def content_keys(self) -> frozenset[str]:
        """Every attribute that holds a raw payload: what redaction strips, live and offline.

        The built-in payload keys and those of custom mappings, so a redacted
        export never carries content that some mapping reads as arguments or results.
        """
        custom = {key for c in self.custom for key in (*c.arguments_keys, *c.result_keys)}
        return CONTENT_KEYS | custom

    @property
    def builds_calls_from_parts(self) -> bool:
        """Whether :meth:`tool_call_from` makes the same calls as :meth:`tool_call`.

        True unless a subclass overrides :meth:`tool_call`: that subclass's own
        rule then needs the :class:`SpanRecord`, and callers must build one.
        """
        return type(self).tool_call is Conventions.tool_call

    def tool_call_from(
        self,
        attrs: Mapping[str, Any],
        name: str,
        span_id: str | None,
        start_ns: int,
        end_ns: int,
        status_code: int,
        run_key: RunKey = None,
    ) -> ToolCall:
        """:meth:`tool_call` from a span's parts, for callers that hold them already.

        The live processor calls this once per tool span; skipping the
        :class:`SpanRecord` and building the frozen record with its record
        builder (positional slot stores) makes it a fraction of a microsecond.
        """
        get = attrs.get
        if self.custom and (custom := self._custom_for(attrs)) is not None:
            name_keys = (*custom.tool_name_keys, *_TOOL_NAME_KEYS)
            args_keys = (*custom.arguments_keys, *_ARGUMENT_KEYS)
            result_keys = (*custom.result_keys, *_RESULT_KEYS)
            tool = _first_text(attrs, name_keys)
            arguments = _first(attrs, args_keys)
            result = _first(attrs, result_keys)
        else:
            tool = get(GenAI.TOOL_NAME)  # the common case first: one lookup each
            if tool is None:
                tool = _first_text(attrs, _TOOL_NAME_KEYS)
            elif type(tool) is not str:
                tool = str(tool)
            arguments = get(GenAI.TOOL_CALL_ARGUMENTS)
            if arguments is None:
                arguments = _first(attrs, _ARGUMENT_KEYS)
            result = get(GenAI.TOOL_CALL_RESULT)
            if result is None:
                result = _first(attrs, _RESULT_KEYS)
        call_id = get(GenAI.TOOL_CALL_ID)
        return ToolCall(
            tool or _name_from_span(name),
            arguments,
            result,
            self._status(attrs, status_code),
            run_key,
            None,
            None if call_id is None else str(call_id),
            span_id,
            start_ns,
            end_ns,
            get(Stall.TOOL_EXEMPT) is True,
            get(Stall.TOOL_APPROVAL) is True,
            model_content.failure(attrs),
        )

    def model_call(self, span: SpanRecord, run_key: RunKey = None) -> ModelCall:
        """The :class:`ModelCall` a model span describes."""
        attrs = span.attributes
        model = attrs.get(GenAI.REQUEST_MODEL) or attrs.get(OI.LLM_MODEL_NAME)
        status = self._status(attrs, span.status_code)
        error = None if status is Status.OK else model_content.failure(attrs, span.status_message)
        return ModelCall(
            run_key,
            span.span_id,
            span.start_ns,
            span.end_ns,
            None if model is None else str(model),
            status,
            error,
            *model_content.token_usage(attrs),
            model_content.output_digest(attrs),
        )

    def status(self, span: SpanRecord) -> Status:
        """Refused, overloaded, error or ok, from the span status and error attributes."""
        return self._status(span.attributes, span.status_code)

    def _status(self, attrs: Mapping[str, Any], status_code: int) -> Status:
        if attrs.get(Stall.REFUSED) is True:
            return Status.REFUSED
        error_type = attrs.get(Err.ERROR_TYPE)
        if error_type is not None:
            low = str(error_type).lower()
            if low in self.refused_markers:
                return Status.REFUSED
            if low in self.overloaded_markers:
                return Status.OVERLOADED
        http = attrs.get(Err.HTTP_STATUS_CODE)
        if http is not None and str(http) in self.overloaded_markers:
            return Status.OVERLOADED
        if attrs.get(Err.RPC_GRPC_STATUS_CODE) in _OVERLOADED_GRPC:
            return Status.OVERLOADED
        if status_code == STATUS_ERROR or error_type is not None:
            return Status.ERROR
        return Status.OK

    def _custom_for(self, attributes: Mapping[str, Any]) -> CustomConvention | None:
        for conv in self.custom:
            if conv.role_key in attributes:
                return conv
        return None


def agent_name(attributes: Any) -> str | None:
    """The agent's name as the conventions spell it, if any."""
    name = attributes.get(GenAI.AGENT_NAME) or attributes.get(TL.ENTITY_NAME)
    return None if name is None else str(name)


def is_agent_span_name(name: str) -> bool:
    """Whether a span is named as the GenAI conventions name agent spans.

    ``invoke_agent {gen_ai.agent.name}`` (or bare ``invoke_agent``) marks a run
    even before its attributes are set: Google ADK sets them just after the
    span starts, too late for ``on_start``. The live processor and the batch
    analysis both apply this rule, so they agree on where runs begin.
    """
    op = Op.INVOKE_AGENT
    return name.startswith(op) and (len(name) == len(op) or name[len(op)] == " ")


def _first(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            return value
    return ABSENT


def _first_text(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    value = _first(attributes, keys)
    return None if value is ABSENT else str(value)


def _name_from_span(name: str) -> str:
    """``execute_tool search`` and ``tools/call search`` name the tool after the verb."""
    head, _, tail = name.partition(" ")
    return tail.strip() or head


__all__ = [
    "CONTENT_KEYS",
    "ROLE_KEYS",
    "Conventions",
    "CustomConvention",
    "Role",
    "SpanRecord",
    "agent_name",
    "is_agent_span_name",
]
