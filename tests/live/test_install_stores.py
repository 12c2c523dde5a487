"""install() on the providers that Phoenix, Logfire and Langfuse set up (the phoenix extra).

Each library sets tracing up its own way: Phoenix's ``register()`` gives a
provider that drops its own processor when another is added, Logfire's
``configure()`` puts an SDK provider behind a proxy, and Langfuse's client adds
its batch processor to the provider. install() must wrap what each left, so the
spans still arrive, enriched, once each. Phoenix runs for real on loopback and
its filter ``stall.verdict == 'break'`` must find the looping run.
"""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from phoenix_server import phoenix, require_phoenix
from test_install_wraps import loop

from otel_stall import install

pytestmark = [pytest.mark.phoenix]


def _require(module: str) -> None:
    require_phoenix()
    if importlib.util.find_spec(module) is None:
        message = f"{module} is not installed (the phoenix extra)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def _spans_of_trace(server: Any, project: str, trace_id: str, count: int) -> list[dict[str, Any]]:
    stop = time.monotonic() + 60
    spans: list[dict[str, Any]] = []
    while time.monotonic() < stop:
        spans = [
            s for s in server.wait_for_spans(1, project) if s["context"]["trace_id"] == trace_id
        ]
        if len(spans) >= count:
            return spans
        time.sleep(0.25)
    raise AssertionError(f"{len(spans)} spans of trace {trace_id} in Phoenix, not {count}")


@pytest.mark.e2e
def test_phoenix_register_then_install_sends_the_enriched_run_to_phoenix() -> None:
    """register() then install(): the loop reaches Phoenix with stall.*, and its filter finds it."""
    server = phoenix()
    from phoenix.otel import register

    provider = register(
        endpoint=server.traces_endpoint,
        project_name="stall-e2e",
        set_global_tracer_provider=False,
        verbose=False,
    )
    install(provider, environ={})
    loop(provider)
    provider.force_flush()
    tracer_spans = 1 + 8 * 2  # the run, and each round's model and tool span
    run_spans = [
        s for s in server.wait_for_spans(tracer_spans, "stall-e2e") if s["parent_id"] is None
    ]
    (run,) = run_spans
    spans = _spans_of_trace(server, "stall-e2e", run["context"]["trace_id"], tracer_spans)
    assert len(spans) == tracer_spans  # each span once
    assert run["attributes"]["stall.verdict"] == "break"
    tools = [s for s in spans if s["name"] == "execute_tool search"]
    assert len(tools) == 8
    assert all("stall.signature" in s["attributes"] for s in tools)
    assert any(e["name"] == "stall.detected" for s in spans for e in s["events"])

    project = next(p for p in server.get("/v1/projects")["data"] if p["name"] == "stall-e2e")
    found = server.graphql(
        """query ($id: ID!, $filter: String!) {
          node(id: $id) { ... on Project {
            spans(first: 10, filterCondition: $filter) { edges { node { name spanId } } }
          } }
        }""",
        {"id": project["id"], "filter": "stall.verdict == 'break'"},
    )
    matched = [e["node"] for e in found["node"]["spans"]["edges"]]
    assert [m["spanId"] for m in matched] == [run["context"]["span_id"]]


def test_logfire_configure_then_install_wraps_its_processors() -> None:
    """Logfire's global provider is a proxy: install() finds the SDK provider and wraps it all."""
    _require("logfire")
    import logfire

    exporter = InMemorySpanExporter()
    logfire.configure(
        send_to_logfire=False,
        console=False,
        additional_span_processors=[SimpleSpanProcessor(exporter)],
    )
    from opentelemetry import trace

    stall = install(environ={})
    inner = trace.get_tracer_provider().provider  # type: ignore[attr-defined]
    assert inner._active_span_processor._span_processors == (stall,)
    loop(inner)
    spans = exporter.get_finished_spans()
    run = next(s for s in spans if s.name.startswith("invoke_agent"))
    assert run.attributes["stall.verdict"] == "break"  # type: ignore[index]
    assert len({s.context.span_id for s in spans}) == len(spans) == 1 + 8 * 2


def test_langfuse_client_then_install_wraps_its_processor() -> None:
    """Langfuse's client adds its batch processor to the provider: install() wraps it."""
    _require("langfuse")
    from langfuse import Langfuse

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    client = Langfuse(
        public_key="pk-lf-test",
        secret_key="sk-lf-test",
        base_url="http://127.0.0.1:9",
        tracer_provider=provider,
        span_exporter=exporter,
    )
    try:
        stall = install(provider, environ={})
        assert type(stall.downstream[0]).__name__ == "LangfuseSpanProcessor"
        loop(provider)
        provider.force_flush()
        spans = exporter.get_finished_spans()
        run = next(s for s in spans if s.name.startswith("invoke_agent"))
        assert run.attributes["stall.verdict"] == "break"  # type: ignore[index]
        assert len({s.context.span_id for s in spans}) == len(spans)
    finally:
        client.shutdown()
