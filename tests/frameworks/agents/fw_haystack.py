# mypy: ignore-errors
"""Haystack: an ``Agent`` on ``OpenAIChatGenerator``, traced by Haystack's own tracer.

Haystack writes its spans itself, through whichever tracer is enabled; here it
is the OpenTelemetry one (``opentelemetry-haystack``'s ``OpenTelemetryTracer``
on the harness's provider). The agent's spans: ``haystack.agent.run`` >
``haystack.agent.step`` > ``haystack.agent.step.llm`` and one
``haystack.agent.step.tool`` per call. Content (``haystack.*.input`` /
``output``) only with ``HAYSTACK_CONTENT_TRACING_ENABLED=true``, read when
haystack is imported: the generator sets it in the environment. A failing
tool's error goes back to the model (``raise_on_tool_invocation_failure=False``).
"""

from __future__ import annotations

import fw_harness as h


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "haystack") as provider:
        from haystack import tracing
        from haystack.components.agents import Agent
        from haystack.components.generators.chat import OpenAIChatGenerator
        from haystack.dataclasses import ChatMessage
        from haystack.tools import create_tool_from_function
        from haystack.utils import Secret
        from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

        tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))
        generator = OpenAIChatGenerator(
            model=h.MODEL, api_key=Secret.from_token(h.API_KEY), api_base_url=args.base_url
        )
        tools = [
            create_tool_from_function(f) for f in (h.search, h.fetch_page, h.lookup, h.find_docs)
        ]
        agent = Agent(
            chat_generator=generator,
            tools=tools,
            system_prompt=h.instructions("main"),
            max_agent_steps=20,
            raise_on_tool_invocation_failure=False,
        )
        agent.warm_up()
        agent.run(messages=[ChatMessage.from_user(h.prompt(args.scenario))])


if __name__ == "__main__":
    main()
