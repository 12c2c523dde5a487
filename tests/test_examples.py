"""The scripts in examples/ run as the README says and do what their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import pytest
from user_process import run_python

from otel_stall.live.log_events import API_EMITS_EVENTS

EXAMPLES = Path(__file__).parent.parent / "examples"


def run_example(name: str) -> str:
    """Run one example as a user would, in a clean environment; its standard output."""
    done = run_python([str(EXAMPLES / name)])
    assert done.stderr == ""
    return done.stdout


def test_guarded_agent_refuses_the_repeat_and_stops_at_break() -> None:
    """The live gate refuses the second identical fetch, and the loop stops with a break verdict."""
    lines = run_example("guarded_agent.py").splitlines()
    assert lines[0] == 'turn 1: ran fetch {"url": "https://example.com/spans"}'
    assert lines[1].startswith('turn 2: refused fetch {"url": "https://example.com/spans"} -> ')
    assert lines[2].endswith(" again")  # the guidance is printed once
    assert not any("ran fetch" in line for line in lines[1:])
    assert any(line.startswith("stopping: ") for line in lines)
    assert lines[-1].startswith("verdict: break (stall score ")


def test_replay_file_reports_the_bundled_loop() -> None:
    """Replaying the bundled loop.jsonl in code reports its run as a break with findings."""
    (line,) = run_example("replay_file.py").splitlines()
    verdict, score, kinds = line.split(" ", 2)
    assert verdict == "break"
    assert float(score) > 0.5
    assert "'repeat'" in kinds


def test_log_events_shows_each_finding_as_a_span_event_and_a_log_record() -> None:
    """With logs/dup each finding is on the run span and is a log record in its context."""
    done = run_python([str(EXAMPLES / "log_events.py")])
    lines = done.stdout.splitlines()
    events = [line.split(": ", 1)[1] for line in lines if line.startswith("span event")]
    records = [line.split(": ", 1)[1] for line in lines if line.startswith("log record")]
    assert events
    if not API_EMITS_EVENTS:  # an old Logs API: span events only, and the error says why
        assert "needs opentelemetry-api 1.39 or later" in done.stderr
        assert records == []
        return
    assert done.stderr == ""
    assert [record.split(", ")[0] for record in records] == events
    assert all(record.endswith("run span: True") for record in records)


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_has_a_test_here(name: str) -> None:
    """A new example gets a test of its own in this module, so none can rot unrun."""
    assert f'"{name}"' in Path(__file__).read_text()
