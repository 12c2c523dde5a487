# mypy: ignore-errors
"""OpenLLMetry (Traceloop SDK): a hand-written tool loop on the OpenAI client, with its decorators.

``Traceloop.init(exporter=...)`` takes the project's capture exporter (so
nothing is sent to Traceloop's backend; ``TRACELOOP_TELEMETRY=false``). The
loop is an ``@agent``, each tool a ``@tool``, and OpenLLMetry's OpenAI
instrumentation records the model calls. A failing tool's exception is
recorded by ``@tool`` and its message sent back to the model. Content off:
``TRACELOOP_TRACE_CONTENT=false``.
"""

from __future__ import annotations

import json
import os

import fw_harness as h
from openai import OpenAI
from traceloop.sdk import Traceloop
from traceloop.sdk.decorators import agent, tool

from otel_stall.live.capture import OtlpJsonLinesSpanExporter

SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": fn.__doc__,
            "parameters": {
                "type": "object",
                "properties": {arg: {"type": kind}},
                "required": [arg],
            },
        },
    }
    for name, fn, arg, kind in (
        ("search", h.search, "query", "string"),
        ("fetch_page", h.fetch_page, "page", "integer"),
        ("lookup", h.lookup, "key", "string"),
        ("research", None, "topic", "string"),
    )
    if fn is not None or name == "research"
]


def run_agent(client: OpenAI, name: str, prompt: str, tools: dict) -> str:
    messages = [
        {"role": "system", "content": h.instructions(name)},
        {"role": "user", "content": prompt},
    ]
    schemas = [s for s in SCHEMAS if s["function"]["name"] in tools]
    while True:
        reply = client.chat.completions.create(model=h.MODEL, messages=messages, tools=schemas)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content or ""
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                result = tools[call.function.name](**json.loads(call.function.arguments))
            except RuntimeError as exc:
                result = f"Error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def main() -> None:
    args = h.parse_args()
    if os.path.exists(args.out):
        os.remove(args.out)
    Traceloop.init(
        app_name="traceloop",
        exporter=OtlpJsonLinesSpanExporter(args.out),
        disable_batch=True,
        telemetry_enabled=False,
    )
    client = OpenAI(base_url=args.base_url, api_key=h.API_KEY)

    @agent(name="researcher")
    def researcher(topic: str) -> str:
        return run_agent(client, "researcher", f"Research {topic}.", {"fetch_page": fetch_page})

    search = tool(name="search")(h.search)
    fetch_page = tool(name="fetch_page")(h.fetch_page)
    lookup = tool(name="lookup")(h.lookup)
    research = tool(name="research")(researcher)

    @agent(name="main")
    def main_agent() -> str:
        tools = {"search": search, "fetch_page": fetch_page, "lookup": lookup, "research": research}
        return run_agent(client, "main", h.prompt(args.scenario), tools)

    main_agent()
    Traceloop.get_default_span_processor().force_flush()


if __name__ == "__main__":
    main()
