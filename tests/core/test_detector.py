"""The detector's rules, thresholds and resets, on fixtures and on synthetic runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

from otel_stall import (
    ABSENT,
    Action,
    DuplicateMode,
    Kind,
    ModelCall,
    RunDetector,
    RunReport,
    StallPolicy,
    Status,
    ToolCall,
    Verdict,
    detect,
    stall_score,
)

Events = Callable[[str], list[ToolCall | ModelCall]]
M = ModelCall()


def call(
    tool: str = "search",
    args: Any = None,
    result: Any = None,
    status: Status = Status.OK,
    **flags: Any,
) -> ToolCall:
    """A tool call; ``args`` defaults to a fixed query and ``result`` to a fixed hit."""
    return ToolCall(
        tool,
        {"q": "x"} if args is None else args,
        {"hits": ["doc-1"]} if result is None else result,
        status,
        **flags,
    )


def run(events: Sequence[ToolCall | ModelCall], policy: StallPolicy | None = None) -> RunReport:
    reports = detect(events, policy)
    assert len(reports) == 1
    return reports[0]


def kinds(report: RunReport) -> list[tuple[Kind, Action]]:
    return [(f.kind, f.action) for f in report.findings]


def of_kind(report: RunReport, kind: Kind) -> list[Any]:
    return [f for f in report.findings if f.kind is kind]


NO_DUP = StallPolicy(duplicate_mode=DuplicateMode.OFF)


# -- the reference fixtures ----------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "check"),
    [
        ("loop", lambda score: score > 0.5),
        ("progress", lambda score: score == 0.0),
        ("poll_idempotent", lambda score: score > 0.0),
    ],
)
def test_reference_fixture_shapes(
    trace_events: Events, stem: str, check: Callable[[float], bool]
) -> None:
    """The looping shape scores high, the progress shape zero, the idempotent poll above zero."""
    assert check(run(trace_events(stem)).stall_score)


@pytest.mark.parametrize(
    ("stem", "verdict"),
    [
        ("loop", Verdict.BREAK),
        ("progress", Verdict.OK),
        ("poll_idempotent", Verdict.WARN),
        ("reworded_queries", Verdict.BREAK),
        ("empty_results", Verdict.OK),
        ("failures", Verdict.ESCALATE),
        ("refused_rounds", Verdict.BREAK),
        ("overloaded", Verdict.OK),
        ("approval", Verdict.OK),
    ],
)
def test_fixture_verdicts(trace_events: Events, stem: str, verdict: Verdict) -> None:
    """Each hand-made trace ends with the verdict its shape calls for."""
    assert run(trace_events(stem)).verdict is verdict


def test_loop_fixture_breaks_on_the_fifth_repeat(trace_events: Events) -> None:
    """The loop warns at the 3rd identical search (a read between), breaks at the 5th in a row."""
    report = run(trace_events("loop"))
    repeats = of_kind(report, Kind.REPEAT)
    assert [(f.action, f.count, f.first_seq, f.seq) for f in repeats] == [
        (Action.WARN, 3, 1, 4),
        (Action.BREAK, 5, 3, 7),
    ]
    assert [row.count for row in report.ledger if row.tool == "search"] == [1, 2, 3, 4, 5, 6]
    assert all(row.repeat_of == 1 for row in report.ledger[2:])


def test_poll_false_positive_fixed_by_exempting_the_tool(trace_events: Events) -> None:
    """Exempting the polling tool by policy removes every finding of the known false positive."""
    report = run(
        trace_events("poll_idempotent"), StallPolicy(exempt_tools=frozenset({"job_status"}))
    )
    assert report.findings == ()
    assert report.verdict is Verdict.OK
    assert all(row.new_fact for row in report.ledger if row.tool == "job_status")


def test_poll_false_positive_fixed_by_record_flag(trace_events: Events) -> None:
    """A poll tool that declares itself exempt on its record is not flagged either."""
    events = [
        replace(e, exempt=True) if isinstance(e, ToolCall) and e.tool == "job_status" else e
        for e in trace_events("poll_idempotent")
    ]
    assert run(events).verdict is Verdict.OK


def test_reworded_queries_stop_on_no_new_facts(trace_events: Events) -> None:
    """Different arguments that bring back the same documents end the run after 5 rounds."""
    report = run(trace_events("reworded_queries"))
    assert kinds(report) == [(Kind.NO_NEW_FACTS, Action.BREAK)]
    finding = report.findings[0]
    assert (finding.count, finding.first_seq, finding.seq, finding.round) == (5, 2, 6, 6)
    assert "write the answer" in finding.message


def test_empty_results_keep_counting_as_new(trace_events: Events) -> None:
    """Zero results in every shape are new facts, so exploration is never cut off."""
    report = run(trace_events("empty_results"))
    assert all(row.new_fact for row in report.ledger)
    assert report.findings == ()


def test_failures_fixture_escalates(trace_events: Events) -> None:
    """A deploy that keeps failing escalates; another tool's success does not reset it."""
    report = run(trace_events("failures"))
    (finding,) = report.findings
    assert (finding.kind, finding.action, finding.count, finding.first_seq, finding.seq) == (
        Kind.FAILURES,
        Action.ESCALATE,
        5,
        4,
        9,
    )
    assert "escalate" in finding.message


def test_refused_rounds_fixture(trace_events: Events) -> None:
    """Five rounds in which every call was refused break, and no_new_facts stays quiet."""
    report = run(trace_events("refused_rounds"))
    assert of_kind(report, Kind.NO_NEW_FACTS) == []
    (finding,) = of_kind(report, Kind.REFUSED_ROUNDS)
    assert (finding.count, finding.round) == (5, 6)
    assert all(not row.new_fact for row in report.ledger if row.status is Status.REFUSED)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"max_tool_calls": 4}, []),
        ({"max_tool_calls": 4, "overloaded_allowance": 0}, [(Kind.BUDGET, Action.BREAK)]),
        ({"max_tool_calls": 3}, [(Kind.BUDGET, Action.BREAK)]),
        ({"max_rounds": 4}, []),
        ({"max_rounds": 4, "overloaded_allowance": 0}, [(Kind.BUDGET, Action.BREAK)]),
        ({"max_rounds": 3}, [(Kind.BUDGET, Action.BREAK)]),
    ],
)
def test_overloaded_fixture_budgets(
    trace_events: Events, settings: dict[str, Any], expected: list[tuple[Kind, Action]]
) -> None:
    """Up to 3 overloaded calls come off the call budget and extend the round limit."""
    assert kinds(run(trace_events("overloaded"), StallPolicy(**settings))) == expected


def test_approval_results_count_as_new(trace_events: Events) -> None:
    """Approval tools' repeated results are new facts, by record flag or by policy."""
    events = trace_events("approval")
    assert of_kind(run(events), Kind.NO_NEW_FACTS) == []
    unflagged = [replace(e, approval=False) if isinstance(e, ToolCall) else e for e in events]
    assert of_kind(run(unflagged), Kind.NO_NEW_FACTS) != []
    by_policy = run(unflagged, StallPolicy(approval_tools=frozenset({"send_*"})))
    assert of_kind(by_policy, Kind.NO_NEW_FACTS) == []
    assert all(f.tool == "lookup_user" for f in of_kind(by_policy, Kind.DUPLICATE_CALL))


# -- repeat --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "actions"),
    [
        (1, ["continue"]),
        (2, ["continue", "continue"]),
        (3, ["continue", "continue", "warn"]),
        (4, ["continue", "continue", "warn", "warn"]),
        (5, ["continue", "continue", "warn", "warn", "break"]),
        (7, ["continue", "continue", "warn", "warn", "break", "break", "break"]),
    ],
)
def test_repeat_thresholds(n: int, actions: list[str]) -> None:
    """1-2 continue, 3 warns, 5 breaks; rows reflect the state, findings fire once each."""
    report = run([call()] * n, NO_DUP)
    assert [row.action.value for row in report.ledger] == actions
    expected = [Action.WARN] * (n >= 3) + [Action.BREAK] * (n >= 5)
    assert [f.action for f in of_kind(report, Kind.REPEAT)] == expected
    assert [row.consecutive for row in report.ledger] == list(range(1, n + 1))


def test_repeat_warning_message_allows_one_replan() -> None:
    """The warning is written for the model: the result is known, re-plan once."""
    (finding,) = run([call()] * 3, NO_DUP).findings
    assert "already in the conversation" in finding.message
    assert "re-plan once" in finding.message
    assert "`search`" in finding.message


def test_repeat_thresholds_per_tool() -> None:
    """A per-tool threshold applies to that tool only."""
    policy = StallPolicy(tool_thresholds={"deploy": (2, 3)}, duplicate_mode=DuplicateMode.OFF)
    deploy = run([call("deploy")] * 3, policy)
    assert [row.action for row in deploy.ledger] == [Action.CONTINUE, Action.WARN, Action.BREAK]
    search = run([call("search")] * 3, policy)
    assert search.ledger[-1].action is Action.WARN


def test_repeat_streak_resets_on_a_different_call() -> None:
    """Another call in between starts the back-to-back count over."""
    policy = StallPolicy(duplicate_mode=DuplicateMode.OFF, repeat_window=None)
    report = run([call(), call(), call("read"), call(), call()], policy)
    assert [row.consecutive for row in report.ledger] == [1, 2, 1, 1, 2]
    assert report.findings == ()
    assert [row.repeat_of for row in report.ledger] == [None, 1, None, 1, 1]


def ls() -> ToolCall:
    """The same listing with the same output every time."""
    return call("ls", args={"path": "."}, result=["a.py", "b.py"])


def scroll(page: int) -> ToolCall:
    """A scroll that shows a page not seen before."""
    return call("scroll", args={"page": page}, result=[f"headline {page}"])


def test_identical_calls_with_others_between_warn_at_the_third() -> None:
    """ls, scroll, scroll, ls, scroll, ls: the 3rd identical ls within the window warns."""
    report = run([ls(), scroll(1), scroll(2), ls(), scroll(3), ls()])
    (finding,) = of_kind(report, Kind.REPEAT)
    assert (finding.action, finding.tool, finding.count, finding.first_seq, finding.seq) == (
        Action.WARN,
        "ls",
        3,
        1,
        6,
    )
    assert report.verdict is Verdict.WARN
    assert report.ledger[-1].action is Action.WARN


@pytest.mark.parametrize(
    ("calls", "policy"),
    [
        pytest.param(
            [ls(), *map(scroll, range(5)), ls(), *map(scroll, range(5, 9)), ls()],
            None,
            id="beyond-the-window",
        ),
        pytest.param(
            [ls(), scroll(1), ls(), scroll(2), ls()],
            StallPolicy(repeat_window=None),
            id="window-off",
        ),
        pytest.param(
            [ls(), call("send", approval=True), ls(), call("send", approval=True), ls()],
            None,
            id="approval-tool-between",
        ),
        pytest.param(
            [ls(), call("wait", exempt=True), ls(), call("wait", exempt=True), ls()],
            None,
            id="exempt-tool-between",
        ),
        pytest.param(
            [call("ls", args={"path": "."}, result=[i]) for i in range(3)],
            None,
            id="results-differ",
        ),
    ],
)
def test_identical_calls_apart_stay_ok(calls: list[ToolCall], policy: StallPolicy | None) -> None:
    """Beyond the window, with the window off, after a side effect or with new results: ok."""
    report = run(calls, policy)
    assert of_kind(report, Kind.REPEAT) == []
    assert report.verdict is Verdict.OK


def test_a_recurring_call_is_reported_once() -> None:
    """The 3rd ls warns; a 4th and 5th within the window add no finding."""
    report = run([ls(), scroll(1), ls(), scroll(2), ls(), scroll(3), ls(), scroll(4), ls()])
    assert [(f.kind, f.seq) for f in report.findings if f.action is Action.WARN] == [
        (Kind.REPEAT, 5)
    ]


def test_a_cycle_is_reported_by_the_cycle_rule_alone() -> None:
    """A B A B A B: the cycle rule warns; the recurring A and B add no repeat finding."""
    report = run([ls(), scroll(1)] * 3, NO_DUP)
    assert kinds(report) == [(Kind.CYCLE, Action.WARN)]


def test_repeat_fires_again_after_a_reset() -> None:
    """A new streak that reaches the threshold warns again."""
    report = run([call()] * 3 + [call("read")] + [call()] * 3, NO_DUP)
    assert [f.action for f in of_kind(report, Kind.REPEAT)] == [Action.WARN] * 2


def test_same_call_with_changing_result_is_progress() -> None:
    """Same arguments with a different result each time is not a loop."""
    report = run([call(result={"state": i}) for i in range(6)], NO_DUP)
    assert report.findings == ()
    assert report.stall_score == 0.0
    assert all(row.new_fact for row in report.ledger)


@pytest.mark.parametrize("status", [Status.ERROR, Status.OVERLOADED])
def test_failed_calls_are_never_repeats(status: Status) -> None:
    """Identical failures escalate through failures, never as a repeat stall."""
    report = run([call(result={"error": "boom"}, status=status)] * 6)
    assert of_kind(report, Kind.REPEAT) == []
    assert [f.action for f in of_kind(report, Kind.FAILURES)] == [Action.ESCALATE]


@pytest.mark.parametrize(
    ("args", "result"),
    [
        pytest.param(ABSENT, ABSENT, id="nothing-captured"),
        pytest.param({"q": "x"}, ABSENT, id="result-absent"),
        pytest.param(ABSENT, {"hits": [1]}, id="args-absent"),
        pytest.param({"q": "x"}, {1, 2}, id="result-unknown"),
    ],
)
def test_uncaptured_content_is_never_a_repeat(args: Any, result: Any) -> None:
    """Calls whose content was not captured cannot be told apart, so they never repeat."""
    report = run([ToolCall("search", args, result)] * 6)
    assert of_kind(report, Kind.REPEAT) == []
    assert stall_score(report.ledger, report.verdict) == report.stall_score
    assert report.stall_score == report.verdict.severity / 4
    assert all(row.repeat_of is None and row.count == 1 for row in report.ledger)


def test_empty_identical_results_still_repeat() -> None:
    """The same call returning the same empty result back to back is a loop."""
    report = run([call(result={"items": [], "count": 0})] * 5, NO_DUP)
    assert kinds(report) == [(Kind.REPEAT, Action.WARN), (Kind.REPEAT, Action.BREAK)]
    assert all(row.new_fact for row in report.ledger)


@pytest.mark.parametrize(
    ("flag", "policy"),
    [
        pytest.param(True, StallPolicy(), id="record-flag"),
        pytest.param(False, StallPolicy(exempt_tools=frozenset({"search"})), id="policy-name"),
        pytest.param(False, StallPolicy(exempt_tools=frozenset({"sea*"})), id="policy-glob"),
    ],
)
def test_exempt_tools_skip_repeat_and_duplicate(flag: bool, policy: StallPolicy) -> None:
    """Exempt tools are left out of repeat and duplicate_call, and count as new."""
    report = run([call(exempt=flag)] * 6, policy)
    assert report.findings == ()
    assert all(row.new_fact for row in report.ledger)


def test_exempt_flag_mid_streak_still_fires_once_crossed() -> None:
    """A streak that began on self-exempt calls fires when the first checked call crosses."""
    report = run([call(exempt=True)] * 3 + [call()], NO_DUP)
    (finding,) = of_kind(report, Kind.REPEAT)
    assert (finding.action, finding.count, finding.first_seq) == (Action.WARN, 4, 1)


# -- duplicate_call ------------------------------------------------------------


def test_duplicate_call_run_mode_refuses_anywhere_in_run() -> None:
    """In run mode a call that already ran is refused however far back it ran."""
    events = [call(), call("read", {"p": 1}), call("read", {"p": 2}), call(result={"other": 1})]
    report = run(events)
    (finding,) = report.findings
    assert (finding.kind, finding.action, finding.first_seq, finding.seq, finding.count) == (
        Kind.DUPLICATE_CALL,
        Action.REFUSE,
        1,
        4,
        2,
    )
    assert report.ledger[-1].action is Action.REFUSE
    assert "step 1" in finding.message
    assert "change the arguments or the approach" in finding.message


def test_duplicate_call_compares_values_not_text() -> None:
    """JSON text with another key order and spacing is the same call."""
    report = run([call(args={"a": 1, "b": [1, 2]}), call(args='{ "b":[1,2], "a" : 1 }')])
    assert kinds(report) == [(Kind.DUPLICATE_CALL, Action.REFUSE)]


@pytest.mark.parametrize("first", [Status.ERROR, Status.OVERLOADED, Status.REFUSED])
def test_duplicate_call_allows_retry_after_a_call_that_did_not_succeed(first: Status) -> None:
    """Only calls that ran and succeeded count as already executed."""
    report = run([call(status=first), call()])
    assert of_kind(report, Kind.DUPLICATE_CALL) == []


@pytest.mark.parametrize(
    "call_",
    [
        pytest.param(ToolCall("search", ABSENT, {"r": 1}), id="args-absent"),
        pytest.param(call(approval=True), id="approval-flag"),
        pytest.param(call(exempt=True), id="exempt-flag"),
    ],
)
def test_duplicate_call_skips(call_: ToolCall) -> None:
    """Unknown arguments, approval tools and exempt tools are never refused as duplicates."""
    assert of_kind(run([call_, call_]), Kind.DUPLICATE_CALL) == []


def test_refused_duplicate_is_still_reported() -> None:
    """A call refused by the live gate records the same duplicate finding as a replay."""
    report = run([call(), call(status=Status.REFUSED, result=ABSENT)])
    assert kinds(report) == [(Kind.DUPLICATE_CALL, Action.REFUSE)]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(call(), id="ran-again"),
        pytest.param(call(status=Status.REFUSED, result=ABSENT), id="refused"),
    ],
)
def test_a_refusal_is_not_a_stall(second: ToolCall) -> None:
    """A single duplicate, refused or run again, leaves the verdict ok: refusing is the gate's."""
    report = run([call(), second])
    assert of_kind(report, Kind.DUPLICATE_CALL) != []
    assert report.verdict is Verdict.OK


def test_repeats_that_each_bring_a_new_result_are_not_a_stall() -> None:
    """Ten identical scroll_down calls, each returning a new page, leave the verdict ok."""
    pages = [call("scroll_down", {"dir": "down"}, {"page": n}) for n in range(10)]
    report = run(pages)
    assert of_kind(report, Kind.DUPLICATE_CALL) != []
    assert report.verdict is Verdict.OK


@pytest.mark.parametrize(
    ("sequence", "refused_at"),
    [
        (["a", "a"], []),
        (["a", "a", "a"], [3]),
        (["a", "a", "a", "a"], [3, 4]),
        (["a", "a", "b", "a", "a"], []),
        (["a", "b", "a", "b", "a"], []),
    ],
)
def test_duplicate_call_consecutive_mode(sequence: list[str], refused_at: list[int]) -> None:
    """The chat check refuses only the third same call in a row; another call resets it."""
    policy = StallPolicy(duplicate_mode=DuplicateMode.CONSECUTIVE)
    events = [call(args={"k": k}, result={"n": i}) for i, k in enumerate(sequence)]
    report = run(events, policy)
    assert [f.seq for f in of_kind(report, Kind.DUPLICATE_CALL)] == refused_at
    for finding in of_kind(report, Kind.DUPLICATE_CALL):
        assert "in a row" in finding.message


def test_duplicate_call_off() -> None:
    """With duplicate checks off nothing is refused."""
    assert run([call(), call("x"), call()], NO_DUP).findings == ()


def test_check_call_run_mode_is_a_pure_gate() -> None:
    """The live gate refuses a call that already ran, without changing the run's state."""
    detector = RunDetector()
    assert detector.check_call("search", {"q": "x"}) is None
    detector.tool_call(call())
    refusal = detector.check_call("search", '{"q": "x"}')
    assert refusal is not None
    assert (refusal.kind, refusal.action, refusal.first_seq, refusal.seq) == (
        Kind.DUPLICATE_CALL,
        Action.REFUSE,
        1,
        2,
    )
    assert "already ran" in refusal.message
    assert len(detector.ledger) == 1
    assert detector.findings == ()
    assert detector.check_call("search", {"q": "y"}) is None


@pytest.mark.parametrize(
    ("exempt", "approval"), [(True, False), (False, True)], ids=["exempt", "approval"]
)
def test_check_call_skips_declared_tools(exempt: bool, approval: bool) -> None:
    """The gate never refuses a tool that declares itself exempt or approval-gated."""
    detector = RunDetector()
    detector.tool_call(call())
    assert detector.check_call("search", {"q": "x"}, exempt=exempt, approval=approval) is None


def test_check_call_consecutive_mode() -> None:
    """In consecutive mode the gate refuses the third same call in a row."""
    detector = RunDetector(StallPolicy(duplicate_mode=DuplicateMode.CONSECUTIVE))
    detector.tool_call(call())
    assert detector.check_call("search", {"q": "x"}) is None
    detector.tool_call(call())
    refusal = detector.check_call("search", {"q": "x"})
    assert refusal is not None
    assert refusal.count == 3


# -- no_new_facts --------------------------------------------------------------


def rounds(*batches: Sequence[ToolCall]) -> list[ToolCall | ModelCall]:
    """A model-driven run: each batch is one round's tool calls."""
    events: list[ToolCall | ModelCall] = []
    for batch in batches:
        events.append(M)
        events.extend(batch)
    return events


def seen(i: int) -> ToolCall:
    """A call with new arguments that returns the already-seen document."""
    return call(args={"q": f"reworded {i}"}, result={"docs": ["kb-1"]})


def new(i: int) -> ToolCall:
    """A call that brings a document not seen before."""
    return call("fetch", args={"id": i}, result={"doc": f"kb-{100 + i}"})


REFUSED = call("search", {"q": "refused"}, ABSENT, Status.REFUSED)


@pytest.mark.parametrize(("seen_rounds", "fires"), [(4, False), (5, True)])
def test_no_new_facts_threshold(seen_rounds: int, fires: bool) -> None:
    """Five rounds in a row with only seen results break the run; four do not."""
    batches = [[new(0)], [seen(0)], *[[seen(i)] for i in range(1, seen_rounds + 1)]]
    report = run(rounds(*batches))
    assert bool(of_kind(report, Kind.NO_NEW_FACTS)) is fires


@pytest.mark.parametrize("limit", [2, 3, 6])
def test_no_new_facts_limit_override(limit: int) -> None:
    """The round count is configurable and fires exactly when it is reached."""
    policy = StallPolicy(no_new_facts_rounds=limit)
    events = rounds([seen(0)], *[[seen(i)] for i in range(1, 8)])
    (finding,) = of_kind(run(events, policy), Kind.NO_NEW_FACTS)
    assert finding.count == limit
    assert finding.round == limit + 1
    assert finding.first_seq == 2


def test_no_new_facts_is_per_round_not_per_tool() -> None:
    """One new document anywhere in a round is progress for the whole round."""
    events = rounds([seen(0)], *[[seen(i), new(i)] for i in range(1, 8)])
    assert of_kind(run(events), Kind.NO_NEW_FACTS) == []


def test_no_new_facts_resets_only_on_a_new_fact() -> None:
    """Four seen rounds, a new fact, four seen rounds: no break."""
    events = rounds(
        [seen(0)], *[[seen(i)] for i in range(4)], [new(1)], *[[seen(i)] for i in range(4)]
    )
    assert of_kind(run(events), Kind.NO_NEW_FACTS) == []


def test_refused_round_leaves_no_new_facts_unchanged() -> None:
    """A round where every call was refused neither counts nor resets the seen-results streak."""
    events = rounds([seen(0)], *[[seen(i)] for i in range(1, 4)], [REFUSED], [seen(9)], [seen(8)])
    (finding,) = of_kind(run(events), Kind.NO_NEW_FACTS)
    assert finding.count == 5
    assert finding.round == 7


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(None, id="null"),
        pytest.param({"items": [], "count": 0}, id="empty-object"),
        pytest.param(ABSENT, id="absent"),
        pytest.param({1, 2}, id="unknown"),
    ],
)
def test_empty_absent_unknown_results_are_new(result: Any) -> None:
    """Empty, absent and unfingerprintable results always count as new facts."""
    events = rounds(*[[ToolCall("search", {"q": i}, result)] for i in range(8)])
    report = run(events)
    assert all(row.new_fact for row in report.ledger)
    assert report.findings == ()


def test_overloaded_results_are_not_new_facts() -> None:
    """An overloaded call returned nothing: it is not progress."""
    events = rounds([seen(0)], *[[call(args={"q": i}, status=Status.OVERLOADED)] for i in range(5)])
    report = run(events, StallPolicy(failure_streak=10))
    assert [row.new_fact for row in report.ledger] == [True] + [False] * 5
    assert kinds(report) == [(Kind.NO_NEW_FACTS, Action.BREAK)]


def failed(i: int) -> ToolCall:
    """A call with new arguments that fails with the tool's one generic error text."""
    return call("lookup", args={"key": f"k{i}"}, result="tool error", status=Status.ERROR)


def test_one_generic_error_escalates_as_failures_not_no_new_facts() -> None:
    """Rounds that only failed with an error seen before escalate; no_new_facts does not break."""
    report = run(rounds(*[[failed(i)] for i in range(8)]))
    assert kinds(report) == [(Kind.FAILURES, Action.ESCALATE)]
    assert report.verdict is Verdict.ESCALATE


@pytest.mark.parametrize(
    ("between", "breaks"),
    [
        pytest.param([failed(9)], True, id="failed-round-keeps-the-streak"),
        pytest.param([new(9)], False, id="new-fact-round-resets-it"),
    ],
)
def test_failed_rounds_neither_extend_nor_end_the_no_new_facts_streak(
    between: list[ToolCall], breaks: bool
) -> None:
    """Three stale rounds, an all-failed round, then two stale ones break; a new fact resets."""
    stale = [[seen(i)] for i in range(1, 4)]
    events = rounds([seen(0)], [failed(0)], *stale, between, [seen(4)], [seen(5)])
    report = run(events, StallPolicy(failure_streak=10))
    assert ((Kind.NO_NEW_FACTS, Action.BREAK) in kinds(report)) is breaks


def test_rounds_without_model_calls_are_one_call_each() -> None:
    """With no model calls each tool call is its own round, and its row carries the break."""
    report = run([seen(i) for i in range(6)])
    assert [row.round for row in report.ledger] == [1, 2, 3, 4, 5, 6]
    assert report.ledger[-1].action is Action.BREAK
    assert kinds(report) == [(Kind.NO_NEW_FACTS, Action.BREAK)]


def test_round_findings_do_not_rewrite_returned_rows() -> None:
    """In a model-driven run a round-level finding fires at round close; rows stay as returned."""
    detector = RunDetector()
    rows = []
    for i in range(7):
        detector.model_call(M)
        rows.append(detector.tool_call(seen(i)).row)
    report = detector.finish()
    assert report.ledger == tuple(rows)
    assert kinds(report) == [(Kind.NO_NEW_FACTS, Action.BREAK)]


# -- refused_rounds ------------------------------------------------------------


@pytest.mark.parametrize(("n", "fires"), [(4, False), (5, True)])
def test_refused_rounds_threshold(n: int, fires: bool) -> None:
    """Five rounds in a row in which every call was refused break the run."""
    report = run(rounds([new(0)], *[[REFUSED, REFUSED]] * n))
    assert bool(of_kind(report, Kind.REFUSED_ROUNDS)) is fires
    assert of_kind(report, Kind.NO_NEW_FACTS) == []


def test_refused_rounds_reset_when_any_call_runs() -> None:
    """A round where one call ran resets the refusal streak, even if it found nothing new."""
    events = rounds([seen(0)], *[[REFUSED]] * 4, [REFUSED, seen(1)], *[[REFUSED]] * 4)
    assert of_kind(run(events), Kind.REFUSED_ROUNDS) == []


def test_counters_are_kept_apart() -> None:
    """Refusal rounds between seen-result rounds do not wipe the seen-results count."""
    batches: list[list[ToolCall]] = [[seen(0)]]
    for i in range(1, 6):
        batches += [[seen(i)], [REFUSED]]
    report = run(rounds(*batches))
    assert [f.kind for f in report.findings if f.kind is not Kind.DUPLICATE_CALL] == [
        Kind.NO_NEW_FACTS
    ]


# -- failures ------------------------------------------------------------------

ERR = call("deploy", {"v": 1}, {"error": "x"}, Status.ERROR)
OVER = call("deploy", {"v": 1}, ABSENT, Status.OVERLOADED)
OK_DEPLOY = call("deploy", {"v": 0}, {"ok": True})


@pytest.mark.parametrize(
    ("sequence", "escalate_at"),
    [
        pytest.param([ERR] * 4, [], id="four"),
        pytest.param([ERR] * 5, [5], id="five"),
        pytest.param([ERR, OVER, ERR, OVER, ERR], [5], id="overloaded-counts"),
        pytest.param([ERR] * 4 + [OK_DEPLOY] + [ERR] * 4, [], id="success-resets"),
        pytest.param([ERR] * 4 + [call("lint")] + [ERR], [6], id="other-tool-no-reset"),
        pytest.param([ERR] * 4 + [REFUSED] + [ERR], [6], id="refused-no-reset"),
        pytest.param([ERR] * 10, [5], id="fires-once"),
        pytest.param([ERR] * 5 + [OK_DEPLOY] + [ERR] * 5, [5, 11], id="fires-again"),
    ],
)
def test_failures_streak(sequence: list[ToolCall], escalate_at: list[int]) -> None:
    """Five failures in a row of one tool escalate; only that tool's success resets."""
    report = run(sequence)
    assert [f.seq for f in of_kind(report, Kind.FAILURES)] == escalate_at
    assert all(f.action is Action.ESCALATE for f in of_kind(report, Kind.FAILURES))


def test_failures_are_counted_per_tool() -> None:
    """Failures of two tools interleaved do not add up."""
    other = call("build", {"v": 1}, {"error": "y"}, Status.ERROR)
    assert of_kind(run([ERR, other] * 4), Kind.FAILURES) == []


def test_shared_limit_and_overrides() -> None:
    """One shared limit drives all three rules unless each is overridden."""
    shared = StallPolicy(no_progress_limit=2)
    assert (shared.no_new_facts_limit, shared.refused_rounds_limit, shared.failure_limit) == (
        2,
    ) * 3
    assert [f.seq for f in of_kind(run([ERR] * 3, shared), Kind.FAILURES)] == [2]
    split = StallPolicy(no_progress_limit=2, failure_streak=3)
    assert [f.seq for f in of_kind(run([ERR] * 3, split), Kind.FAILURES)] == [3]


# -- budgets -------------------------------------------------------------------


def test_budgets_are_off_by_default() -> None:
    """Without limits a long healthy run is never cut off."""
    report = run([call(args={"q": i}, result={"r": i}) for i in range(300)])
    assert report.findings == ()


def test_call_budget_break_once() -> None:
    """Exceeding max_tool_calls breaks once; refused calls do not spend the budget."""
    events = [call(args={"q": i}, result={"r": i}) for i in range(2)] + [REFUSED] * 3
    events += [call(args={"q": i}, result={"r": i}) for i in range(2, 6)]
    report = run(events, StallPolicy(max_tool_calls=5, duplicate_mode=DuplicateMode.OFF))
    (finding,) = report.findings
    assert (finding.kind, finding.action, finding.seq, finding.count) == (
        Kind.BUDGET,
        Action.BREAK,
        9,
        6,
    )


@pytest.mark.parametrize(("overloaded", "breaks"), [(3, False), (4, True)])
def test_overloaded_allowance(overloaded: int, breaks: bool) -> None:
    """Three overloaded calls are free; the fourth counts against the budget."""
    events = [
        call(args={"q": i}, status=Status.OVERLOADED, result=ABSENT) for i in range(overloaded)
    ]
    events += [call(args={"q": "ok"})] * 1
    report = run(events, StallPolicy(max_tool_calls=1))
    assert bool(of_kind(report, Kind.BUDGET)) is breaks


def test_round_limit_grows_by_overloaded_rounds() -> None:
    """A round that had an overloaded call adds one round to max_rounds."""
    over = call(args={"q": "o"}, status=Status.OVERLOADED, result=ABSENT)
    plain = rounds([new(1)], [over], [new(2)])
    assert of_kind(run(plain, StallPolicy(max_rounds=2)), Kind.BUDGET) == []
    longer = rounds([new(1)], [new(2)], [new(3)])
    (finding,) = of_kind(run(longer, StallPolicy(max_rounds=2)), Kind.BUDGET)
    assert finding.round == 3
    assert "limit of 2 rounds" in finding.message


# -- verdict, score, ledger, runs ----------------------------------------------


@pytest.mark.parametrize(
    ("action", "verdict"),
    [
        (Action.CONTINUE, Verdict.OK),
        (Action.REFUSE, Verdict.WARN),
        (Action.WARN, Verdict.WARN),
        (Action.ESCALATE, Verdict.ESCALATE),
        (Action.BREAK, Verdict.BREAK),
    ],
)
def test_verdict_of_action(action: Action, verdict: Verdict) -> None:
    """A refuse finding makes the verdict at least warn; the rest map one to one."""
    assert Verdict.of(action) is verdict


def test_verdict_is_the_most_severe() -> None:
    """Verdicts rank break > escalate > warn > ok, whatever order the findings came in."""
    events = [ERR] * 5 + [call()] * 5
    report = run(events)
    assert {f.action for f in report.findings} >= {Action.ESCALATE, Action.BREAK}
    assert report.verdict is Verdict.BREAK
    ordered = sorted(Verdict, key=lambda v: v.severity)
    assert ordered == [Verdict.OK, Verdict.WARN, Verdict.ESCALATE, Verdict.BREAK]


@pytest.mark.parametrize(
    ("tools", "share"),
    [
        ([], 0.0),
        (["a"], 0.0),
        (["a", "a"], 0.5),
        (["a", "a", "b", "a"], 0.5),
        (["a", "b", "c", "d"], 0.0),
        (["a"] * 10, 0.9),
    ],
)
def test_stall_score(tools: list[str], share: float) -> None:
    """The repeat share places the score within the verdict's quarter: (severity + share) / 4."""
    events = [call(t) for t in tools]
    report = detect(events, NO_DUP)[0] if events else RunDetector().finish()
    assert report.stall_score == pytest.approx((report.verdict.severity + share) / 4)
    assert stall_score(report.ledger, report.verdict) == report.stall_score
    assert report.verdict.severity / 4 <= report.stall_score < (report.verdict.severity + 1) / 4


def test_ledger_row_fields() -> None:
    """Rows number seq and round from 1 and carry digests, status and the span id."""
    events: list[ToolCall | ModelCall] = [
        M,
        call("a", span_id="s1"),
        call("b", result=ABSENT, span_id="s2"),
        M,
        call("a", span_id="s3"),
    ]
    report = run(events, NO_DUP)
    first, second, third = report.ledger
    assert [r.seq for r in report.ledger] == [1, 2, 3]
    assert [r.round for r in report.ledger] == [1, 1, 2]
    assert [r.span_id for r in report.ledger] == ["s1", "s2", "s3"]
    assert second.result_digest is None
    assert first.signature == third.signature
    assert first.call_signature == third.call_signature != second.call_signature
    assert (third.repeat_of, third.count, third.consecutive) == (1, 2, 1)
    assert [r.new_fact for r in report.ledger] == [True, True, False]
    assert all(r.status is Status.OK for r in report.ledger)
    assert (report.tool_calls, report.rounds) == (3, 2)


def test_detect_groups_interleaved_runs() -> None:
    """Events of several runs interleave; each run is detected on its own, in first-seen order."""
    events: list[ToolCall | ModelCall] = []
    for _ in range(5):
        events += [call(run_key="b"), call("other", args={"n": len(events)}, run_key="a")]
    reports = detect(events, NO_DUP)
    assert [r.run_key for r in reports] == ["b", "a"]
    assert reports[0].verdict is Verdict.BREAK
    assert reports[1].verdict is Verdict.OK
    assert all(r.tool_calls == 5 for r in reports)


def test_live_and_batch_feeding_agree(trace_events: Events) -> None:
    """Feeding a detector event by event gives the same report as ``detect``."""
    events = trace_events("reworded_queries")
    detector = RunDetector(run_key=events[0].run_key)
    for event in events:
        detector.feed(event)
    assert detector.finish() == run(events)
    assert detector.verdict is Verdict.BREAK


def test_duplicate_call_within_one_round() -> None:
    """A call that already ran earlier in the same round is a duplicate too."""
    findings = of_kind(run([M, call(), call()]), Kind.DUPLICATE_CALL)
    assert [(f.seq, f.first_seq, f.round) for f in findings] == [(2, 1, 1)]
