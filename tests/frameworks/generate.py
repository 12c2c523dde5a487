"""Generate the framework fixtures: real agent frameworks, run offline, captured as OTLP/JSON lines.

``make fixtures`` (or ``python tests/frameworks/generate.py``) installs each
framework at its pinned version into its own virtualenv under
``$OTEL_STALL_FWENV`` (``/work/fwenv`` by default, outside the repository),
runs a small agent script under the framework's real instrumentation with the
framework's real OpenAI client pointed at :mod:`stub_model` (a scripted model
on loopback), and captures the spans with the project's own
``OtlpJsonLinesSpanExporter``. It then writes ``manifest.toml``: what each
fixture should give. ``--report`` replays every fixture with this worktree's
``otel-stall`` and prints expected against found: the gap list in SURVEY.md.

Why a scripted model and not the frameworks' own test models: the real client
and provider code run, so the model spans are the ones users see; only the
answers are fixed, and the same script serves every framework.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stub_model import Script, serving

HERE = Path(__file__).resolve().parent
WORKTREE = HERE.parents[1]
AGENTS = HERE / "agents"
FWENV = Path(os.environ.get("OTEL_STALL_FWENV", "/work/fwenv"))
CAPTURE_DEPS = (
    "orjson",
    "xxhash",
    "zstandard",
    "rich",
    "opentelemetry-sdk",
    "opentelemetry-exporter-otlp",
)
"""What importing the capture exporter needs besides the framework; otel-stall is on PYTHONPATH."""

# -- scenarios: one script for every framework ---------------------------------


def _calls(*calls: tuple[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": dict(args)} for name, args in calls]}


def _text(text: str) -> dict[str, Any]:
    return {"text": text}


_PARIS = ("search", {"query": "weather in Paris"})


@dataclass(frozen=True)
class Expect:
    """What otel-stall should say about one fixture: a verdict, runs and tool calls in all."""

    verdict: str
    runs: int
    tool_calls: int
    note: str = ""


@dataclass(frozen=True)
class Scenario:
    """A scripted conversation and what it should give."""

    script: Script
    expect: Expect
    about: str


SCENARIOS: dict[str, Scenario] = {
    "loop": Scenario(
        {"main": [_calls(_PARIS)] * 6 + [_text("I could not find the weather.")]},
        Expect("break", 1, 6),
        "the same search with the same result 6 times",
    ),
    "progress": Scenario(
        {
            "main": [_calls(("fetch_page", {"page": p})) for p in range(1, 5)]
            + [_text("Collected 4 pages.")]
        },
        Expect("ok", 1, 4),
        "fetch_page 1..4, each result new",
    ),
    "parallel": Scenario(
        {
            "main": [_calls(_PARIS, ("search", {"query": "weather in London"}))] * 6
            + [_text("Neither city has data.")]
        },
        Expect("break", 1, 12),
        "6 rounds of the same two parallel searches, same results",
    ),
    "failing": Scenario(
        {
            "main": [_calls(("lookup", {"key": f"k{i}"})) for i in range(1, 7)]
            + [_text("The backend is down.")]
        },
        Expect("escalate", 1, 6, "the failures rule escalates after 5 failed calls of one tool"),
        "lookup k1..k6, every call raises",
    ),
    "reworded": Scenario(
        {
            "main": [
                _calls(("find_docs", {"query": q}))
                for q in (
                    "weather in Paris",
                    "Paris weather today",
                    "forecast for Paris",
                    "what is the weather like in Paris",
                    "Paris, France weather",
                    "current conditions in Paris",
                )
            ]
            + [_text("The documents do not say.")]
        },
        Expect("break", 1, 6, "no new facts: every result had been seen before"),
        "find_docs 6 times, each query reworded, the same documents each time",
    ),
    "subagent": Scenario(
        {
            "main": [_calls(("research", {"topic": "otel"})), _text("Research done.")],
            "researcher": [
                _calls(("fetch_page", {"page": 1})),
                _calls(("fetch_page", {"page": 2})),
                _text("Found 2 pages."),
            ],
        },
        Expect("ok", 2, 3, "the research tool runs a sub-agent: a run of its own"),
        "an agent used as a tool (research) whose agent fetches pages 1 and 2",
    ),
    "handoff": Scenario(
        {
            "main": [_calls(("transfer_to_researcher", {}))],
            "researcher": [
                _calls(("fetch_page", {"page": 1})),
                _calls(("fetch_page", {"page": 2})),
                _text("Found 2 pages."),
            ],
        },
        Expect("ok", 2, 3, "the transfer call is the first run's tool call; the receiver is a run"),
        "main hands off to researcher, which fetches pages 1 and 2",
    ),
}
NOCONTENT = "-nocontent"
"""A scenario name ending so plays the base scenario with the framework's content capture off."""


def scenario(name: str) -> Scenario:
    """The scenario ``name`` plays (``loop-nocontent`` plays ``loop``)."""
    return SCENARIOS[name.removesuffix(NOCONTENT)]


# -- frameworks --------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """One way a framework can be instrumented: switches in env, scenarios it can play."""

    name: str
    scenarios: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    expect: Mapping[str, Expect] = field(default_factory=dict)
    note: str = ""
    packages: tuple[str, ...] = ()
    """Extra packages: the layout then gets a virtualenv of its own (instrumentations can clash)."""
    content: bool = True
    """Whether the layout captures tool arguments and results (False: off by default)."""
    venv: str = ""
    """Share the virtualenv of the layout of this name (same packages)."""
    nocontent_env: Mapping[str, str] = field(default_factory=dict)
    """The framework's switches that turn content capture off, for ``*-nocontent`` scenarios."""


@dataclass(frozen=True)
class Framework:
    """A framework at a pinned version and the script that drives it."""

    name: str
    version: str
    packages: tuple[str, ...]
    agent: str
    layouts: tuple[Layout, ...]
    instrumentation: str
    node: bool = False
    calls: Mapping[str, tuple[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Scripted calls renamed to this framework's own (name, arguments; ``{arg}`` is filled in)."""
    side_calls: bool = False
    """The framework makes model calls of its own (routing, checks): answer them apart."""
    final_tool: str = ""
    """A tool that the framework's agents must call to finish (closing texts become its calls)."""
    final_argument: str = "answer"
    """The final tool's argument that takes the closing text."""

    def venv(self, layout: Layout) -> Path:
        """Where the layout's virtualenv (or node_modules) lives: outside the repository."""
        suffix = f"-{layout.venv or layout.name}" if layout.packages else ""
        return FWENV / f"{self.name}-{self.version}{suffix}"

    def layout_dir(self, layout: Layout) -> Path:
        """``tests/frameworks/<framework>/<version>-<layout>``."""
        return HERE / self.name / f"{self.version}-{layout.name}"


_BASIC = ("loop", "progress", "parallel", "failing")
MAF_FAILING = {
    "failing": Expect(
        "ok",
        1,
        3,
        "the framework ends the run after 3 tool errors itself (its max_consecutive_errors)",
    )
}
GENAI_CONTENT_ON = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
OPENINFERENCE_HIDE = {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"}
GENAI_CONTENT_OFF = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "false"}

FRAMEWORKS: tuple[Framework, ...] = (
    *(
        Framework(
            "pydantic-ai",
            version,
            (f"pydantic-ai-slim[openai]=={version}", *pins),
            "fw_pydantic_ai.py",
            tuple(
                Layout(
                    f"v{n}",
                    (*_BASIC, "subagent", *(("loop-nocontent",) if n == default else ())),
                    {"PAI_INSTRUMENT": str(n)},
                    note=f"InstrumentationSettings(version={n})"
                    + (" (the default)" if n == default else ""),
                )
                for n in versions
            ),
            "Agent.instrument_all(InstrumentationSettings(version=N)), global SDK provider",
        )
        for version, versions, default, pins in (
            # 0.8.1 imports opentelemetry._events, which later OTel APIs dropped
            (
                "0.8.1",
                (1, 2),
                1,
                ("opentelemetry-sdk==1.36.0", "opentelemetry-exporter-otlp==1.36.0"),
            ),
            ("1.107.10", (1, 2), 2, ()),
            ("2.68.0", (2, 5, 6), 5, ()),
        )
    ),
    Framework(
        "pydantic-ai",
        "2.68.0",
        ("pydantic-ai-slim[openai]==2.68.0",),
        "fw_pydantic_ai_mcp.py",
        (
            Layout(
                "v5-mcp",
                _BASIC,
                {
                    "PAI_INSTRUMENT": "5",
                    # the server runs in the MCP SDK's venv: make fixtures ONLY=mcp first
                    "FW_MCP_PYTHON": str(FWENV / "mcp-2.3.0" / "bin" / "python"),
                },
                packages=("pydantic-ai-slim[mcp]==2.68.0",),
                note="tools on an MCP server (mcp 2.3.0, stdio) through MCPToolset",
            ),
        ),
        "Agent.instrument_all(version=5); an MCPToolset; the server's own MCP spans",
    ),
    Framework(
        "openai-agents",
        "0.24.0",
        ("openai-agents==0.24.0",),
        "fw_openai_agents.py",
        (
            Layout(
                "openinference",
                (*_BASIC, "subagent", "handoff", "loop-nocontent"),
                {"OA_INSTRUMENTATION": "openinference"},
                packages=("openinference-instrumentation-openai-agents==2.6.0",),
                nocontent_env={
                    "OPENINFERENCE_HIDE_INPUTS": "true",
                    "OPENINFERENCE_HIDE_OUTPUTS": "true",
                },
                note="openinference-instrumentation-openai-agents 2.6.0",
            ),
            Layout(
                "genai",
                (*_BASIC, "subagent", "handoff", "loop-nocontent"),
                {"OA_INSTRUMENTATION": "genai", **GENAI_CONTENT_ON},
                packages=("opentelemetry-instrumentation-openai-agents-v2==0.1.0",),
                nocontent_env=GENAI_CONTENT_OFF,
                note="OTel contrib opentelemetry-instrumentation-openai-agents-v2 0.1.0",
            ),
        ),
        "OpenAIAgentsInstrumentor().instrument(tracer_provider=...) after set_trace_processors([])",
    ),
    Framework(
        "langgraph",
        "1.2.24",
        (
            "langgraph==1.2.24",
            "langchain-openai==1.7.4",
            "openinference-instrumentation-langchain==0.1.80",
            "langchain==1.5.2",
        ),
        "fw_langgraph.py",
        (
            Layout(
                "openinference",
                (*_BASIC, "subagent", "loop-nocontent"),
                {"LG_API": "prebuilt"},
                nocontent_env={
                    "OPENINFERENCE_HIDE_INPUTS": "true",
                    "OPENINFERENCE_HIDE_OUTPUTS": "true",
                },
                note="langgraph.prebuilt.create_react_agent; openinference-langchain 0.1.80",
            ),
            Layout(
                "create-agent",
                (*_BASIC, "subagent"),
                {"LG_API": "create_agent"},
                note="langchain.agents.create_agent (1.5.2); openinference-langchain 0.1.80",
            ),
        ),
        "LangChainInstrumentor().instrument(tracer_provider=...)",
    ),
    Framework(
        "google-adk",
        "2.13.0",
        ("google-adk==2.13.0",),
        "fw_google_adk.py",
        (
            Layout(
                "default",
                (*_BASIC, "subagent", "handoff"),
                content=False,
                note="ADK's default telemetry schema 2, no content switch set (no content)",
            ),
            Layout(
                "default-content",
                (*_BASIC, "subagent", "handoff"),
                {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
                note="schema 2 with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY",
            ),
            Layout(
                "legacy",
                (*_BASIC, "subagent", "handoff", "loop-nocontent"),
                {"ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN": "1"},
                nocontent_env={"ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "false"},
                note="ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1: the legacy schema",
            ),
        ),
        "ADK's built-in tracing on the global SDK provider; Gemini client on the stub",
        calls={
            "research": ("researcher", {"request": "Research otel."}),
            "transfer_to_researcher": ("transfer_to_agent", {"agent_name": "researcher"}),
        },
    ),
    Framework(
        "google-adk",
        "1.39.1",
        ("google-adk==1.39.1",),
        "fw_google_adk.py",
        (
            Layout(
                "default",
                (*_BASIC, "subagent", "handoff", "loop-nocontent"),
                nocontent_env={"ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "false"},
                note="the last 1.x: its only layout, content in spans by default",
            ),
        ),
        "ADK's built-in tracing on the global SDK provider; Gemini client on the stub",
        calls={
            "research": ("researcher", {"request": "Research otel."}),
            "transfer_to_researcher": ("transfer_to_agent", {"agent_name": "researcher"}),
        },
    ),
    Framework(
        "strands-agents",
        "1.62.0",
        ("strands-agents[openai]==1.62.0",),
        "fw_strands.py",
        (
            Layout("default", (*_BASIC, "subagent"), note="Strands' default span layout"),
            Layout(
                "genai-latest",
                (*_BASIC, "subagent"),
                {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
                note="OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental",
            ),
        ),
        "Strands' built-in tracer on the global SDK provider",
    ),
    Framework(
        "mcp",
        "2.3.0",
        ("mcp==2.3.0",),
        "fw_mcp.py",
        (
            Layout(
                "client-server",
                _BASIC,
                content=False,
                note="MCPServer + Client in one process; the SDK's own spans, no agent framework",
            ),
        ),
        "the SDK's built-in OTel spans (client dispatcher, server OpenTelemetryMiddleware)",
    ),
    Framework(
        "smolagents",
        "1.26.0",
        ("smolagents[openai]==1.26.0", "openinference-instrumentation-smolagents==0.1.43"),
        "fw_smolagents.py",
        (
            Layout(
                "openinference",
                (*_BASIC, "subagent", "loop-nocontent"),
                nocontent_env=OPENINFERENCE_HIDE,
                expect={
                    "subagent": Expect(
                        "ok", 2, 2, "the managed agent's call has no tool span: researcher.run"
                    )
                },
                note="ToolCallingAgent; openinference-smolagents 0.1.43; final_answer not counted",
            ),
        ),
        "SmolagentsInstrumentor().instrument(tracer_provider=...)",
        calls={"research": ("researcher", {"task": "Research otel."})},
        final_tool="final_answer",
    ),
    Framework(
        "llama-index",
        "0.14.25",
        (
            "llama-index-core==0.14.25",
            "llama-index-llms-openai==0.8.3",
            "openinference-instrumentation-llama-index==4.6.1",
        ),
        "fw_llama_index.py",
        (
            Layout(
                "openinference",
                (*_BASIC, "subagent", "handoff", "loop-nocontent"),
                nocontent_env=OPENINFERENCE_HIDE,
                note="FunctionAgent / AgentWorkflow; openinference-llama-index 4.6.1",
            ),
        ),
        "LlamaIndexInstrumentor().instrument(tracer_provider=...)",
        calls={
            "transfer_to_researcher": (
                "handoff",
                {"to_agent": "researcher", "reason": "research is needed"},
            )
        },
    ),
    Framework(
        "traceloop",
        "0.62.4",
        ("traceloop-sdk==0.62.4", "openai", "httpx"),  # the SDK imports httpx, undeclared
        "fw_traceloop.py",
        (
            Layout(
                "decorators",
                (*_BASIC, "subagent", "loop-nocontent"),
                {"TRACELOOP_TELEMETRY": "false"},
                nocontent_env={"TRACELOOP_TRACE_CONTENT": "false"},
                note="a hand-written tool loop on the OpenAI client with @agent and @tool",
            ),
        ),
        "Traceloop.init(exporter=OtlpJsonLinesSpanExporter(...)); its OpenAI instrumentation",
    ),
    Framework(
        "agent-framework",
        "1.23.0",
        ("agent-framework-core==1.23.0", "agent-framework-openai==1.17.0"),
        "fw_agent_framework.py",
        (
            Layout(
                "default",
                (*_BASIC, "subagent"),
                expect=MAF_FAILING,
                content=False,
                note="built-in telemetry, ENABLE_SENSITIVE_DATA unset (no content)",
            ),
            Layout(
                "sensitive",
                (*_BASIC, "subagent"),
                {"ENABLE_SENSITIVE_DATA": "true"},
                expect=MAF_FAILING,
                note="ENABLE_SENSITIVE_DATA=true",
            ),
            Layout(
                "sensitive-latest",
                (*_BASIC, "subagent"),
                {
                    "ENABLE_SENSITIVE_DATA": "true",
                    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                },
                expect=MAF_FAILING,
                note="ENABLE_SENSITIVE_DATA=true and the GenAI latest-experimental opt-in",
            ),
        ),
        "the built-in telemetry (on by default) on the global SDK provider",
    ),
    Framework(
        "crewai",
        "1.15.30",
        (
            "crewai==1.15.30",
            "openinference-instrumentation-crewai==1.1.21",
            "openinference-instrumentation-openai",
        ),
        "fw_crewai.py",
        (
            Layout(
                "openinference",
                (*_BASIC, "loop-nocontent"),
                {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false"},
                nocontent_env=OPENINFERENCE_HIDE,
                expect={
                    "loop": Expect("break", 1, 5, "CrewAI itself stops at the 5th identical call"),
                    "parallel": Expect(
                        "break",
                        1,
                        10,
                        "CrewAI stops at the 5th identical call: the two searches in turn"
                        " make 5 full periods of a cycle",
                    ),
                    "loop-nocontent": Expect("ok", 1, 5, "content not captured: must be flagged"),
                },
                note="Crew of one Agent/Task; openinference-crewai 1.1.21 + openinference-openai",
            ),
        ),
        "CrewAIInstrumentor() and OpenAIInstrumentor() .instrument(tracer_provider=...)",
    ),
    Framework(
        "gemini-cli",
        "0.61.0",
        ("@google/gemini-cli@0.61.0",),
        "fw_gemini_cli.mjs",
        (
            Layout(
                "telemetry",
                (*_BASIC, "loop-nocontent"),
                {"GEMINI_TELEMETRY_LOG_PROMPTS": "true"},
                nocontent_env={"GEMINI_TELEMETRY_LOG_PROMPTS": "false"},
                expect={
                    "loop": Expect("warn", 1, 4, "gemini-cli's own loop detection ends it first"),
                    "parallel": Expect(
                        "warn", 1, 9, "gemini-cli's loop detection ends it in round 5"
                    ),
                    "loop-nocontent": Expect("ok", 1, 4, "content not captured: must be flagged"),
                },
                note="gemini -p --yolo; one session = one run (gen_ai.conversation.id)",
            ),
        ),
        "GEMINI_TELEMETRY_ENABLED/TRACES_ENABLED, OTLP/HTTP to a loopback receiver",
        node=True,
        side_calls=True,
        calls={
            "search": ("read_file", {"file_path": "{query}.txt"}),
            "fetch_page": ("read_file", {"file_path": "page{page}.txt"}),
            "lookup": ("read_file", {"file_path": "missing/{key}.txt"}),
        },
    ),
    Framework(
        "haystack",
        "3.4.1",
        ("haystack-ai==3.4.1", "opentelemetry-haystack==2.0.0"),
        "fw_haystack.py",
        (
            Layout(
                "content",
                (
                    "loop",
                    "progress",
                    "parallel",
                    "failing",
                    "reworded",
                    "loop-nocontent",
                    "failing-nocontent",
                ),
                {"HAYSTACK_CONTENT_TRACING_ENABLED": "true"},
                nocontent_env={"HAYSTACK_CONTENT_TRACING_ENABLED": "false"},
                note="Agent on OpenAIChatGenerator; content tracing on (off by default)",
            ),
        ),
        "tracing.enable_tracing(OpenTelemetryTracer(...)) from opentelemetry-haystack",
    ),
    Framework(
        "dspy",
        "3.4.1",
        ("dspy==3.4.1", "openinference-instrumentation-dspy==0.1.48"),
        "fw_dspy.py",
        (
            Layout(
                "openinference",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                nocontent_env=OPENINFERENCE_HIDE,
                note="dspy.ReAct on a scripted dspy.LM; ReAct's own finish tool is not a call",
            ),
        ),
        "DSPyInstrumentor().instrument(tracer_provider=...)",
    ),
    Framework(
        "beeai",
        "0.1.85",
        ("beeai-framework==0.1.85", "openinference-instrumentation-beeai==0.1.30"),
        "fw_beeai.py",
        (
            Layout(
                "openinference",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                nocontent_env=OPENINFERENCE_HIDE,
                note="RequirementAgent on OpenAIChatModel; its final_answer tool is not a call",
            ),
        ),
        "BeeAIInstrumentor().instrument(tracer_provider=...)",
        final_tool="final_answer",
        final_argument="response",
    ),
    Framework(
        "semantic-kernel",
        "1.45.0",
        ("semantic-kernel==1.45.0",),
        "fw_semantic_kernel.py",
        (
            Layout(
                "sensitive",
                ("loop", "progress", "parallel", "failing", "reworded"),
                {"SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE": "true"},
                note="ChatCompletionAgent, auto function calling; sensitive diagnostics on",
            ),
            Layout(
                "diagnostics",
                ("loop", "failing"),
                {"SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS": "true"},
                content=False,
                note="diagnostics without the sensitive form: no arguments or results",
            ),
        ),
        "the built-in telemetry on the global SDK provider",
    ),
    Framework(
        "ag2",
        "1.2.1",
        ("ag2[openai]==1.2.1",),
        "fw_ag2.py",
        (
            Layout(
                "telemetry",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                nocontent_env={"AG2_CAPTURE_CONTENT": "false"},
                note="Agent on OpenAIConfig; TelemetryMiddleware (capture_content on by default)",
            ),
        ),
        "TelemetryMiddleware(tracer_provider=..., capture_content=...) in the agent's middleware",
    ),
    Framework(
        "langchain",
        "1.5.2",
        (
            "langchain==1.5.2",
            "langchain-openai==1.7.4",
            "opentelemetry-instrumentation-langchain==0.62.4",
        ),
        "fw_langchain_openllmetry.py",
        (
            Layout(
                "openllmetry",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                nocontent_env={"TRACELOOP_TRACE_CONTENT": "false"},
                note="create_agent on ChatOpenAI; OpenLLMetry's LangchainInstrumentor 0.62.4",
            ),
        ),
        "LangchainInstrumentor().instrument(tracer_provider=...) (OpenLLMetry, no Traceloop SDK)",
    ),
    Framework(
        "agno",
        "3.1.10",
        ("agno==3.1.10", "openai", "openinference-instrumentation-agno==1.0.15"),
        "fw_agno.py",
        (
            Layout(
                "openinference",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                nocontent_env=OPENINFERENCE_HIDE,
                note="Agent on OpenAIChat; openinference-instrumentation-agno 1.0.15",
            ),
        ),
        "AgnoInstrumentor().instrument(tracer_provider=...)",
    ),
    Framework(
        "autogen-agentchat",
        "0.7.5",
        ("autogen-agentchat==0.7.5", "autogen-ext[openai]==0.7.5"),
        "fw_autogen.py",
        (
            Layout(
                "default",
                ("loop", "progress", "failing", "reworded"),
                content=False,
                note="AssistantAgent on OpenAIChatCompletionClient; autogen-core's own tracing"
                " (records no tool arguments or results, and no model spans)",
            ),
            Layout(
                "openinference",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                {"AG_INSTRUMENTATION": "openinference"},
                packages=("openinference-instrumentation-autogen-agentchat==0.1.22",),
                nocontent_env=OPENINFERENCE_HIDE,
                note="with OpenInference's AutogenAgentChatInstrumentor 0.1.22 beside it",
            ),
        ),
        "autogen-core's built-in tracing on the global SDK provider",
    ),
    Framework(
        "google-genai",
        "2.34.0",
        ("google-genai==2.34.0", "opentelemetry-instrumentation-google-genai==1.3b0"),
        "fw_google_genai.py",
        (
            Layout(
                "afc",
                ("loop", "progress", "failing", "reworded", "loop-nocontent"),
                {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
                nocontent_env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"},
                note="automatic function calling: the whole tool loop in one generate_content",
            ),
        ),
        "GoogleGenAiSdkInstrumentor().instrument(tracer_provider=...); Gemini API on the stub",
    ),
    Framework(
        "vercel-ai",
        "7.0.173",
        (
            "ai@7.0.173",
            "@ai-sdk/openai@4.0.118",
            "@ai-sdk/otel@1.0.173",
            "zod@4.6.7",
            "@opentelemetry/api@1.10.0",
            "@opentelemetry/sdk-trace-node@2.12.1",
            "@opentelemetry/sdk-trace-base@2.12.1",
            "@opentelemetry/resources@2.12.1",
            "@opentelemetry/exporter-trace-otlp-proto@0.301.1",
        ),
        "fw_vercel_ai.mjs",
        (
            Layout(
                "otel",
                (*_BASIC, "subagent", "loop-nocontent"),
                {"VAI_TELEMETRY": "otel"},
                note="registerTelemetry(new OpenTelemetry()) from @ai-sdk/otel",
            ),
            Layout(
                "legacy",
                (*_BASIC, "subagent", "loop-nocontent"),
                {"VAI_TELEMETRY": "legacy"},
                note="registerTelemetry(new LegacyOpenTelemetry()): the ai.* attributes",
            ),
        ),
        "registerTelemetry(...) from 'ai' with @ai-sdk/otel; Node SDK OTLP/HTTP to a receiver",
        node=True,
    ),
    Framework(
        "langchain-js",
        "1.5.14",
        (
            "langchain@1.5.14",
            "@langchain/core@1.4.0",
            "@langchain/openai@1.6.0",
            "@arizeai/openinference-instrumentation-langchain@4.1.1",
            "zod@4.6.7",
            "@opentelemetry/api@1.10.0",
            "@opentelemetry/sdk-trace-node@2.12.1",
            "@opentelemetry/sdk-trace-base@2.12.1",
            "@opentelemetry/resources@2.12.1",
            "@opentelemetry/exporter-trace-otlp-proto@0.301.1",
        ),
        "fw_langchain_js.mjs",
        (
            Layout(
                "openinference",
                (*_BASIC, "subagent", "loop-nocontent"),
                note="createAgent on ChatOpenAI; openinference-instrumentation-langchain 4.1.1",
            ),
        ),
        "LangChainInstrumentation().manuallyInstrument(CallbackManager); Node SDK OTLP/HTTP",
        node=True,
    ),
    Framework(
        "mastra",
        "1.71.0",
        (
            "@mastra/core@1.71.0",
            "@mastra/observability@1.17.9",
            "@mastra/otel-exporter@1.4.0",
            "zod@4.6.7",
            "@opentelemetry/exporter-trace-otlp-proto@0.301.1",
        ),
        "fw_mastra.mjs",
        (
            Layout(
                "otel",
                (*_BASIC, "subagent", "loop-nocontent"),
                note="Agent.generate(maxSteps=20); Observability with OtelExporter 1.4.0",
            ),
        ),
        "Observability({configs: {otel: {exporters: [new OtelExporter({provider: {custom}})]}}})",
        node=True,
    ),
)


# -- running -------------------------------------------------------------------


def ensure_env(fw: Framework, layout: Layout) -> Path:
    """Create the layout's virtualenv (or node_modules) once per pinned package list."""
    venv = fw.venv(layout)
    packages = (*fw.packages, *layout.packages)
    stamp = venv / ".stall-installed"
    wanted = "\n".join(packages)
    if stamp.exists() and stamp.read_text() == wanted:
        return venv
    venv.mkdir(parents=True, exist_ok=True)
    if fw.node:
        subprocess.run(
            # --legacy-peer-deps: sdk-trace-node 2.12 and exporter 0.301 disagree on api's peer
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--legacy-peer-deps",
                *packages,
            ],
            cwd=venv,
            check=True,
        )
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, *packages, *CAPTURE_DEPS], check=True)
    stamp.write_text(wanted)
    return venv


def rewrite(script: Script, fw: Framework) -> Script:
    """The script with the framework's own names for agent tools, handoffs and finishing."""

    def call(c: Mapping[str, Any]) -> dict[str, Any]:
        name, args = fw.calls.get(c["name"], (c["name"], c["arguments"]))
        fill = {k: v.format(**c["arguments"]) if isinstance(v, str) else v for k, v in args.items()}
        return {"name": name, "arguments": fill}

    def turn(t: Mapping[str, Any]) -> Mapping[str, Any]:
        if "tool_calls" in t:
            return {"tool_calls": [call(c) for c in t["tool_calls"]]}
        if fw.final_tool:
            answer = {fw.final_argument: t["text"]}
            return {"tool_calls": [{"name": fw.final_tool, "arguments": answer}]}
        return t

    rewritten = {agent: [turn(t) for t in turns] for agent, turns in script.items()}
    return {**rewritten, "": []} if fw.side_calls else rewritten


def run_scenario(fw: Framework, layout: Layout, name: str, venv: Path) -> Path:
    """Play one scenario against the scripted model; returns the captured file."""
    out = fw.layout_dir(layout) / f"{name}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with serving(rewrite(scenario(name).script, fw)) as (base_url, model):
        env = {
            **os.environ,
            **layout.env,
            **(layout.nocontent_env if name.endswith(NOCONTENT) else {}),
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "sk-offline-stub",
            "GOOGLE_GEMINI_BASE_URL": base_url.removesuffix("/v1"),
            "GOOGLE_API_KEY": "offline-stub",
            "GOOGLE_GENAI_USE_VERTEXAI": "false",
            "PYTHONPATH": os.pathsep.join((str(WORKTREE), str(AGENTS))),
            "OTEL_SERVICE_NAME": f"{fw.name}-{layout.name}",
            "PYTHONHASHSEED": "0",
        }
        with ExitStack() as stack:
            if fw.node:
                from otlp_lines_receiver import receiving  # needs the repository's venv

                env["OTLP_TRACES_URL"] = stack.enter_context(receiving(out))
                script = venv / fw.agent
                shutil.copy(AGENTS / fw.agent, script)
                command = ["node", str(script)]
            else:
                command = [str(venv / "bin" / "python"), str(AGENTS / fw.agent)]
            command += ["--scenario", name, "--layout", layout.name, "--out", str(out)]
            done = subprocess.run(
                command, env=env, timeout=300, check=False, capture_output=True, text=True
            )
        if done.returncode != 0:
            print(done.stdout[-4000:], done.stderr[-4000:], sep="\n", file=sys.stderr)
            raise RuntimeError(f"{fw.name}/{layout.name}/{name} exited {done.returncode}")
        print(f"  {out.relative_to(HERE)}: {len(model.requests)} model requests")
    return out


def selected(only: Sequence[str]) -> Iterable[tuple[Framework, Layout]]:
    """Framework/layout pairs named by ``--only NAME[/LAYOUT]`` (all when none)."""
    for fw in FRAMEWORKS:
        for layout in fw.layouts:
            keys = (
                fw.name,
                f"{fw.name}-{fw.version}",
                f"{fw.name}/{layout.name}",
                f"{fw.name}-{fw.version}/{layout.name}",
            )
            if not only or any(k in only for k in keys):
                yield fw, layout


# -- manifest and report -------------------------------------------------------


def expected(layout: Layout, name: str) -> Expect:
    """The layout's own expectation for a scenario, else the scenario's.

    Without content a loop cannot be told from progress (the detector never
    calls content-less calls repeats), so a ``-nocontent`` run is ``ok`` and
    must be flagged "content not captured" instead (issue 18, item 7).
    """
    if name in layout.expect:
        return layout.expect[name]
    base = scenario(name).expect
    if has_content(layout, name) or base.verdict != "break":
        return base
    return Expect("ok", base.runs, base.tool_calls, "content not captured: must be flagged")


def has_content(layout: Layout, name: str) -> bool:
    """Whether this fixture's tool spans carry arguments and results."""
    return layout.content and not name.endswith(NOCONTENT)


def _toml(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def write_manifest() -> Path:
    """``manifest.toml``: every committed fixture and what it should give."""
    lines = [
        "# Generated by tests/frameworks/generate.py: one [[fixture]] per captured file.",
        "# verdict/runs/tool_calls: what otel-stall should report (runs and tool calls in all).",
        "",
    ]
    for fw, layout in selected(()):
        for name in layout.scenarios:
            path = fw.layout_dir(layout) / f"{name}.jsonl"
            if not path.exists():
                continue
            want = expected(layout, name)
            notes = "; ".join(n for n in (scenario(name).about, want.note, layout.note) if n)
            if not has_content(layout, name):
                notes += "; content capture off"
            entry = {
                "path": str(path.relative_to(HERE)),
                "framework": fw.name,
                "version": fw.version,
                "layout": layout.name,
                "scenario": name,
                "verdict": want.verdict,
                "runs": want.runs,
                "tool_calls": want.tool_calls,
                "content": has_content(layout, name),
                "generated": "ran",
                "instrumentation": fw.instrumentation,
                "notes": notes,
            }
            lines.append("[[fixture]]")
            lines += [f"{key} = {_toml(value)}" for key, value in entry.items()]
            lines.append("")
    manifest = HERE / "manifest.toml"
    manifest.write_text("\n".join(lines))
    return manifest


def replay(path: Path) -> dict[str, Any]:
    """Run this worktree's ``otel-stall replay --format json`` on one fixture."""
    cli = WORKTREE / ".venv" / "bin" / "otel-stall"
    done = subprocess.run(
        [str(cli), "replay", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    result: dict[str, Any] = json.loads(done.stdout or "{}")
    return result


SEVERITY = ["break", "escalate", "warn", "ok"]


def report(only: Sequence[str]) -> None:
    """Expected against found, one markdown row per fixture."""
    print("| fixture | expected | found | |")
    print("|---|---|---|---|")
    for fw, layout in selected(only):
        for name in layout.scenarios:
            path = fw.layout_dir(layout) / f"{name}.jsonl"
            if not path.exists():
                continue
            want = expected(layout, name)
            runs = replay(path).get("runs", [])
            verdicts = sorted({r["verdict"] for r in runs}, key=SEVERITY.index)
            verdict = verdicts[0] if verdicts else "-"
            tools = sum(int(r["tool_calls"]) for r in runs)
            good = (verdict, len(runs), tools) == (want.verdict, want.runs, want.tool_calls)
            print(
                f"| {path.relative_to(HERE)} | {want.verdict}, {want.runs} run, "
                f"{want.tool_calls} tools | {verdict}, {len(runs)} run, {tools} tools "
                f"| {'ok' if good else '**gap**'} |"
            )


def main(argv: Sequence[str] | None = None) -> int:
    """Generate (all, or ``--only``), then rewrite the manifest; or ``--report``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", action="append", default=[], help="NAME or NAME/LAYOUT")
    parser.add_argument("--scenario", action="append", default=[], help="only these scenarios")
    parser.add_argument("--report", action="store_true", help="replay fixtures, compare")
    parser.add_argument("--manifest", action="store_true", help="only rewrite manifest.toml")
    args = parser.parse_args(argv)
    if args.report:
        report(args.only)
        return 0
    if args.manifest:
        write_manifest()
        return 0
    failed: list[str] = []
    for fw, layout in selected(args.only):
        print(f"{fw.name} {fw.version} / {layout.name}")
        venv = ensure_env(fw, layout)
        for name in layout.scenarios:
            if args.scenario and name not in args.scenario:
                continue
            try:
                run_scenario(fw, layout, name, venv)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failed.append(str(exc))
    write_manifest()
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
