"""Every peer scenario gets the verdict issue #19 expects of it (``expect`` in the manifest).

One parametrised case per run of every fixture in ``tests/peers``: the case id
names the fixture (and the run), the manifest entry gives the peer's judgement
and a link to the peer's test. ``warn_or_above`` means the replay's verdict is
``warn``, ``escalate`` or ``break``; ``ok`` means ``ok``. Where #19's rules
knowingly differ from the peer, the manifest's ``conflict`` says why, and the
case asserts #19's ``expect``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from otel_stall import replay
from otel_stall.offline.report import run_json

PEERS = Path(__file__).parent.parent / "peers"


def _cases() -> list[Any]:
    toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    manifest = toml.loads((PEERS / "manifest.toml").read_text("utf-8"))
    cases = []
    for scenario in manifest["scenario"]:
        runs = scenario.get("runs") or [{"run_span_id": None, "expect": scenario["expect"]}]
        for run in runs:
            case_id = scenario["id"]
            if run["run_span_id"] is not None:
                case_id += f"[{run.get('agent')}:{run['run_span_id']}]"
            cases.append(pytest.param(scenario, run["run_span_id"], run["expect"], id=case_id))
    return cases


def _verdict(path: Path, run_span_id: str | None) -> str:
    result = replay(str(path))
    assert result.errors == []
    runs = [run_json(r) for r in result.reports]
    if run_span_id is None:
        assert len(runs) == 1
        return str(runs[0]["verdict"])
    (run,) = [r for r in runs if r["run_span_id"] == run_span_id]
    return str(run["verdict"])


@pytest.mark.parametrize(("scenario", "run_span_id", "expect"), _cases())
def test_peer_scenario_gets_the_expected_verdict(
    scenario: dict[str, Any], run_span_id: str | None, expect: str
) -> None:
    """A run its peer calls stuck warns or worse; one it calls not stuck stays ok (per expect)."""
    verdict = _verdict(PEERS / scenario["file"], run_span_id)
    wanted = {"ok"} if expect == "ok" else {"warn", "escalate", "break"}
    assert verdict in wanted, (
        f"{scenario['id']}: {verdict}, expected {expect} "
        f"(peer: {scenario['judgement']}, {scenario['source']} {scenario['test']})"
    )
