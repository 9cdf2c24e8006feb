"""CountQuotaSlice and CountConstrainedKnapsackSlice: the chapters' algorithms,
edge-case tables, conformance notes, scarcity handling and construction validation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest
from _slicing_support import (
    budget,
    budgets,
    contents,
    reference_count_quota,
    reference_greedy,
    reference_knapsack,
    scored,
    scored_lists,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, ContextKind, ScoredItem
from cupellation.exceptions import (
    ConfigurationError,
    CountRequirementError,
    InvalidTypeError,
    InvalidValueError,
    TableTooLargeError,
)
from cupellation.slicing import (
    CapExclusion,
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    CountRequirementShortfall,
    DetailedSlicer,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    ScarcityBehavior,
    SliceOutcome,
    Slicer,
    slice_with_details,
)

TOOL = ContextKind("tool")


def cq(*entries: CountQuotaEntry, scarcity: ScarcityBehavior = ScarcityBehavior.DEGRADE,
       inner: Slicer | None = None) -> CountQuotaSlice:
    """A CountQuotaSlice around ``inner`` (GreedySlice by default)."""
    return CountQuotaSlice(inner or GreedySlice(), entries, scarcity)


def ccks(*entries: CountQuotaEntry, bucket_size: int = 100,
         scarcity: ScarcityBehavior = ScarcityBehavior.DEGRADE) -> CountConstrainedKnapsackSlice:
    """A CountConstrainedKnapsackSlice."""
    return CountConstrainedKnapsackSlice(entries, bucket_size, scarcity)


Maker = Callable[..., CountQuotaSlice | CountConstrainedKnapsackSlice]
BOTH = pytest.mark.parametrize("make", [cq, ccks], ids=["count_quota", "ccks"])


class RecordingSlicer:
    """An inner slicer that records its input and budget and selects everything."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], ContextBudget]] = []

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Record the call and return every item, in reverse input order."""
        self.calls.append(([entry.item.content for entry in scored], budget))
        return [entry.item for entry in reversed(scored)]


# -- construction ----------------------------------------------------------------

def test_entry_defaults_and_normalisation() -> None:
    """require_count defaults to 0, cap_count is keyword-only, kinds become ContextKind."""
    entry = CountQuotaEntry("Tool", cap_count=3)
    assert entry == CountQuotaEntry(TOOL, 0, cap_count=3)
    assert entry.kind == "TOOL"
    assert type(entry.kind) is ContextKind
    assert CountQuotaEntry("Tool", 2, cap_count=2).require_count == 2


@pytest.mark.parametrize(
    ("require", "cap", "error", "pattern"),
    [
        (3, 2, ConfigurationError, r"require_count: must be <= cap_count \(2\).*\(got 3\)"),
        (1, 0, ConfigurationError, r"cap_count: a cap of 0 can never satisfy .*\(got 0\)"),
        (-1, 2, ConfigurationError, r"require_count: must be >= 0 \(got -1\)"),
        (0, -2, ConfigurationError, r"cap_count: must be >= 0 \(got -2\)"),
        (1.0, 2, InvalidTypeError, r"require_count: must be an integer, not float"),
        (0, True, InvalidTypeError, r"cap_count: must be an integer, not bool"),
        (0, "2", InvalidTypeError, r"cap_count: must be an integer, not str"),
    ],
)
def test_entry_validation_names_field_and_value(
    require: object, cap: object, error: type[Exception], pattern: str
) -> None:
    """Validation rules 1 and 2 plus type and sign checks, each naming field and value."""
    with pytest.raises(error, match=pattern):
        CountQuotaEntry("Tool", require, cap_count=cap)  # type: ignore[arg-type]


def test_cap_zero_with_require_zero_is_allowed() -> None:
    """capCount may be 0 when requireCount is also 0 (the kind is then excluded by cap)."""
    outcome = slice_with_details(cq(CountQuotaEntry("tool", cap_count=0)),
                                 scored(("a", 1, 0.9, "tool"), ("b", 1, 0.5)), budget(10))
    assert contents(outcome.selected) == ["b"]
    assert [(e.item.content, e.cap, e.count) for e in outcome.cap_exclusions] == [("a", 0, 0)]


def test_knapsack_inner_is_refused_at_construction() -> None:
    """KnapsackSlice guard: construction fails naming the inner slicer."""
    with pytest.raises(ConfigurationError, match=r"inner: .*KnapsackSlice.*\(got KnapsackSlice"):
        CountQuotaSlice(KnapsackSlice(), [])
    # Only the KnapsackSlice instance itself is guarded, not decorators around one.
    CountQuotaSlice(QuotaSlice(KnapsackSlice(), []), [])


def test_construction_validation_of_slicers() -> None:
    """Entries must be CountQuotaEntry with distinct kinds; scarcity must be a known value;
    the knapsack's bucket size must be positive; the inner must be a slicer."""
    with pytest.raises(ConfigurationError, match="entries: names a kind twice"):
        cq(CountQuotaEntry("tool", cap_count=1), CountQuotaEntry("TOOL", cap_count=2))
    with pytest.raises(InvalidTypeError, match="entries"):
        CountQuotaSlice(GreedySlice(), [("tool", 1, 2)])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match=r"scarcity: .*'Degrade', 'Throw'.*'maybe'"):
        CountQuotaSlice(GreedySlice(), [], "maybe")
    with pytest.raises(ConfigurationError, match=r"bucket_size: .*\(got 0\)"):
        CountConstrainedKnapsackSlice([], 0)
    with pytest.raises(InvalidTypeError, match="inner"):
        CountQuotaSlice(object(), [])  # type: ignore[arg-type]


def test_scarcity_strings_are_parsed_and_slicers_are_immutable() -> None:
    """Scarcity accepts names in any case; the slicers are frozen, readable and detailed."""
    slicer = CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Tool", 1, cap_count=2)], "throw")
    assert slicer.scarcity is ScarcityBehavior.THROW
    assert repr(slicer) == (
        "CountQuotaSlice(inner=GreedySlice(), entries=(CountQuotaEntry(kind=ContextKind('Tool'), "
        "require_count=1, cap_count=2),), scarcity=<ScarcityBehavior.THROW: 'Throw'>)"
    )
    knap = ccks(bucket_size=10)
    assert repr(knap).startswith("CountConstrainedKnapsackSlice(entries=(), bucket_size=10")
    assert knap.knapsack == KnapsackSlice(10)
    assert isinstance(slicer, DetailedSlicer)
    assert isinstance(knap, DetailedSlicer)
    with pytest.raises(dataclasses.FrozenInstanceError):
        slicer.scarcity = ScarcityBehavior.DEGRADE  # type: ignore[misc]


# -- the edge-case tables (both chapters) ------------------------------------------------

@BOTH
def test_empty_input_and_zero_target_give_empty_results(make: Maker) -> None:
    """Edge cases: empty scoredItems and targetTokens <= 0 -> empty list, no shortfall
    recorded even when a requirement is configured; the caps in force are still told."""
    slicer = make(CountQuotaEntry("tool", 2, cap_count=3))
    nothing = SliceOutcome((), count_caps=((ContextKind("tool"), 3),))
    assert slice_with_details(slicer, [], budget(100)) == nothing
    items = scored(("a", 10, 0.9, "tool"))
    assert slice_with_details(slicer, items, budget(0, 100)) == nothing


def test_no_entries_runs_the_inner_slicer_unconstrained() -> None:
    """Edge case: no entries -> exactly the inner slicer's selection."""
    items = scored(("a", 60, 0.9), ("b", 50, 0.5), ("c", 40, 0.2))
    assert cq().slice(items, budget(100)) == GreedySlice().slice(items, budget(100))
    # The knapsack variant returns the knapsack's selection re-sorted by score.
    assert contents(KnapsackSlice(10).slice(items, budget(100))) == ["c", "a"]
    assert contents(ccks(bucket_size=10).slice(items, budget(100))) == ["a", "c"]


@BOTH
def test_require_equal_to_cap_commits_exactly_that_many(make: Maker) -> None:
    """Edge case: requireCount = capCount -> phase 1 commits them, phase 2 adds none of the kind."""
    items = scored(("t1", 100, 0.9, "tool"), ("t2", 100, 0.8, "tool"), ("m", 100, 0.7),
                   ("t3", 100, 0.6, "tool"))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 2, cap_count=2)), items,
                                 budget(1000))
    assert sorted(contents(outcome.selected)) == ["m", "t1", "t2"]
    assert [e.item.content for e in outcome.cap_exclusions] == ["t3"]


@BOTH
def test_require_zero_only_caps(make: Maker) -> None:
    """Edge case: requireCount 0, capCount > 0 -> nothing committed, phase-2 output capped."""
    items = scored(("t1", 100, 0.9, "tool"), ("t2", 100, 0.8, "tool"), ("m", 100, 0.7))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 0, cap_count=1)), items,
                                 budget(1000))
    assert sorted(contents(outcome.selected)) == ["m", "t1"]
    assert outcome.cap_exclusions == (CapExclusion(items[1].item, TOOL, 1, 1),)
    assert outcome.shortfalls == ()


@BOTH
def test_scarcity_degrade_records_a_shortfall(make: Maker) -> None:
    """Edge case: fewer candidates than requireCount under Degrade -> all committed plus a
    CountRequirementShortfall(kind, requiredCount, satisfiedCount); an absent kind counts 0."""
    items = scored(("t1", 100, 0.9, "tool"), ("m", 100, 0.5))
    slicer = make(CountQuotaEntry("Tool", 3, cap_count=5), CountQuotaEntry("Memory", 1,
                                                                           cap_count=1))
    outcome = slice_with_details(slicer, items, budget(1000))
    assert sorted(contents(outcome.selected)) == ["m", "t1"]
    assert outcome.shortfalls == (
        CountRequirementShortfall(ContextKind("Tool"), 3, 1),
        CountRequirementShortfall(ContextKind("Memory"), 1, 0),
    )


def test_scarcity_throw_raises_with_the_spec_message() -> None:
    """Under Throw a short kind raises CountRequirementError (an InvalidValueError) whose
    text is exactly the chapter's message, with the kind and counts as attributes."""
    items = scored(("t1", 100, 0.9, "tool"))
    with pytest.raises(CountRequirementError) as caught:
        ccks(CountQuotaEntry("tool", 3, cap_count=3), scarcity=ScarcityBehavior.THROW).slice(
            items, budget(1000))
    assert str(caught.value) == (
        "CountConstrainedKnapsackSlice: candidate pool for kind 'tool' has 1 items "
        "but RequireCount is 3.")
    assert isinstance(caught.value, InvalidValueError)
    assert (caught.value.field, caught.value.value) == ("require_count", 3)
    assert (caught.value.kind, caught.value.required_count,
            caught.value.satisfied_count) == ("tool", 3, 1)
    # count-quota.md gives no exact text; the same wording names CountQuotaSlice.
    with pytest.raises(CountRequirementError) as caught:
        cq(CountQuotaEntry("Tool", 2, cap_count=3), scarcity=ScarcityBehavior.THROW).slice(
            items, budget(1000))
    assert str(caught.value) == (
        "CountQuotaSlice: candidate pool for kind 'Tool' has 1 items but RequireCount is 2.")
    # Enough candidates: no error.
    ok = cq(CountQuotaEntry("tool", 1, cap_count=3), scarcity=ScarcityBehavior.THROW)
    assert contents(ok.slice(items, budget(1000))) == ["t1"]


@BOTH
def test_phase_one_can_exhaust_the_budget(make: Maker) -> None:
    """Edge case: phase 1 uses the whole budget -> residual target 0, nothing else selected;
    required items are committed even past the budget."""
    items = scored(("t1", 600, 0.9, "tool"), ("t2", 600, 0.8, "tool"), ("m", 10, 0.7),
                   ("z", 0, 0.1))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 2, cap_count=2)), items,
                                 budget(1000))
    assert contents(outcome.selected) == ["t1", "t2"]


# -- conformance notes ----------------------------------------------------------------

def test_inner_gets_residual_pool_and_reduced_target_with_max_unchanged() -> None:
    """Phase 2: the inner slicer sees the uncommitted items in input order with
    targetTokens - preAllocated (clamped to maxTokens) and maxTokens unchanged."""
    recorder = RecordingSlicer()
    items = scored(("t1", 100, 0.9, "tool"), ("m", 100, 0.8), ("t2", 50, 0.7, "tool"),
                   ("t3", 70, 0.6, "tool"))
    slicer = cq(CountQuotaEntry("tool", 2, cap_count=5), inner=recorder)
    result = slicer.slice(items, budget(1000, 1500))
    assert recorder.calls == [(["m", "t3"], ContextBudget(max_tokens=1500, target_tokens=850))]
    # Committed first (score order), then the inner's output order.
    assert contents(result) == ["t1", "t2", "t3", "m"]


def test_phase_one_sorts_each_kind_by_score_itself() -> None:
    """Phase 1 picks the top scores of a kind even when the input is not score-sorted, and
    keeps input order among equal scores."""
    items = scored(("low", 10, 0.1, "tool"), ("hi-a", 10, 0.9, "tool"), ("mid", 10, 0.5, "tool"),
                   ("hi-b", 10, 0.9, "tool"))
    recorder = RecordingSlicer()
    result = cq(CountQuotaEntry("tool", 2, cap_count=2), inner=recorder).slice(items, budget(100))
    assert contents(result)[:2] == ["hi-a", "hi-b"]
    assert recorder.calls[0][0] == ["low", "mid"]


@BOTH
def test_kinds_compare_case_insensitively(make: Maker) -> None:
    """Partitioning and cap lookups fold ASCII case: 'TOOL' items meet a 'tool' entry."""
    items = scored(("a", 10, 0.9, "TOOL"), ("b", 10, 0.8, "Tool"), ("c", 10, 0.7, "tOoL"))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 1, cap_count=2)), items,
                                 budget(1000))
    assert sorted(contents(outcome.selected)) == ["a", "b"]
    assert outcome.cap_exclusions == (CapExclusion(items[2].item, TOOL, 2, 2),)
    assert outcome.cap_exclusions[0].kind.value == "tool"  # the entry's spelling


@BOTH
def test_committed_items_count_toward_the_cap_and_are_never_excluded(
    make: Maker,
) -> None:
    """D181: cap counting starts from the committed count; committed items always stay."""
    items = scored(("t1", 100, 0.9, "tool"), ("t2", 100, 0.8, "tool"), ("t3", 100, 0.7, "tool"),
                   ("t4", 100, 0.6, "tool"))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 1, cap_count=2)), items,
                                 budget(600))
    assert sorted(contents(outcome.selected)) == ["t1", "t2"]
    assert [(e.item.content, e.count) for e in outcome.cap_exclusions] == [("t3", 2), ("t4", 2)]


def test_knapsack_output_is_resorted_by_score_before_capping() -> None:
    """D180: the knapsack returns the lower score first (reconstruction order), yet the cap
    keeps the higher-scored item."""
    items = scored(("best", 100, 0.9, "tool"), ("second", 100, 0.8, "tool"))
    assert contents(KnapsackSlice().slice(items, budget(1000))) == ["second", "best"]
    outcome = slice_with_details(ccks(CountQuotaEntry("tool", 0, cap_count=1)), items,
                                 budget(1000))
    assert contents(outcome.selected) == ["best"]
    assert [e.item.content for e in outcome.cap_exclusions] == ["second"]


def test_equal_scores_keep_the_knapsack_output_order() -> None:
    """D180's re-sort is stable (changelog P1): equal scores keep the order the knapsack
    returned them in (reconstruction order, the later input first), so with a cap of 1
    the later of two tied items is kept, as the chapter's SORT(innerSelected) gives."""
    items = scored(("t1", 100, 0.5, "ToolOutput"), ("t2", 100, 0.5, "ToolOutput"))
    assert contents(KnapsackSlice(100).slice(items, budget(1000))) == ["t2", "t1"]
    outcome = slice_with_details(
        ccks(CountQuotaEntry("ToolOutput", 0, cap_count=1), bucket_size=100), items,
        budget(1000))
    assert contents(outcome.selected) == ["t2"]
    assert [e.item.content for e in outcome.cap_exclusions] == ["t1"]
    # A higher score still goes first whatever the knapsack order.
    items = scored(("hi", 100, 0.6, "ToolOutput"), ("lo", 100, 0.5, "ToolOutput"))
    outcome = slice_with_details(
        ccks(CountQuotaEntry("ToolOutput", 0, cap_count=1), bucket_size=100), items,
        budget(1000))
    assert contents(outcome.selected) == ["hi"]


def test_count_quota_keeps_the_inner_output_order_for_capping() -> None:
    """CountQuotaSlice (unlike the knapsack variant) caps in the inner slicer's own order."""
    recorder = RecordingSlicer()  # returns items reversed
    items = scored(("best", 10, 0.9, "tool"), ("second", 10, 0.8, "tool"))
    result = cq(CountQuotaEntry("tool", 0, cap_count=1), inner=recorder).slice(items, budget(100))
    assert contents(result) == ["second"]


@BOTH
def test_unconstrained_kinds_pass_through(make: Maker) -> None:
    """Kinds without an entry are neither committed nor capped."""
    items = scored(("m1", 10, 0.9), ("m2", 10, 0.8), ("m3", 10, 0.7), ("t", 10, 0.1, "tool"))
    outcome = slice_with_details(make(CountQuotaEntry("tool", 0, cap_count=0)), items,
                                 budget(1000))
    assert sorted(contents(outcome.selected)) == ["m1", "m2", "m3"]


@BOTH
def test_slice_is_pure_and_matches_details(make: Maker) -> None:
    """slice() returns slice_with_details().selected, repeatably, with no state on the slicer."""
    slicer = make(CountQuotaEntry("tool", 3, cap_count=4))
    items = scored(("t1", 100, 0.9, "tool"), ("m", 100, 0.8))
    first = slicer.slice(items, budget(1000))
    assert first == list(slicer.slice_with_details(items, budget(1000)).selected)
    assert slicer.slice(items, budget(1000)) == first
    assert not hasattr(slicer, "__dict__")


def test_slice_with_details_helper_wraps_plain_slicers() -> None:
    """The helper wraps a slicer without slice_with_details (no exclusions, no shortfalls)
    and refuses objects that are not slicers."""
    items = scored(("a", 10, 0.9), ("b", 10, 0.5))
    assert slice_with_details(GreedySlice(), items, budget(10)) == SliceOutcome((items[0].item,))
    with pytest.raises(InvalidTypeError, match="slicer"):
        slice_with_details(object(), items, budget(10))  # type: ignore[arg-type]


# -- review fixes: negative tokens, classes as inner, huge scores, the reference ----------

@BOTH
def test_negative_token_candidates_are_never_committed(make: Maker) -> None:
    """Phase 1 skips candidates with negative token counts (as every other slicer does):
    they are not committed, do not lower the pre-allocation and do not count towards the
    requirement."""
    items = scored(("neg", -50, 0.9, "Message"), ("x", 60, 0.5, "Message"))
    slicer = make(CountQuotaEntry("Message", 1, cap_count=5))
    assert contents(slicer.slice(items, budget(20))) == ["x"]
    outcome = slice_with_details(make(CountQuotaEntry("Message", 2, cap_count=5)), items,
                                 budget(1000))
    assert contents(outcome.selected) == ["x"]
    assert outcome.shortfalls == (CountRequirementShortfall(ContextKind("Message"), 2, 1),)


@pytest.mark.parametrize("inner", [GreedySlice, QuotaSlice, CountQuotaSlice, KnapsackSlice])
def test_a_slicer_class_as_inner_is_refused_at_construction(inner: type) -> None:
    """Passing the class instead of an instance (CountQuotaSlice(GreedySlice, [])) is a
    ConfigurationError naming ``inner`` and showing how to pass an instance."""
    with pytest.raises(ConfigurationError) as caught:
        CountQuotaSlice(inner, [])  # type: ignore[arg-type]
    assert caught.value.field == "inner"
    assert caught.value.value is inner
    assert f"pass an instance: {inner.__name__}()" in str(caught.value)


def test_huge_score_in_the_knapsack_phase_names_the_input_index() -> None:
    """A residual score too large for the knapsack's integer values is an
    InvalidValueError naming the entry's index in the caller's input, not the
    residual's, nor a bare OverflowError."""
    items = scored(("t", 10, 2.0, "tool"), ("m", 10, 1e305), ("n", 10, 0.5))
    with pytest.raises(InvalidValueError) as caught:
        ccks(CountQuotaEntry("tool", 1, cap_count=1), bucket_size=1).slice(items, budget(100))
    assert caught.value.field == "CountConstrainedKnapsackSlice scored[1].score"
    assert caught.value.value == 1e305


def test_count_constrained_knapsack_phase_two_table_too_large() -> None:
    """The chapter's OOM guard: TableTooLarge propagates from the phase-2 knapsack
    when its table (residual candidates x (residual target // bucket + 1)) exceeds
    50,000,000 cells, named after CountConstrainedKnapsackSlice."""
    items = scored(("t", 10, 0.9, "tool"), ("m", 10, 0.8), ("n", 10, 0.5))
    slicer = ccks(CountQuotaEntry("tool", 1, cap_count=1), bucket_size=1)
    with pytest.raises(TableTooLargeError) as caught:
        slicer.slice(items, budget(30_000_000))
    error = caught.value
    assert error.slicer == "CountConstrainedKnapsackSlice"
    # Phase 1 committed "t" (10 tokens): 2 residual candidates, 29,999,990 columns + 1.
    assert (error.candidates, error.capacity) == (2, 29_999_990)
    assert error.cells == 2 * 29_999_991


def test_count_constrained_knapsack_within_the_table_limit_selects() -> None:
    """The residual budget decides the table: once phase 1 has taken enough of the
    target, the same large budget fits (2 x 24,999,991 cells) and slices normally."""
    items = scored(("t", 10, 0.9, "tool"), ("m", 10, 0.8), ("n", 10, 0.5))
    slicer = ccks(CountQuotaEntry("tool", 1, cap_count=1), bucket_size=1)
    assert sorted(contents(slicer.slice(items, budget(25_000_000)))) == ["m", "n", "t"]


def _greedy_indices(tokens: Sequence[int], scores: Sequence[float], target: int) -> list[int]:
    return reference_greedy(tokens, scores, target)


@st.composite
def _count_entries(draw: st.DrawFn) -> list[CountQuotaEntry]:
    kinds = draw(st.lists(st.sampled_from(["Message", "ToolOutput", "Document", "Memory"]),
                          unique=True, max_size=3))
    entries = []
    for kind in kinds:
        require = draw(st.integers(min_value=0, max_value=3))
        cap = draw(st.integers(min_value=max(require, 1 if require else 0), max_value=4))
        entries.append(CountQuotaEntry(kind, require, cap_count=cap))
    return entries


@settings(max_examples=200, deadline=None)
@given(scored_lists(max_size=12), budgets(max_target=800), _count_entries(),
       st.integers(min_value=1, max_value=60))
def test_count_constrained_knapsack_matches_the_reference(
    entries: list[ScoredItem], sub_budget: ContextBudget, quotas: list[CountQuotaEntry],
    bucket: int,
) -> None:
    """CountConstrainedKnapsackSlice selects and cap-excludes exactly what a literal
    transcription of COUNT-KNAPSACK-CAP does (stable re-sort of the knapsack output),
    on inputs with ties, negative tokens, out-of-range scores and repeated objects."""
    def knapsack(tokens: Sequence[int], scores: Sequence[float], target: int) -> list[int]:
        return reference_knapsack(tokens, scores, target, bucket)

    expected, excluded = reference_count_quota(entries, sub_budget, quotas, knapsack,
                                               resort=True)
    outcome = slice_with_details(CountConstrainedKnapsackSlice(quotas, bucket), entries,
                                 sub_budget)
    assert [id(item) for item in outcome.selected] == [id(item) for item in expected]
    assert [(id(e.item), e.kind, e.cap, e.count) for e in outcome.cap_exclusions] == [
        (id(e.item), e.kind, e.cap, e.count) for e in excluded]


@settings(max_examples=200, deadline=None)
@given(scored_lists(max_size=12), budgets(max_target=800), _count_entries())
def test_count_quota_matches_the_reference(
    entries: list[ScoredItem], sub_budget: ContextBudget, quotas: list[CountQuotaEntry],
) -> None:
    """CountQuotaSlice(GreedySlice()) selects and cap-excludes exactly what a literal
    transcription of COUNT-QUOTA-SLICE does (caps in the inner slicer's output order,
    no re-sort)."""
    expected, excluded = reference_count_quota(entries, sub_budget, quotas, _greedy_indices,
                                               resort=False)
    outcome = slice_with_details(CountQuotaSlice(GreedySlice(), quotas), entries, sub_budget)
    assert [id(item) for item in outcome.selected] == [id(item) for item in expected]
    assert [(id(e.item), e.kind, e.cap, e.count) for e in outcome.cap_exclusions] == [
        (id(e.item), e.kind, e.cap, e.count) for e in excluded]
