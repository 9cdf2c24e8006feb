"""Shared pieces of the HTML report tests: sample reports, a tag collector and
the headless Chromium driver."""

from __future__ import annotations

import copy
import importlib
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "ARTIFACTS",
    "CHROMEDRIVER",
    "CHROMIUM",
    "DEMO_BUDGET",
    "HOSTILE",
    "PageParser",
    "chromium_driver",
    "demo_report",
    "hostile_report",
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: Where the browser tests leave their screenshots.
ARTIFACTS = ROOT / "out" / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: The budget `cupellation demo` runs with (its defaults).
DEMO_BUDGET = {"maxTokens": 1024, "targetTokens": 400, "outputReserve": 256}

#: Content that would run script if it reached the page unescaped; each sets
#: window.__pwned and the title, which the browser test checks.
HOSTILE = (
    "<script>window.__pwned = 'script'; document.title = 'pwned'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'; document.title = 'pwned'\">",
    "\"><svg onload=\"window.__pwned='svg'\">",
    "</textarea></pre></details><iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\">",
)


def demo_report() -> dict[str, Any]:
    """The report `cupellation demo` wrote (a copy kept as test data)."""
    data: dict[str, Any] = json.loads((HERE / "data" / "demo_report.json").read_text("utf-8"))
    return data


def hostile_report() -> dict[str, Any]:
    """The demo report with script-bearing text in every field the page shows."""
    report = copy.deepcopy(demo_report())
    for number, text in enumerate(HOSTILE):
        report["excluded"].append({
            "item": {"content": text, "tokens": 10 + number, "kind": f"Kind{text}",
                     "source": text, "tags": [text], "metadata": {text: text}},
            "score": 0.1,
            "reason": {"reason": f"Custom{text}", "detail": text},
        })
    report["included"][1]["item"]["content"] = HOSTILE[1] + " and " + HOSTILE[0]
    report["events"][0]["stage"] = HOSTILE[0]
    report["incomplete"] = [HOSTILE[1], "1 of 26 candidates has no item event"]
    report["total_candidates"] += len(HOSTILE)
    report["total_tokens_considered"] += sum(10 + n for n in range(len(HOSTILE)))
    return report


class PageParser(HTMLParser):
    """Collects every start tag, its attributes, and elements by id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.by_id: dict[str, dict[str, str | None]] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Record the tag and index it by id."""
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        element_id = attributes.get("id")
        if element_id is not None:
            self.by_id[element_id] = attributes

    def handle_data(self, data: str) -> None:
        """Keep the text."""
        self.text.append(data)

    @classmethod
    def of(cls, page: str) -> PageParser:
        """The parsed page."""
        parser = cls()
        parser.feed(page)
        parser.close()
        return parser


def chromium_driver(width: int = 1280, height: int = 1000) -> Any:
    """A headless Chromium WebDriver (Debian's chromium and chromium-driver).

    Fails the calling test, with what to install, when the browser, the
    driver or selenium is missing: these tests must never pass by skipping.
    """
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.exists()]
    if missing:
        pytest.fail(
            f"the browser tests need {' and '.join(missing)}; install them with "
            "`apt-get update && apt-get install -y chromium chromium-driver`",
            pytrace=False,
        )
    try:
        webdriver = importlib.import_module("selenium.webdriver")
    except ImportError:
        pytest.fail("the browser tests need selenium: `.venv/bin/pip install selenium` "
                    "(it belongs in the dev extra)", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--hide-scrollbars",
                     f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    return webdriver.Chrome(options=options, service=service)
