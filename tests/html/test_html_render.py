"""The HTML report: self-contained, escaped, with counts where a reader (or a test)
can find them, and clear errors for reports it cannot show."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from _html_support import DEMO_BUDGET, HOSTILE, PageParser, demo_report, hostile_report

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    PriorityScorer,
    TraceDetailLevel,
)
from cupellation.exceptions import DecodeError, InvalidTypeError
from cupellation.html import DEFAULT_TITLE, render_html

#: Every tag the renderer itself writes; anything else came from the report.
OWN_TAGS = {"html", "head", "meta", "link", "title", "style", "body", "main", "header", "h1",
            "h2", "p", "section", "div", "span", "strong", "ul", "li", "table", "thead",
            "tbody", "tr", "th", "td", "details", "summary", "pre", "dl", "dt", "dd", "footer",
            "colgroup", "col"}


def _count(parser: PageParser, element_id: str, attribute: str = "data-count") -> int:
    value = parser.by_id[element_id][attribute]
    assert value is not None
    return int(value)


def test_counts_sit_in_stable_ids_and_match_the_report() -> None:
    """Candidates, included, excluded, pinned and token totals are in elements with
    stable ids, as are the row counts of the item tables."""
    report = demo_report()
    parser = PageParser.of(render_html(report, budget=DEMO_BUDGET))
    included = report["included"]
    assert _count(parser, "count-candidates") == report["total_candidates"] == 22
    assert _count(parser, "count-included") == len(included) == 16
    assert _count(parser, "count-excluded") == len(report["excluded"]) == 6
    assert _count(parser, "count-pinned") == 1
    assert _count(parser, "tokens-selected") == sum(e["item"]["tokens"] for e in included)
    assert _count(parser, "tokens-considered") == report["total_tokens_considered"]
    assert _count(parser, "included-table") == 16
    assert _count(parser, "excluded-table") == 6
    rows = [attrs for tag, attrs in parser.tags if tag == "tr" and "data-position" in attrs]
    assert len(rows) == 22


def test_the_budget_bar_splits_the_window() -> None:
    """Pinned, selected, output reserve and unused tokens add up to maxTokens."""
    report = demo_report()
    parser = PageParser.of(render_html(report, budget=DEMO_BUDGET))
    pinned = _count(parser, "budget-pinned", "data-tokens")
    selected = _count(parser, "budget-selected", "data-tokens")
    reserved = _count(parser, "budget-reserved", "data-tokens")
    unused = _count(parser, "budget-unused", "data-tokens")
    assert (pinned, reserved) == (28, 256)
    assert pinned + selected == sum(e["item"]["tokens"] for e in report["included"])
    assert pinned + selected + reserved + unused == DEMO_BUDGET["maxTokens"]
    assert _count(parser, "budget-target", "data-tokens") == 400
    assert "budget-over" not in parser.by_id


def test_the_budget_margin_and_reserved_slots_are_shown() -> None:
    """A budget's safety margin and reserved slots appear beside the window and target."""
    page = render_html(demo_report(), budget=ContextBudget(
        1024, 400, 256, {"ToolOutput": 2}, 7.5))
    assert "safety margin 7.5%" in page
    assert "reserved slots: ToolOutput 2" in page


def test_a_selection_over_the_window_is_flagged() -> None:
    """When pinned, selected and reserve exceed maxTokens the page says by how much."""
    parser = PageParser.of(render_html(demo_report(), budget={"maxTokens": 300,
                                                              "targetTokens": 300}))
    assert _count(parser, "budget-over", "data-tokens") == 392 - 300
    assert _count(parser, "budget-unused", "data-tokens") == 0


def test_without_a_budget_the_bar_shows_the_tokens_considered() -> None:
    """No budget: pinned, selected and left-out tokens, and a note saying so."""
    page = render_html(demo_report())
    parser = PageParser.of(page)
    assert "budget-reserved" not in parser.by_id
    assert _count(parser, "budget-excluded", "data-tokens") == 1450 + 55 + 60 + 35 + 30
    assert "No budget was given" in page


def test_items_appear_in_placed_and_report_order() -> None:
    """Included rows follow the report's placed order; excluded rows the report's order."""
    report = demo_report()
    page = render_html(report)
    for key in ("included", "excluded"):
        wanted = [entry["item"]["content"][:40] for entry in report[key]]
        section = page[page.index(f'id="{key}-table"'):]
        section = section[:section.index("</table>")]
        positions = [section.index(_escaped(text)) for text in wanted]
        assert positions == sorted(positions)


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace(
        '"', "&quot;").replace("'", "&#x27;")


def test_excluded_rows_show_their_reason_fields() -> None:
    """BudgetExceeded shows item_tokens and available_tokens; Deduplicated shows the content
    it duplicated."""
    page = render_html(demo_report())
    assert re.search(r"item_tokens</span> <span class=\"field-value\">1,450", page)
    assert re.search(r"available_tokens</span> <span class=\"field-value\">8<", page)
    assert "deduplicated_against" in page


def test_incomplete_notes_come_first_and_prominently() -> None:
    """A report with incomplete notes shows them in an alert before everything else;
    a complete report has no such section."""
    report = demo_report()
    assert 'id="incomplete"' not in render_html(report)
    report["incomplete"] = ["no run_completed event: the run's end was not recorded"]
    page = render_html(report)
    parser = PageParser.of(page)
    assert _count(parser, "incomplete") == 1
    assert parser.by_id["incomplete"]["role"] == "alert"
    assert page.index('id="incomplete"') < page.index('id="summary"')
    assert "the run&#x27;s end was not recorded" in page


def test_shortfalls_overflow_and_stages_are_shown() -> None:
    """Count shortfalls, a Proceed overflow and every stage of the timeline appear."""
    report = demo_report()
    report["count_requirement_shortfalls"] = [{"kind": "ToolOutput", "required_count": 3,
                                               "satisfied_count": 1}]
    report["overflow"] = {"tokens_over_budget": 12, "overflowing_items": [
        report["included"][1]["item"]], "budget": {"maxTokens": 10, "targetTokens": 5}}
    parser = PageParser.of(render_html(report))
    assert _count(parser, "shortfalls") == 1
    assert parser.by_id["overflow"]["data-tokens"] == "12"
    stages = [attrs["data-stage"] for tag, attrs in parser.tags if "data-stage" in attrs]
    assert stages == [event["stage"] for event in report["events"]]


def test_the_page_is_self_contained() -> None:
    """No script, no external stylesheet, font or image; a CSP that forbids both."""
    page = render_html(demo_report(), budget=DEMO_BUDGET)
    parser = PageParser.of(page)
    assert not [tag for tag, _ in parser.tags if tag in ("script", "iframe", "img", "object")]
    links = [attrs for tag, attrs in parser.tags if tag == "link"]
    assert links == [{"rel": "icon", "href": "data:,"}]
    assert not re.search(r"https?://", page)
    assert "@import" not in page
    csp = next(attrs["content"] for tag, attrs in parser.tags
               if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None
    assert "default-src 'none'" in csp
    assert "script-src" not in csp


def test_hostile_content_is_escaped_everywhere() -> None:
    """Markup in content, kinds, sources, tags, metadata, reasons, stage names,
    incomplete notes and the title comes out as text: the page holds only the
    renderer's own tags and no event-handler attribute."""
    page = render_html(hostile_report(), budget=DEMO_BUDGET, title=HOSTILE[0])
    parser = PageParser.of(page)
    assert {tag for tag, _ in parser.tags} <= OWN_TAGS
    handlers = [(tag, name) for tag, attrs in parser.tags for name in attrs
                if name.startswith("on") or name == "srcdoc"]
    assert handlers == []
    text = "".join(parser.text)
    for hostile in HOSTILE:
        assert hostile in text  # shown, as text


def test_a_live_report_and_budget_objects_are_accepted() -> None:
    """render_html takes a SelectionReport and a ContextBudget as well as their JSON."""
    items = [ContextItem(f"item {k}", 10, priority=k) for k in range(5)]
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    budget = ContextBudget(max_tokens=40, target_tokens=30)
    Pipeline(scorer=PriorityScorer()).run(items, budget, collector)
    report = collector.build_report()
    page = render_html(report, budget=budget)
    assert page == render_html(report.to_dict(), budget=budget.to_dict())
    parser = PageParser.of(page)
    assert _count(parser, "count-included") == 3
    assert _count(parser, "count-excluded") == 2
    assert f"<title>{DEFAULT_TITLE}</title>" in page


@pytest.mark.parametrize(("change", "field"), [
    (lambda r: r.pop("included"), "included"),
    (lambda r: r.__setitem__("excluded", {}), "excluded"),
    (lambda r: r["included"][3]["item"].__setitem__("tokens", "many"), "included[3].item.tokens"),
    (lambda r: r["included"][0].pop("item"), "included[0].item"),
    (lambda r: r["excluded"][2]["reason"].pop("reason"), "excluded[2].reason.reason"),
    (lambda r: r["excluded"][1].__setitem__("score", None), "excluded[1].score"),
    (lambda r: r["events"][4].__setitem__("item_count", 1.5), "events[4].item_count"),
    (lambda r: r.__setitem__("total_candidates", "22"), "total_candidates"),
    (lambda r: r.__setitem__("incomplete", [3]), "incomplete[0]"),
])
def test_a_report_it_cannot_show_names_the_json_path(change: Any, field: str) -> None:
    """A missing or mistyped member raises DecodeError naming its JSON path and value."""
    report = copy.deepcopy(demo_report())
    change(report)
    with pytest.raises(DecodeError) as caught:
        render_html(report)
    assert caught.value.field == field


def test_bad_budgets_and_titles_are_refused() -> None:
    """A budget without maxTokens, or a negative one, and a non-string title are refused."""
    with pytest.raises(DecodeError) as caught:
        render_html(demo_report(), budget={"targetTokens": 4})
    assert caught.value.field == "budget.maxTokens"
    with pytest.raises(DecodeError):
        render_html(demo_report(), budget={"maxTokens": -1, "targetTokens": 0})
    with pytest.raises(DecodeError):
        render_html([])  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        render_html(demo_report(), title=3)  # type: ignore[arg-type]


def test_control_and_bidi_characters_are_shown_not_applied() -> None:
    """Escape sequences, carriage returns and bidi overrides in content appear on the
    page as visible escapes, never raw (they could hide or reorder what is read)."""
    report = demo_report()
    report["excluded"][0]["item"]["content"] = "ok\x1b[31mred\rback\u202eevil"
    page = render_html(report)
    assert "\x1b" not in page
    assert "\r" not in page
    assert "\u202e" not in page
    assert "ok\\u001b[31mred\\u000dback\\u202eevil" in page


INVISIBLE = {
    "\u200b": "zero width space", "\u200c": "zero width non-joiner",
    "\u200d": "zero width joiner", "\u2060": "word joiner", "\ufeff": "byte-order mark",
    "\u200e": "left-to-right mark", "\u200f": "right-to-left mark",
    "\u061c": "Arabic letter mark", "\u202a": "left-to-right embedding",
    "\u202d": "left-to-right override", "\u2066": "left-to-right isolate",
    "\u2069": "pop directional isolate", "\u2028": "line separator",
    "\u2029": "paragraph separator", "\U000e0041": "tag latin capital letter A",
}


@pytest.mark.parametrize("char", list(INVISIBLE), ids=list(INVISIBLE.values()))
def test_invisible_code_points_are_shown_as_escapes(char: str) -> None:
    """Each invisible code point the terminal output escapes (zero-width characters,
    the BOM, bidi marks, embeddings, overrides and isolates, U+2028/U+2029) appears on
    the page as a visible escape in content, previews, metadata, reason fields and the
    title, never raw: the page used to keep zero-width characters, marks, separators
    and the BOM as they were."""
    report = demo_report()
    entry = report["excluded"][0]
    entry["item"]["content"] = f"pay{char}pal"
    entry["item"]["metadata"] = {f"k{char}": f"v{char}"}
    entry["item"]["tags"] = [f"t{char}"]
    report["included"][0]["item"]["content"] = f"{char}first line\nsecond"
    page = render_html(report, title=f"title{char}")
    assert char not in page
    code = ord(char)
    escape = f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    assert f"pay{escape}pal" in page
    assert f"<title>title{escape}</title>" in page
    assert f"k{escape}" in page
    assert f"t{escape}" in page


def test_tabs_newlines_and_printable_text_are_kept() -> None:
    """Tabs and newlines stay as they are (content is shown preformatted), and so does
    printable text from any script, emoji included."""
    report = demo_report()
    text = "tab\there\nnew line: café, 日本語, שלום, 😀"
    report["excluded"][0]["item"]["content"] = text
    assert text in render_html(report)
