"""The HTML report in a real browser (headless Chromium through selenium): it loads
cleanly, shows the report's counts, runs none of the content, and reads well
(screenshots under out/test-artifacts/)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _html_support import (
    ARTIFACTS,
    DEMO_BUDGET,
    HOSTILE,
    chromium_driver,
    demo_report,
    hostile_report,
)

from cupellation.html import render_html

pytestmark = pytest.mark.slow

TITLE = "Cupel selection report: demo"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module (starting one takes about a second)."""
    driver = chromium_driver()
    try:
        yield driver
    finally:
        driver.quit()


def _open(browser: Any, tmp_path: Path, report: dict[str, Any], name: str) -> Path:
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(report, budget=DEMO_BUDGET, title=TITLE), encoding="utf-8")
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(path.as_uri())
    return path


def _errors(browser: Any) -> list[dict[str, Any]]:
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def _screenshot(browser: Any, name: str) -> Path:
    """A full-page screenshot kept as a test artefact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, max(800, int(height) + 40))
    target = ARTIFACTS / f"{name}.png"
    assert browser.save_screenshot(str(target))
    browser.set_window_size(1280, 1000)
    return target


def _number(browser: Any, element_id: str, attribute: str = "data-count") -> int:
    element = browser.find_element("id", element_id)
    return int(element.get_attribute(attribute))


def test_the_page_loads_without_console_errors_and_shows_the_counts(
        browser: Any, tmp_path: Path) -> None:
    """The demo report's page loads with no console error; the counts the browser
    reads (attributes and visible text) are the report's; a screenshot is kept."""
    report = demo_report()
    _open(browser, tmp_path, report, "demo")
    assert browser.title == TITLE
    assert _errors(browser) == []
    assert _number(browser, "count-candidates") == report["total_candidates"]
    assert _number(browser, "count-included") == len(report["included"])
    assert _number(browser, "count-excluded") == len(report["excluded"])
    assert browser.find_element("id", "count-candidates").text == "22"
    assert browser.find_element("id", "count-included").text == "16"
    included_rows = browser.find_elements("css selector", "#included-table tr[data-position]")
    excluded_rows = browser.find_elements("css selector", "#excluded-table tr[data-position]")
    assert len(included_rows) == len(report["included"])
    assert len(excluded_rows) == len(report["excluded"])
    assert [row.get_attribute("data-reason") for row in excluded_rows] == [
        entry["reason"]["reason"] for entry in report["excluded"]]
    tokens = sum(entry["item"]["tokens"] for entry in report["included"])
    assert _number(browser, "tokens-selected") == tokens
    bar = {name: _number(browser, f"budget-{name}", "data-tokens")
           for name in ("pinned", "selected", "reserved", "unused")}
    assert sum(bar.values()) == DEMO_BUDGET["maxTokens"]
    width = browser.find_element("css selector", "#budget .bar").size["width"]
    segment = browser.find_element("id", "budget-selected-bar").size["width"]
    assert abs(segment / width - bar["selected"] / DEMO_BUDGET["maxTokens"]) < 0.02
    stages = browser.find_elements("css selector", "#timeline .stage")
    assert len(stages) == len(report["events"])
    assert _screenshot(browser, "html-report-demo").stat().st_size > 10_000


def test_injected_content_does_not_execute(browser: Any, tmp_path: Path) -> None:
    """Script tags, onerror/onload attributes and iframes in every report field stay
    text: no global is set, the title is unchanged, no such element exists, nothing
    is logged as an error, and the text is visible on the page."""
    _open(browser, tmp_path, hostile_report(), "hostile")
    browser.execute_script("return 1")  # let any pending handler run before we look
    assert browser.execute_script("return window.__pwned === undefined") is True
    assert browser.title == TITLE
    for tag in ("script", "img", "svg", "iframe"):
        assert browser.find_elements("css selector", tag) == []
    assert _errors(browser) == []
    body = browser.find_element("tag name", "body")
    alert = browser.find_element("id", "incomplete")
    assert alert.is_displayed()
    assert HOSTILE[1] in alert.text
    for row in browser.find_elements("css selector", "#excluded-table details"):
        browser.execute_script("arguments[0].open = true", row)
    visible = body.text
    for text in HOSTILE:
        assert text in visible
    assert browser.execute_script("return window.__pwned === undefined") is True
    _screenshot(browser, "html-report-hostile")


def test_incomplete_notes_are_visible_before_the_tables(browser: Any, tmp_path: Path) -> None:
    """The incomplete alert is displayed above the summary and the tables."""
    report = demo_report()
    report["incomplete"] = ["no run_completed event: the run's end was not recorded"]
    _open(browser, tmp_path, report, "incomplete")
    alert = browser.find_element("id", "incomplete")
    assert alert.is_displayed()
    assert alert.location["y"] < browser.find_element("id", "summary").location["y"]
    assert alert.location["y"] < browser.find_element("id", "included").location["y"]
    assert "the run's end was not recorded" in alert.text
    assert _errors(browser) == []
