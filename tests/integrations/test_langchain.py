"""The live gate inside a real LangChain v1 agent (create_agent), driven by a scripted model."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import integration_support
import pytest

pytestmark = pytest.mark.integrations
integration_support.require("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware.types import InputAgentState  # noqa: E402
from langchain.agents.structured_output import ToolStrategy  # noqa: E402
from langchain_core.callbacks import CallbackManagerForLLMRun  # noqa: E402
from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402
from langchain_core.runnables import Runnable  # noqa: E402
from langchain_core.tools import BaseTool, ToolException, tool  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from pydantic import BaseModel, Field  # noqa: E402

import otel_stall  # noqa: E402
from otel_stall.core.policy import DuplicateMode, StallPolicy  # noqa: E402
from otel_stall.integrations.gate import ToolGate  # noqa: E402
from otel_stall.integrations.langchain import StallMiddleware  # noqa: E402


@dataclass
class Turn:
    """What the model was given on one call: the conversation and the tools bound to it."""

    messages: list[BaseMessage]
    tools: list[str]


class ScriptedChat(BaseChatModel):
    """Asks for ``calls`` in order while it has tools, then answers from the results.

    ``stubborn``: asks for its calls whether it has tools or not (a model that ignores its
    tool list).
    """

    calls: list[tuple[str, dict[str, Any]]]
    turns: list[Turn] = Field(default_factory=list)
    stubborn: bool = False

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, AIMessage]:
        """Bind tools the way a provider model does: they reach ``_generate`` as a keyword."""
        names = [convert_to_openai_tool(t)["function"]["name"] for t in tools]
        return self.bind(tool_names=names, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = list(kwargs.get("tool_names", []))
        self.turns.append(Turn(list(messages), tools))
        asked = len(self.turns) - 1
        seen = [m.text for m in messages if isinstance(m, ToolMessage) and m.status != "error"]
        answer = f"answer from {len(seen)} results: {seen}"
        if tools == ["Answer"]:  # only the structured output's tool is left: answer with it
            call = {"name": "Answer", "args": {"text": answer}, "id": "answer", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        elif (tools or self.stubborn) and asked < len(self.calls):
            name, args = self.calls[asked]
            call = {"name": name, "args": args, "id": f"call-{asked}", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        else:
            message = AIMessage(content=answer)
        return ChatResult(generations=[ChatGeneration(message=message)])


@dataclass
class Tools:
    """The agent's tools, counting how often each body really ran."""

    runs: dict[str, int] = field(default_factory=dict)
    polls_left: int = 5

    def all(self) -> list[BaseTool]:
        """A search tool and a polling tool."""

        @tool
        def search(query: str) -> str:
            """Search the docs."""
            self.runs["search"] = self.runs.get("search", 0) + 1
            return f"3 hits for {query}"

        @tool
        def poll_job(job: str) -> str:
            """Ask whether a job is done."""
            self.runs["poll_job"] = self.runs.get("poll_job", 0) + 1
            self.polls_left -= 1
            return "done" if self.polls_left <= 0 else "pending"

        return [search, poll_job]


LOOP = [("search", {"query": "otel-stall"})] * 6
QUESTION: InputAgentState = {"messages": [HumanMessage("What is otel-stall?")]}


def _refusals(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.status == "error"]


def _check_loop(model: ScriptedChat, tools: Tools, state: dict[str, Any]) -> None:
    """The loop's shape: one real run, refusals as error tool messages, then no tools."""
    assert tools.runs == {"search": 1}, "the repeated calls never ran"
    refused = _refusals(model.turns[2].messages)
    assert len(refused) == 1, "the model's next call shows the refusal as the tool's message"
    assert refused[0].name == "search"
    assert "search" in refused[0].text, "the text is the gate's guidance"
    assert all(turn.tools for turn in model.turns[:-1]), "tools are bound until the break"
    last = model.turns[-1]
    assert last.tools == [], "at break the model is called with no tools"
    told = last.messages[-1]
    assert isinstance(told, HumanMessage), "and told to answer now, last"
    assert told.text not in {m.text for m in state["messages"]}, "for that call only"
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert not final.tool_calls
    assert final.text.startswith("answer from 1 results"), "the run ends with the model's answer"
    print("\nrefusal:", refused[0].text, "\nbreak:", told.text, "\nanswer:", final.text)


def test_loop_is_refused_then_broken_without_otel() -> None:
    """Six identical searches: the 2nd on is refused unrun; then the model answers with no tools."""
    model, tools, gate = ScriptedChat(calls=LOOP), Tools(), ToolGate()
    agent = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(gate)])
    state = agent.invoke(QUESTION)
    _check_loop(model, tools, state)
    assert len(model.turns) == len(LOOP) + 1
    assert gate.open_runs == 0, "the run's state is freed at its end"
    assert "otel_stall_run" not in state, "the run id stays private"


def test_loop_async_two_runs_on_one_event_loop() -> None:
    """ainvoke: two runs at once on one loop, one middleware, each run its own state."""
    runs = [(ScriptedChat(calls=LOOP), Tools()) for _ in range(2)]
    middleware = StallMiddleware(ToolGate())

    async def both() -> list[dict[str, Any]]:
        agents = [create_agent(m, tools=t.all(), middleware=[middleware]) for m, t in runs]
        return list(await asyncio.gather(*(a.ainvoke(QUESTION) for a in agents)))

    for (model, tools), state in zip(runs, asyncio.run(both()), strict=True):
        _check_loop(model, tools, state)


def test_a_thread_s_next_question_is_a_new_run() -> None:
    """The same agent invoked twice: the second invocation's first search runs (a new run)."""
    model, tools = ScriptedChat(calls=[("search", {"query": "otel-stall"})]), Tools()
    agent = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(ToolGate())])
    agent.invoke(QUESTION)
    model.turns.clear()
    agent.invoke(QUESTION)
    assert tools.runs == {"search": 2}
    assert not any(_refusals(turn.messages) for turn in model.turns)


def _seen(model: ScriptedChat) -> list[list[tuple[str, str, str, str]]]:
    """Each call's inputs, without the messages' generated ids."""
    return [
        [
            (type(m).__name__, m.text, str(getattr(m, "tool_calls", "")), str(turn.tools))
            for m in turn.messages
        ]
        for turn in model.turns
    ]


def test_healthy_run_is_untouched() -> None:
    """Distinct searches: the model's inputs are the same, call for call, middleware or not."""
    calls = [("search", {"query": q}) for q in ("a", "b", "c")]
    bare, guarded = ScriptedChat(calls=calls), ScriptedChat(calls=calls)
    bare_tools, guarded_tools = Tools(), Tools()
    plain = create_agent(bare, tools=bare_tools.all()).invoke(QUESTION)
    kept = create_agent(
        guarded, tools=guarded_tools.all(), middleware=[StallMiddleware(ToolGate())]
    ).invoke(QUESTION)
    assert _seen(guarded) == _seen(bare)
    assert [m.text for m in kept["messages"]] == [m.text for m in plain["messages"]]
    assert guarded_tools.runs == bare_tools.runs == {"search": 3}


def test_exempt_polling_tool_is_never_refused() -> None:
    """A polling tool in the policy's exempt tools runs every time it is asked."""
    calls = [("poll_job", {"job": "build-7"})] * 5
    model, tools = ScriptedChat(calls=calls), Tools()
    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"poll_job"})))
    state = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(gate)]).invoke(
        QUESTION
    )
    assert tools.runs == {"poll_job": 5}
    assert not any(_refusals(turn.messages) for turn in model.turns)
    assert model.turns[-1].tools, "never broken: the answer came with tools still bound"
    assert state["messages"][-1].text.startswith("answer from 5 results")


def test_warn_is_noted_on_the_tool_message() -> None:
    """Refusals off: the 3rd identical result runs, and the warning follows it in its message."""
    model, tools = ScriptedChat(calls=LOOP), Tools()
    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    state = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(gate)]).invoke(
        QUESTION
    )
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert tools.runs == {"search": len(results)}, "no call refused"
    first, warned = results[0].text, results[2].text
    assert warned.startswith(first + "\n\n"), "the tool's own result comes first"
    assert "search" in warned[len(first) :], "then the gate's warning"
    assert [r.text for r in results[:2]] == [first, first], "the calls before it are untouched"
    assert model.turns[-1].tools == [], "the loop still ends at break"
    print("\nwarn:", warned[len(first) + 2 :])


def test_a_model_that_ignores_the_break_still_ends_the_run() -> None:
    """A model that asks for a tool with none bound: its tool calls are dropped, the run ends."""
    model, tools = ScriptedChat(calls=LOOP * 2, stubborn=True), Tools()
    agent = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(ToolGate())])
    state = agent.invoke(QUESTION)
    final = state["messages"][-1]
    assert isinstance(final, AIMessage)
    assert not final.tool_calls, "the answer asks for nothing more: the agent ended"
    assert tools.runs == {"search": 1}
    assert len(model.turns) == len(LOOP) + 1, "one model call after the break, not a loop"


def test_loop_with_the_processor_installed_and_an_app_span() -> None:
    """install() on a real SDK provider, the agent run in the app's own agent span.

    LangChain makes no OpenTelemetry spans while it runs (LangSmith's OpenTelemetry export
    writes them afterwards), so the processor never holds this run's calls: the gate keeps
    its own state and guards the same way.
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    processor = otel_stall.install(provider, downstream=SimpleSpanProcessor(exporter))
    model, tools, gate = ScriptedChat(calls=LOOP), Tools(), ToolGate(processor)
    agent = create_agent(model, tools=tools.all(), middleware=[StallMiddleware(gate)])
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
    with provider.get_tracer("app").start_as_current_span("invoke_agent", attributes=attributes):
        state = agent.invoke(QUESTION)
    provider.shutdown()
    _check_loop(model, tools, state)
    assert [s.name for s in exporter.get_finished_spans()] == ["invoke_agent"]


def test_a_failing_tool_escalates_to_an_answer_without_tools() -> None:
    """Five failures in a row (new arguments each time): escalate, and the model answers."""
    runs = 0

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        nonlocal runs
        runs += 1
        raise ToolException("upstream timed out")

    fetch.handle_tool_error = True
    model = ScriptedChat(calls=[("fetch", {"url": f"https://x.test/{i}"}) for i in range(8)])
    state = create_agent(model, tools=[fetch], middleware=[StallMiddleware(ToolGate())]).invoke(
        QUESTION
    )
    assert runs == 5, "every failing call ran: none repeated"
    last = model.turns[-1]
    assert last.tools == []
    assert isinstance(last.messages[-1], HumanMessage)
    assert "fetch" in last.messages[-1].text, "the escalation names the failing tool"
    assert state["messages"][-1].text == "answer from 0 results: []"
    print("\nescalate:", last.messages[-1].text)


def test_exempt_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """OTEL_STALL_EXEMPT_TOOLS reaches a gate given no policy: the poll is never refused."""
    monkeypatch.setenv("OTEL_STALL_EXEMPT_TOOLS", "poll_*")
    model, tools = ScriptedChat(calls=[("poll_job", {"job": "build-7"})] * 5), Tools()
    create_agent(model, tools=tools.all(), middleware=[StallMiddleware(ToolGate())]).invoke(
        QUESTION
    )
    assert tools.runs == {"poll_job": 5}
    assert not any(_refusals(turn.messages) for turn in model.turns)


class Answer(BaseModel):
    """The agent's structured answer."""

    text: str


def test_break_with_structured_output_answers_through_its_tool() -> None:
    """response_format=ToolStrategy: at break only the answer's tool is bound, and it stays."""
    model, tools = ScriptedChat(calls=LOOP), Tools()
    agent = create_agent(
        model,
        tools=tools.all(),
        middleware=[StallMiddleware(ToolGate())],
        response_format=ToolStrategy(Answer),
    )
    state = agent.invoke(QUESTION)
    assert tools.runs == {"search": 1}
    assert model.turns[-1].tools == ["Answer"], "the search tools are gone, the answer's is not"
    structured = state["structured_response"]
    assert isinstance(structured, Answer)
    assert structured.text.startswith("answer from 1 results")
    asked = {c["id"] for m in state["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in state["messages"] if isinstance(m, ToolMessage)}
    assert answered <= asked, "every tool message answers a tool call the history still has"
