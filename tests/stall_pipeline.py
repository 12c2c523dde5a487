"""A real pipeline for processor tests: TracerProvider -> StallSpanProcessor -> in-memory.

Also builds realistic agent traces in each supported convention, so the
processor, guard and convention tests share one way of making spans.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from otel_stall import Conventions, CustomConvention, Finding, StallSpanProcessor
from otel_stall.core.stall_attributes import with_defaults

Attrs = dict[str, Any]


@dataclass
class Pipeline:
    """One provider with the processor wrapping a SimpleSpanProcessor(InMemorySpanExporter)."""

    provider: TracerProvider
    exporter: InMemorySpanExporter
    processor: StallSpanProcessor
    reader: InMemoryMetricReader
    tracer: Tracer
    findings: list[Finding] = field(default_factory=list)

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every exported span, in end order."""
        return self.exporter.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        """Exported spans with this name, in end order."""
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        """The single exported span with this name."""
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}"
        return found[0]

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, Any]]], float]:
        """Counter points by (instrument name, attribute set)."""
        return {
            (name, frozenset((point.attributes or {}).items())): point.value
            for name, point in data_points(self.reader)
        }

    def metric_total(self, name: str) -> float:
        """The sum of a counter over all attribute sets."""
        return sum(v for (n, _), v in self.metrics().items() if n == name)


def data_points(reader: InMemoryMetricReader) -> Iterator[tuple[str, Any]]:
    """Every data point the reader collects, with its instrument's name."""
    data = reader.get_metrics_data()
    if data is None:
        return
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    yield metric.name, point


def make_pipeline(
    *, sampler: Sampler | None = None, span_limits: SpanLimits | None = None, **kwargs: Any
) -> Pipeline:
    """A fresh pipeline.

    ``sampler`` goes to the provider, ``span_limits`` to it and the processor, the rest to the
    processor.
    """
    exporter = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    findings: list[Finding] = []
    kwargs.setdefault("on_finding", findings.append)
    processor = StallSpanProcessor(
        SimpleSpanProcessor(exporter),
        meter_provider=MeterProvider([reader]),
        span_limits=span_limits,
        **kwargs,
    )
    provider = TracerProvider(sampler=sampler, span_limits=span_limits)
    provider.add_span_processor(processor)
    return Pipeline(
        provider, exporter, processor, reader, provider.get_tracer("agent-test"), findings
    )


def stall(span: ReadableSpan) -> Attrs:
    """The ``stall.*`` attributes of an exported span."""
    return {k: v for k, v in (span.attributes or {}).items() if k.startswith("stall.")}


def stall_values(span: ReadableSpan) -> Attrs:
    """The ``stall.*`` attributes of an exported span as a reader takes them: absent is default."""
    return with_defaults(stall(span))


def events(span: ReadableSpan, name: str = "stall.detected") -> list[Attrs]:
    """Attributes of the span's events with this name, in order."""
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


# -- conventions ---------------------------------------------------------------


def _sdk_keeps_map_values() -> bool:
    """Whether this SDK keeps a map as a span attribute value (1.45 on; before, it drops it)."""
    span = TracerProvider().get_tracer("probe").start_span("probe")
    span.set_attribute("probe", {"map": 1})
    span.end()
    return isinstance(span, ReadableSpan) and (span.attributes or {}).get("probe") is not None


SDK_KEEPS_MAPS = _sdk_keeps_map_values()
needs_map_attributes = pytest.mark.skipif(
    not SDK_KEEPS_MAPS, reason="this SDK (before 1.45) drops map values of span attributes"
)
"""For tests of structured (map/list) payloads, which older SDKs never let reach a processor."""


@dataclass(frozen=True)
class Style:
    """How one instrumentation convention spells agent, model and tool spans."""

    name: str
    agent: Callable[[str], tuple[str, Attrs]]
    model: Callable[[], tuple[str, Attrs]]
    tool: Callable[[str, Any, Any], tuple[str, Attrs]]
    conventions: Conventions = field(default_factory=Conventions)
    structured: bool = False
    """Its payloads are map/list attribute values, not JSON text."""


def _js(value: Any) -> Any:
    return value if isinstance(value, str) else json.dumps(value)


def _genai_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return f"execute_tool {tool}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": f"call_{abs(hash((tool, _js(args)))) % 10_000}",
        "gen_ai.tool.call.arguments": _js(args),
        "gen_ai.tool.call.result": _js(result),
    }


def _genai_structured_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return f"execute_tool {tool}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.arguments": args,
        "gen_ai.tool.call.result": result,
    }


def _genai_agent(name: str) -> tuple[str, Attrs]:
    return f"invoke_agent {name}", {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.provider.name": "openai",
    }


def _genai_model() -> tuple[str, Attrs]:
    return "chat gpt-4.1", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4.1"}


def _mcp_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return f"tools/call {tool}", {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool,
        "mcp.session.id": "sess-1",
        "gen_ai.tool.call.arguments": _js(args),
        "gen_ai.tool.call.result": _js(result),
    }


def _oi_agent(name: str) -> tuple[str, Attrs]:
    return name, {"openinference.span.kind": "AGENT", "input.value": "find the report"}


def _oi_model() -> tuple[str, Attrs]:
    return "ChatOpenAI", {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}


def _oi_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return tool, {
        "openinference.span.kind": "TOOL",
        "tool.name": tool,
        "input.value": _js(args),
        "input.mime_type": "application/json",
        "output.value": _js(result),
    }


def _tl_agent(name: str) -> tuple[str, Attrs]:
    return f"{name}.agent", {"traceloop.span.kind": "agent", "traceloop.entity.name": name}


def _tl_model() -> tuple[str, Attrs]:
    return "openai.chat", {"llm.request.type": "chat", "gen_ai.request.model": "gpt-4o"}


TRUNCATE_AT = 40
"""OpenLLMetry cuts entity input at a length limit; the tests cut it here."""


def _tl_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    text = json.dumps({"args": [], "kwargs": args, "padding": "x" * 80})
    return f"{tool}.tool", {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": tool,
        "traceloop.entity.input": text[:TRUNCATE_AT],  # invalid JSON: cut mid-string
        "traceloop.entity.output": _js(result),
    }


def _adk_agent(name: str) -> tuple[str, Attrs]:
    return f"invoke_agent {name}", {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": name,
        "gen_ai.system": "gcp.vertex.agent",
    }


def _adk_model() -> tuple[str, Attrs]:
    return "call_llm", {
        "gen_ai.system": "gcp.vertex.agent",
        "gcp.vertex.agent.llm_request": '{"model": "gemini-2.0-flash"}',
    }


def _adk_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return f"execute_tool {tool}", {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gcp.vertex.agent.tool_call_args": _js(args),
        "gcp.vertex.agent.tool_response": _js(result),
    }


CUSTOM = Conventions(
    custom=(
        CustomConvention(
            role_key="myco.step",
            tool_value="tool",
            model_value="llm",
            agent_value="agent",
            tool_name_keys=("myco.tool",),
            arguments_keys=("myco.args",),
            result_keys=("myco.out",),
        ),
    )
)


def _custom_agent(name: str) -> tuple[str, Attrs]:
    return f"agent {name}", {"myco.step": "agent"}


def _custom_model() -> tuple[str, Attrs]:
    return "llm", {"myco.step": "llm"}


def _custom_tool(tool: str, args: Any, result: Any) -> tuple[str, Attrs]:
    return "step", {
        "myco.step": "tool",
        "myco.tool": tool,
        "myco.args": _js(args),
        "myco.out": _js(result),
    }


STYLES: tuple[Style, ...] = (
    Style("genai", _genai_agent, _genai_model, _genai_tool),
    Style("genai-structured", _genai_agent, _genai_model, _genai_structured_tool, structured=True),
    Style("mcp", _genai_agent, _genai_model, _mcp_tool),
    Style("openinference", _oi_agent, _oi_model, _oi_tool),
    Style("openllmetry", _tl_agent, _tl_model, _tl_tool),
    Style("adk", _adk_agent, _adk_model, _adk_tool),
    Style("custom", _custom_agent, _custom_model, _custom_tool, CUSTOM),
)
STYLE_IDS = [s.name for s in STYLES]
STYLE_PARAMS = [
    pytest.param(s, id=s.name, marks=needs_map_attributes if s.structured else ()) for s in STYLES
]
"""Every style, for ``parametrize("style", STYLE_PARAMS)``: structured ones need a new SDK."""


@dataclass(frozen=True)
class Call:
    """One tool call of a scripted run."""

    tool: str
    args: Any
    result: Any
    attributes: Mapping[str, Any] = field(default_factory=dict)
    error: bool = False


class Agent:
    """Drives realistic spans: invoke_agent -> (chat, execute_tool ...) rounds."""

    def __init__(self, tracer: Tracer, style: Style, name: str = "researcher") -> None:
        self.tracer = tracer
        self.style = style
        self.name = name

    @contextmanager
    def run(self) -> Iterator[Span]:
        """The agent span, current for the duration."""
        span_name, attrs = self.style.agent(self.name)
        with self.tracer.start_as_current_span(span_name, attributes=attrs) as span:
            yield span

    def model(self) -> None:
        """One model call (opens a round)."""
        span_name, attrs = self.style.model()
        with self.tracer.start_as_current_span(span_name, attributes=attrs):
            pass

    def tool(self, call: Call) -> None:
        """One tool call span under the current span."""
        span_name, attrs = self.style.tool(call.tool, call.args, call.result)
        attrs = {**attrs, **call.attributes}
        with self.tracer.start_as_current_span(
            span_name, attributes=attrs, record_exception=False, set_status_on_exception=False
        ) as span:
            if call.error:
                span.set_status(Status(StatusCode.ERROR, "tool failed"))

    def round(self, *calls: Call) -> None:
        """A model call, then its tool calls."""
        self.model()
        for call in calls:
            self.tool(call)
