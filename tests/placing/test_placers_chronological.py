"""ChronologicalPlacer: every edge-case row of ``spec/src/placers/chronological.md``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from cupellation import ContextItem, ScoredItem
from cupellation.placing import ChronologicalPlacer

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def scored(content: str, score: float = 0.5, timestamp: datetime | None = None) -> ScoredItem:
    """A ScoredItem with the given content, score and timestamp."""
    return ScoredItem(ContextItem(content=content, tokens=10, timestamp=timestamp), score)


def contents(items: list[ContextItem]) -> list[str]:
    """The contents of ``items`` in order."""
    return [item.content for item in items]


def test_empty_input_gives_empty_list() -> None:
    """Empty input -> empty list."""
    assert ChronologicalPlacer().place([]) == []


def test_single_item_is_returned_as_is() -> None:
    """A single item comes back as the very same object."""
    entry = scored("only", timestamp=T0)
    placed = ChronologicalPlacer().place([entry])
    assert len(placed) == 1
    assert placed[0] is entry.item


def test_single_item_without_timestamp_is_returned() -> None:
    """A single untimestamped item is returned too."""
    entry = scored("only")
    assert ChronologicalPlacer().place([entry])[0] is entry.item


def test_all_timestamped_sorted_ascending() -> None:
    """All items timestamped -> ascending by timestamp."""
    items = [scored("c", timestamp=T0 + timedelta(days=3)),
             scored("a", timestamp=T0),
             scored("b", timestamp=T0 + timedelta(days=1))]
    assert contents(ChronologicalPlacer().place(items)) == ["a", "b", "c"]


def test_no_timestamps_preserves_input_order() -> None:
    """No item timestamped -> input order."""
    items = [scored(name, score) for name, score in [("x", 0.1), ("y", 0.9), ("z", 0.5)]]
    assert contents(ChronologicalPlacer().place(items)) == ["x", "y", "z"]


def test_mixed_timestamped_first_then_untimestamped_in_input_order() -> None:
    """Timestamped items first (ascending), then the untimestamped in input order."""
    items = [scored("none-1"),
             scored("late", timestamp=T0 + timedelta(hours=2)),
             scored("none-2"),
             scored("early", timestamp=T0),
             scored("none-3")]
    assert contents(ChronologicalPlacer().place(items)) == [
        "early", "late", "none-1", "none-2", "none-3"]


def test_same_timestamp_preserves_input_order() -> None:
    """All items share a timestamp -> input order (stable sort)."""
    items = [scored(name, timestamp=T0) for name in ["d", "b", "a", "c"]]
    assert contents(ChronologicalPlacer().place(items)) == ["d", "b", "a", "c"]


def test_ties_among_distinct_timestamps_keep_input_order() -> None:
    """Ties break by input index even when interleaved with other timestamps."""
    items = [scored("t1-first", timestamp=T0 + timedelta(seconds=1)),
             scored("t0-first", timestamp=T0),
             scored("t1-second", timestamp=T0 + timedelta(seconds=1)),
             scored("t0-second", timestamp=T0)]
    assert contents(ChronologicalPlacer().place(items)) == [
        "t0-first", "t0-second", "t1-first", "t1-second"]


def test_scores_do_not_influence_order() -> None:
    """Scores are ignored: reversing them does not change the result."""
    stamps = [T0 + timedelta(minutes=m) for m in (5, 1, 3)]
    low_first = [scored(f"i{i}", score=i / 10, timestamp=t) for i, t in enumerate(stamps)]
    high_first = [scored(f"i{i}", score=1 - i / 10, timestamp=t) for i, t in enumerate(stamps)]
    assert contents(ChronologicalPlacer().place(low_first)) == ["i1", "i2", "i0"]
    assert contents(ChronologicalPlacer().place(high_first)) == ["i1", "i2", "i0"]


def test_compares_instants_not_offsets() -> None:
    """Timestamps compare by UTC instant: 10:00+05:00 (05:00Z) precedes 06:00Z."""
    plus_five = timezone(timedelta(hours=5))
    items = [scored("six-utc", timestamp=datetime(2024, 1, 1, 6, tzinfo=UTC)),
             scored("five-utc", timestamp=datetime(2024, 1, 1, 10, tzinfo=plus_five))]
    assert contents(ChronologicalPlacer().place(items)) == ["five-utc", "six-utc"]


def test_microsecond_differences_are_ordered() -> None:
    """Timestamps one microsecond apart are still ordered by instant."""
    items = [scored("later", timestamp=T0 + timedelta(microseconds=1)),
             scored("earlier", timestamp=T0)]
    assert contents(ChronologicalPlacer().place(items)) == ["earlier", "later"]


def test_returns_same_objects_and_new_list() -> None:
    """The result holds the input's item objects, in a new list (input untouched)."""
    items = [scored("b", timestamp=T0 + timedelta(days=1)), scored("a", timestamp=T0)]
    snapshot = list(items)
    placed = ChronologicalPlacer().place(items)
    assert placed[0] is items[1].item
    assert placed[1] is items[0].item
    assert items == snapshot


def test_accepts_tuple_input() -> None:
    """Any sequence of ScoredItem works, e.g. a tuple."""
    items = (scored("b", timestamp=T0 + timedelta(days=1)), scored("a", timestamp=T0))
    assert contents(ChronologicalPlacer().place(items)) == ["a", "b"]
