"""Generate the peer loop detectors' test scenarios as traces of OTel GenAI spans.

Run ``python tests/peers/generate_peers.py [DIR]`` (default: next to this script) to
write one OTLP/JSON-lines file per scenario under ``<peer>/`` and the
``manifest.toml`` that gives each one the peer's judgement, the test it comes
from and what issue #19 implies otel-stall should say. ``--report`` instead
prints the README's table of current ``otel-stall replay`` verdicts.

Each scenario restates, in this project's trace format and in our own words,
a case from the published test suites of OpenHands' ``StuckDetector``,
gemini-cli's ``LoopDetectionService`` and Roo Code's ``ToolRepetitionDetector``.
Nothing here is their code: the tests were read, and the situations they set
up are written again as agent runs.

The spans go through the real SDK (a ``TracerProvider`` with a fixed id
generator, fixed timestamps, an explicit resource and sampler, so neither the
SDK version nor ``OTEL_*`` variables leak in) and are written by
:class:`OtlpJsonLinesSpanExporter`, one line per span. Running the script twice
gives identical files; ``tests/peers/test_peer_fixtures_generated.py`` checks that
the committed files are what it writes.

How a peer's events become spans:

- an action is an ``execute_tool`` span, preceded by the ``chat`` span in which
  the model asked for it; an observation is the tool's result, or an ERROR
  status with ``error.type`` and a message when the peer's observation is an error;
- an assistant message, a thought or streamed text is ``gen_ai.output.messages``
  on a ``chat`` span (only in scenarios about model text);
- a user message is the ``gen_ai.input.messages`` of the next ``chat`` span
  (only the new message, not the whole history);
- a context-window error is a ``chat`` span with ERROR status and
  ``error.type``; a new user turn is a new ``invoke_agent`` run (its own trace,
  one ``gen_ai.conversation.id``); a delegate is an ``invoke_agent`` span
  nested under the parent's ``execute_tool`` span.

Where a peer blocks a call, the fixture still shows the call as run, with the
same result as before: the traces record what the agent did, as replay (or a
live pipeline without the gate) sees it, and the judgement says whether the
peer flags the run. Where a peer's test gives no result, a repeated call gets
the same result each time (a deterministic tool).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from otel_stall import Action, OtlpJsonLinesSpanExporter, Verdict

BASE_NS: Final = 1_735_689_600_000_000_000
"""2025-01-01T00:00:00Z: every fixture's first span starts here."""
GAP_NS: Final = 5_000_000
CHAT_NS: Final = 800_000_000
FAILED_CHAT_NS: Final = 300_000_000
TOOL_NS: Final = 150_000_000
MODEL: Final = "gpt-4o-2024-08-06"
PROVIDER: Final = "openai"

Judgement = Literal["stuck", "not_stuck"]
Expect = Literal["warn_or_above", "ok"]
Basis = Literal["behaviour", "threshold", "stream_reset", "rule_scope"]

# -- the peers' sources, as the search index holds them ---------------------

OPENHANDS_COMMIT: Final = "396b2c9faab6dd078a5e8529afa959f329c94389"
GEMINI_COMMIT: Final = "027684383b97f6e08768d254b91429c3da0905b7"
ROO_COMMIT: Final = "1ad5afb9ded36b5261451a9710179cbd9f2830a1"


@dataclass(frozen=True)
class Peer:
    """A peer detector: its name here, its service name in the traces, its test file."""

    key: str
    service: str
    repo: str
    commit: str
    test_path: str

    @property
    def source(self) -> str:
        """The test file's GitHub URL at the commit that was read."""
        return f"https://github.com/{self.repo}/blob/{self.commit}/{self.test_path}"


OPENHANDS: Final = Peer(
    "openhands",
    "openhands",
    "All-Hands-AI/OpenHands",
    OPENHANDS_COMMIT,
    "tests/unit/controller/test_is_stuck.py",
)
GEMINI: Final = Peer(
    "gemini_cli",
    "gemini-cli",
    "google-gemini/gemini-cli",
    GEMINI_COMMIT,
    "packages/core/src/services/loopDetectionService.test.ts",
)
ROO: Final = Peer(
    "roo_code",
    "roo-code",
    "RooCodeInc/Roo-Code",
    ROO_COMMIT,
    "src/core/tools/__tests__/ToolRepetitionDetector.spec.ts",
)
PEERS: Final = (OPENHANDS, GEMINI, ROO)

# -- what a run is made of ---------------------------------------------------


@dataclass(frozen=True)
class Call:
    """The model asks for one tool (in a ``chat`` span), then the tool runs."""

    tool: str
    args: Mapping[str, Any]
    result: str | None = None
    error: tuple[str, str] | None = None
    """``(error.type, message)`` when the tool fails."""
    text: str | None = None
    """Text the model streamed before asking for the tool."""
    thought: str | None = None
    """A reasoning part the model emitted before asking for the tool."""
    user: str | None = None
    """A user message that came in just before this model call."""


@dataclass(frozen=True)
class Say:
    """The model answers with text only."""

    text: str
    user: str | None = None


@dataclass(frozen=True)
class ModelFailure:
    """A model call that fails, such as a context window exceeded."""

    error_type: str
    message: str
    user: str | None = None


@dataclass(frozen=True)
class Delegate:
    """A tool call that runs another agent inside it (OpenHands' delegation)."""

    tool: str
    args: Mapping[str, Any]
    run: Run
    error: tuple[str, str] | None = None


Step = Call | Say | ModelFailure | Delegate


@dataclass(frozen=True)
class Run:
    """One ``invoke_agent`` span and the steps inside it."""

    agent: str
    steps: Sequence[Step]
    conversation: str | None = None
    judgement: Judgement | None = None
    """The peer's judgement of this run, in fixtures with more than one run."""
    expect: Expect | None = None


@dataclass(frozen=True)
class Scenario:
    """One fixture: a peer test's situation as runs, with what the peer and #19 say."""

    peer: Peer
    name: str
    test: str
    judgement: Judgement
    basis: Basis
    rule: str
    description: str
    runs: Sequence[Run]
    expect: Expect | None = None
    """What #19 implies otel-stall should say; by default the peer's judgement mapped."""
    conflict: str = ""
    """Why ``expect`` differs from the peer's judgement, or why no #19 rule as written agrees."""
    also: Sequence[str] = ()
    """Other tests of the same suite whose situation is this same trace."""
    peer_config: str = ""

    @property
    def id(self) -> str:
        """``<peer>/<name>``, also the fixture's path without ``.jsonl``."""
        return f"{self.peer.key}/{self.name}"

    @property
    def expected(self) -> Expect:
        """What #19 implies: the explicit override, else the judgement mapped."""
        return self.expect or _mapped(self.judgement)


def _mapped(judgement: Judgement) -> Expect:
    return "warn_or_above" if judgement == "stuck" else "ok"


# -- deterministic ids, timestamps and the span writer -----------------------


class FixedIds(IdGenerator):
    """Ids from a hash of the fixture's name and a counter: the same every time."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._count = 0

    def _next(self, size: int) -> int:
        self._count += 1
        digest = hashlib.sha256(f"{self._label}/{self._count}".encode()).digest()
        return int.from_bytes(digest[:size], "big") or 1

    def generate_span_id(self) -> int:
        """A fixed 64-bit span id."""
        return self._next(8)

    def generate_trace_id(self) -> int:
        """A fixed 128-bit trace id."""
        return self._next(16)


class Writer:
    """Emits one scenario's runs as spans on a fixed timeline."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.now = BASE_NS
        self.calls = 0
        self.model_calls = 0
        self.runs: list[tuple[Run, str]] = []
        """Each run and its span id, in the order the runs start."""

    def _start(self, name: str, parent: Span | None, kind: SpanKind, attrs: dict[str, Any]) -> Span:
        self.now += GAP_NS
        context = None if parent is None else set_span_in_context(parent)
        return self.tracer.start_span(
            name, context=context, kind=kind, attributes=attrs, start_time=self.now
        )

    def _end(self, span: Span, duration_ns: int) -> None:
        self.now += duration_ns
        span.end(end_time=self.now)

    def run(self, run: Run, parent: Span | None = None) -> None:
        """An ``invoke_agent`` span around the run's steps."""
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": run.agent,
            "gen_ai.provider.name": PROVIDER,
        }
        if run.conversation is not None:
            attrs["gen_ai.conversation.id"] = run.conversation
        agent = self._start(f"invoke_agent {run.agent}", parent, SpanKind.INTERNAL, attrs)
        self.runs.append((run, f"{agent.get_span_context().span_id:016x}"))
        outer_model_calls, self.model_calls = self.model_calls, 0
        for step in run.steps:
            self.step(step, agent)
        self.model_calls = outer_model_calls
        self._end(agent, GAP_NS)

    def step(self, step: Step, agent: Span) -> None:
        """One model call, and the tool call it asked for if any."""
        if isinstance(step, Say):
            self.chat(agent, _text_output(step.text), step.user, output_tokens=_tokens(step.text))
        elif isinstance(step, ModelFailure):
            self.failed_chat(agent, step)
        elif isinstance(step, Call):
            call_id = self._call_id()
            output = _call_output(step, call_id)
            self.chat(agent, output, step.user, output_tokens=_tokens(json.dumps(step.args)) + 12)
            self.tool(agent, step.tool, step.args, call_id, step.result, step.error)
        else:
            call_id = self._call_id()
            self.chat(agent, None, None, output_tokens=_tokens(json.dumps(step.args)) + 12)
            span = self._tool_span(agent, step.tool, step.args, call_id)
            self.run(step.run, span)
            self._finish_tool(span, None, step.error)

    def _call_id(self) -> str:
        self.calls += 1
        return f"call_{self.calls:03d}"

    def chat(
        self, agent: Span, output: list[dict[str, Any]] | None, user: str | None, output_tokens: int
    ) -> None:
        """A successful ``chat`` span: usage, and output messages where the scenario has any."""
        attrs = self._chat_attributes(user)
        attrs["gen_ai.response.model"] = MODEL
        attrs["gen_ai.usage.input_tokens"] = 1_000 + 150 * self.model_calls
        attrs["gen_ai.usage.output_tokens"] = output_tokens
        if output is not None:
            attrs["gen_ai.output.messages"] = _dumps(output)
            attrs["gen_ai.response.finish_reasons"] = (output[-1]["finish_reason"],)
        self.model_calls += 1
        span = self._start(f"chat {MODEL}", agent, SpanKind.CLIENT, attrs)
        self._end(span, CHAT_NS)

    def failed_chat(self, agent: Span, failure: ModelFailure) -> None:
        """A ``chat`` span that ends in an error, without usage (the provider reported none)."""
        attrs = self._chat_attributes(failure.user)
        attrs["error.type"] = failure.error_type
        self.model_calls += 1
        span = self._start(f"chat {MODEL}", agent, SpanKind.CLIENT, attrs)
        span.set_status(Status(StatusCode.ERROR, failure.message))
        self._end(span, FAILED_CHAT_NS)

    @staticmethod
    def _chat_attributes(user: str | None) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": MODEL,
        }
        if user is not None:
            attrs["gen_ai.input.messages"] = _dumps(
                [{"role": "user", "parts": [{"type": "text", "content": user}]}]
            )
        return attrs

    def tool(
        self,
        agent: Span,
        tool: str,
        args: Mapping[str, Any],
        call_id: str,
        result: str | None,
        error: tuple[str, str] | None,
    ) -> None:
        """An ``execute_tool`` span: its result, or an error."""
        span = self._tool_span(agent, tool, args, call_id)
        self._finish_tool(span, result, error)

    def _tool_span(self, agent: Span, tool: str, args: Mapping[str, Any], call_id: str) -> Span:
        """A started tool span; arguments keep their given key order (``parameter_order``)."""
        attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.type": "function",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(args, ensure_ascii=False),
        }
        return self._start(f"execute_tool {tool}", agent, SpanKind.INTERNAL, attrs)

    def _finish_tool(self, span: Span, result: str | None, error: tuple[str, str] | None) -> None:
        if result is not None:
            span.set_attribute("gen_ai.tool.call.result", result)
        if error is not None:
            span.set_attribute("error.type", error[0])
            span.set_status(Status(StatusCode.ERROR, error[1]))
        self._end(span, TOOL_NS)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _tokens(text: str) -> int:
    """A rough, fixed token count: four characters a token, at least one."""
    return max(1, len(text) // 4)


def _text_output(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]


def _call_output(call: Call, call_id: str) -> list[dict[str, Any]] | None:
    """The model's output for a tool call, only when the scenario is about its text."""
    if call.text is None and call.thought is None:
        return None
    parts: list[dict[str, Any]] = []
    if call.thought is not None:
        parts.append({"type": "reasoning", "content": call.thought})
    if call.text is not None:
        parts.append({"type": "text", "content": call.text})
    parts.append({"type": "tool_call", "id": call_id, "name": call.tool, "arguments": call.args})
    return [{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}]


@dataclass(frozen=True)
class Rendered:
    """A scenario's file, and its runs with their span ids."""

    data: bytes
    runs: list[tuple[Run, str]]


def render(scenario: Scenario) -> Rendered:
    """The scenario's spans as OTLP/JSON lines, one span a line, through the real SDK."""
    stream = io.BytesIO()
    provider = TracerProvider(
        sampler=ALWAYS_ON,
        resource=Resource({"service.name": scenario.peer.service}),
        id_generator=FixedIds(scenario.id),
        span_limits=SpanLimits(
            max_span_attributes=64,
            max_attribute_length=SpanLimits.UNSET,
            max_span_attribute_length=SpanLimits.UNSET,
        ),
    )
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesSpanExporter(stream)))
    writer = Writer(provider.get_tracer("otel-stall.peers", "1.0"))
    for run in scenario.runs:
        writer.run(run)
    provider.shutdown()
    return Rendered(stream.getvalue(), writer.runs)


# -- OpenHands: StuckDetector (tests/unit/controller/test_is_stuck.py) -------

OH_AGENT: Final = "CodeActAgent"
EXIT_0: Final = "\n[The command completed with exit code 0.]"
CWD_LINE: Final = "[Jupyter current working directory: /workspace]"
PY_LINE: Final = "[Jupyter Python interpreter: /opt/venv/bin/python]"
EDIT_CELL: Final = (
    "edit_file_by_replace(\n"
    "    'inventory.py',\n"
    '    to_replace="""def restock(items):\n'
    "    if not items:\n"
    '        return []\n"""'
)


def bash(command: str, output: str, user: str | None = None) -> Call:
    """OpenHands' ``CmdRunAction`` and its output."""
    return Call("execute_bash", {"command": command}, output + EXIT_0, user=user)


def view(path: str, content: str) -> Call:
    """OpenHands' ``FileReadAction`` and the file's content."""
    return Call("str_replace_editor", {"command": "view", "path": path}, content)


def cell(code: str, output: str) -> Call:
    """OpenHands' ``IPythonRunCellAction``: the cell runs; a syntax error is its output."""
    return Call("execute_ipython_cell", {"code": code}, output)


def syntax_error_cells(message: str, varying: bool, count: int = 4) -> list[Step]:
    """The same edit cell run ``count`` times; its SyntaxError is fixed or moves each time."""
    steps: list[Step] = []
    for i in range(count):
        line = (i + 1) * 10 if varying else 42
        trailing = "\n" * (i + 1) if varying else ""
        output = (
            f"  Cell In[1], line {line}\n"
            '    to_replace="""def restock(items):\n'
            "               ^\n"
            f"{message}{trailing}\n{CWD_LINE}\n{PY_LINE}"
        )
        steps.append(cell(EDIT_CELL, output))
    return steps


def unterminated_cells(varying: bool, count: int = 4) -> list[Step]:
    """A cell with an unclosed string literal, run ``count`` times."""
    steps: list[Step] = []
    for i in range(count):
        line = (i + 1) * 10 if varying else 1
        output = (
            f'print("  Cell In[1], line {line}\nstatus\n       ^\n'
            f"SyntaxError: unterminated string literal (detected at line {line})\n"
            f"{CWD_LINE}\n{PY_LINE}"
        )
        steps.append(cell(EDIT_CELL, output))
    return steps


def ls_empty(count: int, user_at: int | None = None, user: str = "") -> list[Step]:
    """``ls`` in an empty directory, ``count`` times; a user message before call ``user_at``."""
    return [bash("ls", "", user=user if i == user_at else None) for i in range(count)]


def window_error(user: str | None = None) -> ModelFailure:
    """A model call rejected because the prompt no longer fits the context window."""
    return ModelFailure(
        "ContextWindowExceededError",
        "the prompt is 131,482 tokens, over this model's 128,000-token context window",
        user=user,
    )


def context_window_interleaved() -> list[Step]:
    """Ten context-window errors, each followed (but the last) by ordinary work."""
    steps: list[Step] = []
    for i in range(10):
        steps.append(window_error())
        if i < 9:
            steps.append(bash(f"ls {i}", "file1.txt\nfile2.txt"))
            if i % 2 == 0:
                steps.append(view(f"/workspace/file{i}.txt", f"notes for part {i}"))
    return steps


LISTING: Final = "file1.txt\nfile2.txt"
FILE1: Final = "first file: three lines of notes"
FILE2: Final = "second file: a short list of tasks"
REPLY: Final = "I am fine, and thank you for asking."


def openhands() -> list[Scenario]:
    """OpenHands' ``TestStuckDetector`` cases, and the delegate case of ``TestAgentController``."""
    peer = OPENHANDS

    def one(agent_steps: Sequence[Step]) -> list[Run]:
        return [Run(OH_AGENT, tuple(agent_steps))]

    return [
        Scenario(
            peer,
            "history_too_short",
            "TestStuckDetector::test_history_too_short",
            "not_stuck",
            "behaviour",
            "any (nothing to count yet)",
            "A user greeting and a single ls: too little history to call anything a loop.",
            one([bash("ls", LISTING, user="Hello")]),
        ),
        Scenario(
            peer,
            "repeating_action_observation",
            "TestStuckDetector::test_is_stuck_repeating_action_observation",
            "stuck",
            "behaviour",
            "repeat",
            "The same ls with the same (empty) output four times; a user message after "
            "the second does not break the streak.",
            one(ls_empty(4, user_at=2, user="Done")),
        ),
        Scenario(
            peer,
            "repeating_action_error",
            "TestStuckDetector::test_is_stuck_repeating_action_error",
            "stuck",
            "behaviour",
            "failure loop",
            "The same unknown command fails four times with one error class and varying "
            "messages; OpenHands stops at the third error in a row.",
            one(
                [
                    Call(
                        "execute_bash",
                        {"command": "frobnicate --all"},
                        error=("ErrorObservation", message),
                        user="Done" if i == 2 else None,
                    )
                    for i, message in enumerate(
                        (
                            "bash: frobnicate: command not found",
                            "still no such command, or some other failure",
                            "a different error this time",
                            "bash: frobnicate: command not found",
                        )
                    )
                ]
            ),
        ),
        Scenario(
            peer,
            "invalid_syntax_error",
            "TestStuckDetector::test_is_stuck_invalid_syntax_error",
            "stuck",
            "behaviour",
            "repeat",
            "The same edit cell runs four times and prints the same 'invalid syntax' "
            "error at the same line each time.",
            one(
                syntax_error_cells(
                    "SyntaxError: invalid syntax. Perhaps you forgot a comma?", False
                )
            ),
        ),
        Scenario(
            peer,
            "invalid_syntax_error_random_lines",
            "TestStuckDetector::test_is_not_stuck_invalid_syntax_error_random_lines",
            "not_stuck",
            "behaviour",
            "repeat, failure loop (must stay quiet: the output differs each time)",
            "The same edit cell runs four times; its 'invalid syntax' error points at a "
            "different line each time, so each run told the agent something new.",
            one(
                syntax_error_cells("SyntaxError: invalid syntax. Perhaps you forgot a comma?", True)
            ),
        ),
        Scenario(
            peer,
            "invalid_syntax_error_three_incidents",
            "TestStuckDetector::test_is_not_stuck_invalid_syntax_error_only_three_incidents",
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "Three runs of the same edit cell, each failing on a different line.",
            one(
                syntax_error_cells(
                    "SyntaxError: invalid syntax. Perhaps you forgot a comma?", True, count=3
                )
            ),
        ),
        Scenario(
            peer,
            "incomplete_input_error",
            "TestStuckDetector::test_is_stuck_incomplete_input_error",
            "stuck",
            "behaviour",
            "repeat",
            "The same edit cell runs four times and stops at the same 'incomplete input' "
            "error each time.",
            one(syntax_error_cells("SyntaxError: incomplete input", False)),
        ),
        Scenario(
            peer,
            "incomplete_input_error_random_lines",
            "TestStuckDetector::test_is_not_stuck_incomplete_input_error",
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "The same edit cell runs four times with 'incomplete input' reported at a "
            "different line each time.",
            one(syntax_error_cells("SyntaxError: incomplete input", True)),
        ),
        Scenario(
            peer,
            "unterminated_string_error",
            "TestStuckDetector::test_is_stuck_ipython_unterminated_string_error",
            "stuck",
            "behaviour",
            "repeat",
            "A cell with an unclosed string literal runs four times with the same error "
            "at the same line.",
            one(unterminated_cells(False)),
        ),
        Scenario(
            peer,
            "unterminated_string_error_random_lines",
            "TestStuckDetector::test_is_not_stuck_ipython_unterminated_string_error_random_lines",
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "The unclosed-string cell runs four times; the error's line moves each time.",
            one(unterminated_cells(True)),
        ),
        Scenario(
            peer,
            "unterminated_string_error_two_incidents",
            "TestStuckDetector::test_is_not_stuck_ipython_unterminated_string_error_only_two_incidents",
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet: two identical calls)",
            "The unclosed-string cell runs twice with the same error: two identical calls "
            "are not a loop.",
            one(unterminated_cells(False, count=2)),
        ),
        Scenario(
            peer,
            "syntax_error_not_at_end",
            "TestStuckDetector::test_is_not_stuck_ipython_syntax_error_not_at_end",
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "The same one-line cell runs four times; the error's line and the output "
            "after it change every time.",
            one(
                [
                    cell(
                        'print("hello',
                        'print("hello\n       ^\n'
                        f"SyntaxError: unterminated string literal (detected at line {line})\n"
                        f"{tail}",
                    )
                    for line, tail in (
                        (1, "some more output follows"),
                        (1, "and more output, on and on"),
                        (3, "that is all"),
                        (2, "the last line of output"),
                    )
                ]
            ),
        ),
        Scenario(
            peer,
            "action_observation_pattern",
            "TestStuckDetector::test_is_stuck_repeating_action_observation_pattern",
            "stuck",
            "behaviour",
            "cycle",
            "ls then viewing file1.txt, with the same outputs, three times over (a "
            "two-step cycle); a user message before the third round changes nothing.",
            one(
                [
                    bash("ls", LISTING),
                    view("/workspace/file1.txt", FILE1),
                    bash("ls", LISTING),
                    view("/workspace/file1.txt", FILE1),
                    bash("ls", LISTING, user="Come on"),
                    view("/workspace/file1.txt", FILE1),
                ]
            ),
        ),
        Scenario(
            peer,
            "not_stuck",
            "TestStuckDetector::test_is_stuck_not_stuck",
            "not_stuck",
            "behaviour",
            "cycle (must stay quiet: an alternation whose arguments vary)",
            "ls, view file1, pwd, view file2, then pwd and view file2 again: an "
            "alternation whose arguments vary, never three full periods of one cycle.",
            one(
                [
                    bash("ls", LISTING),
                    view("/workspace/file1.txt", FILE1),
                    bash("pwd", "/workspace"),
                    view("/workspace/file2.txt", FILE2),
                    bash("pwd", "/workspace", user="Done"),
                    view("/workspace/file2.txt", FILE2),
                ]
            ),
        ),
        Scenario(
            peer,
            "monologue",
            "TestStuckDetector::test_is_stuck_monologue",
            "stuck",
            "behaviour",
            "monologue",
            "After a greeting and one command, the assistant sends the same message "
            "three times in a row with nothing observed in between.",
            one(
                [
                    Say("Hi there!", user="Hi there!"),
                    bash("echo 42", "42", user="How are you?"),
                    Say(REPLY),
                    Say(REPLY),
                    Say(REPLY),
                ]
            ),
        ),
        Scenario(
            peer,
            "monologue_observation_between",
            "TestStuckDetector::test_is_stuck_monologue",
            "not_stuck",
            "behaviour",
            "monologue (must stay quiet: an observation came in between)",
            "The test's second half, without the three-in-a-row prefix it builds on: "
            "the same message three times, but a command's new output arrives between "
            "the first and the second.",
            one(
                [
                    Say("Hi there!", user="Hi there!"),
                    bash("echo 42", "42", user="How are you?"),
                    Say(REPLY),
                    bash("storybook", "The stories build again; moving on."),
                    Say(REPLY),
                    Say(REPLY),
                ]
            ),
        ),
        Scenario(
            peer,
            "context_window_error_loop",
            "TestStuckDetector::test_is_stuck_context_window_error_loop",
            "stuck",
            "behaviour",
            "model failure loop",
            "Ten model calls in a row fail with context window exceeded; trimming the "
            "prompt between them does not help.",
            one([window_error(user="Hello"), *[window_error() for _ in range(9)]]),
        ),
        Scenario(
            peer,
            "context_window_error_with_other_events",
            "TestStuckDetector::test_is_not_stuck_context_window_error_with_other_events",
            "not_stuck",
            "behaviour",
            "model failure loop (must stay quiet: work happens between the errors)",
            "Ten context-window errors, each followed by successful model calls and "
            "commands on different files.",
            one(context_window_interleaved()),
        ),
        Scenario(
            peer,
            "context_window_error_nine",
            "TestStuckDetector::test_is_not_stuck_context_window_error_less_than_ten",
            "not_stuck",
            "threshold",
            "model failure loop",
            "Nine context-window errors in a row: one short of OpenHands' threshold of ten.",
            one([window_error(user="Hello"), *[window_error() for _ in range(8)]]),
            expect="warn_or_above",
            conflict="#19 escalates a model span failing the same way 3 times in a row; "
            "OpenHands waits for 10.",
        ),
        Scenario(
            peer,
            "context_window_error_with_user_messages",
            "TestStuckDetector::test_is_stuck_context_window_error_with_user_messages",
            "stuck",
            "behaviour",
            "model failure loop",
            "Ten context-window errors in a row; a user asks to continue before each "
            "retry, which does not help.",
            one(
                [window_error(user="Hello" if i == 0 else f"Please go on ({i})") for i in range(10)]
            ),
        ),
        Scenario(
            peer,
            "interactive_new_turn",
            "TestStuckDetector::test_interactive_mode_resets_after_user_message",
            "stuck",
            "behaviour",
            "repeat (per run: a new turn starts a new count)",
            "Turn 1 repeats ls four times (stuck); the user then writes, and turn 2 "
            "(a new run of the same conversation) runs ls twice: not stuck, because "
            "interactive mode only looks after the last user message. In headless mode "
            "OpenHands would count across turns and call turn 2 stuck as well.",
            [
                Run(OH_AGENT, tuple(ls_empty(4)), "conv-interactive", "stuck"),
                Run(
                    OH_AGENT,
                    tuple(ls_empty(2, user_at=0, user="Hello")),
                    "conv-interactive",
                    "not_stuck",
                ),
            ],
        ),
        Scenario(
            peer,
            "delegate_stuck",
            "TestAgentController::test_is_stuck_delegate_stuck",
            "stuck",
            "rule_scope",
            "repeat (in the delegate); delegate_stalled (in the parent)",
            "The main agent hands a task to a browsing agent, which opens the same page "
            "four times with the same result; OpenHands calls the parent stuck because "
            "its delegate is.",
            [
                Run(
                    OH_AGENT,
                    (
                        Delegate(
                            "delegate_to_browsing_agent",
                            {"task": "Find the release date on the project page"},
                            Run(
                                "BrowsingAgent",
                                tuple(
                                    Call(
                                        "browser",
                                        {"code": "goto('https://example.org/releases')"},
                                        "Releases: nothing published yet.",
                                    )
                                    for _ in range(4)
                                ),
                                judgement="stuck",
                            ),
                            error=(
                                "AgentStuckInLoopError",
                                "the delegate agent is stuck in a loop",
                            ),
                        ),
                    ),
                    judgement="stuck",
                ),
            ],
        ),
    ]


# -- gemini-cli: LoopDetectionService (loopDetectionService.test.ts) ---------

GEMINI_AGENT: Final = "gemini-cli"
SETTINGS: Final = {"absolute_path": "/home/dev/app/settings.json"}
SETTINGS_TEXT: Final = '{"theme": "dark", "autosave": true}'
SENTENCE: Final = "The build is still running, so I keep on waiting. "
OTHER_SENTENCE: Final = "Now the tests are green and the report is written. "


def chunk(sentence: str, length: int) -> str:
    """``sentence`` repeated and cut to ``length`` characters: one repeating unit."""
    return (sentence * (length // len(sentence) + 1))[:length]


CHUNK: Final = chunk(SENTENCE, 50)
OTHER_CHUNK: Final = chunk(OTHER_SENTENCE, 50)


def noise(seed: int, length: int) -> str:
    """Letters and digits from a seeded generator: text that never repeats itself."""
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(rng.choice(alphabet) for _ in range(length))


def read_settings(count: int) -> list[Step]:
    """The same file read ``count`` times, with the same content each time."""
    return [Call("read_file", SETTINGS, SETTINGS_TEXT) for _ in range(count)]


def said(text: str) -> list[Run]:
    """One run whose only step is one model output: a streamed response, whole."""
    return [Run(GEMINI_AGENT, (Say(text),))]


def list_format_runs() -> list[Run]:
    """For each list marker, its own run: nine chunks, a list line, nine other chunks."""
    runs: list[Run] = []
    for marker in ("* item", "- item", "+ item", "1. item", "42. item"):
        text = CHUNK * 9 + f"\n{marker}\n" + OTHER_CHUNK * 9
        runs.append(Run(f"{GEMINI_AGENT} ({marker})", (Say(text),), judgement="not_stuck"))
    return runs


def gemini() -> list[Scenario]:
    """gemini-cli's tool-call and content ("chanting") loop cases."""
    peer = GEMINI
    threshold = "TOOL_CALL_LOOP_THRESHOLD=5, CONTENT_LOOP_THRESHOLD=10, CONTENT_CHUNK_SIZE=50"
    suite = "LoopDetectionService"

    def test(group: str, name: str) -> str:
        return f"{suite} > {group} > {name}"

    tools = "Tool Call Loop Detection"
    content = "Content Loop Detection"
    code = "Content Loop Detection with Code Blocks"
    return [
        Scenario(
            peer,
            "tool_calls_below_threshold",
            test(
                tools,
                "should not detect a loop for fewer than TOOL_CALL_LOOP_THRESHOLD identical calls",
            ),
            "not_stuck",
            "threshold",
            "repeat",
            "The same file read four times with the same content: one short of "
            "gemini-cli's threshold of five identical calls.",
            [Run(GEMINI_AGENT, tuple(read_settings(4)))],
            expect="warn_or_above",
            conflict="#19 keeps the repeat rule's warn at 3 identical signatures (result "
            "included); gemini-cli counts to 5 and ignores results.",
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "tool_calls_at_threshold",
            test(tools, "should detect a loop on the TOOL_CALL_LOOP_THRESHOLD-th identical call"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read five times with the same content.",
            [Run(GEMINI_AGENT, tuple(read_settings(5)))],
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "tool_calls_past_threshold",
            test(tools, "should detect a loop on subsequent identical calls"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read six times with the same content: still a loop after "
            "the first detection.",
            [Run(GEMINI_AGENT, tuple(read_settings(6)))],
            also=(
                "LoopDetectionService > Iterative Loop State > should correctly transition "
                "from Strike 1 to Strike 2",
            ),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "different_tool_calls",
            test(tools, "should not detect a loop for different tool calls"),
            "not_stuck",
            "rule_scope",
            "cycle",
            "Three different calls (two files read, one glob), in the same order, three "
            "times over, each with its same result: no two consecutive calls are identical.",
            [
                Run(
                    GEMINI_AGENT,
                    tuple(
                        step
                        for _ in range(3)
                        for step in (
                            Call("read_file", SETTINGS, SETTINGS_TEXT),
                            Call(
                                "read_file",
                                {"absolute_path": "/home/dev/app/package.json"},
                                '{"name": "app", "version": "0.3.1"}',
                            ),
                            Call("glob", {"pattern": "src/**/*.ts"}, "src/main.ts\nsrc/util.ts"),
                        )
                    ),
                )
            ],
            expect="warn_or_above",
            conflict="gemini-cli only counts consecutive identical calls; with each call's "
            "result the same every time, this is a 3-step cycle run for 3 full periods, "
            "which #19's cycle rule warns on.",
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "thought_between_identical_calls",
            test(tools, "should not reset tool call counter for other event types"),
            "stuck",
            "behaviour",
            "repeat",
            "Four identical file reads, a thought from the model, then a fifth identical "
            "read: the thought does not break the streak.",
            [
                Run(
                    GEMINI_AGENT,
                    (
                        *read_settings(4),
                        Call(
                            "read_file",
                            SETTINGS,
                            SETTINGS_TEXT,
                            thought="Maybe the file changed since I last looked.",
                        ),
                    ),
                )
            ],
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "random_content",
            test(content, "should not detect a loop for random content"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet)",
            "10,000 characters of seeded random letters and digits in one response.",
            said(noise(1, 10_000)),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "repeated_chunk",
            test(content, "should detect a loop when a chunk of content repeats consecutively"),
            "stuck",
            "behaviour",
            "chanting",
            "One 50-character chunk of a sentence, ten times back to back in one response.",
            said(CHUNK * 10),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "list_long_shared_prefix",
            test(content, "should not detect a loop for a list with a long shared prefix"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a list)",
            "Fifteen list lines that share a 60-character resource path and differ in "
            "their last part.",
            said(
                "".join(
                    f"- tenants/acme-prod-eu-west/clusters/primary/namespaces/billing/jobs/{i}\n"
                    for i in range(15)
                )
            ),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "repetitions_far_apart",
            test(content, "should not detect a loop if repetitions are very far apart"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: the repeats are far apart)",
            "The same 50-character chunk ten times, each followed by 2,000 characters "
            "of unrelated text.",
            said("".join(CHUNK + noise(100 + i, 2_000) for i in range(10))),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "long_pattern",
            test(content, "should detect a loop with longer repeating patterns (e.g. ~150 chars)"),
            "stuck",
            "behaviour",
            "chanting",
            "A 150-character passage repeated thirty times in one response.",
            said(chunk(SENTENCE, 150) * 30),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reported_example_stop_writing",
            test(content, "should detect the specific user-provided loop example"),
            "stuck",
            "behaviour",
            "chanting",
            "A five-line, indented 'I will stop now' passage (our wording of a loop "
            "users reported) repeated thirty times.",
            said(
                "I will write nothing more.\n"
                "  I will simply end this turn.\n"
                "  There is nothing left to do.\n"
                "  I will take no further action.\n"
                "  I will wait for your next instruction.\n" * 30
            ),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reported_example_task_complete",
            test(content, "should detect the second specific user-provided loop example"),
            "stuck",
            "behaviour",
            "chanting",
            "A 'the task is done' sentence with a trailing indent (our wording of a "
            "second reported loop) repeated thirty times.",
            said(
                "Every requested log line is in place and the test file checks out. "
                "I will mark the task as done now.\n  " * 30
            ),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "alternating_short_phrases",
            test(content, "should detect a loop of alternating short phrases"),
            "stuck",
            "behaviour",
            "chanting",
            "Two short phrases alternating a hundred times.",
            said("Working on it... All set. " * 100),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "repeated_thought_process",
            test(content, "should detect a loop of repeated complex thought processes"),
            "stuck",
            "behaviour",
            "chanting",
            "A three-sentence line of reasoning repeated thirty times.",
            said("Let me open the config. The config is missing. I will write a new one. " * 30),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "repetition_inside_code_block",
            test(code, "should not detect a loop when repetitive content is inside a code block"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a code block)",
            "Ten copies of a chunk inside a fenced code block.",
            said("```\n" + CHUNK * 10 + "\n```"),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "transition_into_code_block",
            test(code, "should not detect loops when content transitions into a code block"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a code block)",
            "Eight copies of a chunk, then a code fence opens and ten more copies follow "
            "inside it.",
            said(CHUNK * 8 + "```javascript\n" + CHUNK * 10),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "already_inside_code_block",
            test(code, "should skip loop detection when already inside a code block"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a code block)",
            "A code block opens at once and fifteen copies of a chunk follow inside it.",
            said("Here is the code:\n```\n" + CHUNK * 15),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "multiple_fence_transitions",
            test(code, "should correctly track inCodeBlock state with multiple fence transitions"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a code block)",
            "Some text, a code block holding five copies of a chunk, then a second code "
            "block opening.",
            said("Plain text first. ```\n" + CHUNK * 5 + "```\n```python\n"),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "repetition_outside_code_block",
            test(code, "should detect a loop when repetitive content is outside a code block"),
            "stuck",
            "behaviour",
            "chanting",
            "A short code block, then ten copies of a chunk after it, outside any block.",
            said("```\nmake build\n```" + CHUNK * 10),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "multiple_code_blocks",
            test(code, "should handle content with multiple code blocks and no loops"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet)",
            "Two small code blocks with a line of text between them.",
            said("```\nx = 1\n```\nthen, after that:\n```\ny = 2\n```"),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "code_blocks_then_looping_text",
            test(code, "should handle content with mixed code blocks and looping text"),
            "stuck",
            "behaviour",
            "chanting",
            "A code block with one line, then ten copies of a chunk outside it.",
            said("```\nx = 1\n```" + CHUNK * 10),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "code_block_repeating_tokens",
            test(code, "should not detect a loop for a long code block with some repeating tokens"),
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a code block)",
            "A code block holding the same loop statement twenty times.",
            said("```\n" + "for (const row of rows) { total += row.amount; }" * 20 + "\n```"),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_code_fence",
            test(code, "should reset tracking when a code fence is found"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: a code block)",
            "Nine copies of a chunk, then a code fence, then ten more copies inside the "
            "block it opens.",
            said(CHUNK * 9 + "```" + CHUNK * 10),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_table",
            test(code, "should reset tracking when a table is detected"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: a table line splits the text)",
            "Nine copies of a chunk, a table row on its own line, then nine more copies.",
            said(CHUNK * 9 + "\n| Name | Size |\n" + CHUNK * 9),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_list_item",
            test(code, "should reset tracking when a list item is detected"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: a list line splits the text)",
            "Nine copies of a chunk, a list item on its own line, then nine more copies.",
            said(CHUNK * 9 + "\n* one list entry\n" + CHUNK * 9),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_heading",
            test(code, "should reset tracking when a heading is detected"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: a heading splits the text)",
            "Nine copies of a chunk, a heading on its own line, then nine more copies.",
            said(CHUNK * 9 + "\n## Results\n" + CHUNK * 9),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_blockquote",
            test(code, "should reset tracking when a blockquote is detected"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: a quote splits the text)",
            "Nine copies of a chunk, a quoted line, then nine more copies.",
            said(CHUNK * 9 + "\n> quoted from the log\n" + CHUNK * 9),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "reset_on_list_formats",
            test(code, "should reset tracking for various list item formats"),
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet: list lines split the text)",
            "Five independent runs, one per list marker (* - + 1. 42.): nine copies of a "
            "chunk, a list line, then nine copies of another chunk.",
            list_format_runs(),
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "tool_call_resets_content",
            f"{suite} > Reset Functionality > tool call should reset content count",
            "not_stuck",
            "stream_reset",
            "chanting (must stay quiet)",
            "A short phrase nine times, then a tool call, then a different short answer: "
            "the tool call ends the stream the repeats were counted in.",
            [
                Run(
                    GEMINI_AGENT,
                    (
                        Call(
                            "list_directory",
                            {"path": "/home/dev/app"},
                            "settings.json\npackage.json\nsrc/",
                            text="Still checking. " * 9,
                        ),
                        Say("Something new now."),
                    ),
                )
            ],
            peer_config=threshold,
        ),
        Scenario(
            peer,
            "divider_content",
            f"{suite} > Divider Content Detection > should not detect a loop for repeating "
            "divider-like content",
            "not_stuck",
            "behaviour",
            "chanting (must stay quiet: a divider)",
            "A 50-dash divider fifteen times over.",
            said("-" * 50 * 15),
            peer_config=threshold,
        ),
    ]


# -- Roo Code: ToolRepetitionDetector (ToolRepetitionDetector.spec.ts) -------

ROO_AGENT: Final = "roo-code"
TEST_TXT: Final = {"path": "test.txt"}
TEST_TXT_CONTENT: Final = "1 | hello from test.txt"


def repeated(tool: str, args: Mapping[str, Any], result: str, count: int) -> Run:
    """One run: the same call ``count`` times, with the same result."""
    return Run(ROO_AGENT, tuple(Call(tool, args, result) for _ in range(count)))


def page(url: str, y: int, items: Sequence[str]) -> str:
    """What a browser scroll returns: where the viewport is and what it shows."""
    return _dumps({"url": url, "scroll_y": y, "items": list(items)})


NEWS: Final = "https://news.example.org/"


def scroll_pages(action: str, count: int) -> list[Step]:
    """``count`` scrolls, each showing headlines not seen before."""
    steps: list[Step] = []
    for i in range(count):
        y = 800 * (i + 1) if action == "scroll_down" else 800 * (count - i - 1)
        items = [f"headline {5 * i + j}" for j in range(5)]
        steps.append(Call("browser_action", {"action": action}, page(NEWS, y, items)))
    return steps


def roo() -> list[Scenario]:
    """Roo Code's consecutive-identical-call cases (limit 3 unless the test sets another)."""
    peer = ROO
    suite = "ToolRepetitionDetector"
    file_a = "1 | export const a = 1"
    file_b = "1 | export const b = 2"

    def test(group: str, name: str) -> str:
        return f"{suite} > {group} > {name}"

    def read_files(paths: Sequence[str]) -> dict[str, Any]:
        return {"files": [{"path": p} for p in paths]}

    return [
        Scenario(
            peer,
            "default_limit_four_calls",
            test("initialization", "should default to a limit of 3 if no argument provided"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read four times with the same content; the fourth is the one "
            "Roo Code blocks at its default limit.",
            [repeated("read_file", TEST_TXT, TEST_TXT_CONTENT, 4)],
            also=(
                test(
                    "repetition below limit",
                    "should allow execution when repetition is below limit and block when "
                    "limit reached",
                ),
                test(
                    "repetition reaches limit",
                    "should block execution when repetition reaches the limit",
                ),
                test(
                    "explicit Nth call blocking behavior",
                    "should allow first 3 calls but block on the 4th call for limit 3 (default)",
                ),
                test(
                    "repetition after limit",
                    "should allow execution of previously problematic tool after reset",
                ),
                test(
                    "explicit Nth call blocking behavior",
                    "should reset counter after blocking and allow new attempts",
                ),
            ),
            peer_config="limit=3 (limit=2 in the last two tests listed in 'also')",
        ),
        Scenario(
            peer,
            "limit_2_three_calls",
            test("initialization", "should use the custom limit when provided"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read three times with the same content.",
            [repeated("read_file", TEST_TXT, TEST_TXT_CONTENT, 3)],
            also=(
                test(
                    "explicit Nth call blocking behavior",
                    "should allow first 2 calls but block on the 3rd call for limit 2",
                ),
                test("tool name interpolation", "should include tool name in the error message"),
                test(
                    "browser scroll action exclusion",
                    "should still apply repetition detection to non-browser tools",
                ),
                test(
                    "native protocol with nativeArgs",
                    "should handle tools with only params (no nativeArgs)",
                ),
            ),
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "different_tools",
            test("no repetition", "should allow execution for different tool calls"),
            "not_stuck",
            "behaviour",
            "any (must stay quiet)",
            "Three different tools, one call each.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("list_files", {"path": "."}, "src/\ntest.txt"),
                        Call("read_file", TEST_TXT, TEST_TXT_CONTENT),
                        Call("search_files", {"path": "src", "regex": "TODO"}, "Found 0 results."),
                    ),
                )
            ],
        ),
        Scenario(
            peer,
            "reset_after_different_call",
            test("no repetition", "should reset the counter when different tool calls are made"),
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet: the streak was broken)",
            "A file read, a different call, then the same file read again.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("read_file", TEST_TXT, TEST_TXT_CONTENT),
                        Call("list_files", {"path": "."}, "src/\ntest.txt"),
                        Call("read_file", TEST_TXT, TEST_TXT_CONTENT),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "limit_reached_then_new_tool",
            test("repetition reaches limit", "should reset internal state after limit is reached"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read three times (Roo Code flags the third), then a different "
            "call, which it allows.",
            [
                Run(
                    ROO_AGENT,
                    (
                        *(Call("read_file", TEST_TXT, TEST_TXT_CONTENT) for _ in range(3)),
                        Call("list_files", {"path": "."}, "src/\ntest.txt"),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "limit_reached_twice",
            test("repetition after limit", "should require reaching the limit again after reset"),
            "stuck",
            "behaviour",
            "repeat",
            "The same file read six times: Roo Code flags the third and, after its "
            "reset, the sixth.",
            [repeated("read_file", TEST_TXT, TEST_TXT_CONTENT, 6)],
            also=(
                test(
                    "explicit Nth call blocking behavior",
                    "should handle different limits correctly",
                ),
            ),
            peer_config="limit=2 (limit=5 in the test listed in 'also': the sixth call blocked)",
        ),
        Scenario(
            peer,
            "empty_parameters",
            test("edge cases", "should handle empty tool call"),
            "stuck",
            "behaviour",
            "repeat",
            "A tool with no parameters called three times with the same result.",
            [repeated("list_code_definition_names", {}, "No definitions found.", 3)],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "parameter_order",
            test(
                "edge cases",
                "should treat tools with same parameters in different order as identical",
            ),
            "stuck",
            "behaviour",
            "repeat",
            "Three calls with the same three parameters written in a different order "
            "each time, with the same result.",
            [
                Run(
                    ROO_AGENT,
                    tuple(
                        Call("search_files", args, "Found 2 results.")
                        for args in (
                            {"path": "src", "regex": "TODO", "file_pattern": "*.ts"},
                            {"file_pattern": "*.ts", "path": "src", "regex": "TODO"},
                            {"regex": "TODO", "file_pattern": "*.ts", "path": "src"},
                        )
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "limit_1_two_calls",
            test(
                "explicit Nth call blocking behavior",
                "should allow the 1st call but block on the 2nd call for limit 1",
            ),
            "stuck",
            "threshold",
            "repeat",
            "The same file read twice with the same content, under a limit of one.",
            [repeated("read_file", TEST_TXT, TEST_TXT_CONTENT, 2)],
            expect="ok",
            conflict="#19: a single repeated call is not a stall (the repeat rule warns at 3); "
            "Roo Code flags the second call only when configured with limit=1.",
            peer_config="limit=1",
        ),
        Scenario(
            peer,
            "scroll_down_new_pages",
            test(
                "browser scroll action exclusion",
                "should not count browser scroll_down actions as repetitions",
            ),
            "not_stuck",
            "behaviour",
            "repeat, item novelty (must stay quiet: each page is new)",
            "Ten scroll_down calls, each showing headlines not seen before.",
            [Run(ROO_AGENT, tuple(scroll_pages("scroll_down", 10)))],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "scroll_up_new_pages",
            test(
                "browser scroll action exclusion",
                "should not count browser scroll_up actions as repetitions",
            ),
            "not_stuck",
            "behaviour",
            "repeat, item novelty (must stay quiet: each page is new)",
            "Ten scroll_up calls, each showing headlines not seen before.",
            [Run(ROO_AGENT, tuple(scroll_pages("scroll_up", 10)))],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "scroll_alternating",
            test(
                "browser scroll action exclusion",
                "should not count alternating scroll_down and scroll_up as repetitions",
            ),
            "not_stuck",
            "rule_scope",
            "cycle",
            "scroll_down then scroll_up, five times over; the two views are the same each time.",
            [
                Run(
                    ROO_AGENT,
                    tuple(
                        step
                        for _ in range(5)
                        for step in (
                            Call(
                                "browser_action",
                                {"action": "scroll_down"},
                                page(NEWS, 800, ["headline 5", "headline 6"]),
                            ),
                            Call(
                                "browser_action",
                                {"action": "scroll_up"},
                                page(NEWS, 0, ["headline 0", "headline 1"]),
                            ),
                        )
                    ),
                )
            ],
            expect="warn_or_above",
            conflict="Roo Code exempts scroll actions by name; with the same two views every "
            "time this is a 2-step cycle run for 5 full periods, which #19's cycle rule "
            "breaks on.",
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "click_repeated",
            test(
                "browser scroll action exclusion",
                "should still apply repetition detection to other browser_action types",
            ),
            "stuck",
            "behaviour",
            "repeat",
            "The same click at the same point three times, with the same page after it.",
            [
                repeated(
                    "browser_action",
                    {"action": "click", "coordinate": "[100, 200]"},
                    page(NEWS, 0, ["headline 0", "headline 1"]),
                    3,
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "scroll_interspersed",
            test(
                "browser scroll action exclusion",
                "should not interfere with repetition detection of other tools when scroll "
                "actions are interspersed",
            ),
            "stuck",
            "rule_scope",
            "repeat, within its window: the same signature 3 times in 10 calls, not back to "
            "back, warns",
            "ls, two scrolls, ls, one scroll, ls: the three ls calls give the same output; "
            "each scroll shows new headlines.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("execute_command", {"command": "ls"}, "src/\ntest.txt"),
                        *scroll_pages("scroll_down", 2),
                        Call("execute_command", {"command": "ls"}, "src/\ntest.txt"),
                        Call(
                            "browser_action",
                            {"action": "scroll_down"},
                            page(NEWS, 2400, [f"headline {10 + j}" for j in range(5)]),
                        ),
                        Call("execute_command", {"command": "ls"}, "src/\ntest.txt"),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "browser_action_without_action",
            test(
                "browser scroll action exclusion",
                "should handle browser_action with missing or invalid action parameter gracefully",
            ),
            "stuck",
            "behaviour",
            "repeat",
            "browser_action with no parameters three times, with the same result.",
            [repeated("browser_action", {}, "Error: an action is required.", 3)],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "native_args_different_files",
            test(
                "native protocol with nativeArgs",
                "should differentiate read_file calls with different files in nativeArgs",
            ),
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "read_file with a files list: file1, then file2, then file1 again.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("read_file", read_files(["file1.ts"]), file_a),
                        Call("read_file", read_files(["file2.ts"]), file_b),
                        Call("read_file", read_files(["file1.ts"]), file_a),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "native_args_same_files",
            test(
                "native protocol with nativeArgs",
                "should detect repetition when same files are read multiple times with nativeArgs",
            ),
            "stuck",
            "behaviour",
            "repeat",
            "read_file with the same one-file list three times, with the same content.",
            [repeated("read_file", read_files(["same-file.ts"]), file_a, 3)],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "native_args_file_order",
            test(
                "native protocol with nativeArgs",
                "should differentiate read_file calls with multiple files in different orders",
            ),
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "read_file with files [a.ts, b.ts], then [b.ts, a.ts]: two different calls.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("read_file", read_files(["a.ts", "b.ts"]), f"{file_a}\n{file_b}"),
                        Call("read_file", read_files(["b.ts", "a.ts"]), f"{file_b}\n{file_a}"),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
        Scenario(
            peer,
            "native_args_different_cwd",
            test(
                "native protocol with nativeArgs",
                "should handle tools with both params and nativeArgs",
            ),
            "not_stuck",
            "behaviour",
            "repeat (must stay quiet)",
            "ls in /home/user, then ls in /home/admin.",
            [
                Run(
                    ROO_AGENT,
                    (
                        Call("execute_command", {"command": "ls", "cwd": "/home/user"}, "notes.md"),
                        Call(
                            "execute_command", {"command": "ls", "cwd": "/home/admin"}, "backup.tar"
                        ),
                    ),
                )
            ],
            peer_config="limit=2",
        ),
    ]


def scenarios() -> list[Scenario]:
    """Every scenario, peer by peer."""
    return [*openhands(), *gemini(), *roo()]


# -- the manifest -------------------------------------------------------------

SKIPPED: Final = (
    (
        OPENHANDS,
        "TestStuckDetector::test_is_not_stuck_context_window_error_in_non_headless",
        "its headless half is context_window_error_loop; its interactive half needs a run with "
        "no events after the user message, which a trace cannot hold",
    ),
    (
        GEMINI,
        "LoopDetectionService > Tool Call Loop Detection > should not detect a loop when "
        "disabled for session / "
        "should stop reporting a loop if disabled after detection / should skip loop detection "
        "if disabled in config",
        "switching the detector off is configuration, not a judgement",
    ),
    (
        GEMINI,
        "LoopDetectionService > LoopDetectionService LLM Checks (13 tests)",
        "a second model judges the history; its answer is mocked, not in the trace",
    ),
    (
        ROO,
        "ToolRepetitionDetector > explicit Nth call blocking behavior > should never block "
        "when limit is 0 "
        "(unlimited) / should handle negative limits as 0 (unlimited)",
        "switching the detector off is configuration, not a judgement",
    ),
    (
        ROO,
        "ToolRepetitionDetector > edge cases > should handle different tool names with "
        "identical serialized JSON",
        "it replaces a private method to force a hash collision",
    ),
)


def _toml(value: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(value, ensure_ascii=False)


def _toml_list(values: Sequence[str]) -> str:
    if not values:
        return "[]"
    return "[\n" + "".join(f"  {_toml(v)},\n" for v in values) + "]"


def manifest(rendered: Sequence[tuple[Scenario, Rendered]]) -> str:
    """``manifest.toml``: one ``[[scenario]]`` table per fixture, runs listed where several."""
    lines = [
        "# Generated by tests/peers/generate_peers.py: edit the script, not this file.",
        "# One [[scenario]] per fixture; see tests/peers/README.md for the fields.",
        "",
    ]
    for s, out in rendered:
        lines += [
            "[[scenario]]",
            f"id = {_toml(s.id)}",
            f"peer = {_toml(s.peer.key)}",
            f"file = {_toml(s.id + '.jsonl')}",
            f"judgement = {_toml(s.judgement)}",
            f"expect = {_toml(s.expected)}",
            f"basis = {_toml(s.basis)}",
            f"rule = {_toml(s.rule)}",
            f"description = {_toml(s.description)}",
            f"source = {_toml(s.peer.source)}",
            f"test = {_toml(s.test)}",
        ]
        if s.also:
            lines.append(f"also = {_toml_list(s.also)}")
        if s.peer_config:
            lines.append(f"peer_config = {_toml(s.peer_config)}")
        if s.conflict:
            lines.append(f"conflict = {_toml(s.conflict)}")
        if len(out.runs) > 1:
            for run, span_id in out.runs:
                judgement, expect = run_expectation(s, run)
                lines += [
                    "",
                    "[[scenario.runs]]",
                    f"run_span_id = {_toml(span_id)}",
                    f"agent = {_toml(run.agent)}",
                    f"judgement = {_toml(judgement)}",
                    f"expect = {_toml(expect)}",
                ]
        lines.append("")
    for peer, test, why in SKIPPED:
        lines += [
            "[[skipped]]",
            f"peer = {_toml(peer.key)}",
            f"source = {_toml(peer.source)}",
            f"test = {_toml(test)}",
            f"why = {_toml(why)}",
            "",
        ]
    return "\n".join(lines)


def run_expectation(scenario: Scenario, run: Run) -> tuple[Judgement, Expect]:
    """A run's own judgement and expectation, else the scenario's."""
    if run.judgement is None:
        return scenario.judgement, scenario.expected
    return run.judgement, run.expect or _mapped(run.judgement)


def build() -> dict[str, bytes]:
    """Every generated file, by path relative to ``tests/peers``."""
    rendered = [(s, render(s)) for s in scenarios()]
    files = {f"{s.id}.jsonl": out.data for s, out in rendered}
    files["manifest.toml"] = manifest(rendered).encode()
    return files


# -- the README's verdict table -----------------------------------------------


@dataclass(frozen=True)
class Current:
    """What ``otel-stall replay`` says of one run today."""

    verdict: str
    findings: list[str]
    """``kind:action`` of each kind of finding, sorted."""
    without_refusals: str
    """The verdict once duplicate refusals no longer count towards it (#19, section 1)."""


def current(root: Path) -> dict[str, Current]:
    """Every fixture's runs by run span id, from one ``otel-stall replay --format json``."""
    cli = Path(sys.executable).with_name("otel-stall")
    paths = sorted(str(p) for p in root.rglob("*.jsonl"))
    out = subprocess.run(
        [str(cli), "replay", "--format", "json", *paths],
        capture_output=True,
        check=False,
        timeout=600,
    )
    runs: dict[str, Current] = {}
    for run in json.loads(out.stdout)["runs"]:
        actions = [Action(f["action"]) for f in run["findings"]]
        kept = [Verdict.of(a) for a in actions if a is not Action.REFUSE]
        runs[run["run_span_id"]] = Current(
            run["verdict"],
            sorted({f"{f['kind']}:{f['action']}" for f in run["findings"]}),
            max(kept, key=lambda v: v.severity, default=Verdict.OK).value,
        )
    return runs


def agrees(expect: Expect, verdict: str) -> str:
    """``yes`` when a verdict is what #19 asks for, else a bold ``no``."""
    return "yes" if (verdict == "ok") == (expect == "ok") else "**no**"


def report(root: Path) -> str:
    """A markdown table: each fixture's peer judgement, #19's expectation, today's verdicts."""
    rows = [
        "| fixture | peer says | #19 expects | verdict now | findings now | agrees now "
        "| verdict without refusals | agrees then | #19 rule |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    today = current(root)
    for s in scenarios():
        runs = render(s).runs
        for index, (run, span_id) in enumerate(runs, 1):
            judgement, expect = run_expectation(s, run)
            now = today[span_id]
            name = s.id if len(runs) == 1 else f"{s.id} (run {index}: {run.agent})"
            rows.append(
                f"| `{name}` | {judgement} | {expect} | {now.verdict} "
                f"| {', '.join(now.findings) or '-'} | {agrees(expect, now.verdict)} "
                f"| {now.without_refusals} | {agrees(expect, now.without_refusals)} | {s.rule} |"
            )
    return "\n".join(rows) + "\n"


def main(argv: list[str]) -> int:
    """Write the fixtures and manifest (to ``argv[1]`` or here), or print the report."""
    here = Path(__file__).parent
    if len(argv) > 1 and argv[1] == "--report":
        sys.stdout.write(report(here))
        return 0
    root = Path(argv[1]) if len(argv) > 1 else here
    for rel, data in build().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
