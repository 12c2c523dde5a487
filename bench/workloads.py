"""The processor benchmarks' workloads and pipelines, shared by the clock and the instruction count.

Four workloads, each a function ``(tracer, units) -> spans`` that traces
``units`` traces or agent runs and returns how many spans it ended:

- ``non_tool``: an HTTP request as an instrumented web app traces it, a server
  root span with eight database queries and one outgoing HTTP call under it,
  with the attributes the HTTP and database semantic conventions put there;
- ``tool``: an agent run, one ``invoke_agent`` span over 50 ``execute_tool``
  spans, each with about 1.4 KB of JSON arguments and result, every call's
  text different from every other call's in the process (no cache hits);
- ``chat``: an agent run of model calls only, ``chat`` spans with the usage
  and finish-reason attributes and no captured content (the default of most
  instrumentations);
- ``looping``: an agent stuck in a loop, as one looks: each round a ``chat``
  span, then the same tool call with the same arguments and result again.

Three pipelines: A, the users' wiring without otel-stall; the *floor*, the same
with :class:`FloorProcessor` in otel-stall's place, the least any stall detector
must do per span; B, with ``StallSpanProcessor``. Only the public API is used
(``StallSpanProcessor`` from the package root), so the benchmarks run unchanged
against an older checkout: run them with that checkout's interpreter.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import orjson
import xxhash
from budgets import BUDGETS
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Tracer

from otel_stall import StallSpanProcessor

ROOT = Path(__file__).resolve().parent.parent
"""The checkout these benchmarks belong to (its ``tests/otlp_sink.py`` is the receiver)."""

Work = Callable[[Tracer, int], int]

# -- non-tool spans --------------------------------------------------------------

_QUERIES = (
    ("SELECT", "customers", "SELECT id, name, tier FROM customers WHERE id = $1"),
    ("SELECT", "orders", "SELECT id, status, total FROM orders WHERE customer_id = $1 LIMIT 50"),
    ("SELECT", "order_items", "SELECT sku, qty, price FROM order_items WHERE order_id = ANY($1)"),
    ("SELECT", "products", "SELECT sku, title, stock FROM products WHERE sku = ANY($1)"),
    (
        "SELECT",
        "shipments",
        "SELECT order_id, carrier, eta FROM shipments WHERE order_id = ANY($1)",
    ),
    ("SELECT", "invoices", "SELECT order_id, paid_at FROM invoices WHERE order_id = ANY($1)"),
    ("SELECT", "returns", "SELECT order_id, reason FROM returns WHERE order_id = ANY($1)"),
    ("UPDATE", "customers", "UPDATE customers SET last_seen = now() WHERE id = $1"),
)


def non_tool(tracer: Tracer, traces: int) -> int:
    """``traces`` HTTP requests: a server span, eight queries and one outgoing call each."""
    for i in range(traces):
        with tracer.start_as_current_span(
            "GET /customers/{id}/orders",
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": "GET",
                "http.route": "/customers/{id}/orders",
                "url.scheme": "https",
                "url.path": f"/customers/{1000 + i}/orders",
                "server.address": "shop.example.com",
                "server.port": 443,
                "network.protocol.version": "1.1",
                "client.address": "10.1.2.3",
                "user_agent.original": "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
            },
        ) as root:
            for operation, table, text in _QUERIES:
                with tracer.start_as_current_span(
                    f"{operation} shop.{table}",
                    kind=SpanKind.CLIENT,
                    attributes={
                        "db.system.name": "postgresql",
                        "db.namespace": "shop",
                        "db.operation.name": operation,
                        "db.collection.name": table,
                        "db.query.text": text,
                        "server.address": "db.internal",
                        "server.port": 5432,
                    },
                ):
                    pass
            with tracer.start_as_current_span(
                "GET",
                kind=SpanKind.CLIENT,
                attributes={
                    "http.request.method": "GET",
                    "url.full": f"https://rates.example.com/v1/fx?base=EUR&n={i}",
                    "server.address": "rates.example.com",
                    "server.port": 443,
                },
            ) as call:
                call.set_attribute("http.response.status_code", 200)
            root.set_attribute("http.response.status_code", 200)
    return traces * (len(_QUERIES) + 2)


# -- tool spans ------------------------------------------------------------------

ARGUMENTS = json.dumps(
    {
        "query": "quarterly revenue by region for the EMEA sales organisation, all product lines",
        "filters": {"region": ["emea", "uk", "dach", "nordics"], "year": 2024, "quarter": [1, 2]},
        "limit": 25,
        "include": ["title", "url", "snippet", "score", "owner", "updated"],
        "sort": {"field": "score", "order": "desc"},
        "page": 0,
    }
)
RESULT = json.dumps(
    {
        "hits": [
            {
                "title": f"Regional revenue report {k}",
                "url": f"https://docs.example.com/reports/{k}",
                "snippet": "Revenue grew in the region, driven by enterprise renewals.",
                "score": 0.9 - k / 100,
            }
            for k in range(6)
        ],
        "total": 6,
    }
)
TOOLS_PER_RUN = 50
ROUNDS_PER_LOOP = 10
_calls = itertools.count()
"""Numbers every distinct call's payloads, so no two calls in a process are alike."""


def _vary(payload: str, key: str) -> str:
    """``payload`` with its top-level ``key`` set to a number no other call has."""
    return payload.replace(f'"{key}": ', f'"{key}": 1{next(_calls)}', 1)


def _agent_attributes(run: int) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "gen_ai.agent.id": f"agent-{run}",
    }


def _tool_span(tracer: Tracer, call_id: str, arguments: str, result: str) -> None:
    with tracer.start_as_current_span(
        "execute_tool search",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": arguments,
            "gen_ai.tool.call.result": result,
        },
    ):
        pass


def tool(tracer: Tracer, runs: int) -> int:
    """``runs`` agent runs of 50 distinct tool calls each."""
    for r in range(runs):
        with tracer.start_as_current_span(
            "invoke_agent researcher", attributes=_agent_attributes(r)
        ):
            for k in range(TOOLS_PER_RUN):
                args, result = _vary(ARGUMENTS, "page"), _vary(RESULT, "total")
                _tool_span(tracer, f"call_{r}_{k}", args, result)
    return runs * (TOOLS_PER_RUN + 1)


def _chat_span(tracer: Tracer) -> None:
    with tracer.start_as_current_span(
        "chat gpt-4o",
        kind=SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "server.address": "api.openai.com",
        },
    ) as chat:
        chat.set_attribute("gen_ai.response.model", "gpt-4o-2024-08-06")
        chat.set_attribute("gen_ai.usage.input_tokens", 1830)
        chat.set_attribute("gen_ai.usage.output_tokens", 64)
        chat.set_attribute("gen_ai.response.finish_reasons", ("tool_calls",))


CHATS_PER_RUN = 20


def chat(tracer: Tracer, runs: int) -> int:
    """``runs`` agent runs of 20 model calls each, no content captured."""
    for r in range(runs):
        with tracer.start_as_current_span(
            "invoke_agent researcher", attributes=_agent_attributes(r)
        ):
            for _ in range(CHATS_PER_RUN):
                _chat_span(tracer)
    return runs * (CHATS_PER_RUN + 1)


def looping(tracer: Tracer, runs: int) -> int:
    """``runs`` stuck agent runs: ten rounds of a model call and the same tool call."""
    for r in range(runs):
        with tracer.start_as_current_span(
            "invoke_agent researcher", attributes=_agent_attributes(r)
        ):
            for k in range(ROUNDS_PER_LOOP):
                _chat_span(tracer)
                _tool_span(tracer, f"call_{r}_{k}", ARGUMENTS, RESULT)
    return runs * (2 * ROUNDS_PER_LOOP + 1)


@dataclass(frozen=True)
class Workload:
    """One row of the benchmark: a workload, its size per repetition, and its budget."""

    name: str
    key: str
    """The row in ``budgets.BUDGETS``."""
    work: Work
    units: int
    """Traces or runs per repetition: about 500 spans, one batch of the batch processor."""
    tool_calls: int = 0
    """Tool calls per unit, to give the cost per tool call."""

    @property
    def budget(self) -> float:
        """Ceiling on the CPU-time ratio of the pipeline with otel-stall over the one without."""
        return BUDGETS[self.key].limit


WORKLOADS = (
    Workload("non-tool spans", "wiring.non_tool", non_tool, 50),
    Workload("chat spans, no content", "wiring.chat", chat, 24),
    Workload("tool spans, 1.4 KB payload", "wiring.tool", tool, 10, TOOLS_PER_RUN),
    Workload("a looping run", "wiring.looping", looping, 24, ROUNDS_PER_LOOP),
)
"""A repetition stays under the batch processor's 512-span batch: one flush, one request."""


def code_under_test() -> str:
    """The measured ``otel_stall``: its version, and its commit when it is a checkout.

    Not its folder: the page names no path of the measuring machine.
    """
    import otel_stall

    package = Path(otel_stall.__file__).resolve().parent
    commit = ""
    if (package.parent / ".git").exists():
        out = subprocess.run(
            ["git", "-C", str(package.parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        commit = f" at commit {out.stdout.strip()}" if out.returncode == 0 else ""
    return f"otel-stall {otel_stall.__version__}{commit}"


def payload_bytes() -> int:
    """Arguments plus result of one tool call, in bytes."""
    return len(ARGUMENTS) + len(RESULT)


# -- the floor -------------------------------------------------------------------


def _canonical(text: Any) -> bytes:
    """A payload's canonical bytes: JSON re-serialised with sorted keys, other text as it is."""
    if not isinstance(text, str):
        return repr(text).encode()
    try:
        return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONDecodeError:
        return text.encode()


class FloorProcessor(SpanProcessor):
    """The least a stall detector must do per span, in otel-stall's place: the budgets' floor.

    For each tool span it reads the arguments and the result, canonicalises and
    hashes them (orjson with sorted keys, xxhash), counts the call and its
    repeats in its run (the agent span's trace, forgotten when the agent span
    ends), and hands on a copy with 4 attributes set (the SDK's public
    ``ReadableSpan``: an ended span takes no more attributes). Every other span
    goes on after one dictionary lookup. No rules, no conventions, no events:
    what otel-stall costs above this is the price of what it does beyond it.
    """

    def __init__(self, downstream: SpanProcessor) -> None:
        self._downstream = downstream
        self._runs: dict[int, dict[int, int]] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Hand the start on."""
        self._downstream.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Sign and count a tool span, then hand it on; hand any other span on at once."""
        attributes = span.attributes or {}
        operation = attributes.get("gen_ai.operation.name")
        context = span.context
        if operation != "execute_tool" or context is None:
            if operation == "invoke_agent" and context is not None:
                with self._lock:
                    self._runs.pop(context.trace_id, None)
            self._downstream.on_end(span)
            return
        arguments = _canonical(attributes.get("gen_ai.tool.call.arguments", ""))
        result = _canonical(attributes.get("gen_ai.tool.call.result", ""))
        signature = xxhash.xxh3_64_intdigest(arguments + b"\0" + result)
        with self._lock:
            run = self._runs.setdefault(context.trace_id, {})
            seen = run[signature] = run.get(signature, 0) + 1
            seq = run[-1] = run.get(-1, 0) + 1
        extra: dict[str, str | int] = {
            "stall.signature": f"{signature:016x}",
            "stall.call.seq": seq,
            "stall.repeat.count": seen,
            "stall.verdict": "ok" if seen < 3 else "warn",
        }
        self._downstream.on_end(
            ReadableSpan(
                name=span.name,
                context=context,
                parent=span.parent,
                resource=span.resource,
                attributes={**attributes, **extra},
                events=span.events,
                links=span.links,
                kind=span.kind,
                status=span.status,
                start_time=span.start_time,
                end_time=span.end_time,
                instrumentation_scope=span.instrumentation_scope,
            )
        )

    def shutdown(self) -> None:
        """Shut the downstream processor down."""
        self._downstream.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the downstream processor."""
        return self._downstream.force_flush(timeout_millis)

    def open_runs(self) -> int:
        """Runs it holds state for (the memory benchmark's check)."""
        return len(self._runs)


# -- the pipelines ---------------------------------------------------------------

Side = Literal["without", "floor", "with"]
SIDES: tuple[Side, ...] = ("without", "floor", "with")
"""The three pipelines: without otel-stall, with the floor processor, with otel-stall."""


def pipeline(
    port: int, side: Side, export_timeout: float | None = None
) -> tuple[TracerProvider, SpanProcessor]:
    """One pipeline batching to an OTLP/gRPC receiver on ``port``, and its first processor.

    ``export_timeout`` (seconds) replaces the exporter's default of 10 where the
    process runs far slower than usual (under valgrind), so that no export times
    out and is retried: a retry would add instructions no user pays.
    """
    batch = BatchSpanProcessor(
        OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=export_timeout)
    )
    return provider_for(side, batch)


def provider_for(side: Side, downstream: SpanProcessor) -> tuple[TracerProvider, SpanProcessor]:
    """A provider whose one processor is ``downstream``, or the floor or otel-stall around it."""
    processor = downstream
    if side == "floor":
        processor = FloorProcessor(downstream)
    elif side == "with":
        processor = StallSpanProcessor(downstream)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    return provider, processor


# -- the receiver ----------------------------------------------------------------

_SINK = """
import sys
sys.path.insert(0, "tests")
from otlp_sink import OtlpSink
with OtlpSink(keep=False) as sink:
    print(sink.port, flush=True)
    for _ in sys.stdin:  # each line asks for the count so far
        print(sink.count, flush=True)
"""


class Receiver:
    """``tests/otlp_sink.py``'s OTLP/gRPC sink in a process of its own, so receiving is not counted.

    It runs on this checkout's interpreter (``.venv``) whatever interpreter runs
    the benchmark, so an older checkout is measured against the same receiver.
    """

    def __init__(self) -> None:
        own = ROOT / ".venv" / "bin" / "python"
        python = str(own) if own.exists() else sys.executable
        self._process = subprocess.Popen(
            [python, "-c", _SINK],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._stdin: IO[str] = self._process.stdin  # type: ignore[assignment]
        self._stdout: IO[str] = self._process.stdout  # type: ignore[assignment]
        self.port = int(self._stdout.readline())

    def count(self) -> int:
        """Spans received so far."""
        self._stdin.write("\n")
        self._stdin.flush()
        return int(self._stdout.readline())

    def close(self) -> None:
        """Stop the receiver's process."""
        self._stdin.close()
        self._process.wait(30)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
