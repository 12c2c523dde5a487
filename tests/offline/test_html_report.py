"""The HTML report in a real browser: Debian's chromium, headless, driven by Playwright.

No browser is downloaded: Playwright drives the system's ``/usr/bin/chromium``
(``apt-get install chromium``). Without it, or without the ``playwright``
package, the test skips on a developer's machine and fails under ``CI=true``.
A screenshot of the page is left in the temp folder as a CI artifact.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from otel_stall import Action
from otel_stall.cli import main
from otel_stall.core.records import ACTION_SEVERITY

GOLDEN = Path(__file__).parent.parent / "golden" / "formats" / "otlp.jsonl"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(tempfile.gettempdir()) / "otel-stall-artifacts"
WARN = ACTION_SEVERITY[Action.WARN]


def _missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless chromium with a new, empty profile; fails rather than skips in CI."""
    missing = _missing()
    if missing is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: the browser test must run, but {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The golden capture's HTML page and, for comparison, its JSON report."""
    folder = tmp_path_factory.mktemp("report")
    page, doc = folder / "report.html", folder / "report.json"
    assert main(["replay", str(GOLDEN), "-o", str(page), "--all"]) == 1
    assert main(["replay", str(GOLDEN), "-o", str(doc)]) == 1
    return page, json.loads(doc.read_text())


def _runs_by_span(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["run_span_id"]: run for run in doc["runs"]}


def test_the_page_draws_each_call_marks_the_onset_and_shows_a_row_on_click(
    browser_context: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    """One mark per ledger row, the onset where the report says the stall began, a row on click.

    The stall begins at the first fruitless call in the evidence of the finding that first
    raised the verdict (issue 28), so never after the first row at warn or above.
    """
    path, doc = report
    page = browser_context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    runs = _runs_by_span(doc)
    sections = page.locator("section.run")
    assert sections.count() == len(runs)
    for index in range(sections.count()):
        section = sections.nth(index)
        span_id = section.get_attribute("data-run-span")
        assert span_id is not None
        ledger = runs[span_id]["ledger"]
        calls = section.locator("button.call")
        assert calls.count() == len(ledger)
        assert [calls.nth(i).get_attribute("data-seq") for i in range(calls.count())] == [
            str(row["seq"]) for row in ledger
        ]
        warned = [row["seq"] for row in ledger if ACTION_SEVERITY[Action(row["action"])] >= WARN]
        began = runs[span_id]["wasted"]["from_seq"]
        onsets = section.locator("button.call.onset")
        assert onsets.count() == (1 if began is not None else 0)
        assert (began is None) == (not warned)
        if began is not None:
            assert onsets.first.get_attribute("data-seq") == str(began)
            assert began <= warned[0]

    researcher = page.locator("section.run", has_text="researcher")
    researcher.locator('button.call[data-seq="3"]').click()
    detail = researcher.locator("table.detail")
    assert detail.is_visible()
    cells = dict(
        zip(
            detail.locator("th").all_inner_texts(),
            detail.locator("td").all_inner_texts(),
            strict=True,
        )
    )
    assert cells["Call"] == "3"
    assert cells["Tool"] == "fetch"
    assert cells["Repeats call"] == "2"
    assert cells["Action taken"] == "refuse"
    assert "docs.example.com/otel/spans" in cells["Arguments"]

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "html-report.png"), full_page=True)
    assert [url for url in requests if not url.startswith("file:")] == []
    page.close()


def test_redacted_page_holds_no_arguments(
    browser_context: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--redact leaves the looping URL out of the page, markup and data alike."""
    path = tmp_path / "redacted.html"
    assert main(["replay", str(GOLDEN), "-o", str(path), "--redact"]) == 1
    assert "docs.example.com/otel/spans" not in path.read_text(encoding="utf-8")
    page = browser_context.new_page()
    page.goto(path.as_uri())
    assert page.locator("section.run").count() == 2  # break and escalate; the ok run is left out
    page.close()


# -- captures written by the SDK ----------------------------------------------------------

HOSTILE_TOOL = '<img src=x onerror="window.__pwned=1">'
SECRET_RESULT = "result-marker-7d1c"


def _capture(path: Path, runs: int, *, hostile: bool = False) -> None:
    """``runs`` agent runs through the SDK and the capture exporter: every third one loops.

    A looping run asks the same search six times (a model turn before each);
    the others make four distinct calls. ``hostile`` names one tool with markup.
    """
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from otel_stall import OtlpJsonLinesSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": "many"}))
    provider.add_span_processor(
        BatchSpanProcessor(OtlpJsonLinesSpanExporter(path), max_queue_size=1 << 15)
    )
    tracer = provider.get_tracer("test.many")
    for run in range(runs):
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"agent-{run}"}
        with tracer.start_as_current_span(f"invoke_agent agent-{run}", attributes=agent):
            loops = run % 3 == 0
            for k in range(6 if loops else 4):
                chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
                with tracer.start_as_current_span("chat m", attributes=chat) as span:
                    span.set_attribute("gen_ai.usage.input_tokens", 100)
                    span.set_attribute("gen_ai.usage.output_tokens", 10)
                name = HOSTILE_TOOL if hostile and k == 0 else "search"
                query = "same" if loops else f"query {k}"
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": f"call_{run}_{k}",
                    "gen_ai.tool.call.arguments": json.dumps({"q": query}),
                    "gen_ai.tool.call.result": json.dumps({"hits": [query], "m": SECRET_RESULT}),
                }
                with tracer.start_as_current_span(f"execute_tool {name}", attributes=tool):
                    pass
    provider.shutdown()


def _covered(run: dict[str, Any], kind: str) -> set[str]:
    """The seqs the report's findings of ``kind`` cover: their signature's calls in range.

    A range starts where its evidence does (issue 28): a refusal's at the refused call, not
    at the earlier call it points to; any other finding's at its first call.
    """
    found = [f for f in run["findings"] if f["kind"] == kind]
    starts = (f["seq"] if f["action"] == "refuse" else f["first_seq"] for f in found)
    first, last = min(starts), max(f["seq"] for f in found)
    signature = found[0]["signature"]
    rows = [r for r in run["ledger"] if first <= r["seq"] <= last]
    own = [r for r in rows if signature in (r["signature"], r["call_signature"])]
    return {str(r["seq"]) for r in own or rows}


def test_a_finding_highlights_its_calls_and_a_call_lists_its_findings(
    browser_context: Any, report: tuple[Path, dict[str, Any]]
) -> None:
    """Click a finding: exactly its calls are highlighted; click a call: its findings are named."""
    path, doc = report
    page = browser_context.new_page()
    page.goto(path.as_uri())
    section = page.locator("section.run", has_text="researcher")
    run = _runs_by_span(doc)[section.get_attribute("data-run-span") or ""]
    findings = section.locator("li.finding")
    assert findings.count() == len({(f["kind"], f["signature"]) for f in run["findings"]})
    for index in range(findings.count()):
        finding = findings.nth(index)
        kind = finding.inner_text().split(" ")[1].rstrip(":")
        finding.click()
        linked = section.locator("button.call.linked")
        assert {linked.nth(i).get_attribute("data-seq") for i in range(linked.count())} == (
            _covered(run, kind)
        )
        dimmed = section.locator("button.call:not(.linked)")
        if dimmed.count():
            assert float(dimmed.first.evaluate("b => getComputedStyle(b).opacity")) < 1
    findings.nth(findings.count() - 1).click()  # a second click clears the highlight
    assert section.locator("button.call.linked").count() == 0

    kinds = {f["kind"] for f in run["findings"]}
    for seq in ("1", "5"):
        section.locator(f'button.call[data-seq="{seq}"]').click()
        panel = section.locator(".call-findings")
        assert panel.is_visible()
        named = {k for k in kinds if seq in _covered(run, k)}
        texts = panel.locator("li").all_inner_texts()
        assert {t.split(" ")[1].rstrip(":") for t in texts if t != "none"} == named
        assert section.locator("li.finding.linked").count() == len(named)
    page.close()


def test_a_call_shows_its_result_duration_and_model_turns(
    browser_context: Any, tmp_path: Path
) -> None:
    """The detail panel names the result, the duration and the model turns, with labels."""
    capture, path = tmp_path / "c.jsonl", tmp_path / "c.html"
    _capture(capture, 1)
    assert main(["replay", str(capture), "-o", str(path)]) == 1
    page = browser_context.new_page()
    page.goto(path.as_uri())
    assert page.locator("button.call .tool").first.inner_text() == "search"
    assert page.locator("li.turns").count() == 6
    page.locator('button.call[data-seq="2"]').click()
    detail = page.locator("table.detail")
    cells = dict(
        zip(
            detail.locator("th").all_inner_texts(),
            detail.locator("td").all_inner_texts(),
            strict=True,
        )
    )
    assert SECRET_RESULT in cells["Result"]
    assert '"same"' in cells["Arguments"]
    assert cells["Model turns before it"].startswith("1 model turn, ")
    assert cells["Model turns before it"].endswith("110 tokens")
    assert cells["Duration"].endswith(("ms", " s"))
    assert "signature" not in " ".join(cells)  # readable labels, not field names
    page.close()


def test_hostile_names_stay_text_and_redact_hides_results(
    browser_context: Any, tmp_path: Path
) -> None:
    """Markup in a tool name runs nothing; --redact leaves arguments and results out."""
    capture, path, redacted = tmp_path / "h.jsonl", tmp_path / "h.html", tmp_path / "r.html"
    _capture(capture, 3, hostile=True)
    assert main(["replay", str(capture), "-o", str(path), "--all"]) == 1
    assert main(["replay", str(capture), "-o", str(redacted), "--all", "--redact"]) == 1
    text = redacted.read_text(encoding="utf-8")
    assert SECRET_RESULT in path.read_text(encoding="utf-8")
    assert "q\\" in path.read_text(encoding="utf-8")
    assert SECRET_RESULT not in text
    assert "q\\" not in text  # the arguments' JSON, escaped into the page's data
    page = browser_context.new_page()
    dialogs: list[str] = []

    def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(path.as_uri())
    page.locator('button.call[data-seq="1"]').first.click()
    page.locator("li.finding").first.click()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0
    assert HOSTILE_TOOL in page.locator("table.detail td").all_inner_texts()
    assert dialogs == []
    page.close()


def test_a_thousand_runs_open_on_a_table_that_sorts_and_filters(
    browser_context: Any, tmp_path: Path
) -> None:
    """1,000 runs: under 2 MB, a row per run linked to its trace, sorting and filtering work."""
    capture, path, doc = tmp_path / "many.jsonl", tmp_path / "many.html", tmp_path / "many.json"
    _capture(capture, 1000)
    url = "http://jaeger:16686/trace/{trace_id}"
    assert main(["replay", str(capture), "-o", str(path), "--all", "--trace-url", url]) == 1
    assert main(["replay", str(capture), "-o", str(doc)]) == 1
    runs = json.loads(doc.read_text())["runs"]
    assert len(runs) == 1000
    assert path.stat().st_size < 2 << 20
    page = browser_context.new_page()
    page.goto(path.as_uri())
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1000
    links = page.locator("table.runs a[href^='http://jaeger']")
    assert {links.nth(i).get_attribute("href") for i in range(3)} <= {
        url.replace("{trace_id}", run["trace_id"]) for run in runs
    }

    header = page.locator("table.runs th", has_text=re.compile("^Tool calls$"))
    header.locator("button").click()
    column = page.locator("table.runs tbody tr td:nth-child(5)").all_inner_texts()
    assert column == sorted(column, key=int)
    assert header.get_attribute("aria-sort") == "ascending"
    header.locator("button").click()
    column = page.locator("table.runs tbody tr td:nth-child(5)").all_inner_texts()
    assert column == sorted(column, key=int, reverse=True)

    page.locator("input.filter").fill("break")
    shown = page.locator("table.runs tbody tr:not([hidden])")
    assert shown.count() == sum(1 for run in runs if run["verdict"] == "break")
    page.locator("input.filter").fill("agent-999 ")
    assert page.locator("table.runs tbody tr:not([hidden])").count() == 1
    page.close()


@pytest.mark.parametrize("template", ["http://jaeger/trace/", "javascript:alert(1)//{trace_id}"])
def test_a_trace_url_without_the_id_or_http_exits_2(
    template: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--trace-url must be http(s) and hold {trace_id}; the error names the flag."""
    assert main(["replay", str(GOLDEN), "--format", "html", "--trace-url", template]) == 2
    assert "--trace-url" in capsys.readouterr().err
