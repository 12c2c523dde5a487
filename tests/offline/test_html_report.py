"""The HTML report in a real browser: Debian's chromium, headless, driven by Playwright.

No browser is downloaded: Playwright drives the system's ``/usr/bin/chromium``
(``apt-get install chromium``). Without it, or without the ``playwright``
package, the test skips on a developer's machine and fails under ``CI=true``.
A screenshot of the page is left in the temp folder as a CI artifact.
"""

from __future__ import annotations

import json
import os
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
    """One mark per ledger row, the onset at the first call at warn or above, a row on click."""
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
        onset = [row["seq"] for row in ledger if ACTION_SEVERITY[Action(row["action"])] >= WARN]
        onsets = section.locator("button.call.onset")
        assert onsets.count() == (1 if onset else 0)
        if onset:
            assert onsets.first.get_attribute("data-seq") == str(onset[0])

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
