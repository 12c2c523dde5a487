"""The live gate inside a real pydantic-ai agent, driven offline by pydantic-ai's FunctionModel."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import integration_support
import pytest

pytestmark = pytest.mark.integrations
integration_support.require("pydantic_ai")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent, AgentRunResult, ToolOutput  # noqa: E402
from pydantic_ai.capabilities import Instrumentation  # noqa: E402
from pydantic_ai.exceptions import ToolFailed  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402

import otel_stall  # noqa: E402
from otel_stall.core.policy import DuplicateMode, StallPolicy  # noqa: E402
from otel_stall.integrations.gate import ToolGate  # noqa: E402
from otel_stall.integrations.pydantic_ai import StallGuard  # noqa: E402
from otel_stall.semconv import StallAttributes  # noqa: E402


@dataclass
class Turn:
    """What the model was given on one turn: the conversation and the tools it could call."""

    messages: list[ModelMessage]
    tools: list[str]


@dataclass
class ScriptedModel:
    """Asks for ``calls`` in order while it has tools, then answers from the results."""

    calls: list[tuple[str, dict[str, Any]]]
    turns: list[Turn] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        """One model turn."""
        tools = [tool.name for tool in info.function_tools]
        self.turns.append(Turn(list(messages), tools))
        asked = len(self.turns) - 1
        if tools and asked < len(self.calls):
            name, args = self.calls[asked]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{asked}")])
        seen = [p.content for p in _parts(messages, ToolReturnPart) if p.outcome == "success"]
        answer = f"answer from {len(seen)} results: {seen}"
        if info.output_tools:  # a structured answer: through its output tool
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"text": answer})])
        return ModelResponse(parts=[TextPart(answer)])


def _parts(messages: list[ModelMessage], kind: type[Any]) -> list[Any]:
    return [part for message in messages for part in message.parts if isinstance(part, kind)]


@dataclass
class Tools:
    """The agent's tools, counting how often each body really ran."""

    runs: dict[str, int] = field(default_factory=dict)
    polls_left: int = 5

    def agent(self, model: ScriptedModel, **kwargs: Any) -> Agent[None, Any]:
        """A pydantic-ai agent with a search tool and a polling tool."""
        agent: Agent[None, Any] = Agent(FunctionModel(model), **kwargs)

        @agent.tool_plain
        def search(query: str) -> str:
            """Search the docs."""
            self.runs["search"] = self.runs.get("search", 0) + 1
            return f"3 hits for {query}"

        @agent.tool_plain
        def poll_job(job: str) -> str:
            """Ask whether a job is done."""
            self.runs["poll_job"] = self.runs.get("poll_job", 0) + 1
            self.polls_left -= 1
            return "done" if self.polls_left <= 0 else "pending"

        return agent


LOOP = [("search", {"query": "otel-stall"})] * 6


def _told(turn: Turn, text: str) -> bool:
    """Whether ``text`` reached the model on this turn (FunctionModel shows a note as a part)."""
    return any(text in str(getattr(p, "content", "")) for m in turn.messages for p in m.parts)


def _failed(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for p in _parts(messages, ToolReturnPart) if p.outcome == "failed"]


def _check_loop(model: ScriptedModel, tools: Tools, result: AgentRunResult[str]) -> None:
    """The loop's shape, the same in both modes: one real run, refusals, then no tools."""
    assert tools.runs == {"search": 1}, "the repeated calls never ran"
    refused = _failed(model.turns[2].messages)
    assert len(refused) == 1, "the model's next turn shows the refusal as the tool's result"
    assert refused[0].tool_name == "search"
    assert "search" in str(refused[0].content), "the text is the gate's guidance"
    assert all(turn.tools for turn in model.turns[:-1]), "tools are there until the break"
    last = model.turns[-1]
    assert last.tools == [], "at break the model's turn has no tools"
    told = [p.content for p in _parts(result.all_messages(), SystemPromptPart)]
    assert told, "the guidance is in the conversation, in the system's voice"
    assert _told(last, told[-1]), "and the model is told to answer now"
    output = result.output
    assert output.startswith("answer from 1 results"), "the run ends with the model's answer"
    print("\nrefusal:", refused[0].content, "\nbreak:", told[-1], "\nanswer:", output)


def test_loop_is_refused_then_broken_without_otel() -> None:
    """Six identical searches: the 2nd on is refused unrun; then the model answers with no tools."""
    model, tools = ScriptedModel(LOOP), Tools()
    gate = ToolGate()
    agent = tools.agent(model, capabilities=[StallGuard(gate=gate)])
    result = agent.run_sync("What is otel-stall?")
    _check_loop(model, tools, result)
    assert len(model.turns) == len(LOOP) + 1
    assert gate.open_runs == 0, "the run's state is freed at its end"


def test_loop_async_on_one_event_loop() -> None:
    """The same in an async run: two runs at once on one loop, each its own run state."""
    runs = [(ScriptedModel(LOOP), Tools()) for _ in range(2)]
    gate = ToolGate()

    async def both() -> list[AgentRunResult[str]]:
        agents = [tools.agent(model, capabilities=[StallGuard(gate=gate)]) for model, tools in runs]
        return list(await asyncio.gather(*(a.run("What is otel-stall?") for a in agents)))

    for (model, tools), result in zip(runs, asyncio.run(both()), strict=True):
        _check_loop(model, tools, result)


def _seen(model: ScriptedModel) -> list[list[tuple[str, str, str]]]:
    """Each turn's inputs, without the parts' times and ids."""
    return [
        [
            (type(part).__name__, str(getattr(part, "content", "")), str(turn.tools))
            for message in turn.messages
            for part in message.parts
        ]
        for turn in model.turns
    ]


def test_healthy_run_is_untouched() -> None:
    """Distinct searches: the model's inputs are the same, turn for turn, with the guard or not."""
    calls = [("search", {"query": q}) for q in ("a", "b", "c")]
    bare, guarded = ScriptedModel(calls), ScriptedModel(calls)
    bare_tools, guarded_tools = Tools(), Tools()
    plain = bare_tools.agent(bare).run_sync("Compare a, b and c.").output
    kept = guarded_tools.agent(guarded, capabilities=[StallGuard(gate=ToolGate())])
    assert kept.run_sync("Compare a, b and c.").output == plain
    assert _seen(guarded) == _seen(bare)
    assert guarded_tools.runs == bare_tools.runs == {"search": 3}


def test_exempt_polling_tool_is_never_refused() -> None:
    """A polling tool in the policy's exempt tools runs every time it is asked."""
    calls = [("poll_job", {"job": "build-7"})] * 5
    model, tools = ScriptedModel(calls), Tools()
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"poll_job"})))
    agent = tools.agent(model, capabilities=[StallGuard(gate=gate)])
    output = agent.run_sync("Wait for it.").output
    assert tools.runs == {"poll_job": 5}
    assert not any(_failed(turn.messages) for turn in model.turns)
    assert model.turns[-1].tools, "never broken: the answer came with tools still there"
    assert output.startswith("answer from 5 results")


def test_loop_in_processor_mode_with_pydantic_ai_spans() -> None:
    """pydantic-ai's spans feed install()'s processor on a real SDK provider; the gate asks it."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = otel_stall.install(provider, downstream=SimpleSpanProcessor(exporter))
    model, tools = ScriptedModel(LOOP), Tools()
    gate = ToolGate(processor)
    agent = tools.agent(
        model,
        capabilities=[
            Instrumentation(settings=InstrumentationSettings(tracer_provider=provider)),
            StallGuard(gate=gate),
        ],
    )
    try:
        result = agent.run_sync("What is otel-stall?")
    finally:
        provider.shutdown()
    _check_loop(model, tools, result)
    assert gate.open_runs == 0, "the processor held the run: the gate kept no state of its own"
    actions = [
        s.attributes.get(StallAttributes.ACTION)
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get(StallAttributes.REFUSED)
    ]
    assert "refuse" in actions, "the refused call's span carries stall.action = refuse"


def test_warn_follows_the_tool_result() -> None:
    """Refusals off: the 3rd identical call runs, and the warning follows its result."""
    model, tools = ScriptedModel(LOOP), Tools()
    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    result = tools.agent(model, capabilities=[StallGuard(gate=gate)]).run_sync("otel-stall?")
    returns = _parts(result.all_messages(), ToolReturnPart)
    assert tools.runs == {"search": len(returns)}, "no call refused"
    notes = [p.content for p in _parts(result.all_messages(), SystemPromptPart)]
    assert "search" in notes[0], "the warning is in the conversation, in the system's voice"
    assert _told(model.turns[3], notes[0]), "the model's context after the 3rd result has it"
    assert not _told(model.turns[2], notes[0]), "and not before it"
    assert model.turns[-1].tools == [], "the loop still ends at break"
    print("\nwarn:", notes[0])


def test_a_failing_tool_escalates_to_an_answer_without_tools() -> None:
    """Five failures in a row (new arguments each time): escalate, and the model answers."""
    model = ScriptedModel([("fetch", {"url": f"https://x.test/{i}"}) for i in range(8)])
    agent: Agent[None, str] = Agent(
        FunctionModel(model), capabilities=[StallGuard(gate=ToolGate())]
    )
    runs = 0

    @agent.tool_plain
    def fetch(url: str) -> str:
        """Fetch a page."""
        nonlocal runs
        runs += 1
        raise ToolFailed("upstream timed out")

    result = agent.run_sync("Fetch them.")
    assert runs == 5, "every failing call ran: none repeated"
    assert model.turns[-1].tools == []
    told = [p.content for p in _parts(result.all_messages(), SystemPromptPart)]
    assert len(told) == 1
    assert "fetch" in told[0], "the escalation names the failing tool"
    assert _told(model.turns[-1], told[0])
    assert result.output == "answer from 0 results: []"
    print("\nescalate:", told[0])


def test_warn_in_processor_mode_reaches_the_next_request() -> None:
    """With the processor, a warning fired by the tool's span is told with the next request."""
    provider = TracerProvider()
    policy = StallPolicy(duplicate_mode=DuplicateMode.OFF)
    processor = otel_stall.install(
        provider, downstream=SimpleSpanProcessor(InMemorySpanExporter()), policy=policy
    )
    model, tools = ScriptedModel(LOOP), Tools()
    instrumentation = Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))
    guard = StallGuard(gate=ToolGate(processor))
    result = tools.agent(model, capabilities=[instrumentation, guard]).run_sync("otel-stall?")
    provider.shutdown()
    notes = [p.content for p in _parts(result.all_messages(), SystemPromptPart)]
    assert len(notes) == 2, "the warning at the 3rd call, then the break at the 5th, once each"
    assert notes[0] != notes[1], "the warning is its own finding, not the break"
    assert _told(model.turns[3], notes[0])
    assert not _told(model.turns[2], notes[0])
    assert model.turns[-1].tools == []


class Answer(BaseModel):
    """The agent's structured answer."""

    text: str


def test_break_with_structured_output_answers_through_its_output_tool() -> None:
    """output_type=ToolOutput: at break the function tools go, the output tool stays."""
    model, tools = ScriptedModel(LOOP), Tools()
    guard = StallGuard(gate=ToolGate())
    agent = tools.agent(model, output_type=ToolOutput(Answer), capabilities=[guard])
    result = agent.run_sync("What is otel-stall?")
    assert tools.runs == {"search": 1}
    assert model.turns[-1].tools == [], "no function tools at break"
    assert isinstance(result.output, Answer)
    assert result.output.text.startswith("answer from 1 results")
