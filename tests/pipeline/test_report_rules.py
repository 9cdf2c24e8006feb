"""SelectionReport.from_json / from_dict check the report format's MUST rules:
total_candidates = len(included) + len(excluded), total_tokens_considered = the sum
of both lists' tokens, and excluded sorted by score descending. A report that breaks
one reads, saying so in ``incomplete``; ``strict=True`` refuses it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline, PriorityScorer, SelectionReport
from cupellation.exceptions import DecodeError


def _entry(content: str, tokens: int, score: float, reason: dict[str, Any]) -> dict[str, Any]:
    return {"item": {"content": content, "tokens": tokens, "kind": "Message"},
            "score": score, "reason": reason}


def _report(**changes: Any) -> dict[str, Any]:
    """A small whole report (2 included, 2 excluded, 4 candidates, 100 tokens)."""
    report: dict[str, Any] = {
        "events": [{"stage": "Classify", "duration_ms": 0.1, "item_count": 4}],
        "included": [_entry("a", 10, 0.9, {"reason": "Scored"}),
                     _entry("b", 20, 0.8, {"reason": "Scored"})],
        "excluded": [
            _entry("c", 30, 0.7, {"reason": "BudgetExceeded", "item_tokens": 30,
                                  "available_tokens": 5}),
            _entry("d", 40, 0.2, {"reason": "BudgetExceeded", "item_tokens": 40,
                                  "available_tokens": 5})],
        "total_candidates": 4,
        "total_tokens_considered": 100,
    }
    report.update(changes)
    return report


def test_a_report_that_keeps_every_rule_reads_whole_even_when_strict() -> None:
    """The rules hold: the report is complete, strictly or not, and nothing is added."""
    for strict in (False, True):
        report = SelectionReport.from_json(json.dumps(_report()), strict=strict)
        assert report.is_complete
        assert report.to_dict() == _report()


def test_total_candidates_99_with_four_items_is_not_complete() -> None:
    """The issue's case: total_candidates 99 while the lists hold 4 items. It reads,
    with the broken rule named in incomplete; strict raises a DecodeError naming it."""
    text = json.dumps(_report(total_candidates=99))
    report = SelectionReport.from_json(text)
    assert not report.is_complete
    assert report.total_candidates == 99
    assert report.incomplete == (
        "total_candidates is 99 but included and excluded list 4 items (the report format's rule: "
        "total_candidates = len(included) + len(excluded))",)
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_json(text, strict=True)
    assert info.value.field == "total_candidates"
    assert info.value.value == 99
    assert "len(included) + len(excluded)" in str(info.value)


def test_total_tokens_considered_must_be_the_sum_of_both_lists() -> None:
    """total_tokens_considered 101 against 100 listed tokens breaks the second rule."""
    data = _report(total_tokens_considered=101)
    report = SelectionReport.from_dict(data)
    assert report.incomplete == (
        "total_tokens_considered is 101 but the listed items hold 100 tokens (the report format's "
        "rule: total_tokens_considered = the sum of tokens over included and excluded)",)
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_dict(data, strict=True)
    assert info.value.field == "total_tokens_considered"


def test_excluded_must_be_sorted_by_score_descending() -> None:
    """Excluded entries in rising score order break the third rule, named with the
    first entry out of order; equal scores are in order (ties are allowed)."""
    rising = _report()
    rising["excluded"].reverse()
    report = SelectionReport.from_dict(rising)
    assert len(report.incomplete) == 1
    assert report.incomplete[0].startswith("excluded[1].score is 0.7 but excluded[1] scores "
                                           "0.7, above excluded[0]'s 0.2")
    assert "sorted by score descending" in report.incomplete[0]
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_dict(rising, strict=True)
    assert info.value.field == "excluded[1].score"
    tied = _report()
    tied["excluded"][1]["score"] = 0.7
    assert SelectionReport.from_dict(tied, strict=True).is_complete


def test_every_broken_rule_is_named_and_said_once_across_round_trips() -> None:
    """A report breaking all three rules lists three lines after the ones it came
    with; writing it and reading it back lists them once, not twice."""
    data = _report(total_candidates=5, total_tokens_considered=1,
                   incomplete=["no run_completed event: the run's end was not recorded"])
    data["excluded"].reverse()
    report = SelectionReport.from_dict(data)
    assert len(report.incomplete) == 4
    assert report.incomplete[0] == "no run_completed event: the run's end was not recorded"
    again = SelectionReport.from_json(report.to_json())
    assert again == report


def test_an_abridged_copy_of_the_seeds_example_reads_and_says_so() -> None:
    """The wire format's complete example lists 4 items under total_candidates 5 and 4736
    tokens for 2688 listed (abridged: the fifth candidate is not shown). Its shape,
    with those numbers, reads with both broken rules named, and is_complete False."""
    data = {
        "events": [{"stage": "Classify", "duration_ms": 0.3, "item_count": 5}],
        "included": [_entry("Recent conversation turn", 256, 0.92, {"reason": "Scored"}),
                     _entry("System prompt", 128, 0.0, {"reason": "Pinned"})],
        "excluded": [
            _entry("Old tool output", 2048, 0.45, {"reason": "BudgetExceeded",
                                                   "item_tokens": 2048,
                                                   "available_tokens": 512}),
            _entry("Duplicate message", 256, 0.30,
                   {"reason": "Deduplicated",
                    "deduplicated_against": "Recent conversation turn"})],
        "total_candidates": 5,
        "total_tokens_considered": 4736,
    }
    report = SelectionReport.from_dict(data)
    assert not report.is_complete
    assert [line.split(" is ")[0] for line in report.incomplete] == [
        "total_candidates", "total_tokens_considered"]
    assert {k: v for k, v in report.to_dict().items() if k != "incomplete"} == data


def test_reports_the_pipeline_folds_always_keep_the_rules() -> None:
    """A report folded from a real run (exclusions at Classify, Deduplicate and
    Slice) reads back strictly and equal: the fold never breaks the rules."""
    items = [ContextItem(content=f"c{k % 7}", tokens=k * 3 - 5, priority=k % 4)
             for k in range(30)]
    report = Pipeline(scorer=PriorityScorer()).dry_run(items, ContextBudget(100, 60))
    assert report.is_complete
    assert SelectionReport.from_json(report.to_json(), strict=True) == report


@pytest.mark.parametrize(("change", "field"), [
    ({"total_candidates": 2**63}, "total_candidates"),
    ({"total_tokens_considered": -(2**63) - 1}, "total_tokens_considered"),
    ({"events": [{"stage": "Score", "duration_ms": 1.0, "item_count": 2**64}]},
     "events[0].item_count"),
    ({"count_requirement_shortfalls": [{"kind": "Memory", "required_count": 2**63,
                                        "satisfied_count": 0}]},
     "count_requirement_shortfalls[0].required_count"),
    ({"overflow": {"tokens_over_budget": "3", "overflowing_items": [],
                   "budget": {"maxTokens": 1, "targetTokens": 1}}},
     "overflow.tokens_over_budget"),
    ({"count_requirement_shortfalls": {"kind": "Memory"}}, "count_requirement_shortfalls"),
])
def test_numbers_are_checked_as_the_seeds_type_them(change: dict[str, Any], field: str
                                                    ) -> None:
    """Integers are int64 (and integers), wherever they appear: a DecodeError names the
    member, never a report holding a value no sink can carry."""
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_dict(_report(**change))
    assert info.value.field == field


@pytest.mark.parametrize("score", [float("nan"), float("inf"), 10**400])
def test_scores_are_finite_numbers(score: Any) -> None:
    """A score that is NaN, infinite or beyond float64 is a DecodeError naming it."""
    data = _report()
    data["included"][0]["score"] = score
    with pytest.raises(DecodeError) as info:
        SelectionReport.from_dict(data)
    assert info.value.field == "included[0].score"
