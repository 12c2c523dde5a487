"""Chanting (issue #19, item 4): a chunk of text repeated close together in model output.

The peer scenarios (``tests/peers/test_peer_verdicts.py``) hold gemini-cli's cases;
these pin the rule's own choices: what counts as prose, the window, the carry
across outputs, the policy, bounded memory, and output read from the
``gen_ai.choice`` events that Strands writes.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stall_pipeline import STYLES, Agent, make_pipeline

from otel_stall import (
    Action,
    Conventions,
    Kind,
    ModelCall,
    Role,
    RunDetector,
    StallDetected,
    StallPolicy,
    ToolCall,
    Verdict,
    detect,
)
from otel_stall.cli import main
from otel_stall.core import chanting
from otel_stall.core.chanting import WINDOW_CHARS, scan
from otel_stall.otlp.decode import spans_from_json

SENTENCE = "The deploy is still pending, so I will wait a little longer. "
"""Twelve words: one chunk of eight fits in it whole."""
STRANDS = Path(__file__).parent.parent / "frameworks" / "strands-agents"


def said(text: str) -> ModelCall:
    """A model call whose output is ``text`` (only its hashes are kept)."""
    return ModelCall(model="m", chant=scan(text))


def chanting_findings(events: list[Any], policy: StallPolicy | None = None) -> list[Any]:
    (report,) = detect(events, policy or StallPolicy())
    return [f for f in report.findings if f.kind is Kind.CHANTING]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(SENTENCE * 10, id="ten-copies"),
        pytest.param("Intro first. " + SENTENCE * 10 + "And the end.", id="inside-other-text"),
        pytest.param((SENTENCE + "\n\n") * 10, id="paragraphs"),
        pytest.param("```\nx = 1\n```\n" + SENTENCE * 10, id="after-a-code-block"),
        pytest.param(SENTENCE.upper() * 5 + SENTENCE * 5, id="case-folded"),
        pytest.param("  ".join([SENTENCE] * 10).replace(" ", "\n", 3), id="wrapped-lines"),
    ],
)
def test_a_passage_ten_times_close_together_chants(text: str) -> None:
    """Ten copies of one passage in the prose of one output warn."""
    (finding,) = chanting_findings([said(text)])
    assert finding.action is Action.WARN
    assert finding.count >= 10
    assert "repeats the same passage" in finding.message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(SENTENCE * 9, id="nine-copies"),
        pytest.param("```\n" + SENTENCE * 20 + "\n```", id="code-block"),
        pytest.param("Here:\n```python\n" + SENTENCE * 20, id="unclosed-code-block"),
        pytest.param(SENTENCE * 9 + "\n| a | b |\n" + SENTENCE * 9, id="table-row-between"),
        pytest.param(SENTENCE * 9 + "\n- item\n" + SENTENCE * 9, id="list-item-between"),
        pytest.param(SENTENCE * 9 + "\n12) item\n" + SENTENCE * 9, id="numbered-item-between"),
        pytest.param(SENTENCE * 9 + "\n### Next\n" + SENTENCE * 9, id="heading-between"),
        pytest.param(SENTENCE * 9 + "\n> quoted\n" + SENTENCE * 9, id="quote-between"),
        pytest.param(SENTENCE * 9 + "\n* * *\n" + SENTENCE * 9, id="divider-between"),
        pytest.param("\n".join(f"- {SENTENCE}{n}" for n in range(30)), id="list"),
        pytest.param("\n".join(f"| {SENTENCE} | {n} |" for n in range(30)), id="table"),
        pytest.param("=" * 3000, id="divider-line"),
        pytest.param((SENTENCE + "x" * 300 + " ") * 10, id="far-apart"),
        pytest.param("Still checking. " * 9, id="short-phrase-nine-times"),
    ],
)
def test_structure_code_and_spread_out_repeats_do_not_chant(text: str) -> None:
    """Code, tables, lists, headings, quotes, dividers split or skip the prose; so does distance."""
    assert chanting_findings([said(text)]) == []


def test_a_chant_carries_over_into_the_next_output() -> None:
    """Six copies, then six more in the next output with no tool call between, warn."""
    (finding,) = chanting_findings([said(SENTENCE * 6), said(SENTENCE * 6)])
    assert finding.count >= 10


@pytest.mark.parametrize(
    "between",
    [
        pytest.param(ToolCall("search", {"q": 1}, {"hits": [1]}), id="tool-call"),
        pytest.param(ModelCall(model="m"), id="output-not-captured"),
        pytest.param(said("```\ncode\n```"), id="output-ending-in-code"),
    ],
)
def test_a_tool_call_or_an_unread_output_ends_the_carry(between: Any) -> None:
    """Six copies, something between, six more: the two halves are not one chant."""
    assert chanting_findings([said(SENTENCE * 6), between, said(SENTENCE * 6)]) == []


def test_a_chant_that_goes_on_fires_once_and_again_after_it_stopped() -> None:
    """Output after chanting output is one finding; a quiet output between starts a new one."""
    loud = said(SENTENCE * 12)
    assert len(chanting_findings([loud, loud, loud])) == 1
    quiet = said("All done, here is the summary of what changed.")
    assert len(chanting_findings([loud, quiet, loud])) == 2


def test_chanting_alone_only_warns() -> None:
    """However long the chant, the verdict is warn: text alone costs no tool calls."""
    (report,) = detect([said(SENTENCE * 200)] * 5)
    assert report.verdict is Verdict.WARN


@pytest.mark.parametrize(
    ("policy", "copies", "fires"),
    [
        pytest.param(StallPolicy(chant_repeats=5), 5, True, id="repeats-5-five-copies"),
        pytest.param(StallPolicy(chant_repeats=5), 4, False, id="repeats-5-four-copies"),
        pytest.param(StallPolicy(chant_repeats=20), 19, False, id="repeats-20"),
        pytest.param(StallPolicy(chanting=False), 50, False, id="off"),
    ],
)
def test_the_policy_sets_the_threshold_and_switches_the_rule(
    policy: StallPolicy, copies: int, fires: bool
) -> None:
    """chant_repeats is the count that warns; chanting=false turns the rule off."""
    assert bool(chanting_findings([said(SENTENCE * copies)], policy)) is fires


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [("OTEL_STALL_CHANT_REPEATS", "chant_repeats", 7), ("OTEL_STALL_CHANTING", "chanting", False)],
)
def test_chanting_settings_read_the_environment(env: str, field: str, value: Any) -> None:
    """Each chanting setting has its OTEL_STALL_* variable."""
    assert getattr(StallPolicy.from_env({env: str(value).lower()}), field) == value


def test_chant_repeats_below_two_is_refused() -> None:
    """One occurrence is no repeat: the policy says so instead of warning on every output."""
    with pytest.raises(ValueError, match="chant_repeats"):
        StallPolicy(chant_repeats=1)


@pytest.mark.parametrize(("setting", "verdict"), [("true", "warn"), ("false", "ok")])
def test_config_file_switches_chanting(
    setting: str, verdict: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--config's chanting key reaches the replay's detector."""
    config = tmp_path / "policy.toml"
    config.write_text(f"[policy]\nchanting = {setting}\n")
    trace = Path(__file__).parent.parent / "peers" / "gemini_cli" / "repeated_chunk.jsonl"
    assert main(["replay", str(trace), "--config", str(config), "--format", "json"]) in (0, 1)
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["verdict"] == verdict


@pytest.mark.slow
def test_memory_stays_bounded_on_a_long_chanting_run() -> None:
    """2,000 chanting outputs: the carry stays within one window, the detector's memory flat."""
    outputs = [scan(SENTENCE * 30 + f"turn {n} " + SENTENCE * 30) for n in range(50)]
    carry = chanting.NO_CHUNKS
    for output in outputs * 20:
        carry = chanting.carried(carry, output)
        assert len(carry) <= WINDOW_CHARS // 2
        assert all(-WINDOW_CHARS <= offset < 0 for offset in carry.offsets)
        assert output.nbytes <= 2 * 16 * WINDOW_CHARS // 2
    detector = RunDetector(keep=10)
    tracemalloc.start()
    try:
        sizes = []
        for n in range(1, 2_001):
            call = ModelCall(model="m", chant=outputs[n % 50])
            detector.model_call(call)
            detector.model_ended(call)
            if n in (200, 2_000):
                sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    assert sizes[1] <= sizes[0] * 1.1 + 64_000


@st.composite
def healthy_outputs(draw: st.DrawFn) -> list[str]:
    """Outputs of words never used twice in the run, with markdown structure mixed in."""
    counter = iter(range(1_000_000))
    layouts = st.sampled_from(["\n", " ", "\n\n", "\n- ", "\n## ", "\n| ", "\n```\n", ". "])
    outputs = []
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        size = draw(st.integers(min_value=0, max_value=400))
        breaks = draw(st.lists(layouts, min_size=size, max_size=size))
        outputs.append("".join(f"w{next(counter)}{sep}" for sep in breaks))
    return outputs


@given(healthy_outputs(), st.lists(st.booleans(), min_size=8, max_size=8))
def test_outputs_without_a_repeated_chunk_never_chant(
    outputs: list[str], tools: list[bool]
) -> None:
    """No chunk occurs twice, whatever the structure and tool calls between: no chanting."""
    events: list[Any] = []
    for n, (text, tool) in enumerate(zip(outputs, tools, strict=False)):
        events.append(said(text))
        if tool:
            events.append(ToolCall("search", {"q": n}, {"hits": [n]}))
    assert chanting_findings(events, StallPolicy(chant_repeats=2)) == []


def _model_outputs(path: Path) -> list[tuple[str | None, bool]]:
    """Each model span's output digest, as the built-in conventions read it.

    Strands' default layout keeps output in ``gen_ai.choice`` events; with the
    latest GenAI conventions, in ``gen_ai.client.inference.operation.details``.
    """
    conventions = Conventions.BUILTIN
    digests = []
    for line in path.read_text("utf-8").splitlines():
        for span in spans_from_json(json.loads(line)):
            if conventions.role(span.attributes) is Role.MODEL:
                call = conventions.model_call(span)
                digests.append((call.output, call.chant is not None))
    return digests


@pytest.mark.parametrize("scenario", ["progress", "loop", "failing", "parallel", "subagent"])
def test_strands_output_in_choice_events_reads_as_in_output_messages(scenario: str) -> None:
    """Strands' output read from its events matches, digest for digest, in both layouts."""
    default = _model_outputs(STRANDS / "1.62.0-default" / f"{scenario}.jsonl")
    latest = _model_outputs(STRANDS / "1.62.0-genai-latest" / f"{scenario}.jsonl")
    assert default == latest
    assert any(digest is not None for digest, _ in default)
    assert all((digest is not None) is scanned for digest, scanned in default)


def test_the_live_gate_knows_chanting() -> None:
    """Live, chanting warns: raise_if_stalled(at=WARN) stops with its guidance; nothing else.

    The default (break) does not raise, and no tool call is refused for it.
    """
    pipe = make_pipeline()
    guard = pipe.processor.guard
    agent = Agent(pipe.tracer, STYLES[0])
    message = {"role": "assistant", "parts": [{"type": "text", "content": SENTENCE * 12}]}
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.output.messages": json.dumps([message]),
    }
    with agent.run():
        with pipe.tracer.start_as_current_span("chat m", attributes=attributes):
            pass
        verdict, report = guard.verdict()
        assert verdict is Verdict.WARN
        assert report is not None
        assert [f.kind for f in report.findings] == [Kind.CHANTING]
        guard.raise_if_stalled()
        with pytest.raises(StallDetected, match="repeats the same passage"):
            guard.raise_if_stalled(at=Verdict.WARN)
        assert guard.before_call("search", {"q": 1}) is None
