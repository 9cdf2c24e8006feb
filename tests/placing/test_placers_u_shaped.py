"""UShapedPlacer: every edge-case row of ``spec/src/placers/u-shaped.md``."""

from __future__ import annotations

from cupellation import ContextItem, ScoredItem
from cupellation.placing import UShapedPlacer


def scored(content: str, score: float, *, pinned: bool = False) -> ScoredItem:
    """A ScoredItem with the given content and score."""
    return ScoredItem(ContextItem(content=content, tokens=10, pinned=pinned), score)


def place(pairs: list[tuple[str, float]]) -> list[str]:
    """Place (content, score) pairs with UShapedPlacer and return the contents."""
    placed = UShapedPlacer().place([scored(c, s) for c, s in pairs])
    return [item.content for item in placed]


def test_empty_input_gives_empty_list() -> None:
    """Empty input -> empty list."""
    assert UShapedPlacer().place([]) == []


def test_single_item_is_returned_as_is() -> None:
    """A single item comes back as the very same object."""
    entry = scored("only", 0.2)
    placed = UShapedPlacer().place([entry])
    assert len(placed) == 1
    assert placed[0] is entry.item


def test_two_items_higher_first() -> None:
    """Two items: the higher-scored at index 0, the lower at index 1, either input order."""
    assert place([("lo", 0.1), ("hi", 0.9)]) == ["hi", "lo"]
    assert place([("hi", 0.9), ("lo", 0.1)]) == ["hi", "lo"]


def test_spec_visual_example_seven_items() -> None:
    """The chapter's example: A..G scored 0.9..0.3 -> [A, C, E, G, F, D, B]."""
    pairs = [("A", 0.9), ("B", 0.8), ("C", 0.7), ("D", 0.6), ("E", 0.5), ("F", 0.4), ("G", 0.3)]
    assert place(pairs) == ["A", "C", "E", "G", "F", "D", "B"]


def test_example_independent_of_input_order() -> None:
    """The ranking uses scores, so shuffled distinct-score input gives the same U."""
    pairs = [("D", 0.6), ("G", 0.3), ("A", 0.9), ("F", 0.4), ("B", 0.8), ("E", 0.5), ("C", 0.7)]
    assert place(pairs) == ["A", "C", "E", "G", "F", "D", "B"]


def test_even_count_pointers_meet_in_middle() -> None:
    """Six items: ranks 0,2,4 fill from the left, 1,3,5 from the right."""
    pairs = [("r0", 6.0), ("r1", 5.0), ("r2", 4.0), ("r3", 3.0), ("r4", 2.0), ("r5", 1.0)]
    assert place(pairs) == ["r0", "r2", "r4", "r5", "r3", "r1"]


def test_all_equal_scores_rank_by_index_and_still_alternate() -> None:
    """Equal scores: ranks follow input order, placement still alternates edges."""
    pairs = [("X", 0.5), ("Y", 0.5), ("Z", 0.5), ("W", 0.5)]
    assert place(pairs) == ["X", "Z", "W", "Y"]


def test_ties_break_by_lower_index_first() -> None:
    """Among tied scores the lower input index takes the better rank."""
    pairs = [("low", 0.1), ("tie-a", 0.7), ("top", 0.9), ("tie-b", 0.7)]
    # ranks: top, tie-a, tie-b, low -> [top, tie-b, low, tie-a]
    assert place(pairs) == ["top", "tie-b", "low", "tie-a"]


def test_pinned_items_not_special_cased() -> None:
    """Pinned items (score 1.0) rank by score only; pinned=True changes nothing."""
    items = [scored("a", 0.4), scored("pin", 1.0, pinned=True), scored("b", 0.8)]
    unpinned = [scored("a", 0.4), scored("pin", 1.0), scored("b", 0.8)]
    placer = UShapedPlacer()
    assert [i.content for i in placer.place(items)] == ["pin", "a", "b"]
    assert [i.content for i in placer.place(unpinned)] == ["pin", "a", "b"]


def test_negative_zero_ties_with_zero() -> None:
    """-0.0 and 0.0 are the same score, so input order breaks the tie."""
    assert place([("neg", -0.0), ("pos", 0.0), ("top", 1.0)]) == ["top", "pos", "neg"]


def test_scores_outside_unit_interval_are_ranked() -> None:
    """Scores are only compared, so values outside [0, 1] still rank correctly."""
    assert place([("m", -3.0), ("big", 42.0), ("z", 0.0)]) == ["big", "m", "z"]


def test_integer_scores_accepted() -> None:
    """An int score ranks like the equal float."""
    items = [ScoredItem(ContextItem(content="one", tokens=1), 1),
             ScoredItem(ContextItem(content="half", tokens=1), 0.5)]
    assert [i.content for i in UShapedPlacer().place(items)] == ["one", "half"]


def test_returns_same_objects() -> None:
    """Every placed item is the input's object, not a copy."""
    items = [scored(c, s) for c, s in [("a", 0.1), ("b", 0.2), ("c", 0.3)]]
    placed = UShapedPlacer().place(items)
    assert {id(i) for i in placed} == {id(e.item) for e in items}
