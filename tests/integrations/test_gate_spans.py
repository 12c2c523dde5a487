"""The gate's refusal on the processor's run: which span says the call was refused (no framework).

A framework that asks from inside its own span of the call (ADK) gets that span
marked, so the processor records the call once, as refused, not again as a call
that returned the refusal. A span of another call is left as it is.
"""

from __future__ import annotations

import pytest
from stall_pipeline import STYLES, Agent, Call, make_pipeline, stall

from otel_stall.integrations.gate import ToolGate
from otel_stall.semconv import StallAttributes

pytestmark = pytest.mark.integrations

GENAI = STYLES[0]
ARGS = {"query": "x"}
SEARCH = Call("search", ARGS, {"hits": [1]})


def test_a_refusal_inside_the_calls_own_span_marks_that_span() -> None:
    """Asked from within ``execute_tool search``, that span is refused: no second span."""
    pipe = make_pipeline()
    gate = ToolGate(pipe.processor)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        agent.model()
        name, attrs = GENAI.tool("search", ARGS, {"error": "refused"})
        with pipe.tracer.start_as_current_span(name, attributes=attrs):
            assert gate.before_tool("search", ARGS).refused
    tools = pipe.named("execute_tool search")
    assert len(tools) == 2
    assert StallAttributes.REFUSED not in stall(tools[0])
    assert stall(tools[1])[StallAttributes.REFUSED] is True
    assert stall(tools[1])[StallAttributes.ACTION] == "refuse"


def test_a_span_of_another_tool_is_left_alone() -> None:
    """Inside another tool's span (a tool that calls tools), that span is not marked refused."""
    pipe = make_pipeline()
    gate = ToolGate(pipe.processor)
    agent = Agent(pipe.tracer, GENAI)
    with agent.run():
        agent.round(SEARCH)
        name, attrs = GENAI.tool("research", {"topic": "x"}, "done")
        with pipe.tracer.start_as_current_span(name, attributes=attrs):
            assert gate.before_tool("search", ARGS).refused
    assert StallAttributes.REFUSED not in stall(pipe.one("execute_tool research"))
    assert pipe.one("execute_tool research").status.is_ok
