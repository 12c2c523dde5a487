"""Forked children (prefork servers, multiprocessing's fork) start clean and never hang."""

from __future__ import annotations

import io
import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from stall_pipeline import STYLES, Agent, Call, Pipeline, make_pipeline, stall

from otel_stall import StallSpanProcessor
from otel_stall.live.capture import OtlpJsonLinesSpanExporter
from otel_stall.semconv import StallAttributes as S

GENAI = STYLES[0]
CHILD_SECONDS = 20
"""The child's own deadline: past it, a watchdog thread ends it and the test fails instead of
hanging. A thread, not SIGALRM: pytest-timeout owns that signal, and a signal handler needs the
very thread that is stuck."""

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Fork; run ``work`` in the child and return what it returned (as JSON) to the parent."""
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns when a process with threads forks: that is the case under test.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            os.close(read_end)
            watchdog = threading.Timer(CHILD_SECONDS, os._exit, (3,))
            watchdog.daemon = True
            watchdog.start()
            with os.fdopen(write_end, "w") as out:
                json.dump(work(), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as got:
        text = got.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"child ended with {status}"
    assert os.WEXITSTATUS(status) == 0, f"child ended with {status}"
    result: dict[str, Any] = json.loads(text)
    return result


def looping_run(pipe: Pipeline, name: str) -> dict[str, Any]:
    """Run one agent that repeats a call until it breaks; what its run span says."""
    agent = Agent(pipe.tracer, GENAI, name)
    with agent.run():
        for _ in range(5):
            agent.round(Call("search", {"q": "same"}, {"hits": [1]}))
    return stall(pipe.one(f"invoke_agent {name}"))


def test_child_starts_without_the_parents_runs() -> None:
    """A child forked mid-run has no runs or spans of its parent and detects its own runs."""
    pipe = make_pipeline()
    agent = Agent(pipe.tracer, GENAI, "parent")
    with agent.run():
        agent.round(Call("search", {"q": 1}, {"r": 1}))
        before = pipe.processor.stats()

        def child() -> dict[str, Any]:
            stats = pipe.processor.stats()
            verdict = looping_run(pipe, "child")
            after = pipe.processor.stats()
            return {
                "active": stats.active_runs,
                "tracked": stats.tracked_spans,
                "verdict": verdict[S.VERDICT],
                "finished": after.finished_runs,
                "active_after": after.active_runs,
            }

        got = in_child(child)
        agent.round(Call("search", {"q": 2}, {"r": 2}))
    assert before.active_runs == 1
    assert before.tracked_spans > 0
    assert got == {
        "active": 0,
        "tracked": 0,
        "verdict": "break",
        "finished": 1,
        "active_after": 0,
    }
    # The parent's own run went on untouched by the child.
    assert stall(pipe.one("invoke_agent parent"))[S.TOOL_CALLS] == 2


def test_child_does_not_hang_on_a_lock_held_at_fork() -> None:
    """A lock held by another thread when the process forks does not block the child's spans."""
    inside, release = threading.Event(), threading.Event()
    holding = False

    def clock() -> float:
        # Called with the run table's lock held (TTL eviction): block there when asked.
        if holding:
            inside.set()
            release.wait(CHILD_SECONDS)
        return 0.0

    pipe = make_pipeline(clock=clock)
    holding = True
    holder = threading.Thread(target=pipe.processor.evict_expired)
    holder.start()
    try:
        assert inside.wait(CHILD_SECONDS)

        def child() -> dict[str, Any]:
            nonlocal holding
            holding = False
            return {"verdict": looping_run(pipe, "child")[S.VERDICT]}

        got = in_child(child)
    finally:
        holding = False
        release.set()
        holder.join()
    assert got == {"verdict": "break"}


# -- the README's wiring: StallSpanProcessor(SimpleSpanProcessor(OtlpJsonLinesSpanExporter)) --

CHILDREN = 8


def _readme_provider(target: Any) -> TracerProvider:
    """The README's quickstart wiring, writing to ``target``."""
    provider = TracerProvider()
    exporter = OtlpJsonLinesSpanExporter(target)
    provider.add_span_processor(StallSpanProcessor(SimpleSpanProcessor(exporter)))
    return provider


def _fork_child(provider: TracerProvider, name: str) -> int:
    """Fork a child that runs one looping agent through ``provider`` and exits 0; its pid."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            watchdog = threading.Timer(CHILD_SECONDS, os._exit, (3,))
            watchdog.daemon = True
            watchdog.start()
            agent = Agent(provider.get_tracer("child"), GENAI, name)
            with agent.run():
                for _ in range(3):
                    agent.round(Call("search", {"q": "same"}, {"hits": [1]}))
            code = 0
        finally:
            os._exit(code)
    return pid


def _finished(pids: list[int]) -> int:
    """How many children exited 0 (each has its own watchdog, so this returns)."""
    done = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        done += os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return done


def test_readme_wiring_forks_while_a_thread_exports(tmp_path: Path) -> None:
    """Eight children forked while another thread exports all finish, and their spans land whole.

    The attack of issue 27: gunicorn --preload or celery fork with the exporter's lock held by
    a thread that is writing; the child's first span waited on it for ever (0 of 8 finished).
    """
    path = tmp_path / "spans.jsonl"
    provider = _readme_provider(str(path))
    stop = threading.Event()
    big = {"text": "x" * 200_000}  # a long write under the lock, so the forks land inside it

    def exporting() -> None:
        agent = Agent(provider.get_tracer("parent"), GENAI, "parent")
        with agent.run():
            while not stop.is_set():
                agent.round(Call("fetch", {"url": "u"}, big))

    thread = threading.Thread(target=exporting)
    thread.start()
    pids = []
    try:
        for n in range(CHILDREN):
            time.sleep(0.005 * (n % 3))
            pids.append(_fork_child(provider, f"child-{n}"))
    finally:
        finished = _finished(pids)
        stop.set()
        thread.join()
        provider.shutdown()
    assert finished == CHILDREN
    lines = path.read_bytes().splitlines()
    names = {
        span["name"]
        for line in lines
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
    }
    assert {f"invoke_agent child-{n}" for n in range(CHILDREN)} <= names


class _Gate(io.RawIOBase):
    """A stream whose writes block in the parent, until released: the exporter's lock is held."""

    def __init__(self) -> None:
        self.parent = os.getpid()
        self.inside, self.release = threading.Event(), threading.Event()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if os.getpid() == self.parent:
            self.inside.set()
            self.release.wait(CHILD_SECONDS)
        return len(data)


def test_child_does_not_hang_on_the_exporters_lock_held_at_fork() -> None:
    """A fork while another thread is inside the exporter's write: the child still exports."""
    gate = _Gate()
    provider = _readme_provider(gate)
    tracer = provider.get_tracer("parent")

    def exporting() -> None:
        with tracer.start_as_current_span("blocked"):
            pass

    thread = threading.Thread(target=exporting)
    thread.start()
    try:
        assert gate.inside.wait(CHILD_SECONDS)
        finished = _finished([_fork_child(provider, "child")])
    finally:
        gate.release.set()
        thread.join()
        provider.shutdown()
    assert finished == 1
