# mypy: ignore-errors
"""Semantic Kernel: a ``ChatCompletionAgent`` on ``OpenAIChatCompletion``, its own telemetry.

Semantic Kernel writes its spans itself on the global provider: one
``execute_tool <plugin>-<function>`` span per kernel function call, always, and
model spans when ``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS``
(or its ``_SENSITIVE`` form, which adds the messages) is true. Auto function
calling runs the tool loop; its attempts are raised above the scripts' length
(``maximum_auto_invoke_attempts``). A failing function's exception goes back to
the model as the function's result.
"""

from __future__ import annotations

import asyncio

import fw_harness as h


async def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "semantic-kernel"):
        from openai import AsyncOpenAI
        from semantic_kernel.agents import ChatCompletionAgent
        from semantic_kernel.connectors.ai import FunctionChoiceBehavior
        from semantic_kernel.connectors.ai.open_ai import (
            OpenAIChatCompletion,
            OpenAIChatPromptExecutionSettings,
        )
        from semantic_kernel.functions import KernelArguments, kernel_function

        class Tools:
            @kernel_function(description="Search the web: the same query, the same answer.")
            def search(self, query: str) -> str:
                return h.search(query)

            @kernel_function(description="Fetch one page of a listing: each page is new.")
            def fetch_page(self, page: int) -> str:
                return h.fetch_page(page)

            @kernel_function(description="Look a key up in a backend that is down.")
            def lookup(self, key: str) -> str:
                return h.lookup(key)

            @kernel_function(description="Find documents about a query.")
            def find_docs(self, query: str) -> str:
                return h.find_docs(query)

        client = AsyncOpenAI(api_key=h.API_KEY, base_url=args.base_url)
        service = OpenAIChatCompletion(ai_model_id=h.MODEL, async_client=client)
        behavior = FunctionChoiceBehavior.Auto()
        behavior.maximum_auto_invoke_attempts = 20
        settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=behavior)
        agent = ChatCompletionAgent(
            service=service,
            name="main",
            instructions=h.instructions("main"),
            plugins=[Tools()],
            arguments=KernelArguments(settings=settings),
        )
        await agent.get_response(messages=h.prompt(args.scenario))


if __name__ == "__main__":
    asyncio.run(main())
