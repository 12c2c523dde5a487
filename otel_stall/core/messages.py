"""Guidance written for the model, not for an operator.

A bare code makes a model give up ("blocked" reads as "impossible"), so each
message says what is already known and what to do next.
"""

from __future__ import annotations

from otel_stall.core.records import Action


def repeat(tool: str, count: int, first_seq: int, action: Action) -> str:
    """Back-to-back identical calls with identical results."""
    head = (
        f"Stall: `{tool}` was called {count} times in a row with the same arguments and "
        f"returned the same result each time (first at step {first_seq})."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: write your answer from what you have gathered."
    return (
        head + " That result is already in the conversation: use it, or change the arguments "
        "or the approach. You may re-plan once."
    )


def recurrence(tool: str, count: int, first_seq: int) -> str:
    """The same call with the same result again, with other calls between."""
    return (
        f"Stall: `{tool}` has been called {count} times since step {first_seq} with the same "
        "arguments and returned the same result each time. Calling it again will not tell you "
        "anything new: use that result, or change the arguments or the approach. "
        "You may re-plan once."
    )


def duplicate(tool: str, first_seq: int) -> str:
    """A call that already ran in this run."""
    return (
        f"Refused: `{tool}` already ran with these arguments at step {first_seq}, and its "
        "result is in the conversation. Use that result, or change the arguments or the approach."
    )


def duplicate_in_a_row(tool: str, count: int) -> str:
    """The chat check: the Nth identical call in a row."""
    return (
        f"Refused: this would be call {count} in a row of `{tool}` with the same arguments. "
        "The earlier result is in the conversation: use that value, or use a different tool."
    )


def no_new_facts(rounds: int, first_seq: int) -> str:
    """Rounds whose results had all been seen before."""
    return (
        f"No new facts in {rounds} rounds in a row (since step {first_seq}): every result had "
        "been seen before. Stop calling tools and write the answer from what you have gathered."
    )


def refused_rounds(rounds: int) -> str:
    """Rounds in which every call was refused."""
    return (
        f"Every tool call was refused in {rounds} rounds in a row. Stop repeating refused calls: "
        "answer from what you have, or take a different approach."
    )


def failures(tool: str, count: int, first_seq: int) -> str:
    """A failure streak of one tool."""
    return (
        f"`{tool}` failed {count} times in a row (since step {first_seq}). This is a tool "
        "failure, not a stall: escalate instead of retrying."
    )


def call_budget(limit: int) -> str:
    """The tool-call budget ran out."""
    return f"The tool-call budget of {limit} calls is spent. Write the answer from what you have."


def round_budget(limit: int) -> str:
    """The round limit was reached."""
    return f"The limit of {limit} rounds is reached. Write the answer from what you have."


def failure_loop(tool: str, count: int, first_seq: int) -> str:
    """The same call failing the same way several times in a row."""
    return (
        f"`{tool}` failed {count} times in a row with the same arguments and the same error "
        f"(since step {first_seq}). Retrying it unchanged will fail again: change the "
        "arguments or the approach, or report the failure."
    )


def failure_loop_refused(tool: str, count: int, first_seq: int) -> str:
    """The gate refuses the next try of a call that keeps failing the same way."""
    return (
        f"Refused: `{tool}` with these arguments failed {count} times in a row with the same "
        f"error (since step {first_seq}); it would fail again. Change the arguments or the "
        "approach, or report the failure."
    )


def model_failure_loop(model: str, count: int) -> str:
    """Model calls failing the same way several times in a row."""
    return (
        f"The model call ({model}) failed {count} times in a row with the same error. "
        "Retrying unchanged will fail again: shorten the context, wait, or stop and report it."
    )


def cycle(length: int, periods: int, first_seq: int, action: Action) -> str:
    """A sequence of calls repeating back to back with the same results."""
    head = (
        f"Stall: the same {length} calls have run {periods} times over in the same order, "
        f"with the same results each time (since step {first_seq})."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: write your answer from what you have gathered."
    return (
        head + " Those results are already in the conversation: use them, or take a "
        "different approach. You may re-plan once."
    )


def monologue(count: int, action: Action) -> str:
    """The model repeating the same message with nothing new between."""
    head = (
        f"Stall: you have written the same message {count} times in a row, and nothing new "
        "came in between."
    )
    if action is Action.BREAK:
        return head + " The loop is stopped: give your final answer now."
    return head + " Repeating it will not change the outcome: take a different step or finish."


def chanting(count: int) -> str:
    """The model's output repeating one passage over and over."""
    return (
        f"Stall: your output repeats the same passage ({count} times, close together). "
        "Stop repeating it: say what you need or what is blocking you, take a different "
        "step, or finish."
    )


def delegate_stalled(agent: str, verdict: str) -> str:
    """A sub-agent this run handed a task to ended stalled."""
    return (
        f"Stall: the agent you handed a task to ({agent}) ended stuck (verdict {verdict}): it "
        "went round in circles without finishing. Handing it the same task again will loop "
        "again: re-plan instead. Split the task, give it what it was missing, or do it "
        "another way."
    )
