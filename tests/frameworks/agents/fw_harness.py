"""What every framework's agent script shares: arguments, capture, tools and the script client.

Runs inside the framework's own virtualenv, with the worktree on ``PYTHONPATH``
so that the capture exporter is the project's own
(``otel_stall.live.capture.OtlpJsonLinesSpanExporter``). The tools are plain
functions that each script wraps in its framework's tool type, so every
framework sees the same names, arguments and results.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import urllib.request
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from otel_stall.live.capture import OtlpJsonLinesSpanExporter

MODEL = "gpt-4o"
API_KEY = "sk-offline-stub"


@dataclass(frozen=True)
class Args:
    """One scenario run: what to play, in which layout, and where the spans go."""

    scenario: str
    layout: str
    out: str
    base_url: str


def parse_args() -> Args:
    """``--scenario S --layout L --out FILE``; the stub's URL comes in ``OPENAI_BASE_URL``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--layout", default="default")
    parser.add_argument("--out", required=True)
    ns = parser.parse_args()
    base_url = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    return Args(ns.scenario, ns.layout, ns.out, base_url)


class SeededIds(IdGenerator):
    """Trace and span ids from a fixed seed, so a regenerated fixture differs only in times."""

    def __init__(self, seed: int = 18) -> None:
        self._random = random.Random(seed)

    def generate_span_id(self) -> int:
        """A non-zero 64-bit id."""
        return self._random.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        """A non-zero 128-bit id."""
        return self._random.getrandbits(128) or 1


@contextmanager
def capture(out: str, service: str) -> Iterator[TracerProvider]:
    """A global SDK provider writing OTLP/JSON lines to ``out``; flushed and shut on exit."""
    if os.path.exists(out):
        os.remove(out)
    provider = TracerProvider(
        resource=Resource.create({"service.name": service}),
        id_generator=SeededIds(zlib.crc32(service.encode())),  # one seed per process
    )
    provider.add_span_processor(BatchSpanProcessor(OtlpJsonLinesSpanExporter(out)))
    trace.set_tracer_provider(provider)
    try:
        yield provider
    finally:
        provider.force_flush()
        provider.shutdown()


def instructions(agent: str) -> str:
    """An agent's instructions, carrying the marker that the stub routes on."""
    return f"You are a careful research assistant. [agent:{agent}]"


def prompt(scenario: str) -> str:
    """The user's request: fixed per scenario."""
    return f"Please help with the '{scenario}' task."


def search(query: str) -> str:
    """Search the web: the same query always gives the same answer."""
    return f"No results found for {query!r}."


def fetch_page(page: int) -> str:
    """Fetch one page of a listing: each page is new."""
    first = page * 10
    return f"Page {page}: items {first}..{first + 9}"


def find_docs(query: str) -> str:
    """Find documents about a query: however it is worded, the same two come back."""
    return "Found 2 documents: doc-17 (Paris climate), doc-42 (France travel guide)."


def lookup(key: str) -> str:
    """Look a key up in a backend that is down: always fails."""
    raise RuntimeError(f"backend unavailable while looking up {key}")


def next_turn(base_url: str, agent: str) -> dict[str, Any]:
    """The stub's next turn for ``agent``, for frameworks driven by a custom model class."""
    url = base_url.rstrip("/").removesuffix("/v1") + "/v1/script/next"
    request = urllib.request.Request(
        url,
        data=json.dumps({"agent": agent}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer
