"""The live gate in the OpenAI Agents SDK: a guarded agent, driven by the SDK's scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from integration_support import require
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_stall import install
from otel_stall.core.policy import StallPolicy
from otel_stall.integrations.gate import ToolGate

pytestmark = pytest.mark.integrations

ANSWER = "From what I gathered: sunny, 21 degrees."


def _run(
    agent_of: Callable[[Any], Any], responder: Callable[[Any], Any], tools: list[Any]
) -> tuple[Any, Any]:
    """Run one agent over a scripted model that answers each call with ``responder``; offline."""
    require("agents")
    from agents import Agent, RunConfig, Runner
    from agents.testing import ModelStep, ScriptedModel

    model = ScriptedModel([ModelStep.respond(responder) for _ in range(12)])
    agent = agent_of(Agent(name="researcher", instructions="Answer.", tools=tools, model=model))
    result = Runner.run_sync(agent, "Weather?", run_config=RunConfig(tracing_disabled=True))
    return result, model


def _loop_responder(tool: str) -> Callable[[Any], Any]:
    """A model that asks the same call while it has tools, and answers once it has none."""
    from agents.testing import assistant_message, function_call

    asked = iter(range(100))

    def respond(call: Any) -> Any:
        if not call.tools:
            return [assistant_message(ANSWER)]
        return [function_call(tool, {"city": "Paris"}, call_id=f"call-{next(asked)}")]

    return respond


def _outputs(call: Any) -> list[str]:
    """The tool outputs the model had in its input on one call."""
    return [
        str(item["output"])
        for item in call.input
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def _weather_tool(ran: list[str]) -> Any:
    from agents import function_tool

    @function_tool
    def weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return f"{city}: sunny, 21 degrees"

    return weather


def _guarded(gate: ToolGate) -> Callable[[Any], Any]:
    from otel_stall.integrations.openai_agents import guard

    return lambda agent: guard(agent, gate=gate)


def _assert_loop_stopped(result: Any, model: Any, ran: list[str], gate: ToolGate) -> None:
    calls = model.calls
    assert ran == ["Paris"]  # asked 6 times, ran once
    assert len(calls) == 7  # 6 turns asking, then one with no tools
    refusal = _outputs(calls[2])[-1]
    assert refusal.startswith("Refused: `weather` already ran with these arguments")
    assert [bool(call.tools) for call in calls] == [True] * 6 + [False]
    assert calls[-1].system_instructions != "Answer."
    assert calls[-1].system_instructions.startswith("Answer.\n\n")
    assert result.final_output == ANSWER
    rejected = [
        r for r in result.tool_input_guardrail_results if r.output.behavior["type"] != "allow"
    ]
    assert len(rejected) == 5
    print("refusal:", refusal)
    print("break instructions:", calls[-1].system_instructions)
    print("final answer:", result.final_output)


def test_a_loop_is_refused_then_stopped_with_an_answer() -> None:
    """The 2nd identical call is refused unrun, the model reads why; at break it has no tools."""
    gate = ToolGate(policy=StallPolicy())
    ran: list[str] = []
    result, model = _run(_guarded(gate), _loop_responder("weather"), [_weather_tool(ran)])
    _assert_loop_stopped(result, model, ran, gate)


def test_the_loop_is_stopped_with_the_processor_installed() -> None:
    """With install() on a real SDK provider the gate finds no run of its spans and guards alone."""
    provider = TracerProvider()
    processor = install(provider, exporter=InMemorySpanExporter(), environ={})
    try:
        gate = ToolGate(processor)
        ran: list[str] = []
        result, model = _run(_guarded(gate), _loop_responder("weather"), [_weather_tool(ran)])
        _assert_loop_stopped(result, model, ran, gate)
    finally:
        provider.shutdown()


GLOBAL_PROVIDER = """
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
import otel_stall
from otel_stall.integrations.openai_agents import guard

provider = TracerProvider()
trace.set_tracer_provider(provider)
processor = otel_stall.install(exporter=InMemorySpanExporter(), environ={})
ran = []

@function_tool
def weather(city: str) -> str:
    \"\"\"The weather in a city.\"\"\"
    ran.append(city)
    return f"{city}: sunny, 21 degrees"

asked = iter(range(100))

def respond(call):
    if not call.tools:
        return [assistant_message("answer")]
    return [function_call("weather", {"city": "Paris"}, call_id=f"call-{next(asked)}")]

model = ScriptedModel([ModelStep.respond(respond) for _ in range(12)])
agent = guard(Agent(name="researcher", instructions="Answer.", tools=[weather], model=model))
attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"}
with trace.get_tracer("app").start_as_current_span("invoke_agent", attributes=attributes):
    config = RunConfig(tracing_disabled=True)
    result = asyncio.run(Runner.run(agent, "Weather?", run_config=config))
tools = [bool(call.tools) for call in model.calls]
print(json.dumps({"ran": ran, "tools": tools, "answer": result.final_output}))
"""
"""An app with otel-stall installed on the global provider, running the guarded agent in a span."""


def test_the_loop_is_stopped_under_the_global_installed_processor() -> None:
    """With install() on the global provider and the app's agent span, the default gate stops it."""
    import subprocess
    import sys

    require("agents")
    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"ran": ["Paris"], "tools": [True] * 6 + [False], "answer": "answer"}


def _healthy_responder() -> Callable[[Any], Any]:
    """A model that asks three different cities, then answers."""
    from agents.testing import assistant_message, function_call

    def respond(call: Any) -> Any:
        turn = sum(1 for item in call.input if isinstance(item, dict) and "output" in item)
        if turn < 3:
            city = ("Paris", "Oslo", "Lima")[turn]
            return [function_call("weather", {"city": city}, call_id=f"call-{turn}")]
        return [assistant_message(ANSWER)]

    return respond


def _seen(model: Any) -> list[tuple[Any, ...]]:
    """What the model was given on each call: instructions, input, and the tools' schemas."""
    return [
        (
            call.system_instructions,
            json.dumps(call.input, sort_keys=True, default=str),
            [
                (tool.name, json.dumps(tool.params_json_schema, sort_keys=True))
                for tool in call.tools
            ],
        )
        for call in model.calls
    ]


def test_a_healthy_run_is_untouched() -> None:
    """Different calls run as unguarded: the model's inputs are the same, call by call."""
    gate = ToolGate(policy=StallPolicy())
    plain_ran: list[str] = []
    plain, plain_model = _run(lambda a: a, _healthy_responder(), [_weather_tool(plain_ran)])
    ran: list[str] = []
    guarded, model = _run(_guarded(gate), _healthy_responder(), [_weather_tool(ran)])
    assert ran == plain_ran == ["Paris", "Oslo", "Lima"]
    assert _seen(model) == _seen(plain_model)
    assert len(model.calls) == 4
    assert guarded.final_output == plain.final_output == ANSWER


def test_an_exempt_polling_tool_is_never_refused() -> None:
    """A tool the policy exempts runs every time it is asked, with nothing added to its output."""
    from agents import function_tool
    from agents.testing import assistant_message, function_call

    polled: list[int] = []

    @function_tool
    def job_status(job: str) -> str:
        """The status of a job."""
        polled.append(1)
        return "done" if len(polled) == 6 else f"running ({len(polled)})"

    def respond(call: Any) -> Any:
        outputs = _outputs(call)
        if outputs and outputs[-1] == "done":
            return [assistant_message("The job is done.")]
        return [function_call("job_status", {"job": "42"}, call_id=f"call-{len(outputs)}")]

    gate = ToolGate(policy=StallPolicy(exempt_tools=frozenset({"job_status"})))
    result, model = _run(_guarded(gate), respond, [job_status])
    assert len(polled) == 6
    assert _outputs(model.calls[-1]) == [f"running ({n})" for n in range(1, 6)] + ["done"]
    assert all(call.system_instructions == "Answer." for call in model.calls)
    assert result.final_output == "The job is done."


def test_the_gate_state_of_a_run_is_freed_with_the_run() -> None:
    """Once the run's result is gone, the gate holds no state of it (bounded by run lifetime)."""
    import gc

    gate = ToolGate(policy=StallPolicy())
    ran: list[str] = []
    result, model = _run(_guarded(gate), _loop_responder("weather"), [_weather_tool(ran)])
    assert gate.open_runs == 1
    del result, model
    gc.collect()
    assert gate.open_runs == 0


def test_a_warning_is_told_on_the_next_turn_only() -> None:
    """With duplicates allowed, the turn after the 3rd identical result hears the warning, once."""
    from otel_stall.core.policy import DuplicateMode

    gate = ToolGate(policy=StallPolicy(duplicate_mode=DuplicateMode.OFF))
    ran: list[str] = []
    result, model = _run(_guarded(gate), _loop_responder("weather"), [_weather_tool(ran)])
    told = [call.system_instructions for call in model.calls]
    assert len(ran) == 5  # the 5th identical result is a break
    assert told[:3] == ["Answer."] * 3
    assert told[3].startswith("Answer.\n\nStall: `weather` was called 3 times in a row")
    assert told[4] == "Answer."
    assert [bool(call.tools) for call in model.calls] == [True] * 5 + [False]
    assert told[5].count("The loop is stopped") == 1
    assert result.final_output == ANSWER
    print("warning:", told[3])
    print("break instructions:", told[5])


def test_a_streamed_run_is_refused_and_stopped_the_same_way() -> None:
    """``Runner.run_streamed`` goes through the same guardrails and tool checks, on its loop."""
    import asyncio

    require("agents")
    from agents import Agent, RunConfig, Runner
    from agents.testing import ModelStep, ScriptedModel

    gate = ToolGate(policy=StallPolicy())
    ran: list[str] = []
    respond = _loop_responder("weather")
    model = ScriptedModel([ModelStep.respond(respond) for _ in range(12)])
    agent = _guarded(gate)(
        Agent(name="researcher", instructions="Answer.", tools=[_weather_tool(ran)], model=model)
    )

    async def main() -> Any:
        config = RunConfig(tracing_disabled=True)
        streamed = Runner.run_streamed(agent, "Weather?", run_config=config)
        async for _ in streamed.stream_events():
            pass
        return streamed

    streamed = asyncio.run(main())
    assert all(call.streamed for call in model.calls)
    _assert_loop_stopped(streamed, model, ran, gate)


def test_guarded_agents_of_a_handoff_share_the_run() -> None:
    """A call that ran before a handoff is refused when the agent handed to asks it again."""
    require("agents")
    from agents import Agent, RunConfig, Runner
    from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call

    from otel_stall.integrations.openai_agents import guard

    gate = ToolGate(policy=StallPolicy())
    ran: list[str] = []
    weather = _weather_tool(ran)
    script = iter(
        [
            [function_call("weather", {"city": "Paris"}, call_id="call-1")],
            [function_call("transfer_to_forecaster", {}, call_id="call-2")],
            [function_call("weather", {"city": "Paris"}, call_id="call-3")],
            [assistant_message(ANSWER)],
        ]
    )
    model = ScriptedModel([ModelStep.respond(lambda call: next(script)) for _ in range(4)])
    forecaster = Agent(name="forecaster", instructions="Forecast.", tools=[weather], model=model)
    guarded = guard(forecaster, gate=gate)
    researcher = Agent(
        name="researcher", instructions="Answer.", tools=[weather], model=model, handoffs=[guarded]
    )
    config = RunConfig(tracing_disabled=True)
    result = Runner.run_sync(guard(researcher, gate=gate), "Weather?", run_config=config)
    assert ran == ["Paris"]
    assert result.last_agent.name == "forecaster"
    assert _outputs(model.calls[-1])[-1].startswith("Refused: `weather` already ran")
    assert result.final_output == ANSWER
