# mypy: ignore-errors
"""Google GenAI SDK: automatic function calling, traced by the OTel contrib instrumentation.

The client (``google-genai``) is pointed at the stub's Gemini API with
``GOOGLE_GEMINI_BASE_URL``. Plain Python functions passed as tools turn on the
SDK's automatic function calling: one ``generate_content`` call runs the whole
tool loop (the model asks, the SDK runs the function, sends the result back,
and again), so every tool call and every model round trip of the run happen
inside the one ``generate_content`` span that the instrumentation writes
(``opentelemetry-instrumentation-google-genai``). A failing tool's exception is
handed back to the model as the function's error response by the SDK.
"""

from __future__ import annotations

import os

import fw_harness as h
from google import genai
from google.genai import types
from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

MODEL = "gemini-2.5-flash"


def main() -> None:
    args = h.parse_args()
    with h.capture(args.out, "google-genai") as provider:
        GoogleGenAiSdkInstrumentor().instrument(tracer_provider=provider)
        client = genai.Client(
            api_key=os.environ.get("GOOGLE_API_KEY", "offline-stub"),
            http_options=types.HttpOptions(base_url=os.environ["GOOGLE_GEMINI_BASE_URL"]),
        )
        config = types.GenerateContentConfig(
            system_instruction=h.instructions("main"),
            tools=[h.search, h.fetch_page, h.lookup, h.find_docs],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(
                maximum_remote_calls=20
            ),
        )
        client.models.generate_content(model=MODEL, contents=h.prompt(args.scenario), config=config)


if __name__ == "__main__":
    main()
