"""The page ``cupellation stats --html`` writes, opened in a real headless Chromium: it
loads without console errors, draws one bar segment per bucket and reason with the
counts in their tooltips, shows the incomplete-runs headline first, and hostile service
or reason names stay text."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _html_support import ARTIFACTS, chromium_driver

from cupellation.cli._statspage import stats_page
from cupellation.store import (
    ExclusionCount,
    FailureCount,
    FleetStats,
    SourceCount,
    UtilizationStats,
)

pytestmark = pytest.mark.slow

_DAY = datetime(2026, 11, 20, tzinfo=UTC)
_HOSTILE = '<img src=x onerror="document.title=\'pwned\'">'


def _stats() -> FleetStats:
    """Two days, two services, three reasons; one service named with markup."""
    rows = [ExclusionCount(bucket=_DAY + timedelta(days=day), service=service, reason=reason,
                           kind="ToolOutput", count=count)
            for day in (0, 1)
            for service, reason, count in (("billing", "BudgetExceeded", 7 + day),
                                            (_HOSTILE, "Deduplicated", 2),
                                            ("billing", "NegativeTokens", 1 + day))]
    return FleetStats(
        bucket="day", runs=40, completed_runs=37, failed_runs=3, incomplete_runs=2,
        incomplete_causes=(("no end event", 2),), overflow_events=1, exclusions=tuple(rows),
        utilization=(UtilizationStats(service="billing", runs=37, p50=0.5, p90=0.8,
                                      p99=0.95, minimum=0.1, maximum=0.97),),
        failures=(FailureCount(service="billing", error_type="PinnedBudgetError", runs=3),),
        top_sources=(SourceCount(source="Chat", count=19, top_reason="BudgetExceeded"),))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for the module."""
    driver = chromium_driver()
    try:
        yield driver
    finally:
        driver.quit()


def test_the_stats_page_draws_every_segment_and_keeps_names_as_text(
        browser: Any, tmp_path: Path) -> None:
    """Six segments (2 days x 3 reasons) whose tooltips carry the counts; the headline
    names the incomplete runs and that digests were not checked; the markup in a
    service name is shown as text and never runs; no console error."""
    stats = _stats()
    page = tmp_path / "stats.html"
    page.write_text(stats_page(stats), encoding="utf-8")
    browser.get_log("browser")
    browser.get(page.as_uri())
    titles = [element.get_attribute("textContent")
              for element in browser.find_elements("css selector", "svg rect title")]
    assert sorted(titles) == sorted(
        f"{(_DAY + timedelta(days=day)).strftime('%Y-%m-%d')}: {reason} {count}"
        for day in (0, 1)
        for reason, count in (("BudgetExceeded", 7 + day), ("Deduplicated", 2),
                              ("NegativeTokens", 1 + day)))
    headline = browser.find_element("css selector", ".headline").text
    assert "2 structurally incomplete (2 no end event)" in headline
    assert "digests not checked" in headline
    assert browser.title == "cupellation fleet statistics"
    assert _HOSTILE in browser.find_element("tag name", "body").text
    assert not [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "stats-page.png"))
