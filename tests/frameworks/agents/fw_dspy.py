# mypy: ignore-errors
"""DSPy: a ``dspy.ReAct`` agent, traced by OpenInference (``openinference-instrumentation-dspy``).

ReAct's model writes fields as text (``next_thought``, ``next_tool_name``,
``next_tool_args``), not native tool calls, so the scripted model is a
``dspy.LM`` whose ``forward`` asks the stub for its next turn
(``/v1/script/next``) and writes it in the ChatAdapter's field format; the
LM's ``__call__``, which OpenInference wraps, runs unchanged. A closing text
becomes ReAct's own ``finish`` tool, which ReAct calls to end the loop (the
call otel-stall must not count); the answer is then extracted by a second
predictor. A failing tool's exception becomes the step's observation.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import dspy
import fw_harness as h
from openinference.instrumentation.dspy import DSPyInstrumentor


def _fields(**fields: str) -> str:
    text = "".join(f"[[ ## {name} ## ]]\n{value}\n\n" for name, value in fields.items())
    return text + "[[ ## completed ## ]]"


class ScriptedLM(dspy.LM):
    """ReAct's turns from the stub's script; the extraction step gets a fixed answer."""

    def __init__(self, base_url: str) -> None:
        super().__init__("openai/gpt-4o", cache=False)
        self.base_url = base_url

    def forward(self, prompt=None, messages=None, **kwargs):
        system = str((messages or [{}])[0].get("content", ""))  # a failure's text may quote ReAct
        if "next_tool_name" in system:
            turn = h.next_turn(self.base_url, "main")["turn"]
            calls = turn.get("tool_calls") or [{"name": "finish", "arguments": {}}]
            call = calls[0]
            text = _fields(
                next_thought="Next step.",
                next_tool_name=call["name"],
                next_tool_args=json.dumps(call["arguments"]),
            )
        else:
            text = _fields(reasoning="From the trajectory.", answer="Done.")
        message = SimpleNamespace(content=text, tool_calls=None)
        return SimpleNamespace(
            choices=[SimpleNamespace(message=message, finish_reason="stop", index=0)],
            usage={"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
            model="gpt-4o",
        )


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "dspy") as provider:
        DSPyInstrumentor().instrument(tracer_provider=provider)
        dspy.configure(lm=ScriptedLM(args.base_url), adapter=dspy.ChatAdapter())
        agent = dspy.ReAct(
            "question -> answer",
            tools=[h.search, h.fetch_page, h.lookup, h.find_docs],
            max_iters=20,
        )
        agent(question=h.prompt(args.scenario))


if __name__ == "__main__":
    main()
