"""The edge: span attributes in, :class:`ToolCall` / :class:`ModelCall` out.

One :class:`Conventions` value understands OTel GenAI, MCP, OpenInference,
OpenLLMetry and Google ADK spans, plus user-supplied :class:`CustomConvention`
mappings. It works on a :class:`SpanRecord`, a plain value that the live
processor, the replay and the gateway all build, so the detector is fed the
same records whichever way the spans arrive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from otel_stall.conventions import final_answer, model_content, switches
from otel_stall.conventions.content import (
    Event,
    event_value,
    event_values,
    says_error,
    without_call_ids,
)
from otel_stall.conventions.mappings import BUILTIN, SpanConvention
from otel_stall.conventions.names import name_from_span
from otel_stall.conventions.reading import (
    AGENT,
    PLAIN,
    Reading,
    first,
    first_text,
    marked,
    named_in,
)
from otel_stall.conventions.tables import Tables, compile_conventions
from otel_stall.core import chanting
from otel_stall.core.config import ConfigError, env_field, parse_int, parse_names, resolve
from otel_stall.core.records import ABSENT, ModelCall, RunKey, Status, ToolCall
from otel_stall.core.run_state import Role
from otel_stall.semconv import ErrorAttributes as Err
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import GenAIOperation as Op
from otel_stall.semconv import OpenInferenceAttributes as OI
from otel_stall.semconv import PydanticAIAttributes as PAI
from otel_stall.semconv import StallAttributes as Stall
from otel_stall.semconv import TraceloopAttributes as TL
from otel_stall.semconv import VercelAIAttributes as AI

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2


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
    events: tuple[Event, ...] = ()
    """The span's events as (name, attributes): some frameworks put tool content there."""


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


BUILTIN_TABLES: Final = compile_conventions(BUILTIN)

CONTENT_KEYS: Final = BUILTIN_TABLES.content_keys | {GenAI.INPUT_MESSAGES, GenAI.OUTPUT_MESSAGES}
"""Raw payload attributes, and the names of events that carry payloads: what redaction strips."""

OUTPUT_EVENTS: Final = BUILTIN_TABLES.output_events
"""``(event name, attribute)`` pairs that hold a model span's output (``gen_ai.choice``)."""

ROLE_KEYS: Final = BUILTIN_TABLES.role_keys
"""Every attribute :meth:`Conventions.role` reads (besides custom ``role_key`` values).

A span holding none of them is :attr:`Role.OTHER`: one set test instead of a
series of lookups, which on the SDK's attribute mapping each cost a raised
``KeyError``. Compiled from the same mappings as the role table itself.
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


def _load_mappings(path: str) -> tuple[SpanConvention, ...]:
    """``OTEL_STALL_CONVENTIONS``: the mapping file's conventions (empty: none)."""
    from otel_stall.conventions.user import load_conventions  # only when a file is named

    return load_conventions(path) if path.strip() else ()


def _lower_set(value: Any) -> frozenset[str]:
    names = parse_names(value) if isinstance(value, str) else value
    return frozenset(str(v).lower() for v in names)


@dataclass(frozen=True)
class Conventions:
    """How spans map to records. Build it directly or with :meth:`from_env`.

    The built-in mappings (:data:`~otel_stall.conventions.mappings.BUILTIN`)
    come first; ``mappings`` (user :class:`SpanConvention` values, e.g. from a
    TOML file named by ``OTEL_STALL_CONVENTIONS``) add to them.
    """

    overloaded_markers: frozenset[str] = env_field(
        DEFAULT_OVERLOADED, "OVERLOADED_MARKERS", parse_names, "comma-separated error types"
    )
    """``error.type`` values and HTTP statuses meaning rate-limited or overloaded."""
    refused_markers: frozenset[str] = env_field(
        DEFAULT_REFUSED, "REFUSED_MARKERS", parse_names, "comma-separated error types"
    )
    """``error.type`` values meaning a guard refused the call."""
    custom: tuple[CustomConvention, ...] = ()
    mappings: tuple[SpanConvention, ...] = env_field(
        (), "CONVENTIONS", _load_mappings, "a TOML mapping file (see docs/frameworks.md)"
    )
    """User mappings in the built-ins' form, after them in precedence."""
    output_scan_bytes: int = env_field(
        chanting.SCAN_BYTES, "OUTPUT_SCAN_BYTES", parse_int, "a number of bytes, at least 1024"
    )
    """How much of one model output the monologue and chanting rules read (256 KiB).

    The rest is hashed as it is, so the cost of a 10 MB output stays small and
    linear (issue 27: 11.4 s and 280 MB before, 0.3 s and 30 MB after)."""
    _custom_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _tables: Tables = field(init=False, repr=False, compare=False)
    BUILTIN: ClassVar[Conventions]
    """The built-in conventions alone."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "overloaded_markers", _lower_set(self.overloaded_markers))
        set_(self, "refused_markers", _lower_set(self.refused_markers))
        set_(self, "custom", tuple(self.custom))
        set_(self, "mappings", tuple(self.mappings))
        scan = self.output_scan_bytes
        if type(scan) is not int or scan < 1024:
            raise ConfigError(
                f"output_scan_bytes (OTEL_STALL_OUTPUT_SCAN_BYTES): {scan!r} is not a number of "
                "bytes of at least 1024; give one such as 262144, or leave it unset for 256 KiB"
            )
        set_(self, "_custom_keys", tuple(c.role_key for c in self.custom))
        tables = compile_conventions((*BUILTIN, *self.mappings)) if self.mappings else None
        set_(self, "_tables", tables or BUILTIN_TABLES)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **explicit: Any) -> Conventions:
        """Resolve from explicit values, then ``OTEL_STALL_*``, then defaults."""
        return resolve(cls, explicit, environ)

    # -- classification (hot path: every span passes here) ------------------

    def role(self, attributes: Mapping[str, Any] | None) -> Role:
        """Classify a span by its attributes: the first convention that names a role wins.

        An agent span that a graph instrumentation marks as one node visit
        (LangGraph's ``agent`` node, kind AGENT) is a step of its run: plain.
        """
        if not attributes:
            return Role.OTHER
        tables = self._tables
        get = attributes.get
        for key, roles, fold in tables.by_value:
            value = get(key)
            if value is not None and isinstance(value, str):
                role = roles.get(value.upper() if fold else value)
                if role is not None:
                    if role is Role.AGENT and tables.steps:
                        return self._unless_step(role, attributes)
                    return role
        for key, role in tables.by_presence:
            if key in attributes:
                return role
        if self._custom_keys:
            return self._custom_role(attributes)
        return Role.OTHER

    def span_role(self, name: str, attributes: Mapping[str, Any] | None) -> Role:
        """:meth:`role`, with the span's name: a synthetic span (an aggregate) is plain.

        Google ADK's ``execute_tool (merged)`` after parallel calls and
        smolagents' ``FinalAnswerTool`` look like tool calls and are not.
        """
        role = self.role(attributes)
        if role is Role.TOOL and attributes:
            tables = self._tables
            if name in tables.synthetic_spans:
                return Role.OTHER
            tool = attributes.get(GenAI.TOOL_NAME)
            if type(tool) is str and tool in tables.synthetic_tools:
                return Role.OTHER
            if final_answer.is_final_answer(name, attributes, tool if type(tool) is str else None):
                return Role.OTHER
        return role

    def classify(self, name: str, attributes: Mapping[str, Any] | None) -> Role:
        """:meth:`span_role`, else :meth:`role_by_name`: a span's role, as the replay reads it."""
        role = self.span_role(name, attributes)
        return self.role_by_name(name) if role is Role.OTHER else role

    @property
    def tables(self) -> Tables:
        """The compiled tables (built-ins, then user mappings): for ``otel-stall explain``."""
        return self._tables

    @property
    def model_reading_keys(self) -> tuple[frozenset[str], tuple[str, ...]]:
        """What :meth:`read` takes of a model span: its keys, and its output keys' prefixes.

        A gateway decodes no other attribute of a model span it forwards (its input
        messages may be large, and are never read).
        """
        tables = self._tables
        marks = {key for span_marks, _ in tables.sessions for key, _ in span_marks}
        status = {Stall.REFUSED, Err.ERROR_TYPE, Err.HTTP_STATUS_CODE, Err.RPC_GRPC_STATUS_CODE}
        keys = {*tables.model_keys, *model_content.OUTCOME_KEYS, *tables.session_keys, *marks}
        return frozenset(keys | status), model_content.OUTPUT_KEY_PREFIXES

    @property
    def role_name_patterns(self) -> tuple[tuple[str, ...], frozenset[str]]:
        """What :meth:`role_by_name` looks for: name prefixes and whole names, for a quick test."""
        tables = self._tables
        return (Op.INVOKE_AGENT, *tables.model_prefixes), tables.model_names

    def role_by_name(self, name: str) -> Role:
        """The role a span's name alone gives it: agent (``invoke_agent ...``), model, or plain.

        For spans whose role attribute comes after their start: Google ADK sets
        an agent's and a model call's attributes just after the span starts, too
        late for ``on_start``. Live and replay both fall back on this, so they
        agree on where runs and rounds begin.
        """
        if is_agent_span_name(name):
            return Role.AGENT
        tables = self._tables
        if name in tables.model_names or name.startswith(tables.model_prefixes):
            return Role.MODEL
        return Role.OTHER

    def session(self, attributes: Mapping[str, Any] | None) -> str | None:
        """The session a span names, for an instrumentation whose runs no span spans.

        Only a convention with ``session_keys`` names one, and only on its own
        spans (its ``session_marks``): the same key set inside an agent's run by
        another framework is not a run of its own. The caller decides where it
        applies: to calls outside every agent span.
        """
        tables = self._tables
        if not attributes or tables.session_keys.isdisjoint(attributes):
            return None  # the common case, in one set test
        for marks, keys in tables.sessions:
            if marked(attributes, marks):
                for key in keys:
                    value = attributes.get(key)
                    if type(value) is str and value:
                        return value
        return None

    def handoff_target(self, call: ToolCall) -> str | None:
        """The agent a handoff call hands its run to; ``None``: not a handoff tool.

        ``""`` when the call is one but its arguments do not name the agent
        (content not captured): the run still changes hands.
        """
        key = self._tables.handoffs.get(call.tool)
        if key is None:
            return None
        return named_in(call.arguments, key, 4) or ""

    def _unless_step(self, role: Role, attributes: Mapping[str, Any]) -> Role:
        if role is Role.AGENT:
            for key, marker in self._tables.steps:
                value = attributes.get(key)
                if isinstance(value, str) and marker in value:
                    return Role.OTHER
        return role

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

    @property
    def role_keys(self) -> frozenset[str] | None:
        """Every attribute that can make a span more than plain, for a shortcut on plain spans.

        A span holding none of them is :attr:`Role.OTHER` to :meth:`role`.
        ``None`` when a subclass overrides :meth:`role`: its own rule may read any
        key, so every span must be asked.
        """
        if type(self).role is not Conventions.role:
            return None
        return self._tables.role_keys | {c.role_key for c in self.custom}

    @property
    def content_keys(self) -> frozenset[str]:
        """Every attribute, and every event name, that holds a raw payload: what redaction strips.

        Live and offline alike. Attribute keys and event names never collide
        (``gen_ai.tool.message`` is an event, ``gen_ai.tool.call.arguments`` an attribute),
        so one set serves both.

        The built-in payload keys and those of custom mappings, so a redacted
        export never carries content that some mapping reads as arguments or results.
        """
        custom = {key for c in self.custom for key in (*c.arguments_keys, *c.result_keys)}
        return CONTENT_KEYS | self._tables.content_keys | custom

    def content_switch(self, attributes: Mapping[str, Any]) -> str | None:
        """How to turn content capture on for the framework that wrote this span."""
        return switches.content_switch((*BUILTIN, *self.mappings), attributes)

    def read(self, span: SpanRecord, role: Role | None = None, *, output: bool = True) -> Reading:
        """Everything detection takes from one span, read once: see :class:`Reading`.

        ``role`` is the span's role if the caller knows it already (live knows a
        model span from its start); else :meth:`classify` decides. ``output``
        false leaves a model call's output unread (its run's scan budget is spent).
        A plain span gets the shared :data:`~otel_stall.conventions.reading.PLAIN`.
        """
        if role is None:
            role = self.classify(span.name, span.attributes)
        if role is Role.TOOL:
            call = self.tool_call(span)
            attrs = span.attributes
            contentless = call.arguments is ABSENT and call.result is ABSENT
            return Reading(
                role,
                call,
                None,
                self.session(attrs),
                self.handoff_target(call),
                self.content_switch(attrs) if contentless else None,
            )
        if role is Role.MODEL:
            model = self.model_call(span, output=output)
            return Reading(role, None, model, self.session(span.attributes))
        return AGENT if role is Role.AGENT else PLAIN

    def tool_call(self, span: SpanRecord, run_key: RunKey = None) -> ToolCall:
        """The :class:`ToolCall` a tool span describes.

        Name, arguments and result come from the first key that holds them
        (then span events); placeholders for content not captured count as
        absent, a framework's per-call envelope fields are dropped
        (:func:`~otel_stall.conventions.content.without_call_ids`), and a
        result that reports its own failure makes the call an error.
        """
        attrs = span.attributes
        tables = self._tables
        custom = self._custom_for(attrs) if self.custom else None
        if custom is not None:
            tool = first_text(attrs, (*custom.tool_name_keys, *tables.name_keys))
            arguments = first(attrs, custom.arguments_keys)
            result = first(attrs, custom.result_keys)
        else:
            tool = first_text(attrs, tables.name_keys)
            arguments = result = ABSENT
        if arguments is ABSENT:
            arguments = self._content(attrs, tables.argument_keys, span, tables.argument_events)
        if result is ABSENT:
            result = self._content(attrs, tables.result_keys, span, tables.result_events)
        status = self._status(attrs, span.status_code)
        if status is Status.OK and (
            (result is not ABSENT and says_error(result))
            or any(attrs.get(key) is True for key in tables.error_flags)
        ):
            status = Status.ERROR
        call_id = attrs.get(GenAI.TOOL_CALL_ID)
        return ToolCall(
            tool or self._name_from_span(span.name),
            without_call_ids(arguments),
            without_call_ids(result),
            status,
            run_key,
            None,
            None if call_id is None else str(call_id),
            span.span_id,
            span.start_ns,
            span.end_ns,
            attrs.get(Stall.TOOL_EXEMPT) is True,
            attrs.get(Stall.TOOL_APPROVAL) is True,
            model_content.failure(attrs),
        )

    def _content(
        self,
        attrs: Mapping[str, Any],
        keys: tuple[str, ...],
        span: SpanRecord,
        events: tuple[tuple[str, str], ...],
    ) -> Any:
        """The first content key a span holds (a placeholder counts as absent), then events."""
        placeholders = self._tables.placeholders
        for key in keys:
            value = attrs.get(key)
            if value is not None:
                marks = placeholders.get(key)
                if marks is not None and isinstance(value, str) and value in marks:
                    return ABSENT
                return value
        if span.events:
            value = event_value(span.events, events)
            if value is not None:
                return value
        return ABSENT

    def _name_from_span(self, name: str) -> str:
        """``execute_tool search``, ``MCP send tools/call search``: the tool after the verb."""
        for prefix in self._tables.tool_name_prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                return name[len(prefix) :].strip()
        head, _, tail = name.partition(" ")
        return tail.strip() or head

    def model_call(
        self, span: SpanRecord, run_key: RunKey = None, *, output: bool = True
    ) -> ModelCall:
        """The :class:`ModelCall` a model span describes (``output`` false: its text unread)."""
        attrs = span.attributes
        model = first(attrs, self._tables.model_keys)
        status = self._status(attrs, span.status_code)
        error = None if status is Status.OK else model_content.failure(attrs, span.status_message)
        choices = (
            event_values(span.events, self._tables.output_events) if output and span.events else ()
        )
        return ModelCall(
            run_key,
            span.span_id,
            span.start_ns,
            span.end_ns,
            None if model is ABSENT else str(model),
            status,
            error,
            *model_content.token_usage(attrs),
            *(
                model_content.output_hashes(attrs, choices, self.output_scan_bytes)
                if output
                else ()
            ),
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


Conventions.BUILTIN = Conventions()


def agent_name(attributes: Any, span_name: str | None = None) -> str | None:
    """The agent's name: ``gen_ai.agent.name``, a convention's own key, else the span's name.

    ``span_name`` is the agent span's name, where the caller has one: most
    OpenInference instrumentors set no name key but name the span after the
    agent (:func:`otel_stall.conventions.names.name_from_span`).
    """
    name = None
    if attributes:
        name = (
            attributes.get(GenAI.AGENT_NAME)
            or attributes.get(OI.AGENT_NAME)
            or attributes.get(TL.ENTITY_NAME)
            or attributes.get(PAI.AGENT_NAME)
            or attributes.get(AI.FUNCTION_ID)
        )
    if name is None:
        return None if span_name is None else name_from_span(span_name)
    return str(name)


def is_role_span_name(name: str) -> bool:
    """Whether a span's name alone gives it a role (an agent or a model span), built-ins only.

    The decoders hand a span over as a bare parent link only if neither its
    attributes nor its name give it a role.
    """
    return Conventions.BUILTIN.role_by_name(name) is not Role.OTHER


_AGENT_LIKE: Final = re.compile(r"(?i)(?<![a-z])(?:agents?|tools?|llm|mcp|invoke)(?![a-z])")


def looks_agent_like(name: str) -> bool:
    """Whether a span's name has an agent word (agent, tool, llm, mcp, invoke).

    For spans no convention reads: the replay lists them, since they are where
    a framework otel-stall does not know yet puts its runs and calls.
    """
    return _AGENT_LIKE.search(name) is not None


def is_agent_span_name(name: str) -> bool:
    """Whether a span is named as the GenAI conventions name agent spans.

    ``invoke_agent {gen_ai.agent.name}`` (or bare ``invoke_agent``) marks a run
    even before its attributes are set: Google ADK sets them just after the
    span starts, too late for ``on_start``. The live processor and the batch
    analysis both apply this rule, so they agree on where runs begin.
    """
    op = Op.INVOKE_AGENT
    return name.startswith(op) and (len(name) == len(op) or name[len(op)] == " ")


__all__ = [
    "CONTENT_KEYS",
    "ROLE_KEYS",
    "Conventions",
    "CustomConvention",
    "Role",
    "SpanRecord",
    "agent_name",
    "is_agent_span_name",
    "is_role_span_name",
    "looks_agent_like",
]
