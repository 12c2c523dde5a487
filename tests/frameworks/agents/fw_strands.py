# mypy: ignore-errors
"""Strands Agents on its OpenAI model provider, traced by Strands' built-in OpenTelemetry.

Strands' tracer uses the global provider that the harness sets. The layout is
switched with ``OTEL_SEMCONV_STABILITY_OPT_IN`` (unset: the default layout;
``gen_ai_latest_experimental``: the current GenAI conventions). A failing tool
raises; Strands turns that into an error tool result. The sub-agent is a
second Agent called from the ``research`` tool.
"""

from __future__ import annotations

import fw_harness as h
from strands import Agent, tool
from strands.models.openai import OpenAIModel


def build(args: h.Args, name: str, tools: list) -> Agent:
    model = OpenAIModel(
        client_args={"api_key": h.API_KEY, "base_url": args.base_url}, model_id=h.MODEL
    )
    return Agent(
        model=model,
        name=name,
        system_prompt=h.instructions(name),
        tools=tools,
        callback_handler=None,
    )


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "strands"):
        researcher = build(args, "researcher", [tool(h.fetch_page)])

        @tool
        def research(topic: str) -> str:
            """Ask the researcher agent about a topic.

            Args:
                topic: what to research.
            """
            return str(researcher(f"Research {topic}."))

        agent = build(args, "main", [tool(h.search), tool(h.fetch_page), tool(h.lookup), research])
        agent(h.prompt(args.scenario))


if __name__ == "__main__":
    main()
