"""The scripts in examples/ run as the README says and do what their docstrings promise."""

from __future__ import annotations

from pathlib import Path

import pytest
from user_process import run_python

EXAMPLES = Path(__file__).parent.parent / "examples"


def run_example(name: str) -> str:
    """Run one example as a user would, in a clean environment; its standard output."""
    done = run_python([str(EXAMPLES / name)])
    assert done.stderr == ""
    return done.stdout


def test_guarded_agent_refuses_the_repeat_and_stops_at_break() -> None:
    """The live gate refuses the second identical fetch, and the loop stops with a break verdict."""
    lines = run_example("guarded_agent.py").splitlines()
    assert lines[0] == "turn 1: ran fetch"
    assert lines[1].startswith("turn 2: refused -> ")
    assert not any("ran fetch" in line for line in lines[1:])
    assert any(line.startswith("stopping: ") for line in lines)
    assert lines[-1].startswith("verdict: break ")


def test_replay_file_reports_the_bundled_loop() -> None:
    """Replaying the bundled loop.jsonl in code reports its run as a break with findings."""
    (line,) = run_example("replay_file.py").splitlines()
    verdict, score, kinds = line.split(" ", 2)
    assert verdict == "break"
    assert float(score) > 0.5
    assert "'repeat'" in kinds


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_has_a_test_here(name: str) -> None:
    """A new example gets a test of its own in this module, so none can rot unrun."""
    assert f'"{name}"' in Path(__file__).read_text()
