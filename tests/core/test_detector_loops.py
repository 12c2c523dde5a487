"""Issue #19's rules: failure loops, model failure loops, cycles and a loop's wasted cost."""

from __future__ import annotations

from typing import Any

import pytest

from otel_stall import (
    Action,
    Kind,
    ModelCall,
    RunDetector,
    RunReport,
    StallPolicy,
    Status,
    ToolCall,
    Verdict,
    detect,
)


def run(events: list[Any], policy: StallPolicy | None = None) -> RunReport:
    (report,) = detect(events, policy)
    return report


def of_kind(report: RunReport, kind: Kind) -> list[tuple[Action, int, int]]:
    return [(f.action, f.count, f.seq) for f in report.findings if f.kind is kind]


def fail(args: Any = "make", error: str | None = "BuildError", result: Any = None) -> ToolCall:
    """A failed call of ``run``; its result varies unless given."""
    return ToolCall("run", {"cmd": args}, result, Status.ERROR, error=error)


def ok(tool: str, args: Any, result: Any) -> ToolCall:
    return ToolCall(tool, {"a": args}, {"r": result})


def model(status: Status = Status.OK, error: str | None = None) -> ModelCall:
    return ModelCall(model="m", status=status, error=error)


# -- failure loop ------------------------------------------------------------------


def test_same_call_failing_the_same_way_three_times_escalates() -> None:
    """Three failures in a row of one call with one error class escalate at the third."""
    report = run([fail(result={"line": n}) for n in range(4)])
    assert of_kind(report, Kind.FAILURE_LOOP) == [(Action.ESCALATE, 3, 3)]
    assert report.verdict is Verdict.ESCALATE


def test_failure_loop_without_an_error_class_compares_the_error_text() -> None:
    """Without error.type, the same error text three times is the same failure."""
    report = run([fail(error=None, result="no such command")] * 3)
    assert of_kind(report, Kind.FAILURE_LOOP) == [(Action.ESCALATE, 3, 3)]


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param([fail("a"), fail("b"), fail("c")], id="different-arguments"),
        pytest.param(
            [fail(error="A"), fail(error="B"), fail(error="C")], id="different-error-classes"
        ),
        pytest.param([fail(), fail(), ok("run", "make", 1), fail()], id="a-success-between"),
        pytest.param([fail(error=None, result=n) for n in range(3)], id="different-texts-no-class"),
        pytest.param(
            [ToolCall("run", result=n, status=Status.ERROR, error="E") for n in range(3)],
            id="arguments-not-captured",
        ),
    ],
)
def test_distinct_failures_are_not_a_failure_loop(calls: list[ToolCall]) -> None:
    """Different calls, different errors, or a success between: no failure loop."""
    assert of_kind(run(calls), Kind.FAILURE_LOOP) == []


def test_failure_loop_threshold_comes_from_the_policy() -> None:
    """failure_loop_at sets how many same failures in a row escalate."""
    policy = StallPolicy(failure_loop_at=2)
    assert of_kind(run([fail(), fail()], policy), Kind.FAILURE_LOOP) == [(Action.ESCALATE, 2, 2)]


# -- model failure loop ------------------------------------------------------------


def test_model_failing_the_same_way_three_times_escalates() -> None:
    """Three context-window errors in a row escalate."""
    report = run([model(Status.ERROR, "ContextWindowExceededError")] * 3)
    assert [f.kind for f in report.findings] == [Kind.MODEL_FAILURE_LOOP]
    assert report.verdict is Verdict.ESCALATE


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(
            [model(Status.ERROR, "A"), model(), model(Status.ERROR, "A"), model(Status.ERROR, "A")],
            id="a-success-between",
        ),
        pytest.param(
            [model(Status.ERROR, "A"), model(Status.ERROR, "B"), model(Status.ERROR, "A")],
            id="different-errors",
        ),
        pytest.param([model(Status.ERROR)] * 3, id="no-error-class-or-message"),
        pytest.param([model(Status.OVERLOADED, "RateLimitError")] * 5, id="within-allowance"),
    ],
)
def test_model_failures_that_are_not_a_loop(calls: list[ModelCall]) -> None:
    """Work between failures, distinct failures, and retries within the allowance do not fire."""
    assert of_kind(run(calls), Kind.MODEL_FAILURE_LOOP) == []


def test_rate_limits_beyond_the_overloaded_allowance_escalate() -> None:
    """Once the overloaded allowance (3) is spent, 3 more rate limits in a row escalate."""
    report = run([model(Status.OVERLOADED, "RateLimitError")] * 6)
    assert [f.kind for f in report.findings] == [Kind.MODEL_FAILURE_LOOP]


# -- cycles ------------------------------------------------------------------------


def cycle(length: int, periods: int) -> list[ToolCall]:
    return [ok(f"t{i}", i, i) for _ in range(periods) for i in range(length)]


@pytest.mark.parametrize("length", [2, 3, 4, 5])
def test_a_cycle_warns_at_three_periods_and_breaks_at_five(length: int) -> None:
    """A cycle of k calls, results included: warn at 3 full periods, break at 5."""
    report = run(cycle(length, 6))
    assert of_kind(report, Kind.CYCLE) == [
        (Action.WARN, 3, 3 * length),
        (Action.BREAK, 5, 5 * length),
    ]
    assert of_kind(report, Kind.REPEAT) == []


def test_two_periods_are_not_a_cycle() -> None:
    """A sequence done twice is not yet a loop."""
    report = run([*cycle(3, 2), ok("t0", 0, 0)])
    assert of_kind(report, Kind.CYCLE) == []


def test_one_loop_is_reported_once() -> None:
    """A B A B ... is a 2-cycle, not also a 4-cycle; A A A ... is the repeat rule's alone."""
    report = run(cycle(2, 10))
    assert {f.count for f in report.findings if f.kind is Kind.CYCLE} == {3, 5}
    assert len(of_kind(report, Kind.CYCLE)) == 2
    assert of_kind(run([ok("a", 1, 1)] * 6), Kind.CYCLE) == []


@pytest.mark.parametrize(
    "calls",
    [
        pytest.param(
            [ok("a", n, 1) if n % 2 else ok("b", 0, 1) for n in range(12)], id="arguments-vary"
        ),
        pytest.param(
            [ok("a", 0, n) if n % 2 else ok("b", 0, 1) for n in range(12)], id="results-vary"
        ),
    ],
)
def test_an_alternation_that_varies_is_not_a_cycle(calls: list[ToolCall]) -> None:
    """An alternation whose arguments or results vary brings something new each time."""
    report = run(calls)
    assert of_kind(report, Kind.CYCLE) == []


def test_cycle_thresholds_and_length_come_from_the_policy() -> None:
    """cycle_warn_at, cycle_break_at and max_cycle_length shape the rule; length 1 is off."""
    policy = StallPolicy(cycle_warn_at=2, cycle_break_at=3)
    assert [a for a, _, _ in of_kind(run(cycle(2, 3), policy), Kind.CYCLE)] == [
        Action.WARN,
        Action.BREAK,
    ]
    assert of_kind(run(cycle(4, 6), StallPolicy(max_cycle_length=3)), Kind.CYCLE) == []
    assert of_kind(run(cycle(2, 6), StallPolicy(max_cycle_length=1)), Kind.CYCLE) == []


@pytest.mark.parametrize(
    ("env", "field", "value"),
    [
        ("OTEL_STALL_CYCLE_WARN_AT", "cycle_warn_at", 4),
        ("OTEL_STALL_CYCLE_BREAK_AT", "cycle_break_at", 7),
        ("OTEL_STALL_MAX_CYCLE_LENGTH", "max_cycle_length", 3),
        ("OTEL_STALL_FAILURE_LOOP_AT", "failure_loop_at", 4),
        ("OTEL_STALL_REPEAT_WINDOW", "repeat_window", 20),
    ],
)
def test_new_settings_read_the_environment(env: str, field: str, value: int) -> None:
    """Each new threshold has its OTEL_STALL_* variable."""
    assert getattr(StallPolicy.from_env({env: str(value)}), field) == value


# -- wasted cost -------------------------------------------------------------------


def test_wasted_cost_counts_from_the_first_repeat() -> None:
    """The warn at the 3rd identical call began at the 1st repeat: its cost runs from there."""
    events: list[Any] = []
    for n in range(6):
        t = n * 10
        events.append(ModelCall(start_ns=t, end_ns=t + 2, input_tokens=100, output_tokens=5))
        events.append(ToolCall("s", {"q": 1}, {"r": 1}, start_ns=t + 3, end_ns=t + 5))
    report = run(events)
    # The 2nd call (starts at 13) is the first repeat: tool calls 2 to 6, the 4 model
    # calls after it (their 4 x 105 tokens), and the time from 13 to the end (55).
    assert report.onset_seq == 2
    assert report.wasted_calls == 5
    assert report.wasted_model_calls == 4
    assert report.wasted_tokens == 4 * 105
    assert report.wasted_seconds == pytest.approx((55 - 13) / 1e9)


def test_tokens_not_captured_are_absent_not_zero() -> None:
    """Without token usage on any later model call, wasted tokens are None."""
    events: list[Any] = []
    for _ in range(5):
        events += [ModelCall(), ToolCall("s", {"q": 1}, {"r": 1})]
    report = run(events)
    assert report.wasted_calls is not None
    assert report.wasted_tokens is None


def test_a_run_that_never_stalled_wasted_nothing() -> None:
    """No warning: every wasted field is None."""
    report = run([ok("a", n, n) for n in range(5)])
    wasted = (report.wasted_calls, report.wasted_model_calls, report.wasted_tokens)
    assert (*wasted, report.wasted_seconds, report.onset_seq) == (None,) * 5


def test_a_refused_try_of_a_failure_loop_is_reported_as_the_gate_refused_it() -> None:
    """The gate's refusal and the refused call's ledger row carry the same failure_loop finding."""
    from otel_stall import RunDetector

    detector = RunDetector()
    for _ in range(3):
        detector.tool_call(fail(result="no such host"))
    refusal = detector.check_call("run", {"cmd": "make"})
    observed = detector.tool_call(ToolCall("run", {"cmd": "make"}, status=Status.REFUSED))
    assert refusal is not None
    assert refusal.kind is Kind.FAILURE_LOOP
    assert refusal.action is Action.REFUSE
    assert observed.findings == (refusal,)
    assert detector.verdict is Verdict.ESCALATE


# -- monologue ---------------------------------------------------------------------


def said(text: str | None) -> ModelCall:
    from otel_stall.conventions.model_content import output_digest

    if text is None:
        return ModelCall(model="m")
    message = {"role": "assistant", "parts": [{"type": "text", "content": text}]}
    return ModelCall(model="m", output=output_digest({"gen_ai.output.messages": [message]}))


def test_the_same_message_three_times_warns_and_five_breaks() -> None:
    """Monologue: the same normalised assistant message, nothing new between."""
    report = run([said("I am fine.")] * 2 + [said("I  am FINE. ")] * 4)
    assert [(f.kind, f.action, f.count) for f in report.findings] == [
        (Kind.MONOLOGUE, Action.WARN, 3),
        (Kind.MONOLOGUE, Action.BREAK, 5),
    ]


@pytest.mark.parametrize(
    "events",
    [
        pytest.param(
            [said("x"), said("x"), ok("ls", 1, 1), said("x"), said("x")], id="a-new-fact-between"
        ),
        pytest.param([said("x"), said("y"), said("x"), said("y")], id="different-messages"),
        pytest.param([said(None)] * 6, id="no-content-captured"),
    ],
)
def test_messages_that_are_not_a_monologue(events: list[Any]) -> None:
    """A new fact between, different messages, or no captured text: no monologue."""
    assert of_kind(run(events), Kind.MONOLOGUE) == []


@pytest.mark.parametrize(
    "attrs",
    [
        pytest.param(
            {
                "gen_ai.output.messages": (
                    '[{"role":"assistant","parts":[{"type":"text","content":"Hi"}]}]'
                )
            },
            id="genai-json",
        ),
        pytest.param(
            {
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Hi",
            },
            id="openinference",
        ),
        pytest.param(
            {"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "Hi"},
            id="openllmetry",
        ),
    ],
)
def test_output_text_is_read_in_each_convention(attrs: dict[str, Any]) -> None:
    """GenAI, OpenInference and OpenLLMetry model output gives the same hash."""
    from otel_stall.conventions.model_content import output_digest, output_text

    assert output_text(attrs) == "Hi"
    assert output_digest(attrs) == output_digest({"gen_ai.completion.0.content": "hi"})


# -- delegate_stalled ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdict", "fires"),
    [
        pytest.param(Verdict.OK, False, id="ok"),
        pytest.param(Verdict.WARN, True, id="warn"),
        pytest.param(Verdict.ESCALATE, True, id="escalate"),
        pytest.param(Verdict.BREAK, True, id="break"),
    ],
)
def test_a_delegate_that_stalled_warns_its_parent(verdict: Verdict, fires: bool) -> None:
    """A sub-agent run that ended at warn or above gives its parent delegate_stalled at warn."""
    detector = RunDetector()
    detector.model_call(ModelCall())
    detector.tool_call(ok("delegate", "find the release date", "done"))
    findings = detector.delegate_ended("BrowsingAgent", verdict, 5_000_000_000)
    report = detector.finish()
    expected = [(Action.WARN, 1, 1)] if fires else []
    assert of_kind(report, Kind.DELEGATE_STALLED) == expected
    assert [f.tool for f in findings] == (["BrowsingAgent"] if fires else [])
    assert report.verdict is (Verdict.WARN if fires else Verdict.OK)


def test_each_stalled_delegate_is_counted() -> None:
    """Handing the task again to a delegate that stalls again warns again, counting them."""
    detector = RunDetector()
    detector.model_call(ModelCall())
    for _ in range(2):
        detector.delegate_ended(None, Verdict.BREAK, 0)
    (first, second) = detector.finish().findings
    assert (first.count, second.count) == (1, 2)
    assert "re-plan" in second.message
    assert "a sub-agent" in second.message
