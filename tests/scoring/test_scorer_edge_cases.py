"""Every row of each scorer chapter's edge-case table (``spec/src/scorers/*.md``),
one test per row, plus the behaviour each chapter's conformance notes single out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cupellation import ContextItem, ContextKind
from cupellation.exceptions import ConfigurationError, InvalidValueError
from cupellation.scoring import (
    DEFAULT_KIND_WEIGHTS,
    CompositeScorer,
    DecayScorer,
    ExponentialCurve,
    FrequencyScorer,
    FunctionScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    StepCurve,
    TagScorer,
    WindowCurve,
)

T0 = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2025, 1, 1, 12, tzinfo=UTC)


def item(content: str = "x", **fields: Any) -> ContextItem:
    """A 10-token item with the given content and fields."""
    return ContextItem(content=content, tokens=10, **fields)


def at(hours: float) -> datetime:
    """T0 plus ``hours``."""
    return T0 + timedelta(hours=hours)


def scores(scorer: Scorer, items: Sequence[ContextItem]) -> list[float]:
    """The scorer's scores as a plain list."""
    return [float(score) for score in scorer.score_all(items)]


def constant(value: float) -> FunctionScorer:
    """A scorer returning ``value`` for every item."""
    return FunctionScorer(lambda _item, _all: value, name=f"constant({value})")


# -- RecencyScorer ------------------------------------------------------------------


def test_recency_null_timestamp_scores_zero() -> None:
    """item.timestamp is null -> 0.0."""
    assert scores(RecencyScorer(), [item("a", timestamp=at(0)), item("b"),
                                    item("c", timestamp=at(1))])[1] == 0.0


def test_recency_all_null_timestamps_score_zero() -> None:
    """All items have null timestamps -> all score 0.0."""
    assert scores(RecencyScorer(), [item("a"), item("b"), item("c")]) == [0.0, 0.0, 0.0]


def test_recency_single_timestamped_item_scores_one() -> None:
    """Only one item has a timestamp -> that item scores 1.0."""
    assert scores(RecencyScorer(), [item("a"), item("b", timestamp=at(5)), item("c")]) == [
        0.0, 1.0, 0.0]


def test_recency_all_same_timestamp_scores_zero() -> None:
    """All items share the same timestamp -> all score 0.0 (no item strictly older)."""
    assert scores(RecencyScorer(), [item(c, timestamp=at(1)) for c in "abcd"]) == [0.0] * 4


def test_recency_distinct_timestamps_are_evenly_spaced() -> None:
    """Distinct timestamps: oldest 0.0, newest 1.0, rank / (N - 1) between, any input order."""
    items = [item("c", timestamp=at(2)), item("a", timestamp=at(0)), item("d", timestamp=at(3)),
             item("b", timestamp=at(1))]
    assert scores(RecencyScorer(), items) == [2 / 3, 0.0, 1.0, 1 / 3]


def test_recency_ties_share_the_rank_of_strictly_older_items() -> None:
    """Tied timestamps score rank = count strictly older, over (count - 1)."""
    items = [item("a", timestamp=at(0)), item("b", timestamp=at(1)), item("c", timestamp=at(1)),
             item("d", timestamp=at(2))]
    assert scores(RecencyScorer(), items) == [0.0, 1 / 3, 1 / 3, 1.0]


def test_recency_denominator_counts_only_timestamped_items() -> None:
    """Untimestamped items do not enter the denominator."""
    items = [item("a", timestamp=at(0)), item("n1"), item("n2"), item("b", timestamp=at(9))]
    assert scores(RecencyScorer(), items) == [0.0, 0.0, 0.0, 1.0]


def test_recency_compares_instants_not_offsets() -> None:
    """The same instant written with different offsets is a tie."""
    plus_two = timezone(timedelta(hours=2))
    items = [item("a", timestamp=datetime(2024, 1, 1, 2, tzinfo=plus_two)),
             item("b", timestamp=datetime(2024, 1, 1, 0, tzinfo=UTC)),
             item("c", timestamp=datetime(2024, 1, 1, 1, tzinfo=UTC))]
    assert scores(RecencyScorer(), items) == [0.0, 0.0, 1.0]


# -- PriorityScorer -------------------------------------------------------------------


def test_priority_null_scores_zero() -> None:
    """item.priority is null -> 0.0."""
    assert scores(PriorityScorer(), [item("a", priority=1), item("b"), item("c", priority=2)])[
        1] == 0.0


def test_priority_all_null_scores_zero() -> None:
    """All items have null priorities -> all score 0.0."""
    assert scores(PriorityScorer(), [item("a"), item("b")]) == [0.0, 0.0]


def test_priority_single_prioritised_item_scores_one() -> None:
    """Only one item has a priority -> that item scores 1.0."""
    assert scores(PriorityScorer(), [item("a"), item("b", priority=-4)]) == [0.0, 1.0]


def test_priority_all_same_priority_scores_zero() -> None:
    """All items share the same priority -> all score 0.0."""
    assert scores(PriorityScorer(), [item(c, priority=7) for c in "abc"]) == [0.0, 0.0, 0.0]


def test_priority_higher_values_score_higher() -> None:
    """priority 10 scores above priority 5; negative priorities rank lowest."""
    items = [item("a", priority=5), item("b", priority=10), item("c", priority=-3)]
    assert scores(PriorityScorer(), items) == [0.5, 1.0, 0.0]


def test_priority_ties_share_rank() -> None:
    """Tied priorities score the count strictly lower over (count - 1)."""
    items = [item("a", priority=1), item("b", priority=3), item("c", priority=3)]
    assert scores(PriorityScorer(), items) == [0.0, 0.5, 0.5]


# -- KindScorer -------------------------------------------------------------------------


def test_kind_in_map_returns_its_weight() -> None:
    """Item's kind is in the weight map -> the corresponding weight."""
    assert scores(KindScorer({"Memory": 0.3}), [item(kind="Memory")]) == [0.3]


def test_kind_not_in_map_scores_zero() -> None:
    """Item's kind is not in the weight map -> 0.0."""
    assert scores(KindScorer({"Memory": 0.3}), [item(kind="Document")]) == [0.0]


def test_kind_empty_custom_map_scores_zero() -> None:
    """Custom weight map is empty -> all items score 0.0 (not the defaults)."""
    assert scores(KindScorer({}), [item(kind="SystemPrompt"), item()]) == [0.0, 0.0]


def test_kind_weight_above_one_is_not_clamped() -> None:
    """Custom weight exceeds 1.0 -> returned as-is."""
    assert scores(KindScorer({"Message": 4.5}), [item()]) == [4.5]


def test_kind_default_map_has_exactly_the_five_well_known_kinds() -> None:
    """The default map holds exactly the five well-known kinds with the spec's weights."""
    assert dict(DEFAULT_KIND_WEIGHTS) == {
        ContextKind.SYSTEM_PROMPT: 1.0, ContextKind.MEMORY: 0.8, ContextKind.TOOL_OUTPUT: 0.6,
        ContextKind.DOCUMENT: 0.4, ContextKind.MESSAGE: 0.2,
    }
    assert KindScorer().weights is DEFAULT_KIND_WEIGHTS


def test_kind_lookup_is_case_insensitive() -> None:
    """A weight for "Message" matches kinds "message" and "MESSAGE", and vice versa."""
    assert scores(KindScorer(), [item(kind="message"), item(kind="MESSAGE")]) == [0.2, 0.2]
    assert scores(KindScorer({"toolOUTPUT": 0.9}), [item(kind=ContextKind.TOOL_OUTPUT)]) == [0.9]


# -- TagScorer ----------------------------------------------------------------------------


def test_tag_item_without_tags_scores_zero() -> None:
    """Item has no tags -> 0.0."""
    assert scores(TagScorer({"a": 1.0}), [item()]) == [0.0]


def test_tag_all_weights_zero_scores_zero() -> None:
    """totalWeight is 0.0 (all weights zero) -> 0.0, even for matching tags."""
    assert scores(TagScorer({"a": 0.0, "b": 0.0}), [item(tags=("a", "b"))]) == [0.0]


def test_tag_no_configured_tag_matches_scores_zero() -> None:
    """Item has tags but none match configured weights -> 0.0."""
    assert scores(TagScorer({"a": 1.0}), [item(tags=("z", "y"))]) == [0.0]


def test_tag_matching_all_configured_tags_scores_one() -> None:
    """Item matches all configured tags -> 1.0."""
    assert scores(TagScorer({"a": 1.0, "b": 3.0}), [item(tags=("b", "a"))]) == [1.0]


def test_tag_duplicate_tags_add_each_time_and_clamp() -> None:
    """Duplicate tags each add their weight; the result is clamped to 1.0."""
    scorer = TagScorer({"a": 1.0, "b": 3.0})
    assert scores(scorer, [item(tags=("a", "a"))]) == [0.5]
    assert scores(scorer, [item(tags=("b", "b"))]) == [1.0]


def test_tag_total_is_all_configured_weights() -> None:
    """The denominator is the sum of all configured weights, not only matched ones."""
    assert scores(TagScorer({"a": 1.0, "b": 2.0, "c": 1.0}), [item(tags=("a",))]) == [0.25]


def test_tag_matching_ignores_ascii_case_by_default() -> None:
    """Tags compare with ASCII case folding: "Important" matches "important"."""
    assert scores(TagScorer({"important": 2.0, "x": 2.0}), [item(tags=("IMPORTANT",))]) == [0.5]


def test_tag_case_folding_is_ascii_only() -> None:
    """Non-ASCII letters are not folded: "É" does not match "é"."""
    assert scores(TagScorer({"é": 1.0}), [item(tags=("É",)), item(tags=("é",))]) == [0.0, 1.0]


def test_tag_case_sensitive_option_matches_exactly() -> None:
    """case_sensitive=True is the ordinal comparer: "Important" does not match "important"."""
    scorer = TagScorer({"important": 1.0}, case_sensitive=True)
    assert scores(scorer, [item(tags=("Important",)), item(tags=("important",))]) == [0.0, 1.0]


# -- FrequencyScorer ------------------------------------------------------------------------


def test_frequency_item_without_tags_scores_zero() -> None:
    """Item has no tags -> 0.0."""
    assert scores(FrequencyScorer(), [item("a"), item("b", tags=("x",))])[0] == 0.0


def test_frequency_single_item_scores_zero() -> None:
    """Only one item in allItems -> 0.0."""
    assert scores(FrequencyScorer(), [item(tags=("x",))]) == [0.0]


def test_frequency_no_peer_shares_a_tag_scores_zero() -> None:
    """No peer shares any tag -> 0.0."""
    assert scores(FrequencyScorer(), [item("a", tags=("x",)), item("b", tags=("y",))]) == [
        0.0, 0.0]


def test_frequency_all_peers_share_a_tag_scores_one() -> None:
    """All peers share at least one tag -> 1.0."""
    items = [item("a", tags=("x", "y")), item("b", tags=("y",)), item("c", tags=("x",))]
    assert scores(FrequencyScorer(), items)[0] == 1.0


def test_frequency_tagless_peer_does_not_match_but_counts() -> None:
    """A peer with no tags never matches, yet stays in the denominator."""
    items = [item("a", tags=("x",)), item("b", tags=("x",)), item("c")]
    assert scores(FrequencyScorer(), items) == [0.5, 0.5, 0.0]


def test_frequency_tags_compare_case_insensitively() -> None:
    """"Important" and "important" are the same tag."""
    items = [item("a", tags=("Important",)), item("b", tags=("important",))]
    assert scores(FrequencyScorer(), items) == [1.0, 1.0]


def test_frequency_self_exclusion_is_by_identity() -> None:
    """An equal copy counts as a peer; the same instance listed twice is skipped both times."""
    first = item("a", tags=("x",))
    copy = item("a", tags=("x",))
    assert first == copy
    assert first is not copy
    assert scores(FrequencyScorer(), [first, copy, item("c", tags=("y",))]) == [0.5, 0.5, 0.0]
    # The same instance twice: neither position counts for it; the denominator stays N - 1.
    other = item("b", tags=("x",))
    assert scores(FrequencyScorer(), [first, first, other]) == [0.5, 0.5, 1.0]


# -- ReflexiveScorer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hint", "expected"),
    [(None, 0.0), (math.nan, 0.0), (math.inf, 0.0), (-math.inf, 0.0), (0.5, 0.5),
     (-0.3, 0.0), (1.7, 1.0)],
    ids=["null", "nan", "plus-inf", "minus-inf", "half", "below-clamped", "above-clamped"],
)
def test_reflexive_edge_cases(hint: float | None, expected: float) -> None:
    """Each row of the ReflexiveScorer table: null / non-finite -> 0.0, else clamped."""
    assert scores(ReflexiveScorer(), [item(future_relevance_hint=hint)]) == [expected]


# -- CompositeScorer --------------------------------------------------------------------------


def test_composite_empty_entries_is_a_construction_error() -> None:
    """Empty entries list -> construction error."""
    with pytest.raises(ConfigurationError, match="children"):
        CompositeScorer([])


def test_composite_single_entry_delegates() -> None:
    """A single entry has normalised weight 1.0 and returns the child's scores."""
    items = [item("a", priority=1), item("b", priority=2), item("c", priority=3)]
    composite = CompositeScorer([(PriorityScorer(), 7.0)])
    assert composite.weights == (1.0,)
    assert scores(composite, items) == scores(PriorityScorer(), items)


def test_composite_all_children_zero_gives_zero() -> None:
    """All children return 0.0 -> 0.0."""
    assert scores(CompositeScorer([(constant(0.0), 1.0), (constant(0.0), 2.0)]), [item()]) == [
        0.0]


def test_composite_all_children_one_gives_one() -> None:
    """All children return 1.0 -> 1.0 (weights sum to 1.0)."""
    assert scores(CompositeScorer([(constant(1.0), 1.0), (constant(1.0), 3.0)]), [item()]) == [
        1.0]


def test_composite_nested_is_scored_recursively() -> None:
    """A nested composite is valid and contributes its own weighted average."""
    inner = CompositeScorer([(constant(1.0), 1.0), (constant(0.0), 1.0)])
    outer = CompositeScorer([(inner, 1.0), (constant(1.0), 1.0)])
    assert scores(outer, [item()]) == [0.75]


def test_composite_self_referential_cycle_is_a_construction_error() -> None:
    """A scorer graph that reaches itself is rejected at construction."""
    inner = CompositeScorer([(RecencyScorer(), 1.0)])
    outer = CompositeScorer([(inner, 1.0)])
    # Built-ins are immutable, so a cycle can only be forced from outside.
    object.__setattr__(inner, "scorers", (outer,))
    with pytest.raises(ConfigurationError, match="cycle"):
        CompositeScorer([(outer, 1.0)])


def test_composite_weights_are_relative() -> None:
    """(3.0, 1.0) and (0.75, 0.25) normalise to the same weights and scores."""
    items = [item("a", priority=1, timestamp=at(3)), item("b", priority=9, timestamp=at(1)),
             item("c", priority=5, timestamp=at(2))]
    first = CompositeScorer([(RecencyScorer(), 3.0), (PriorityScorer(), 1.0)])
    second = CompositeScorer([(RecencyScorer(), 0.75), (PriorityScorer(), 0.25)])
    assert first.weights == second.weights == (0.75, 0.25)
    assert scores(first, items) == scores(second, items) == [0.75, 0.25, 0.5]


def test_composite_zero_weight_is_rejected() -> None:
    """Weights must be strictly positive: zero is a construction error."""
    with pytest.raises(ConfigurationError, match=r"children\[1\]\.weight"):
        CompositeScorer([(RecencyScorer(), 1.0), (PriorityScorer(), 0.0)])


# -- ScaledScorer ---------------------------------------------------------------------------


def test_scaled_empty_items_gives_no_scores() -> None:
    """Empty allItems: nothing to score (the spec's 0.5 has no item to attach to)."""
    assert scores(ScaledScorer(RecencyScorer()), []) == []


def test_scaled_single_item_scores_half() -> None:
    """Single item in allItems -> 0.5 (max = min)."""
    assert scores(ScaledScorer(ReflexiveScorer()), [item(future_relevance_hint=0.9)]) == [0.5]


def test_scaled_all_equal_inner_scores_give_half() -> None:
    """All items receive the same inner score -> 0.5 each."""
    items = [item("a", kind="Memory"), item("b", kind="Memory")]
    assert scores(ScaledScorer(KindScorer()), items) == [0.5, 0.5]


def test_scaled_two_distinct_scores_give_zero_and_one() -> None:
    """Two items with distinct inner scores -> one 0.0, the other 1.0."""
    items = [item("a", future_relevance_hint=0.6), item("b", future_relevance_hint=0.4)]
    assert scores(ScaledScorer(ReflexiveScorer()), items) == [1.0, 0.0]


def test_scaled_inner_outside_unit_range_still_scales_to_unit_range() -> None:
    """Inner scores outside [0, 1] still map onto [0.0, 1.0]."""
    items = [item("a", kind="Memory"), item("b", kind="Document"), item("c", kind="Message")]
    scorer = ScaledScorer(KindScorer({"Memory": 9.0, "Document": 5.0, "Message": 3.0}))
    assert scores(scorer, items) == [1.0, pytest.approx(1 / 3), 0.0]


def test_scaled_takes_part_in_cycle_detection() -> None:
    """A composite walks through a ScaledScorer to its inner scorer when detecting cycles."""
    composite = CompositeScorer([(RecencyScorer(), 1.0)])
    scaled = ScaledScorer(composite)
    object.__setattr__(composite, "scorers", (scaled,))
    with pytest.raises(ConfigurationError, match="cycle"):
        CompositeScorer([(scaled, 1.0)])


# -- MetadataTrustScorer ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 0.5), ("high", 0.5), ("", 0.5), ("NaN", 0.5), ("+Infinity", 0.5),
     ("-Infinity", 0.5), ("0.0", 0.0), ("0.75", 0.75), ("1.0", 1.0), ("-0.1", 0.0),
     ("1.5", 1.0)],
    ids=["absent", "unparseable-word", "unparseable-empty", "nan", "plus-infinity",
         "minus-infinity", "zero", "three-quarters", "one", "below-clamped", "above-clamped"],
)
def test_metadata_trust_edge_cases(raw: str | None, expected: float) -> None:
    """Each row of the MetadataTrustScorer table, with default_score 0.5."""
    metadata = {} if raw is None else {"cupel:trust": raw}
    assert scores(MetadataTrustScorer(default_score=0.5), [item(metadata=metadata)]) == [expected]


def test_metadata_trust_default_is_the_configured_one() -> None:
    """A missing or unusable value gives the configured default, here 0.2."""
    scorer = MetadataTrustScorer(default_score=0.2)
    items = [item("a"), item("b", metadata={"cupel:trust": "nan"}),
             item("c", metadata={"cupel:trust": " 0.9"})]
    assert scores(scorer, items) == [0.2, 0.2, 0.2]


def test_metadata_trust_accepts_numbers_directly() -> None:
    """A numeric value is used as it is (clamped); a bool or other type is unusable.
    A non-finite float cannot reach the scorer as a number (metadata is JSON), only
    as text, which gives the default."""
    items = [item("a", metadata={"cupel:trust": 0.85}), item("b", metadata={"cupel:trust": 2}),
             item("c", metadata={"cupel:trust": True}),
             item("d", metadata={"cupel:trust": ["0.9"]}),
             item("e", metadata={"cupel:trust": "Infinity"})]
    assert scores(MetadataTrustScorer(default_score=0.5), items) == [0.85, 1.0, 0.5, 0.5, 0.5]
    with pytest.raises(InvalidValueError, match="cupel:trust"):
        item("f", metadata={"cupel:trust": math.inf})


def test_metadata_trust_parses_standard_float_text() -> None:
    """Exponents, leading/trailing points and signs parse; underscores do not."""
    values = ["5e-1", ".25", "1.", "+0.5", "1_0"]
    items = [item(str(i), metadata={"cupel:trust": value}) for i, value in enumerate(values)]
    assert scores(MetadataTrustScorer(default_score=0.1), items) == [0.5, 0.25, 1.0, 0.5, 0.1]


# -- DecayScorer -------------------------------------------------------------------------------


def fixed(moment: datetime = NOW) -> DecayScorer:
    """A DecayScorer whose clock reads ``moment``, exponential 24 h half-life."""
    return DecayScorer(ExponentialCurve(timedelta(hours=24)), clock=lambda: moment)


def decay(curve: ExponentialCurve | StepCurve | WindowCurve, age: timedelta) -> float:
    """The score of an item ``age`` old under ``curve``, clock fixed at NOW."""
    scorer = DecayScorer(curve, clock=lambda: NOW)
    return scores(scorer, [item(timestamp=NOW - age)])[0]


STEPS = StepCurve([(timedelta(hours=1), 0.9), (timedelta(hours=24), 0.5),
                   (timedelta(hours=72), 0.1)])


def test_decay_null_timestamp_scores_null_timestamp_score() -> None:
    """item.timestamp is null -> nullTimestampScore (default 0.5, or as configured)."""
    assert scores(fixed(), [item()]) == [0.5]
    scorer = DecayScorer(WindowCurve(timedelta(hours=1)), null_timestamp_score=0.1,
                         clock=lambda: NOW)
    assert scores(scorer, [item()]) == [0.1]


def test_decay_future_dated_item_is_age_zero() -> None:
    """A future-dated item scores APPLY-CURVE(0)."""
    future = item(timestamp=NOW + timedelta(hours=12))
    assert scores(fixed(), [future]) == [1.0]
    assert decay(STEPS, -timedelta(days=3)) == 0.9


def test_decay_age_zero_per_curve() -> None:
    """Age zero: exponential 1.0, step the first window's score, window 1.0."""
    assert decay(ExponentialCurve(timedelta(hours=1)), timedelta(0)) == 1.0
    assert decay(STEPS, timedelta(0)) == 0.9
    assert decay(WindowCurve(timedelta(hours=1)), timedelta(0)) == 1.0


def test_decay_window_at_max_age_scores_zero() -> None:
    """age == maxAge for the Window curve -> 0.0 (half-open [0, maxAge))."""
    curve = WindowCurve(timedelta(hours=6))
    assert decay(curve, timedelta(hours=6)) == 0.0
    assert decay(curve, timedelta(hours=6) - timedelta(microseconds=1)) == 1.0


def test_decay_step_past_all_boundaries_uses_last_entry() -> None:
    """Step curve, age exceeds all boundaries -> the last entry's score."""
    assert decay(STEPS, timedelta(days=30)) == 0.1


@pytest.mark.parametrize(("hours", "expected"), [(0, 0.9), (1, 0.5), (6, 0.5), (24, 0.1),
                                                 (72, 0.1)])
def test_decay_step_boundaries_fall_into_the_older_window(hours: int, expected: float) -> None:
    """The chapter's step table: an age equal to a boundary takes the next window."""
    assert decay(STEPS, timedelta(hours=hours)) == expected


def test_decay_exponential_very_large_age_approaches_zero() -> None:
    """Exponential with a very large age approaches 0.0 and is never negative."""
    value = decay(ExponentialCurve(timedelta(seconds=1)), timedelta(days=36500))
    assert 0.0 <= value < 1e-300


def test_decay_exponential_half_life_points() -> None:
    """One half-life 0.5, two half-lives 0.25."""
    curve = ExponentialCurve(timedelta(hours=24))
    assert decay(curve, timedelta(hours=24)) == 0.5
    assert decay(curve, timedelta(hours=48)) == 0.25


def test_decay_reads_the_clock_once_per_pass() -> None:
    """One score_all reads the injected clock once, so all items share one 'now'."""
    reads: list[datetime] = []

    def clock() -> datetime:
        reads.append(NOW + timedelta(hours=len(reads)))
        return reads[-1]

    scorer = DecayScorer(WindowCurve(timedelta(hours=1)), clock=clock)
    items = [item(str(i), timestamp=NOW - timedelta(minutes=30)) for i in range(5)]
    assert scores(scorer, items) == [1.0] * 5
    assert len(reads) == 1


def test_decay_ignores_other_items() -> None:
    """An item's decay score is the same alone or among others (absolute scorer)."""
    target = item("t", timestamp=NOW - timedelta(hours=24))
    others = [item(str(i), timestamp=NOW - timedelta(hours=i)) for i in range(5)]
    scorer = fixed()
    assert scorer.score(target, [target]) == scorer.score(target, [*others, target]) == 0.5


# -- MetadataKeyScorer -------------------------------------------------------------------------


def test_metadata_key_absent_is_neutral() -> None:
    """Key absent from item.metadata -> 1.0."""
    assert scores(MetadataKeyScorer("cupel:priority", "high", 1.5), [item()]) == [1.0]


def test_metadata_key_match_returns_boost() -> None:
    """Key present, value matches -> boost."""
    scorer = MetadataKeyScorer("cupel:priority", "high", 1.5)
    assert scores(scorer, [item(metadata={"cupel:priority": "high"})]) == [1.5]


def test_metadata_key_mismatch_is_neutral() -> None:
    """Key present, value does not match -> 1.0 (the comparison is exact)."""
    scorer = MetadataKeyScorer("cupel:priority", "high", 1.5)
    items = [item("a", metadata={"cupel:priority": "normal"}),
             item("b", metadata={"cupel:priority": "HIGH"}),
             item("c", metadata={"cupel:priority": " high"})]
    assert scores(scorer, items) == [1.0, 1.0, 1.0]


def test_metadata_key_non_string_value_never_matches() -> None:
    """String-to-string comparison with no coercion: 1 does not match "1"."""
    scorer = MetadataKeyScorer("tier", "1", 2.0)
    assert scores(scorer, [item("a", metadata={"tier": 1}), item("b", metadata={"tier": "1"})]) == [
        1.0, 2.0]


@pytest.mark.parametrize("boost", [0.0, -1.0, math.nan, math.inf, -math.inf],
                         ids=["zero", "negative", "nan", "plus-inf", "minus-inf"])
def test_metadata_key_bad_boost_is_a_construction_error(boost: float) -> None:
    """boost = 0, < 0, NaN or infinite -> ConfigurationError naming boost."""
    with pytest.raises(ConfigurationError, match="boost") as caught:
        MetadataKeyScorer("cupel:priority", "high", boost)
    assert caught.value.field == "boost"


def test_metadata_key_boost_is_not_clamped() -> None:
    """A boost above 1.0 is returned as it is."""
    assert scores(MetadataKeyScorer("k", "v", 7.25), [item(metadata={"k": "v"})]) == [7.25]
