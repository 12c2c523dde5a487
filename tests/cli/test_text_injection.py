"""Issue 27's injection attack: hostile names reach no terminal, forge no line, add no HTML.

The spans are made with the SDK and the README's capture exporter; their agent
name, tool name and arguments carry a window-title set, a screen clear, an OSC 8
hyperlink, BEL, CR, a bidi override, a newline followed by a forged report
line, and ``<script>``/``<img>`` tags. Every text format prints them escaped.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from otel_stall.cli import main
from otel_stall.core.escape import markdown, printable
from otel_stall.live.capture import OtlpJsonLinesSpanExporter

FORGED = "break    repeat          forged x99 seq 1..99"
AGENT = "evil\x1b]0;pwned\x07\x1b[2J\x1b[H"
TOOL = (
    "fetch\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\\r\n"
    + FORGED
    + "<script>alert(1)</script><img src=x onerror=alert(1)>\u202e"
)
ARGUMENTS = '{"q": "\x1b[31mred\x07 <script>x</script>\\n"}'
CONTROLS = ("\x1b", "\x07", "\r", "\u202e", "\x9b")


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A looping run with hostile names, captured the README's way."""
    path = tmp_path_factory.mktemp("hostile") / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonLinesSpanExporter(str(path))))
    tracer = provider.get_tracer("attack")
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": AGENT}
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": TOOL}
    with tracer.start_as_current_span(f"invoke_agent {AGENT}", attributes=agent):
        for _ in range(6):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
            with tracer.start_as_current_span(f"execute_tool {TOOL}", attributes=tool) as span:
                span.set_attribute("gen_ai.tool.call.arguments", ARGUMENTS)
                span.set_attribute("gen_ai.tool.call.result", '{"same": 1}')
    provider.shutdown()
    return path


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The command's stdout and stderr together."""
    main(args)
    captured = capsys.readouterr()
    return captured.out + captured.err


def assert_inert(text: str) -> None:
    """No control character, and no line that starts like a forged finding."""
    assert not [c for c in CONTROLS if c in text]
    assert not any(line.lstrip().startswith(FORGED) for line in text.splitlines())


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_replay_reports_print_hostile_names_escaped(
    fmt: str, capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table and Markdown show the hostile run, its names escaped, on their own lines."""
    text = run(["replay", str(capture), "--format", fmt, "--all"], capsys)
    assert_inert(text)
    assert "evilx1b]0;pwnedx07" in text.replace("\\", "")  # shown, as escapes
    assert "fetchx1b]8;;" in text.replace("\\", "")  # the tool's name, escaped


def test_markdown_carries_no_html(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No tag survives in the Markdown report: ``<script>`` and ``<img>`` become entities."""
    text = run(["replay", str(capture), "--format", "markdown", "--all"], capsys)
    tags = {tag for tag in ("<script", "<img", "</script") if tag in text.lower()}
    assert not tags
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


@pytest.mark.parametrize(
    "args",
    [["explain"], ["compare"], ["replay", "--format", "table", "--all"]],
    ids=["explain", "compare", "table"],
)
def test_every_text_command_escapes(
    args: list[str], capture: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``explain``, ``compare`` and the table print the hostile spans inert."""
    paths = [str(capture), str(capture)] if args == ["compare"] else [str(capture)]
    assert_inert(run([args[0], *paths, *args[1:]], capsys))


def test_json_keeps_the_names_exact(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON is for programs: it escapes in its own syntax and decodes to the exact name."""
    main(["replay", str(capture), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert {f["tool"] for run in doc["runs"] for f in run["findings"]} == {TOOL}


@given(st.text())
def test_printable_leaves_no_control_and_keeps_printable_text(text: str) -> None:
    """Escaped text has no control character; text without one is returned unchanged."""
    out = printable(text)
    assert not [c for c in out if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0]
    assert "\n" not in out
    if text.isprintable():
        assert out == text
    assert "<" not in markdown(text)
