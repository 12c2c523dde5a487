"""#28 item 5: a result that differs from a seen one only by noise in free text is no new fact."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from otel_stall.core.detector import RunDetector
from otel_stall.core.policy import StallPolicy
from otel_stall.core.records import Kind, ModelCall, ToolCall
from otel_stall.core.rules.near_duplicate import MIN_WORDS, SKETCHES, NearDuplicate, sketch

BODY = " ".join(
    f"Section {chr(65 + i)} of the quarterly report covers {topic} for the region, with the "
    f"figures the {team} team agreed at its review and the actions it owns."
    for i, (topic, team) in enumerate(
        [
            ("revenue", "finance"),
            ("support tickets", "service"),
            ("hiring", "people"),
            ("the budget", "planning"),
            ("travel costs", "operations"),
            ("security", "risk"),
        ]
    )
)
PAGE = BODY + " Fetched at {stamp} by request {rid}."


def _loop(policy: StallPolicy, rounds: int = 7) -> RunDetector:
    """The same page fetched with new arguments each round, noise in its text each time."""
    run = RunDetector(policy)
    for n in range(rounds):
        run.model_call(ModelCall())
        text = PAGE.format(stamp=f"10:{n:02d}", rid=f"r{9000 + n}")
        run.tool_call(ToolCall("fetch", {"url": "https://example.test/report", "try": n}, text))
    run.finish()
    return run


def test_noise_in_free_text_is_no_new_fact_with_the_rule_on() -> None:
    """With near_duplicates on, the noisy loop runs out of facts and breaks."""
    run = _loop(StallPolicy(near_duplicates=True))
    assert [row.new_fact for row in run.ledger][:2] == [True, False]
    assert Kind.NO_NEW_FACTS in {finding.kind for finding in run.findings}


def test_the_rule_is_off_by_default() -> None:
    """Off, every noisy result is a new fact: the default verdicts stay as they were."""
    run = _loop(StallPolicy())
    assert all(row.new_fact for row in run.ledger)
    assert run.verdict.value == "ok"


def test_different_pages_stay_new() -> None:
    """Results about different things are far apart: each is a new fact."""
    run = RunDetector(StallPolicy(near_duplicates=True))
    topics = ["revenue", "tickets", "hiring", "budget", "travel", "security", "roadmap"]
    for n, topic in enumerate(topics):
        words = " ".join(f"{topic} item {i} detail {topic}{i * 7} note" for i in range(8))
        run.tool_call(ToolCall("fetch", {"n": n}, words))
    assert all(row.new_fact for row in run.ledger)


def test_short_results_are_not_sketched() -> None:
    """In a short text one changed word may be the whole answer: no sketch, no judgement."""
    assert sketch(" ".join(["word"] * (MIN_WORDS - 1))) is None


@settings(max_examples=50)
@given(st.lists(st.text(min_size=1, max_size=8), min_size=MIN_WORDS, max_size=80))
def test_a_sketch_is_a_stable_64_bit_value(words: list[str]) -> None:
    """The same text gives the same sketch, within 64 bits, whatever its words."""
    text = " ".join(f"w{abs(hash(w)) % 997}" for w in words)
    first = sketch(text)
    assert first == sketch(text)
    assert first is None or 0 <= first < 1 << 64


def test_memory_per_run_is_fixed() -> None:
    """A thousand distinct long results: the rule's bytes do not grow."""
    run = RunDetector(StallPolicy(near_duplicates=True))
    rule = run.rule(NearDuplicate)
    assert rule is not None
    sizes = set()
    for n in range(1000):
        text = " ".join(f"t{n}x{i} y{(n * 31 + i) % 101}" for i in range(30))
        run.tool_call(ToolCall("fetch", {"n": n}, text))
        if n >= 100:
            sizes.add(rule.nbytes())
    assert len(sizes) == 1
    assert len(rule.seen) <= SKETCHES
