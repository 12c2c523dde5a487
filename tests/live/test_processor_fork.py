"""Forked children (prefork servers, multiprocessing's fork) start clean and never hang."""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from stall_pipeline import STYLES, Agent, Call, Pipeline, make_pipeline, stall

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
