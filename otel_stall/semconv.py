"""Every attribute key, event name and metric name otel-stall reads or writes.

The ``gen_ai.*`` keys are defined here rather than imported from
``opentelemetry-semantic-conventions``, whose GenAI constants are marked as
moved and keep changing while the conventions are in development.
"""

from __future__ import annotations

from typing import Final


class StallAttributes:
    """Attributes otel-stall attaches to tool spans and run spans."""

    SEQ: Final = "stall.seq"
    """int: the tool call's position in its run's ledger, from 1."""
    ROUND: Final = "stall.round"
    """int: the round (model call plus the tool calls after it) the call belongs to, from 1."""
    REPEAT_COUNT: Final = "stall.repeat.count"
    """int: occurrences of this full signature in the run so far, this one included; absent: 1."""
    REPEAT_OF: Final = "stall.repeat.of"
    """int: ``stall.seq`` of the first occurrence; absent: the call is not a repeat."""
    REPEAT_CONSECUTIVE: Final = "stall.repeat.consecutive"
    """int: length of the current back-to-back run of this full signature; absent: 1."""
    SIGNATURE: Final = "stall.signature"
    """string: xxh3 of tool, normalised arguments, result digest and status."""
    CALL_SIGNATURE: Final = "stall.call.signature"
    """string: xxh3 of tool and normalised arguments (what a guard compares)."""
    RESULT_DIGEST: Final = "stall.result.digest"
    """string: xxh3 of the normalised result; absent when the result was not captured."""
    NEW_FACT: Final = "stall.new_fact"
    """bool: the result carried a fingerprint not seen before in the run; absent: true.

    Only ``false`` is written: a call that brought nothing new is the one to look at."""
    ACTION: Final = "stall.action"
    """string: ``continue``, ``warn``, ``refuse``, ``break`` or ``escalate``; always set.

    ``continue`` too: span metrics group tool spans by it (a metric label must not vanish)."""

    VERDICT: Final = "stall.verdict"
    """string, run span: ``ok``, ``warn``, ``break`` or ``escalate``."""
    DETECTED: Final = "stall.detected"
    """bool, run span: any rule fired; absent: false. A real boolean for tail sampling.

    Only ``true`` is written: tail sampling keys on ``stall.detected = true``."""
    SCORE: Final = "stall.score"
    """double, run span: (verdict severity 0-3 + share of calls that repeated) / 4; absent: 0."""
    TOOL_CALLS: Final = "stall.tool_calls"
    """int, run span: tool calls in the run."""
    ROUNDS: Final = "stall.rounds"
    """int, run span: rounds in the run."""
    REFUSALS: Final = "stall.refusals"
    """int, run span: calls the rules told the gate to refuse; absent: 0.

    Refusals get no ``stall.detected`` event (a loop has one on every repeated
    call): each shows on its tool span's ``stall.action``, and this counts them."""
    WASTED_TOKENS: Final = "stall.wasted.tokens"
    """int, run span: tokens of the model calls counted in ``stall.wasted.model_calls``; absent
    when none of them had their usage captured."""
    WASTED_CALLS: Final = "stall.wasted.calls"
    """int, run span: tool calls from the stall's onset to the run's end, the onset call included.

    The onset is the first call that brought nothing new in the evidence of the finding
    that first raised the verdict to warn or above (the first repeat, the first round of a
    streak, a cycle's second period, the first repeated failure)."""
    WASTED_MODEL_CALLS: Final = "stall.wasted.model_calls"
    """int, run span: model calls that ended after the stall's onset call started."""
    WASTED_SECONDS: Final = "stall.wasted.seconds"
    """double, run span: wall time from the stall's onset call's start to the run's end."""

    TOOL_EXEMPT: Final = "stall.tool.exempt"
    """bool, set by a tool on its own span: it repeats by protocol (polling, waiting)."""
    TOOL_APPROVAL: Final = "stall.tool.approval"
    """bool, set by a tool on its own span: it has approved side effects."""
    REFUSED: Final = "stall.refused"
    """bool, set by a guard on a tool span: the call was refused and never ran."""


class StallEventAttributes:
    """The ``stall.detected`` event added to a run span when a finding fires."""

    EVENT_NAME: Final = "stall.detected"
    """Event name, on the run span while it is still open: one per escalation.

    A finding that warns, breaks off or escalates gets one; a refusal does not
    (see ``stall.refusals``). ``on_finding`` and the ``stall.findings`` counter get every
    finding."""
    KIND: Final = "stall.kind"
    """string: the rule (``repeat``, ``duplicate_call``, ``no_new_facts``, ...)."""
    ACTION: Final = StallAttributes.ACTION
    """string: what the rule asks for."""
    SIGNATURE: Final = StallAttributes.SIGNATURE
    """string: the looping signature (the call signature for ``duplicate_call``)."""
    COUNT: Final = "stall.count"
    """int: repeats, rounds or failures counted when the rule fired."""
    FIRST_SEQ: Final = "stall.first_seq"
    """int: where the stall began."""
    SEQ: Final = StallAttributes.SEQ
    """int: the call at which it fired."""
    MESSAGE: Final = "stall.message"
    """string: the stall report, written for the model."""


class StallMetricNames:
    """Instrument names, emitted through the OpenTelemetry Metrics API."""

    FINDINGS: Final = "stall.findings"
    """Counter of findings by ``stall.kind``, ``stall.action``, ``gen_ai.tool.name``."""
    TOOL_CALLS: Final = "stall.tool_calls"
    """Counter of tool calls by ``gen_ai.tool.name``, ``stall.repeat``, ``stall.new_fact``."""
    RUNS: Final = "stall.runs"
    """Counter of finished runs by ``stall.verdict``."""
    WASTED_TOKENS: Final = "stall.wasted.tokens"
    """Counter of model tokens spent after a stall's onset, by ``gen_ai.agent.name``."""
    REPEAT: Final = "stall.repeat"
    """bool metric attribute: the call repeated an earlier full signature."""


class GenAIAttributes:
    """OpenTelemetry GenAI semantic conventions (development status)."""

    OPERATION_NAME: Final = "gen_ai.operation.name"
    """string: ``execute_tool``, ``chat``, ``invoke_agent``, ..."""
    TOOL_NAME: Final = "gen_ai.tool.name"
    """string: the tool's name."""
    SYSTEM: Final = "gen_ai.system"
    """string: the instrumented system (deprecated for ``gen_ai.provider.name``); AutoGen's
    own spans say ``autogen``."""
    TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
    """string: the tool's description (tells a framework's own tool from a user's)."""
    TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
    """string: the model's id for this tool call."""
    TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
    """JSON string or structured value: the arguments the model passed (opt-in content)."""
    TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
    """JSON string or structured value: what the tool returned (opt-in content)."""
    AGENT_NAME: Final = "gen_ai.agent.name"
    """string: the agent's name."""
    AGENT_ID: Final = "gen_ai.agent.id"
    """string: the agent's id."""
    REQUEST_MODEL: Final = "gen_ai.request.model"
    """string: the model asked for."""
    INPUT_MESSAGES: Final = "gen_ai.input.messages"
    """Chat history sent to the model (opt-in content); stripped by redaction."""
    OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
    """Model output (opt-in content); stripped by redaction."""
    HANDOFF_TO_AGENT: Final = "gen_ai.handoff.to_agent"
    """string: on an ``agent_handoff`` span, the receiving agent: that call's argument."""
    CONVERSATION_ID: Final = "gen_ai.conversation.id"
    """string: the session a span belongs to (gemini-cli has no span that spans it)."""
    TOOL_MESSAGE_EVENT: Final = "gen_ai.tool.message"
    """Span event: a tool call's arguments in ``content`` (Strands' default layout)."""
    CHOICE_EVENT: Final = "gen_ai.choice"
    """Span event: on a tool span, the tool's result in ``message`` (Strands); on a model
    span, the model's output (Strands' default layout, the GenAI event form)."""
    INFERENCE_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
    """Span event: a model call's messages, ``gen_ai.output.messages`` among them (the
    current GenAI conventions' event form, Strands with ``gen_ai_latest_experimental``)."""
    EVENT_CONTENT: Final = "content"
    """Event attribute of ``gen_ai.tool.message``: the arguments."""
    EVENT_MESSAGE: Final = "message"
    """Event attribute of ``gen_ai.choice``: the result, or the model's output."""
    USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
    """int: tokens the model call read."""
    USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
    """int: tokens the model call wrote."""
    USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
    """int: input tokens under the older GenAI name, which OpenLLMetry still sets."""
    USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
    """int: output tokens under the older GenAI name, which OpenLLMetry still sets."""


class GenAIOperation:
    """Values of ``gen_ai.operation.name``."""

    EXECUTE_TOOL: Final = "execute_tool"
    """A tool call."""
    CHAT: Final = "chat"
    """A chat model call."""
    TEXT_COMPLETION: Final = "text_completion"
    """A completion model call."""
    GENERATE_CONTENT: Final = "generate_content"
    """A multimodal model call."""
    INVOKE_AGENT: Final = "invoke_agent"
    """An agent invocation: one run."""
    AGENT_HANDOFF: Final = "agent_handoff"
    """A handoff to another agent (OTel contrib OpenAI Agents): a tool call of the handing agent."""
    TOOL_CALL: Final = "tool_call"
    """gemini-cli's own name for a tool call."""
    LLM_CALL: Final = "llm_call"
    """gemini-cli's own name for a model call."""


class ErrorAttributes:
    """General attributes that say how an operation failed."""

    ERROR_TYPE: Final = "error.type"
    """string: the error class; also carries refusals and overloads by convention."""
    HTTP_STATUS_CODE: Final = "http.response.status_code"
    """int: an HTTP response status (429 and 503 mean overloaded)."""
    RPC_GRPC_STATUS_CODE: Final = "rpc.grpc.status_code"
    """int: a gRPC status (8 RESOURCE_EXHAUSTED and 14 UNAVAILABLE mean overloaded)."""


class MCPAttributes:
    """Model Context Protocol semantic conventions."""

    METHOD_NAME: Final = "mcp.method.name"
    """string: ``tools/call`` marks a tool call."""
    TOOLS_CALL: Final = "tools/call"
    """The method name of a tool call."""


class OpenInferenceAttributes:
    """OpenInference (Arize Phoenix) semantic conventions."""

    SPAN_KIND: Final = "openinference.span.kind"
    """string: ``TOOL``, ``LLM``, ``AGENT``, ``CHAIN``, ..."""
    TOOL_NAME: Final = "tool.name"
    """string: the tool's name."""
    AGENT_NAME: Final = "agent.name"
    """string: the agent's name on AGENT spans (OpenAI Agents and newer instrumentors)."""
    TOOL_DESCRIPTION: Final = "tool.description"
    """string: the tool's description (tells a framework's own tool from a user's)."""
    INPUT_VALUE: Final = "input.value"
    """string: the span's input, often JSON."""
    OUTPUT_VALUE: Final = "output.value"
    """string: the span's output, often JSON."""
    LLM_MODEL_NAME: Final = "llm.model_name"
    """string: the model on LLM spans."""
    REDACTED: Final = "__REDACTED__"
    """What ``OPENINFERENCE_HIDE_INPUTS/OUTPUTS`` write in place of content: not content."""
    LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
    """int: input tokens on LLM spans."""
    LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
    """int: output tokens on LLM spans."""
    LLM_TOKEN_COUNT_TOTAL: Final = "llm.token_count.total"
    """int: all tokens on LLM spans, where the parts are not given."""


class TraceloopAttributes:
    """OpenLLMetry (Traceloop) attributes."""

    SPAN_KIND: Final = "traceloop.span.kind"
    """string: ``tool``, ``agent``, ``workflow``, ``task``."""
    ENTITY_NAME: Final = "traceloop.entity.name"
    """string: the tool or agent name."""
    ENTITY_INPUT: Final = "traceloop.entity.input"
    """string: JSON input, cut at a length limit (then it is hashed as text)."""
    ENTITY_OUTPUT: Final = "traceloop.entity.output"
    """string: JSON output, cut at a length limit (then it is hashed as text)."""
    LLM_REQUEST_TYPE: Final = "llm.request.type"
    """string: ``chat`` or ``completion`` on OpenLLMetry model spans."""


class ADKAttributes:
    """Google Agent Development Kit attributes."""

    TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
    """string: JSON arguments of a tool call."""
    TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
    """string: JSON response of a tool call."""
    LLM_REQUEST: Final = "gcp.vertex.agent.llm_request"
    """string: marks an ADK model call."""
    MERGED_TOOL: Final = "(merged tools)"
    """``gen_ai.tool.name`` of ADK's synthetic span after parallel calls: not a call."""


class PydanticAIAttributes:
    """pydantic-ai's own keys (instrumentation versions 1 and 2)."""

    TOOL_ARGUMENTS: Final = "tool_arguments"
    """JSON string: a tool call's arguments."""
    TOOL_RESPONSE: Final = "tool_response"
    """string: a tool call's result."""
    AGENT_NAME: Final = "agent_name"
    """string: on ``agent run`` spans, which carry no GenAI operation before 1.0."""


class VercelAIAttributes:
    """The Vercel AI SDK's pre-v7 telemetry (``LegacyOpenTelemetry``)."""

    OPERATION_ID: Final = "ai.operationId"
    """string: ``ai.toolCall``, ``ai.generateText``, ``ai.generateText.doGenerate``, ..."""
    TOOL_NAME: Final = "ai.toolCall.name"
    """string: the tool's name."""
    TOOL_ARGS: Final = "ai.toolCall.args"
    """JSON string: the tool call's arguments (``recordInputs``)."""
    TOOL_RESULT: Final = "ai.toolCall.result"
    """JSON string: the tool's result (``recordOutputs``)."""
    FUNCTION_ID: Final = "ai.telemetry.functionId"
    """string: the caller's name for the generation, used as the agent's name."""


class LangGraphMarkers:
    """How OpenInference marks a LangGraph node visit."""

    METADATA: Final = "metadata"
    """JSON string on OpenInference spans; a graph step's holds ``langgraph_node``."""
    NODE: Final = "langgraph_node"
    """The key inside ``metadata`` that makes an AGENT span a step of its graph's run."""


class HaystackAttributes:
    """Haystack's own tracer (``haystack.tracing``, 2.x and 3.x)."""

    AGENT_MAX_STEPS: Final = "haystack.agent.max_steps"
    """int: on ``haystack.agent.run`` from its start: the span of an Agent's run."""
    TOOL_NAME: Final = "haystack.tool.name"
    """string: on ``haystack.agent.step.tool``, one span per tool call (3.x)."""
    TOOL_INPUT: Final = "haystack.agent.step.tool.input"
    """JSON string: the call's arguments (content tracing only)."""
    TOOL_OUTPUT: Final = "haystack.agent.step.tool.output"
    """JSON string: the call's result, ``{"error": ...}`` when it failed (content tracing only)."""
    TOOL_ERROR: Final = "haystack.tool.error"
    """bool: the call failed (its error went back to the model)."""
    LLM_SPAN: Final = "haystack.agent.step.llm"
    """Span name of an agent step's model call, which carries no key but content tags."""
    PREFIX: Final = "haystack."
    """Every key Haystack's tracer writes starts so."""
