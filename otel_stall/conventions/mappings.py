"""The built-in conventions as data: one :class:`SpanConvention` per instrumentation.

Each says, in the instrumentation's own keys, what makes a span a tool, model
or agent span and where its tool name, arguments and results are (attributes
or span events). :class:`~otel_stall.conventions.builtin.Conventions` compiles
them, with any user mapping (a TOML file in the same form, see
:mod:`otel_stall.conventions.user`), into flat tables read once per span.
The keys and where each framework puts them are surveyed in
``tests/frameworks/SURVEY.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from otel_stall.semconv import ADKAttributes as ADK
from otel_stall.semconv import GenAIAttributes as GenAI
from otel_stall.semconv import GenAIOperation as Op
from otel_stall.semconv import HaystackAttributes as HS
from otel_stall.semconv import LangGraphMarkers as LG
from otel_stall.semconv import MCPAttributes as MCP
from otel_stall.semconv import OpenInferenceAttributes as OI
from otel_stall.semconv import PydanticAIAttributes as PAI
from otel_stall.semconv import TraceloopAttributes as TL
from otel_stall.semconv import VercelAIAttributes as AI

ROLE_NAMES: Final = ("tool", "model", "agent")
"""The roles a mapping can give a span, as spelled in a mapping file."""


@dataclass(frozen=True, slots=True)
class SpanConvention:
    """How one instrumentation spells agent spans: keys, values and names, no code.

    Roles: ``roles[key][value]`` names the role of a span whose attribute
    ``key`` has ``value`` (keys in ``fold_case`` compare upper-cased); a key of
    ``present`` gives its role by being there at all. Content: the first key
    of each list that a span holds wins; ``*_events`` are ``(event name,
    attribute)`` pairs read when no attribute holds the value. ``placeholders``
    are values of this convention's content keys that mean "not captured".
    """

    name: str
    roles: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    fold_case: frozenset[str] = frozenset()
    present: tuple[tuple[str, str], ...] = ()
    tool_name_keys: tuple[str, ...] = ()
    arguments_keys: tuple[str, ...] = ()
    result_keys: tuple[str, ...] = ()
    arguments_events: tuple[tuple[str, str], ...] = ()
    result_events: tuple[tuple[str, str], ...] = ()
    output_events: tuple[tuple[str, str], ...] = ()
    """``(event name, attribute)`` pairs holding a model span's output, read when no
    output attribute holds it (every matching event, in order: one per choice).
    Built-in conventions only, not a mapping file's: the gateway reads the built-in
    ones (:data:`~otel_stall.conventions.builtin.OUTPUT_EVENTS`), so all three agree."""
    tool_name_prefixes: tuple[str, ...] = ()
    """Span-name verbs before a tool's name (``execute_tool search``), when no key names it."""
    synthetic_spans: frozenset[str] = frozenset()
    """Span names of spans that look like calls but are not (aggregates, final answers)."""
    synthetic_tools: frozenset[str] = frozenset()
    """Tool names that mark a synthetic span."""
    placeholders: frozenset[str] = frozenset()
    step_markers: tuple[tuple[str, str], ...] = ()
    """``(key, text)``: an agent span whose ``key`` holds ``text`` is a step of its graph's run."""
    model_keys: tuple[str, ...] = ()
    """Where a model span names its model."""
    model_span_names: tuple[str, ...] = ()
    """Span names (alone, or followed by a space and more) that mark a model span from its
    start, for instrumentations that set the role attribute later (Google ADK)."""
    content_switch: str = ""
    """How to turn content capture on, for the "content not captured" hint."""
    markers: tuple[str, ...] = ()
    """Keys that only this instrumentation writes: they pick its ``content_switch`` first."""
    marker_prefixes: tuple[str, ...] = ()
    """Key prefixes that only this framework writes (``haystack.``): as ``markers``."""
    marker_values: tuple[tuple[str, str], ...] = ()
    """``(key, value)`` pairs only this framework writes (``gen_ai.system = autogen``)."""
    session_keys: tuple[str, ...] = ()
    """Where a span names its session, for an instrumentation whose runs no span spans:
    its calls outside every agent span make one run per session, across traces."""
    handoff_tools: tuple[tuple[str, str], ...] = ()
    """``(tool, argument)``: a call of ``tool`` hands its run over to the agent that
    ``argument`` names, for a framework whose receiving agent has no span of its own:
    the run's later calls are that agent's run (LlamaIndex AgentWorkflow)."""
    error_flags: tuple[str, ...] = ()
    """Keys whose value ``True`` says the call failed, the span being OK (its error went
    back to the model): read with content capture off too."""
    session_marks: tuple[tuple[str, str], ...] = ()
    """``(key, value)``: the spans ``session_keys`` is read on, this instrumentation's own
    (others may set the same key inside runs of their own); none: every span."""


GENAI: Final = SpanConvention(
    "OpenTelemetry GenAI",
    roles={
        GenAI.OPERATION_NAME: {
            Op.EXECUTE_TOOL: "tool",
            Op.AGENT_HANDOFF: "tool",
            Op.TOOL_CALL: "tool",
            Op.INVOKE_AGENT: "agent",
            Op.CHAT: "model",
            Op.TEXT_COMPLETION: "model",
            Op.GENERATE_CONTENT: "model",
            Op.LLM_CALL: "model",
        }
    },
    present=((GenAI.TOOL_NAME, "tool"),),
    tool_name_keys=(GenAI.TOOL_NAME,),
    arguments_keys=(GenAI.TOOL_CALL_ARGUMENTS, GenAI.HANDOFF_TO_AGENT),
    result_keys=(GenAI.TOOL_CALL_RESULT,),
    tool_name_prefixes=(f"{Op.EXECUTE_TOOL} ",),
    model_keys=(GenAI.REQUEST_MODEL,),
    model_span_names=(Op.CHAT, Op.GENERATE_CONTENT, Op.TEXT_COMPLETION),
    content_switch="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (or the "
    "framework's own switch; Semantic Kernel, whose tool spans carry no mark of its own: "
    "SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true)",
)
"""The OTel GenAI conventions, with the operation names frameworks use besides them
(gemini-cli's ``tool_call`` / ``llm_call``, contrib's ``agent_handoff``)."""

GENAI_MESSAGES: Final = SpanConvention(
    "OpenTelemetry GenAI messages",
    arguments_keys=(GenAI.INPUT_MESSAGES,),
    result_keys=(GenAI.OUTPUT_MESSAGES,),
    arguments_events=((GenAI.TOOL_MESSAGE_EVENT, GenAI.EVENT_CONTENT),),
    result_events=((GenAI.CHOICE_EVENT, GenAI.EVENT_MESSAGE),),
    output_events=(
        (GenAI.CHOICE_EVENT, GenAI.EVENT_MESSAGE),
        (GenAI.INFERENCE_DETAILS_EVENT, GenAI.OUTPUT_MESSAGES),
    ),
)
"""Tool content in the message attributes or events, when no tool key holds it
(gemini-cli's ``tool_call``, Strands' default layout), and a model span's output in
its ``gen_ai.choice`` events or the inference details event (Strands, default and
latest layouts). Read after every other convention's keys."""

OPENINFERENCE: Final = SpanConvention(
    "OpenInference",
    roles={OI.SPAN_KIND: {"TOOL": "tool", "LLM": "model", "AGENT": "agent"}},
    fold_case=frozenset({OI.SPAN_KIND}),
    tool_name_keys=(OI.TOOL_NAME,),
    arguments_keys=(OI.INPUT_VALUE,),
    result_keys=(OI.OUTPUT_VALUE,),
    placeholders=frozenset({OI.REDACTED}),
    synthetic_spans=frozenset({"FinalAnswerTool"}),
    step_markers=((LG.METADATA, f'"{LG.NODE}"'),),
    model_keys=(OI.LLM_MODEL_NAME,),
    content_switch="unset OPENINFERENCE_HIDE_INPUTS / OPENINFERENCE_HIDE_OUTPUTS (or pass "
    "TraceConfig(hide_inputs=False, hide_outputs=False), traceConfig in JS, to the instrumentor)",
)
"""OpenInference; a LangGraph node visit labelled AGENT is a step; smolagents'
``FinalAnswerTool`` is the answer, not a call."""

TRACELOOP: Final = SpanConvention(
    "OpenLLMetry",
    roles={
        TL.SPAN_KIND: {"tool": "tool", "agent": "agent"},
        TL.LLM_REQUEST_TYPE: {"chat": "model", "completion": "model"},
    },
    tool_name_keys=(TL.ENTITY_NAME,),
    arguments_keys=(TL.ENTITY_INPUT,),
    result_keys=(TL.ENTITY_OUTPUT,),
    content_switch="TRACELOOP_TRACE_CONTENT=true (or Traceloop.init(trace_content=True))",
    marker_prefixes=("traceloop.",),
)
"""OpenLLMetry: its decorators' ``traceloop.*`` keys; its LangChain instrumentation (0.62)
writes the GenAI keys too, with ``traceloop.*`` beside them: those pick its switch."""

MCP_SDK: Final = SpanConvention(
    "MCP",
    roles={MCP.METHOD_NAME: {MCP.TOOLS_CALL: "tool"}},
    tool_name_prefixes=("MCP send tools/call ", "tools/call "),
)
"""MCP client and server spans; the client span names the tool only in its span name."""

ADK_LEGACY: Final = SpanConvention(
    "Google ADK",
    present=((ADK.TOOL_CALL_ARGS, "tool"), (ADK.LLM_REQUEST, "model")),
    arguments_keys=(ADK.TOOL_CALL_ARGS,),
    result_keys=(ADK.TOOL_RESPONSE,),
    placeholders=frozenset({"{}"}),
    synthetic_spans=frozenset({"execute_tool (merged)"}),
    synthetic_tools=frozenset({ADK.MERGED_TOOL}),
    model_span_names=("call_llm",),
    content_switch="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY (ADK 2.x), "
    "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=true (1.x and the legacy schema)",
    markers=("gcp.vertex.agent.event_id", "gcp.vertex.agent.invocation_id"),
)
"""Google ADK's own keys; ``{}`` is what it writes with content capture off."""

PYDANTIC_AI: Final = SpanConvention(
    "pydantic-ai",
    present=((PAI.AGENT_NAME, "agent"),),
    arguments_keys=(PAI.TOOL_ARGUMENTS,),
    result_keys=(PAI.TOOL_RESPONSE,),
    content_switch="InstrumentationSettings(include_content=True)",
    markers=("logfire.msg", "logfire.json_schema"),
)
"""pydantic-ai's instrumentation versions 1 and 2 (0.x sets no operation on tool spans)."""

VERCEL_AI: Final = SpanConvention(
    "Vercel AI SDK (legacy)",
    roles={
        AI.OPERATION_ID: {
            "ai.toolCall": "tool",
            "ai.generateText": "agent",
            "ai.streamText": "agent",
            "ai.generateObject": "agent",
            "ai.streamObject": "agent",
            "ai.generateText.doGenerate": "model",
            "ai.streamText.doStream": "model",
            "ai.generateObject.doGenerate": "model",
            "ai.streamObject.doStream": "model",
        }
    },
    model_span_names=(
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    ),
    tool_name_keys=(AI.TOOL_NAME,),
    arguments_keys=(AI.TOOL_ARGS,),
    result_keys=(AI.TOOL_RESULT,),
    content_switch="experimental_telemetry: { recordInputs: true, recordOutputs: true }",
)

AGENT_FRAMEWORK: Final = SpanConvention(
    "Microsoft Agent Framework",
    content_switch="ENABLE_SENSITIVE_DATA=true",
    markers=("agent_framework.function.invocation.duration",),
)
"""Microsoft Agent Framework: the GenAI conventions; only its content switch is its own."""

VERCEL_AI_OTEL: Final = SpanConvention(
    "Vercel AI SDK",
    content_switch="experimental_telemetry: { recordInputs: true, recordOutputs: true }",
    markers=("gen_ai.execute_tool.duration",),
)
"""Vercel AI SDK 7 with ``@ai-sdk/otel``: the GenAI conventions; only its switch is its own."""

GEMINI_CLI: Final = SpanConvention(
    "gemini-cli",
    content_switch="GEMINI_TELEMETRY_LOG_PROMPTS=true (telemetry.logPrompts in settings.json)",
    markers=("gen_ai.tool.call_id",),
    session_keys=(GenAI.CONVERSATION_ID,),
    session_marks=((GenAI.AGENT_NAME, "gemini-cli"),),
)
"""gemini-cli's telemetry: the GenAI keys (its roles are in :data:`GENAI`), its own switch.

No span spans a session: each model call and each tool round is a trace of its own,
tied to the others only by ``gen_ai.conversation.id``, so the session is the run."""

LLAMA_INDEX: Final = SpanConvention(
    "LlamaIndex",
    handoff_tools=(("handoff", "to_agent"),),
)
"""LlamaIndex's AgentWorkflow (read through OpenInference): the receiving agent of a
``handoff`` call goes on under the same root span, its calls under the same steps."""

HAYSTACK: Final = SpanConvention(
    "Haystack",
    present=((HS.TOOL_NAME, "tool"), (HS.AGENT_MAX_STEPS, "agent")),
    tool_name_keys=(HS.TOOL_NAME,),
    arguments_keys=(HS.TOOL_INPUT,),
    result_keys=(HS.TOOL_OUTPUT,),
    model_span_names=(HS.LLM_SPAN,),
    error_flags=(HS.TOOL_ERROR,),
    content_switch="HAYSTACK_CONTENT_TRACING_ENABLED=true before haystack is imported (or "
    "tracing.tracer.is_content_tracing_enabled = True)",
    marker_prefixes=(HS.PREFIX,),
)
"""Haystack's own tracer: ``haystack.agent.run`` (the run) > ``haystack.agent.step`` >
``haystack.agent.step.llm`` (a model call, known by its name: it has only content tags)
and ``haystack.agent.step.tool`` (one per call). Content is off by default."""

SEMANTIC_KERNEL: Final = SpanConvention(
    "Semantic Kernel",
    content_switch="SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE=true",
    markers=("sk.available_functions",),
)
"""Semantic Kernel's model diagnostics: the GenAI keys; ``sk.available_functions`` on its
model spans is its own (its tool spans carry only the GenAI keys)."""

AG2: Final = SpanConvention(
    "AG2",
    content_switch="TelemetryMiddleware(capture_content=True) (AG2's default)",
    markers=("ag2.span.type",),
)
"""AG2's ``TelemetryMiddleware`` (``ag2`` 1.x; ``autogen.instrumentation`` before): the
GenAI keys, with ``ag2.span.type`` on every span."""

MASTRA: Final = SpanConvention(
    "Mastra",
    content_switch="leave Mastra's tracingOptions hideInput / hideOutput unset (or false)",
    markers=("mastra.span.type",),
    marker_prefixes=("mastra.",),
)
"""Mastra's exporters (OTel, OpenInference, ...) keep ``mastra.*`` keys on every span:
Mastra's own switch wins over the exporter's."""

AUTOGEN: Final = SpanConvention(
    "AutoGen",
    content_switch="none: AutoGen's own tracing records no tool arguments or results "
    "(trace the tools yourself, or with an instrumentation that records them)",
    marker_values=((GenAI.SYSTEM, "autogen"),),
)
"""AutoGen (autogen-core 0.7): GenAI spans with ``gen_ai.system = autogen``, never content."""

BUILTIN: Final = (
    MASTRA,
    GENAI,
    OPENINFERENCE,
    TRACELOOP,
    MCP_SDK,
    VERCEL_AI,
    ADK_LEGACY,
    PYDANTIC_AI,
    GENAI_MESSAGES,
    AGENT_FRAMEWORK,
    VERCEL_AI_OTEL,
    GEMINI_CLI,
    LLAMA_INDEX,
    HAYSTACK,
    SEMANTIC_KERNEL,
    AG2,
    AUTOGEN,
)
"""In order of precedence: the first convention whose role key a span holds names its role.
Mastra first: it has no role keys, and its marks must pick its switch before those of the
exporter it writes through (OpenLLMetry's ``traceloop.*``, OpenInference)."""

__all__ = ["BUILTIN", "ROLE_NAMES", "SpanConvention"]
