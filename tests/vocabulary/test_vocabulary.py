"""The Cupel.Testing vocabulary (spec/src/testing/vocabulary.md): each of the 13
assertions passes where the chapter says it holds, and fails with the chapter's
message, word for word, where it does not (edge cases from the chapter included)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    KindScorer,
    Pipeline,
    RecencyScorer,
    SelectionReport,
    UShapedPlacer,
)
from cupellation._report import ExcludedItem, IncludedItem
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation.reasons import (
    BudgetExceeded,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    ScoredTooLow,
    UnknownExclusionReason,
)
from cupellation.testing import (
    SelectionReportAssertionChain,
    SelectionReportAssertionError,
    expect,
    should,
)


def inc(content: str, tokens: int = 10, kind: str = "Message", score: float = 0.5,
        reason: InclusionReason = InclusionReason.SCORED) -> IncludedItem:
    """An included entry."""
    return IncludedItem(item=ContextItem(content, tokens, kind=kind), score=score,
                        reason=reason)


def exc(content: str, tokens: int = 10, kind: str = "Message", score: float = 0.5,
        reason: ExclusionReason | None = None) -> ExcludedItem:
    """An excluded entry (BudgetExceeded with item_tokens=tokens, available 5 by default)."""
    return ExcludedItem(item=ContextItem(content, tokens, kind=kind), score=score,
                        reason=reason or BudgetExceeded(item_tokens=tokens,
                                                        available_tokens=5))


def report(included: Sequence[IncludedItem] = (), excluded: Sequence[ExcludedItem] = ()
           ) -> SelectionReport:
    """A hand-built report (the chapter's hand-constructed fixtures)."""
    tokens = sum(e.item.tokens for e in included) + sum(e.item.tokens for e in excluded)
    return SelectionReport(events=(), included=tuple(included), excluded=tuple(excluded),
                           total_candidates=len(included) + len(excluded),
                           total_tokens_considered=tokens)


def message_of(call: object, *args: object) -> str:
    """The message of the SelectionReportAssertionError that ``call(*args)`` raises."""
    assert callable(call)
    with pytest.raises(SelectionReportAssertionError) as caught:
        call(*args)
    return str(caught.value)


EMPTY = report()
MIXED = report(
    included=[inc("sys", 20, "SystemPrompt", 0.9), inc("m1", 30, "Message", 0.8),
              inc("m2", 10, "message", 0.7), inc("tool", 15, "ToolOutput", 0.6)],
    excluded=[exc("big", 50, "Document", 0.95, BudgetExceeded(item_tokens=50,
                                                               available_tokens=25)),
              exc("dup", 10, "Message", 0.4, Deduplicated(deduplicated_against="m2")),
              exc("neg", -1, "ToolOutput", 0.0, NegativeTokens(tokens=-1))],
)


# -- Chain plumbing ---------------------------------------------------------------------

def test_every_assertion_returns_the_chain_itself_and_changes_nothing() -> None:
    """PD-4: a passing assertion returns the same chain, so calls chain fluently, and
    leaves the report as it was; ``should`` is the chapter's name for ``expect``."""
    chain = expect(MIXED)
    before = MIXED.to_dict()
    budget = ContextBudget(max_tokens=100, target_tokens=80)
    result = (chain
              .include_item_with_kind("SystemPrompt")
              .include_item_matching(lambda e: e.score > 0.85)
              .include_exactly_n_items_with_kind("Message", 2)
              .exclude_item_with_reason("Deduplicated")
              .exclude_item_matching_with_reason(lambda i: i.content == "neg", NegativeTokens)
              .exclude_item_with_budget_details(lambda i: i.content == "big", 50, 25)
              .have_no_exclusions_for_kind("SystemPrompt")
              .have_at_least_n_exclusions(3)
              .excluded_items_are_sorted_by_score_descending()
              .have_budget_utilization_above(0.75, budget)
              .have_kind_coverage_count(3)
              .place_item_at_edge(lambda e: e.item.content == "tool")
              .place_top_n_scored_at_edges(1))
    assert result is chain
    assert isinstance(should(MIXED), SelectionReportAssertionChain)
    assert should(MIXED).report is MIXED
    assert MIXED.to_dict() == before


def test_the_failure_is_a_dedicated_assertion_error_naming_the_assertion() -> None:
    """The failure type is SelectionReportAssertionError, an AssertionError (so test
    runners report a failed assertion) carrying the chapter's method name."""
    with pytest.raises(SelectionReportAssertionError) as caught:
        expect(EMPTY).have_at_least_n_exclusions(1)
    assert isinstance(caught.value, AssertionError)
    assert caught.value.assertion == "HaveAtLeastNExclusions"
    assert caught.value.message == str(caught.value)


def test_bad_arguments_raise_errors_naming_them_not_assertion_failures() -> None:
    """A mistake in the test (not a report, a negative count, an unknown reason name,
    a NaN threshold, a non-callable predicate, a zero max_tokens) raises the library's
    validation errors naming the argument."""
    with pytest.raises(InvalidTypeError, match=r"^report:"):
        expect({"included": []})  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match=r"^n: must be >= 0"):
        expect(MIXED).have_at_least_n_exclusions(-1)
    with pytest.raises(InvalidTypeError, match=r"^n:"):
        expect(MIXED).have_kind_coverage_count(True)
    with pytest.raises(InvalidValueError, match=r"^reason: is not an exclusion reason"):
        expect(MIXED).exclude_item_with_reason("BudgetExceed")
    with pytest.raises(InvalidValueError, match=r"^reason: is not an exclusion reason"):
        expect(MIXED).exclude_item_with_reason(dict)
    with pytest.raises(InvalidTypeError, match=r"^reason:"):
        expect(MIXED).exclude_item_with_reason(InclusionReason.PINNED)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match=r"^threshold: must be a number"):
        expect(MIXED).have_budget_utilization_above(math_nan(), ContextBudget(10, 10))
    with pytest.raises(InvalidTypeError, match=r"^budget:"):
        expect(MIXED).have_budget_utilization_above(0.5, 100)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match=re.escape("budget.max_tokens: must be > 0")):
        expect(MIXED).have_budget_utilization_above(0.5, ContextBudget(0, 0))
    with pytest.raises(InvalidTypeError, match=r"^predicate:"):
        expect(MIXED).place_item_at_edge("tool")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"^kind:"):
        expect(MIXED).include_item_with_kind(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match=r"^expected_item_tokens:"):
        expect(MIXED).exclude_item_with_budget_details(
            lambda i: True, "50", 25)  # type: ignore[arg-type]


def math_nan() -> float:
    """NaN."""
    return float("nan")


# -- Inclusion group --------------------------------------------------------------------

def test_include_item_with_kind() -> None:
    """Pattern 1: passes when an included item has the kind (compared case-insensitively,
    as ContextKind is); fails on an empty Included and on a missing kind, listing the
    distinct kinds present in first-seen order."""
    expect(MIXED).include_item_with_kind("toolOUTPUT")
    assert message_of(expect(EMPTY).include_item_with_kind, "Message") == (
        "IncludeItemWithKind(Message) failed: Included contained 0 items with Kind=Message. "
        "Included had 0 items with kinds: [].")
    assert message_of(expect(MIXED).include_item_with_kind, "Memory") == (
        "IncludeItemWithKind(Memory) failed: Included contained 0 items with Kind=Memory. "
        "Included had 4 items with kinds: [SystemPrompt, Message, ToolOutput].")


def test_include_item_matching() -> None:
    """Pattern 2: the predicate sees the whole IncludedItem (item, score, reason); the
    failure is the chapter's message, with the recommended appendix of up to 5 entries
    when Included is not empty."""
    pinned = report(included=[inc("p", 5, score=1.0, reason=InclusionReason.PINNED)])
    expect(pinned).include_item_matching(lambda e: e.reason.name == "Pinned")
    assert message_of(expect(EMPTY).include_item_matching, lambda e: True) == (
        "IncludeItemMatching failed: no item in Included matched the predicate. "
        "Included had 0 items.")
    six = report(included=[inc(f"m{k}", score=k / 10) for k in range(6)])
    assert message_of(expect(six).include_item_matching, lambda e: e.score > 1) == (
        "IncludeItemMatching failed: no item in Included matched the predicate. "
        "Included had 6 items. First 5: [(kind=Message, score=0.0, reason=Scored), "
        "(kind=Message, score=0.1, reason=Scored), (kind=Message, score=0.2, reason=Scored), "
        "(kind=Message, score=0.3, reason=Scored), (kind=Message, score=0.4, reason=Scored)].")


def test_include_exactly_n_items_with_kind() -> None:
    """Pattern 3: exact count; N=0 on an empty Included passes, and the failure shows
    expected, actual and the total."""
    expect(EMPTY).include_exactly_n_items_with_kind("Message", 0)
    expect(MIXED).include_exactly_n_items_with_kind("Memory", 0)
    expect(MIXED).include_exactly_n_items_with_kind("MESSAGE", 2)
    assert message_of(expect(MIXED).include_exactly_n_items_with_kind, "Message", 3) == (
        "IncludeExactlyNItemsWithKind(Message, 3) failed: expected 3 items with Kind=Message "
        "in Included, but found 2. Included had 4 items total.")
    assert message_of(expect(EMPTY).include_exactly_n_items_with_kind, "Document", 1) == (
        "IncludeExactlyNItemsWithKind(Document, 1) failed: expected 1 items with "
        "Kind=Document in Included, but found 0. Included had 0 items total.")


# -- Exclusion group --------------------------------------------------------------------

def test_exclude_item_with_reason() -> None:
    """Pattern 4: the variant is matched (by name, class or value; the value's fields do
    not count); a reserved variant is a valid argument, and so is a variant this version
    does not know, given as a value; the failure lists the distinct reasons present."""
    expect(MIXED).exclude_item_with_reason("BudgetExceeded")
    expect(MIXED).exclude_item_with_reason(Deduplicated)
    expect(MIXED).exclude_item_with_reason(BudgetExceeded(item_tokens=1, available_tokens=0))
    filtered = report(excluded=[exc("f", reason=Filtered(filter_name="pii"))])
    expect(filtered).exclude_item_with_reason("Filtered")
    future = report(excluded=[exc("u", reason=UnknownExclusionReason(reason_name="Expired"))])
    expect(future).exclude_item_with_reason(UnknownExclusionReason(reason_name="Expired"))
    assert message_of(expect(EMPTY).exclude_item_with_reason, "BudgetExceeded") == (
        "ExcludeItemWithReason(BudgetExceeded) failed: no excluded item had reason "
        "BudgetExceeded. Excluded had 0 items with reasons: [].")
    assert message_of(expect(MIXED).exclude_item_with_reason, ScoredTooLow) == (
        "ExcludeItemWithReason(ScoredTooLow) failed: no excluded item had reason "
        "ScoredTooLow. Excluded had 3 items with reasons: "
        "[BudgetExceeded, Deduplicated, NegativeTokens].")


def test_exclude_item_matching_with_reason() -> None:
    """Pattern 5: predicate over the ContextItem and the variant together; the failure
    tells 'matched none' from 'matched but with other reasons'."""
    expect(MIXED).exclude_item_matching_with_reason(lambda i: i.content == "dup",
                                                    "Deduplicated")
    assert message_of(expect(MIXED).exclude_item_matching_with_reason,
                      lambda i: i.content == "absent", "BudgetExceeded") == (
        "ExcludeItemMatchingWithReason(reason=BudgetExceeded) failed: predicate matched 0 "
        "excluded item(s) but none had reason BudgetExceeded. Matched items had reasons: [].")
    assert message_of(expect(MIXED).exclude_item_matching_with_reason,
                      lambda i: i.tokens >= 10, "NegativeTokens") == (
        "ExcludeItemMatchingWithReason(reason=NegativeTokens) failed: predicate matched 2 "
        "excluded item(s) but none had reason NegativeTokens. Matched items had reasons: "
        "[BudgetExceeded, Deduplicated].")


def test_exclude_item_with_budget_details() -> None:
    """Pattern 6: BudgetExceeded with exact item_tokens and available_tokens; the
    failure shows the first matching BudgetExceeded item's values, or the 'no matching
    item had reason BudgetExceeded' form (extended with what the predicate matched)."""
    two = report(excluded=[
        exc("a", 40, score=0.9, reason=BudgetExceeded(item_tokens=40, available_tokens=12)),
        exc("a", 40, score=0.8, reason=BudgetExceeded(item_tokens=40, available_tokens=7))])
    expect(two).exclude_item_with_budget_details(lambda i: i.content == "a", 40, 7)
    assert message_of(expect(two).exclude_item_with_budget_details,
                      lambda i: i.content == "a", 40, 8) == (
        "ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens=40, "
        "available_tokens=8, but found item_tokens=40, available_tokens=12.")
    assert message_of(expect(MIXED).exclude_item_with_budget_details,
                      lambda i: i.content == "dup", 10, 0) == (
        "ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens=10, "
        "available_tokens=0, but no matching item had reason BudgetExceeded. The predicate "
        "matched 1 excluded item(s), with reasons: [Deduplicated].")
    assert message_of(expect(EMPTY).exclude_item_with_budget_details,
                      lambda i: True, 1, 0) == (
        "ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with item_tokens=1, "
        "available_tokens=0, but no matching item had reason BudgetExceeded. The predicate "
        "matched 0 excluded item(s), with reasons: [].")


def test_have_no_exclusions_for_kind() -> None:
    """Pattern 7: vacuously true on an empty Excluded; the failure counts the kind's
    excluded items and shows the first (highest-scored) one."""
    expect(EMPTY).have_no_exclusions_for_kind("Message")
    expect(MIXED).have_no_exclusions_for_kind("Memory")
    assert message_of(expect(MIXED).have_no_exclusions_for_kind, "ToolOutput") == (
        "HaveNoExclusionsForKind(ToolOutput) failed: found 1 excluded item(s) with "
        "Kind=ToolOutput. First: score=0.0, reason=NegativeTokens.")
    twice = report(excluded=[exc("x", kind="Document", score=0.7),
                             exc("y", kind="Document", score=0.25)])
    assert message_of(expect(twice).have_no_exclusions_for_kind, "Document") == (
        "HaveNoExclusionsForKind(Document) failed: found 2 excluded item(s) with "
        "Kind=Document. First: score=0.7, reason=BudgetExceeded.")


# -- Aggregate counts -------------------------------------------------------------------

def test_have_at_least_n_exclusions() -> None:
    """Pattern 8: N=0 always passes (the smoke-test form); the failure shows the count."""
    expect(EMPTY).have_at_least_n_exclusions(0)
    expect(MIXED).have_at_least_n_exclusions(3)
    assert message_of(expect(MIXED).have_at_least_n_exclusions, 4) == (
        "HaveAtLeastNExclusions(4) failed: expected at least 4 excluded items, but Excluded "
        "had 3.")


def test_excluded_items_are_sorted_by_score_descending() -> None:
    """Pattern 9: empty, one item and equal neighbours pass; the failure names the first
    violating pair."""
    expect(EMPTY).excluded_items_are_sorted_by_score_descending()
    expect(report(excluded=[exc("a")])).excluded_items_are_sorted_by_score_descending()
    ties = report(excluded=[exc("a", score=0.5), exc("b", score=0.5), exc("c", score=0.1)])
    expect(ties).excluded_items_are_sorted_by_score_descending()
    bad = report(excluded=[exc("a", score=0.9), exc("b", score=0.3), exc("c", score=0.6),
                           exc("d", score=0.95)])
    assert message_of(expect(bad).excluded_items_are_sorted_by_score_descending) == (
        "ExcludedItemsAreSortedByScoreDescending failed: item at index 2 (score=0.6) is "
        "higher than item at index 1 (score=0.3). Expected non-increasing scores.")


# -- Budget -----------------------------------------------------------------------------

def test_have_budget_utilization_above() -> None:
    """Pattern 10: included tokens over max_tokens (not the target), compared with an
    exact >=; an empty Included is 0.0, which passes a 0.0 threshold."""
    budget = ContextBudget(max_tokens=100, target_tokens=50)
    expect(MIXED).have_budget_utilization_above(0.75, budget)  # 75 / 100, exactly
    expect(EMPTY).have_budget_utilization_above(0.0, budget)
    assert message_of(expect(MIXED).have_budget_utilization_above, 0.76, budget) == (
        "HaveBudgetUtilizationAbove(0.76) failed: computed utilization was 0.750000 "
        "(includedTokens=75, budget.MaxTokens=100).")
    third = report(included=[inc("a", 1)])
    assert message_of(expect(third).have_budget_utilization_above, 0.5,
                      ContextBudget(3, 3)) == (
        "HaveBudgetUtilizationAbove(0.5) failed: computed utilization was 0.333333 "
        "(includedTokens=1, budget.MaxTokens=3).")


# -- Kind coverage ----------------------------------------------------------------------

def test_have_kind_coverage_count() -> None:
    """Pattern 11: distinct kinds in Included (case-insensitively: "Message" and
    "message" are one kind); n=0 passes on an empty report."""
    expect(EMPTY).have_kind_coverage_count(0)
    expect(MIXED).have_kind_coverage_count(3)
    assert message_of(expect(MIXED).have_kind_coverage_count, 4) == (
        "HaveKindCoverageCount(4) failed: expected at least 4 distinct ContextKind values in "
        "Included, but found 3: [SystemPrompt, Message, ToolOutput].")
    assert message_of(expect(EMPTY).have_kind_coverage_count, 1) == (
        "HaveKindCoverageCount(1) failed: expected at least 1 distinct ContextKind values in "
        "Included, but found 0: [].")


# -- Ordering ---------------------------------------------------------------------------

def test_place_item_at_edge() -> None:
    """Pattern 12: position 0 or count-1 only (a single item is both); the two failure
    variants: no match at all, and a match away from the edges (the first match's index)."""
    expect(MIXED).place_item_at_edge(lambda e: e.item.content == "sys")
    expect(MIXED).place_item_at_edge(lambda e: e.item.kind == "Message" or e.score < 0.65)
    expect(report(included=[inc("only")])).place_item_at_edge(lambda e: True)
    assert message_of(expect(EMPTY).place_item_at_edge, lambda e: True) == (
        "PlaceItemAtEdge failed: no item in Included matched the predicate.")
    assert message_of(expect(MIXED).place_item_at_edge, lambda e: e.item.kind == "Message") == (
        "PlaceItemAtEdge failed: item matching predicate was at index 1 (not at edge). "
        "Edge positions: 0 and 3. Included had 4 items.")


def test_place_top_n_scored_at_edges() -> None:
    """Pattern 13: the top-n scores fill positions 0, count-1, 1, count-2, ... in any
    order; n=0 passes; a tie at the n-th score is satisfied by any tied item; n above
    the count fails; the failure lists the top-n with their indexes and the positions."""
    u_shaped = report(included=[inc("a", score=0.9), inc("c", score=0.5), inc("d", score=0.4),
                                inc("e", score=0.6), inc("b", score=0.8)])
    expect(u_shaped).place_top_n_scored_at_edges(0).place_top_n_scored_at_edges(2)
    expect(u_shaped).place_top_n_scored_at_edges(4).place_top_n_scored_at_edges(5)
    expect(EMPTY).place_top_n_scored_at_edges(0)
    tie = report(included=[inc("a", score=0.9), inc("t1", score=0.5), inc("t2", score=0.5),
                           inc("t3", score=0.5)])
    expect(tie).place_top_n_scored_at_edges(2)
    assert message_of(expect(u_shaped).place_top_n_scored_at_edges, 6) == (
        "PlaceTopNScoredAtEdges(6) failed: Included had 5 items, fewer than the 6 edge "
        "positions to fill.")
    middle = report(included=[inc("a", 5, "Message", 0.2), inc("b", 5, "Document", 0.9),
                              inc("c", 5, "Memory", 0.8), inc("d", 5, "Message", 0.1),
                              inc("e", 5, "ToolOutput", 0.3), inc("f", 5, "Message", 0.7)])
    assert message_of(expect(middle).place_top_n_scored_at_edges, 4) == (
        "PlaceTopNScoredAtEdges(4) failed: 1 of the top-4 scored items were not at expected "
        "edge positions. Top-4 items (by score): [(kind=Document, score=0.9, idx=1), "
        "(kind=Memory, score=0.8, idx=2), (kind=Message, score=0.7, idx=5), "
        "(kind=ToolOutput, score=0.3, idx=4)]. Expected edge positions: [0, 5, 1, 4].")
    higher_inside = report(included=[inc("a", score=0.5), inc("top", score=0.9),
                                     inc("b", score=0.5)])
    assert message_of(expect(higher_inside).place_top_n_scored_at_edges, 1) == (
        "PlaceTopNScoredAtEdges(1) failed: 1 of the top-1 scored items were not at expected "
        "edge positions. Top-1 items (by score): [(kind=Message, score=0.9, idx=1)]. "
        "Expected edge positions: [0].")


# -- On real runs -----------------------------------------------------------------------

def test_the_vocabulary_reads_a_real_u_shaped_run() -> None:
    """On a pipeline's own report (KindScorer, UShapedPlacer, a budget that drops the
    Document): the U-shaped placer puts the top scores at the edges, the exclusion's
    token figures are the slicer's, and the conformance assertion holds."""
    items = [ContextItem("system", 10, kind="SystemPrompt"),
             ContextItem("q1", 10, kind="Message"), ContextItem("q2", 12, kind="Message"),
             ContextItem("tool", 8, kind="ToolOutput"),
             ContextItem("doc", 200, kind="Document")]
    budget = ContextBudget(max_tokens=60, target_tokens=50)
    result = Pipeline(scorer=KindScorer(), placer=UShapedPlacer()).dry_run(items, budget)
    (expect(result)
        .include_exactly_n_items_with_kind("Message", 2)
        .have_kind_coverage_count(3)
        .exclude_item_with_budget_details(lambda i: i.content == "doc", 200, 10)
        .have_no_exclusions_for_kind("SystemPrompt")
        .excluded_items_are_sorted_by_score_descending()
        .have_budget_utilization_above(0.66, budget)
        .place_top_n_scored_at_edges(len(result.included))
        .place_item_at_edge(lambda e: e.item.kind == "SystemPrompt"))
    recency = Pipeline(scorer=RecencyScorer()).dry_run(items, budget)
    expect(recency).have_at_least_n_exclusions(1).exclude_item_with_reason("BudgetExceeded")


def test_the_documentation_example_runs() -> None:
    """docs/testing.md's first Python example runs as written, every assertion holding."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text(
        encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    exec(compile(block, "docs/testing.md", "exec"), {})
