"""Policy sensitivity (spec/src/analytics/policy-sensitivity.md), the report analytics
(budget utilization, kind diversity, timestamp coverage, quota utilization per kind)
and the diff of two reports."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    GreedySlice,
    Pipeline,
    PriorityScorer,
    QuotaSlice,
    ReflexiveScorer,
)
from cupellation.analytics import (
    MIN_VARIANTS_MESSAGE,
    ItemStatus,
    budget_utilization,
    diff_reports,
    dry_run_with_policy,
    kind_diversity,
    policy_sensitivity,
    policy_sensitivity_from_pipelines,
    quota_utilization,
    target_utilization,
    timestamp_coverage,
)
from cupellation.exceptions import InvalidTypeError, InvalidValueError, SpecArgumentError
from cupellation.policy import Policy
from cupellation.slicing import CountQuotaEntry, QuotaEntry

_NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _chapter_items() -> list[ContextItem]:
    """The chapter's example: two 40-token items, one with high priority and a low
    relevance hint, the other the reverse."""
    return [ContextItem("item-a", 40, priority=10, future_relevance_hint=0.1),
            ContextItem("item-b", 40, priority=1, future_relevance_hint=0.9)]


def test_the_chapters_example_swings_both_items() -> None:
    """Priority keeps item-a, reflexive keeps item-b at a 40-token target: both swing,
    statuses per variant in input order, variants in input order."""
    budget = ContextBudget(50, 40)
    report = policy_sensitivity(_chapter_items(), budget, [
        ("priority", Policy(scorer=PriorityScorer())),
        ("reflexive", Policy(scorer=ReflexiveScorer()))])
    assert [label for label, _ in report.variants] == ["priority", "reflexive"]
    statuses = {entry.content: entry.statuses for entry in report.diffs}
    assert statuses == {
        "item-a": (("priority", ItemStatus.INCLUDED), ("reflexive", ItemStatus.EXCLUDED)),
        "item-b": (("priority", ItemStatus.EXCLUDED), ("reflexive", ItemStatus.INCLUDED))}


def test_items_on_which_all_variants_agree_are_not_diffs() -> None:
    """Swing-only filter: an item every variant includes (or excludes) is left out."""
    items = [*_chapter_items(), ContextItem("small", 5, priority=50,
                                            future_relevance_hint=1.0)]
    report = policy_sensitivity(items, ContextBudget(50, 45), [
        ("priority", Policy(scorer=PriorityScorer())),
        ("reflexive", Policy(scorer=ReflexiveScorer()))])
    assert "small" not in {entry.content for entry in report.diffs}
    assert all(any(e.item.content == "small" for e in r.included) for _, r in report.variants)


@pytest.mark.parametrize("count", [0, 1])
def test_fewer_than_two_variants_raise_the_exact_message(count: int) -> None:
    """Fewer than two variants is a caller error with the chapter's .NET message, for
    policies and for pipelines alike."""
    assert MIN_VARIANTS_MESSAGE == (
        "At least two variants are required for a sensitivity comparison.")
    policies = [("p", Policy(scorer=PriorityScorer()))][:count]
    with pytest.raises(SpecArgumentError) as caught:
        policy_sensitivity(_chapter_items(), ContextBudget(50, 40), policies)
    assert str(caught.value) == MIN_VARIANTS_MESSAGE
    pipelines = [("p", Pipeline(PriorityScorer()))][:count]
    with pytest.raises(SpecArgumentError) as caught:
        policy_sensitivity_from_pipelines(_chapter_items(), ContextBudget(50, 40), pipelines)
    assert str(caught.value) == MIN_VARIANTS_MESSAGE


def test_labels_must_differ_and_variants_must_be_the_right_type() -> None:
    """A label given twice, or a pipeline where a policy is expected, is refused
    naming the variant."""
    policy = Policy(scorer=PriorityScorer())
    with pytest.raises(InvalidValueError) as caught:
        policy_sensitivity(_chapter_items(), ContextBudget(50, 40), [("a", policy),
                                                                     ("a", policy)])
    assert caught.value.field == "variants[1][0]"
    with pytest.raises(InvalidTypeError) as caught_type:
        policy_sensitivity(_chapter_items(), ContextBudget(50, 40),
                           [("a", policy), ("b", Pipeline(PriorityScorer()))])  # type: ignore[list-item]
    assert caught_type.value.field == "variants[1][1]"


def test_dry_run_with_policy_uses_the_explicit_budget_not_the_policys() -> None:
    """The policy's own budget is ignored: the explicit budget decides."""
    policy = Policy(scorer=PriorityScorer(), budget=ContextBudget(1000, 1000))
    report = dry_run_with_policy(_chapter_items(), ContextBudget(50, 40), policy)
    assert [e.item.content for e in report.included] == ["item-a"]


def test_pipeline_variants_cover_what_a_policy_cannot_hold() -> None:
    """The pipeline overload takes any pipeline (a custom scorer here)."""
    from cupellation import FunctionScorer  # noqa: PLC0415

    last = FunctionScorer(lambda item, _all: 1.0 if item.content == "item-b" else 0.0,
                          name="b")
    report = policy_sensitivity_from_pipelines(_chapter_items(), ContextBudget(50, 40), [
        ("priority", Pipeline(PriorityScorer())), ("custom", Pipeline(last))])
    assert {entry.content for entry in report.diffs} == {"item-a", "item-b"}


# -- report analytics ----------------------------------------------------------------


def _report_of(items: list[ContextItem], budget: ContextBudget,
               slicer: object | None = None) -> object:
    return Pipeline(PriorityScorer(), slicer).dry_run(items, budget)  # type: ignore[arg-type]


def test_budget_utilization_is_over_max_and_target_utilization_over_target() -> None:
    """The two utilizations: included tokens over max_tokens (the spec's) and over
    target_tokens (the span attribute's); 0.0 for an empty selection."""
    items = [ContextItem("a", 30, priority=2), ContextItem("b", 30, priority=1)]
    budget = ContextBudget(100, 60)
    report = Pipeline(PriorityScorer()).dry_run(items, budget)
    assert budget_utilization(report, budget) == 0.6
    assert target_utilization(report, budget) == 1.0
    empty = Pipeline(PriorityScorer()).dry_run([], budget)
    assert budget_utilization(empty, budget) == 0.0
    assert target_utilization(empty, ContextBudget(10, 0)) is None
    with pytest.raises(InvalidValueError):
        budget_utilization(empty, ContextBudget(0, 0))


def test_kind_diversity_and_timestamp_coverage_read_the_included_items() -> None:
    """Distinct kinds (case-insensitive) and the share of included items with a
    timestamp; excluded items do not count; an empty selection covers 0.0."""
    items = [ContextItem("a", 10, kind="Message", timestamp=_NOW, priority=5),
             ContextItem("b", 10, kind="message", priority=4),
             ContextItem("c", 10, kind="Document", timestamp=_NOW, priority=3),
             ContextItem("d", 10, kind="ToolOutput", timestamp=_NOW, priority=0)]
    report = Pipeline(PriorityScorer()).dry_run(items, ContextBudget(30, 30))
    assert kind_diversity(report) == 2
    assert timestamp_coverage(report) == pytest.approx(2 / 3)
    empty = Pipeline(PriorityScorer()).dry_run([], ContextBudget(30, 30))
    assert (kind_diversity(empty), timestamp_coverage(empty)) == (0, 0.0)


def test_quota_utilization_per_kind_in_tokens_and_in_items() -> None:
    """QuotaSlice: tokens of the kind over its floored cap share of the effective
    target; count quotas: items of the kind over the cap count."""
    items = [ContextItem(f"m{k}", 10, kind="Message", priority=k) for k in range(5)]
    items += [ContextItem(f"d{k}", 10, kind="Document", priority=k) for k in range(5)]
    budget = ContextBudget(100, 100)
    quota = QuotaSlice(GreedySlice(), [QuotaEntry("Message", 10, 30),
                                       QuotaEntry("Document", 0, 50)])
    report = Pipeline(PriorityScorer(), quota).dry_run(items, budget)
    rows = {row.kind.value: row for row in quota_utilization(report, quota, budget)}
    used = sum(e.item.tokens for e in report.included if e.item.kind.value == "Message")
    assert rows["Message"].cap == 30
    assert rows["Message"].require == 10
    assert rows["Message"].used == used
    assert rows["Message"].utilization == used / 30
    counts = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Document", 1, cap_count=2)])
    report = Pipeline(PriorityScorer(), counts).dry_run(items, budget)
    (row,) = quota_utilization(report, counts, budget)
    assert (row.unit, row.used, row.cap, row.utilization) == ("items", 2, 2, 1.0)
    with pytest.raises(InvalidTypeError):
        quota_utilization(report, GreedySlice(), budget)


def test_diff_reports_names_gained_lost_and_changed_reasons() -> None:
    """Two runs of the same items under two budgets: what the larger gained, and
    nothing lost; the reverse diff is the mirror image."""
    items = [ContextItem(f"i{k}", 10, priority=k) for k in range(5)]
    pipeline = Pipeline(PriorityScorer())
    small = pipeline.dry_run(items, ContextBudget(20, 20))
    large = pipeline.dry_run(items, ContextBudget(40, 40))
    forward = diff_reports(small, large)
    assert [row["content"] for row in forward.gained] == ["i2", "i1"]
    assert forward.lost == ()
    assert forward.kept == 2
    assert forward.changed
    backward = diff_reports(large, small)
    assert sorted(row["content"] for row in backward.lost) == ["i1", "i2"]
    assert not diff_reports(small, small).changed
