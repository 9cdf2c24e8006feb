"""KnapsackSlice: spec/src/slicers/knapsack.md, its edge-case table, conformance notes,
and equality of the numpy DP with a line-by-line transcription of the spec."""

from __future__ import annotations

import dataclasses

import pytest
from _slicing_support import budget, contents, reference_knapsack, scored, scored_lists
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextItem, ScoredItem
from cupellation.exceptions import (
    ConfigurationError,
    InvalidTypeError,
    InvalidValueError,
    PipelineError,
    TableTooLargeError,
)
from cupellation.slicing import KnapsackSlice, Slicer
from cupellation.slicing._knapsack import MAX_TABLE_CELLS, knapsack_select

KNAPSACK = KnapsackSlice()


def test_construction_defaults_repr_and_immutability() -> None:
    """Default bucket size is 100; the slicer is a frozen Slicer with a constructor-like repr."""
    assert KNAPSACK.bucket_size == 100
    assert isinstance(KNAPSACK, Slicer)
    assert repr(KnapsackSlice(7)) == "KnapsackSlice(bucket_size=7)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        KNAPSACK.bucket_size = 5  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -1, -100])
def test_non_positive_bucket_size_is_a_configuration_error(bad: int) -> None:
    """bucketSize MUST be a positive integer: 0 and negatives are refused, naming the
    field and the value."""
    with pytest.raises(ConfigurationError, match=rf"bucket_size: .*\(got {bad}\)"):
        KnapsackSlice(bad)


@pytest.mark.parametrize("bad", [1.5, "100", True, None])
def test_non_integer_bucket_size_is_a_type_error(bad: object) -> None:
    """A bucket size that is not an int (bools included) raises InvalidTypeError."""
    with pytest.raises(InvalidTypeError, match="bucket_size"):
        KnapsackSlice(bad)  # type: ignore[arg-type]


# -- the edge-case table ------------------------------------------------------

def test_empty_input_gives_empty_list() -> None:
    """Edge case: empty scoredItems -> empty list."""
    assert KNAPSACK.slice([], budget(1000)) == []


def test_zero_target_gives_empty_list() -> None:
    """Edge case: targetTokens <= 0 -> empty list, zero-token items included."""
    assert KNAPSACK.slice(scored(("z", 0, 0.1), ("a", 1, 0.9)), budget(0, 50)) == []


def test_all_zero_token_items_are_selected() -> None:
    """Edge case: all items zero-token -> all selected, in input order."""
    items = scored(("a", 0, 0.9), ("b", 0, 0.5))
    assert contents(KNAPSACK.slice(items, budget(100))) == ["a", "b"]


def test_zero_capacity_after_discretisation_keeps_only_zero_token_items() -> None:
    """Edge case: floor(target / bucket) = 0 -> only zero-token items, even if an item fits."""
    items = scored(("a", 10, 0.9), ("z", 0, 0.1))
    assert contents(KNAPSACK.slice(items, budget(99))) == ["z"]


def test_all_items_exceeding_discretised_capacity_keep_only_zero_token_items() -> None:
    """Edge case: every ceil(tokens / bucket) > capacity -> only zero-token items."""
    items = scored(("a", 201, 0.9), ("b", 250, 0.8), ("z", 0, 0.0))
    # 201 tokens fit 250 tokens, but ceil(201/100) = 3 > floor(250/100) = 2.
    assert contents(KNAPSACK.slice(items, budget(250))) == ["z"]


def test_single_fitting_candidate_is_selected_with_zero_token_items() -> None:
    """Edge case: one candidate that fits -> it plus the zero-token items (those first)."""
    items = scored(("a", 100, 0.5), ("z", 0, 0.1))
    assert contents(KNAPSACK.slice(items, budget(100))) == ["z", "a"]


# -- conformance notes --------------------------------------------------------

def test_beats_greedy_where_density_misleads() -> None:
    """The knapsack-basic case: 'big' (value 7000) beats 'small-a' (5000) at capacity 3."""
    items = scored(("big", 250, 0.7), ("small-a", 150, 0.5), ("small-b", 150, 0.45))
    assert contents(KNAPSACK.slice(items, budget(300))) == ["big"]


def test_output_is_zero_token_items_then_reconstruction_order() -> None:
    """Zero-token items first (input order), then DP picks from the last candidate back."""
    items = scored(("a", 100, 0.9), ("z1", 0, 0.2), ("b", 100, 0.8), ("z2", 0, 0.1),
                   ("c", 100, 0.7))
    assert contents(KNAPSACK.slice(items, budget(300))) == ["z1", "z2", "c", "b", "a"]


def test_near_zero_scores_have_no_value_and_are_not_selected() -> None:
    """Scores below 0.0001 scale to value 0, which never beats the empty knapsack."""
    items = scored(("tiny", 10, 0.00009), ("a", 10, 0.5))
    assert contents(KNAPSACK.slice(items, budget(1000, 1000))) == ["a"]


def test_negative_token_items_are_excluded_from_the_dp() -> None:
    """Negative token counts are not DP candidates (conformance note: SHOULD be excluded)."""
    items = scored(("neg", -100, 0.9), ("a", 100, 0.5))
    assert contents(KNAPSACK.slice(items, budget(100))) == ["a"]


def test_weights_round_up_and_capacity_rounds_down() -> None:
    """Weights round up and capacity down: at bucket 100, 101 tokens weigh 2 buckets and a
    199-token budget holds 1, so only the 99-token item fits; at bucket 1 the better one does."""
    items = scored(("a", 101, 0.9), ("b", 99, 0.1))
    # capacity floor(199/100) = 1; a weighs 2, b weighs 1.
    assert contents(KNAPSACK.slice(items, budget(199))) == ["b"]
    assert contents(KnapsackSlice(1).slice(items, budget(199))) == ["a"]


def test_rejects_non_finite_scores() -> None:
    """A NaN or infinite score has no integer value: InvalidValueError naming the entry."""
    with pytest.raises(InvalidValueError, match=r"scored\[0\]\.score"):
        KNAPSACK.slice([ScoredItem(ContextItem("a", 1), float("inf"))], budget(500))


def test_score_too_large_for_integer_values_is_an_invalid_value() -> None:
    """A finite score whose scaled value overflows a double (1e305 * 10000, reachable
    through KindScorer weights) is an InvalidValueError naming the entry and the value,
    not a bare OverflowError."""
    items = [ScoredItem(ContextItem("a", 10), 0.5), ScoredItem(ContextItem("b", 10), 1e305)]
    with pytest.raises(InvalidValueError) as caught:
        KnapsackSlice(1).slice(items, budget(100))
    assert caught.value.field == "KnapsackSlice scored[1].score"
    assert caught.value.value == 1e305
    assert "too large for KnapsackSlice's integer values" in str(caught.value)


def test_hugely_negative_score_has_value_zero() -> None:
    """max(0, floor(score * 10000)) is 0 for -1e305 as for any negative score: the item
    is simply not a DP candidate (floor(-inf) must not raise)."""
    items = [ScoredItem(ContextItem("a", 10), 0.5), ScoredItem(ContextItem("b", 10), -1e305)]
    assert contents(KnapsackSlice(1).slice(items, budget(100))) == ["a"]


# -- equality with the spec's DP -------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(
    scored_lists(max_size=16, max_tokens=400),
    st.integers(min_value=0, max_value=1500),
    st.integers(min_value=1, max_value=150),
)
def test_matches_reference_dp(entries: list[ScoredItem], target: int, bucket: int) -> None:
    """Same items in the same order as KNAPSACK-SLICE transcribed literally."""
    tokens = [entry.item.tokens for entry in entries]
    scores = [entry.score for entry in entries]
    expected = [entries[i].item for i in reference_knapsack(tokens, scores, target, bucket)]
    actual = KnapsackSlice(bucket).slice(entries, budget(target))
    assert [id(item) for item in actual] == [id(item) for item in expected]


_tie_heavy_tokens = st.lists(st.sampled_from([0, 1, 5, 10, 10, 20, 35, 50]),
                             min_size=1, max_size=20)
_tie_heavy_scores = st.sampled_from([0.0, 0.00001, 0.1, 0.2, 0.3, 0.5])


@settings(max_examples=200, deadline=None)
@given(
    _tie_heavy_tokens,
    st.data(),
    st.integers(min_value=1, max_value=200),
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=1, max_value=60),
)
def test_chunked_table_matches_reference_dp(
    tokens: list[int], data: st.DataObject, target: int, bucket: int, cells: int
) -> None:
    """With a tiny keep-table budget (checkpointed chunks) the result is still the spec's,
    on inputs dense with equal weights and equal values (tie-breaking)."""
    scores = sorted((data.draw(_tie_heavy_scores) for _ in tokens), reverse=True)
    expected = reference_knapsack(tokens, scores, target, bucket)
    assert knapsack_select(tokens, scores, target, bucket, max_keep_cells=cells) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12),
    st.data(),
    st.integers(min_value=1, max_value=400),
    st.sampled_from([1e5, 1e6, 3e14, 1e300]),
)
def test_large_scores_use_exact_integer_arithmetic(
    tokens: list[int], data: st.DataObject, target: int, scale: float
) -> None:
    """Scores far above 1.0 (int64 and beyond-int64 value sums) still match the spec exactly."""
    scores = sorted((data.draw(st.sampled_from([0.1, 0.5, 1.0, 2.0])) * scale for _ in tokens),
                    reverse=True)
    assert knapsack_select(tokens, scores, target, 7) == reference_knapsack(
        tokens, scores, target, 7)


def test_table_at_the_limit_is_clamped_to_the_candidates_total_weight() -> None:
    """A table of exactly 50,000,000 cells (2 candidates x 25,000,000 columns at bucket
    size 1) is allowed, and solved instantly and exactly (the capacity is clamped to the
    sum of the candidates' weights)."""
    items = scored(("a", 30, 0.5), ("b", 20, 0.4), ("z", 0, 0.3))
    assert MAX_TABLE_CELLS == 2 * (24_999_999 + 1)
    result = KnapsackSlice(1).slice(items, budget(24_999_999))
    assert contents(result) == ["z", "b", "a"]


@pytest.mark.parametrize(("candidates", "target", "bucket"), [
    (2, 25_000_000, 1),           # 2 x 25,000,001 = 50,000,002 cells
    (1, 50_000_000, 1),           # 1 x 50,000,001
    (3, 10**15, 1),
    (100_000, 100_000, 100),      # 100,000 x 1,001 = 100,100,000
])
def test_table_over_fifty_million_cells_is_table_too_large(
        candidates: int, target: int, bucket: int) -> None:
    """The specification's TableTooLarge: n x (floor(target / bucket) + 1) > 50,000,000
    raises TableTooLargeError before the table is allocated, even where the
    implementation's own reductions would have made the table small."""
    items = [ScoredItem(ContextItem(f"c{i}", 1 + i % 7), 0.5) for i in range(candidates)]
    with pytest.raises(TableTooLargeError) as info:
        KnapsackSlice(bucket).slice(items, budget(target))
    capacity = target // bucket
    error = info.value
    assert (error.slicer, error.candidates, error.capacity) == ("KnapsackSlice", candidates,
                                                               capacity)
    assert error.cells == candidates * (capacity + 1)
    assert error.limit == MAX_TABLE_CELLS == 50_000_000
    assert isinstance(error, PipelineError)
    assert "KnapsackSlice" in str(error)
    assert "50,000,000" in str(error)


def test_table_cells_count_only_positive_token_candidates() -> None:
    """Zero-token (and negative-token) items are not rows of the table: with one
    candidate, 25,000,001 columns fit however many zero-token items come along."""
    items = scored(("a", 10, 0.5), *((f"z{i}", 0, 0.1) for i in range(5)), ("neg", -3, 0.9))
    result = KnapsackSlice(1).slice(items, budget(25_000_000))
    assert contents(result) == ["z0", "z1", "z2", "z3", "z4", "a"]


@pytest.mark.parametrize(("items", "target"), [
    (scored(("z", 0, 0.4)), 10**12),                 # no candidate: no table
    (scored(("a", 10, 0.5), ("b", 10, 0.5)), 99),    # capacity 0: no table
])
def test_no_table_no_table_too_large(items: list[ScoredItem], target: int) -> None:
    """KNAPSACK-SLICE returns before allocating when there is no candidate or the
    capacity is 0, so neither can raise TableTooLarge."""
    bucket = 1 if target > 99 else 100
    result = KnapsackSlice(bucket).slice(items, budget(target))
    assert contents(result) == [entry.item.content for entry in items if entry.item.tokens == 0]
