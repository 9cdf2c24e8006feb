"""FrequencyScorer (``spec/src/scorers/frequency.md``): the share of peers
that have at least one tag in common with the item.

The specification's loop compares every pair of items: O(N²·T²). Here items
are grouped by their set of folded tags, and for each distinct set we count
the positions whose set meets it: a bitset over positions (a Python int) for
tags shared by many sets, a walk over the sets for the rarer ones. Counts,
and therefore scores, are identical.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import reduce
from operator import or_

import numpy as np
import numpy.typing as npt

from .._model import ContextItem, ascii_fold
from ._base import SCORERS, BuiltinScorer

__all__ = ["FrequencyScorer"]

# Tags found in at least this many distinct tag sets get a bitset over item
# positions (OR-ing a few machine words beats walking their sets one by one);
# rarer tags are walked set by set.
_MIN_POPULAR = 4
# At most this many bytes of bitsets per pass; past it, the least popular
# tags are walked instead, so memory stays bounded for huge inputs.
_BITSET_BUDGET = 32 * 1024 * 1024
# A tag on more positions than this gets its bitset from numpy rather than
# from a Python loop over its positions.
_NUMPY_BITSET = 256


class _FoldCache(dict[str, str]):
    """``ascii_fold`` memoised per tag string for one pass."""

    def __missing__(self, tag: str) -> str:
        folded = self[tag] = ascii_fold(tag)
        return folded


class _Groups:
    """Items grouped by their set of folded tags (group -1: no tags)."""

    __slots__ = ("counts", "item_groups", "n", "sets")

    def __init__(self, items: Sequence[ContextItem]) -> None:
        fold = _FoldCache()
        tags_list = [item.tags for item in items]
        group_of_tags: dict[tuple[str, ...], int] = {}
        group_of_set: dict[frozenset[str], int] = {}
        sets: list[frozenset[str]] = []
        # Distinct tag tuples only: many items usually share theirs.
        for tags in dict.fromkeys(tags_list):
            if not tags:
                group_of_tags[tags] = -1
                continue
            folded = frozenset(map(fold.__getitem__, tags))
            group = group_of_set.get(folded)
            if group is None:
                group = group_of_set[folded] = len(sets)
                sets.append(folded)
            group_of_tags[tags] = group
        self.n = len(tags_list)
        self.sets = sets
        self.item_groups = list(map(group_of_tags.__getitem__, tags_list))
        tally = Counter(self.item_groups)
        self.counts = [tally[group] for group in range(len(sets))]


def _bitsets(
    groups: _Groups,
    popular: frozenset[str],
    tag_groups: dict[str, list[int]],
    tag_totals: dict[str, int],
) -> dict[str, int]:
    """For each popular tag, the bitset (bit p = position p) of the items carrying it."""
    sets, n = groups.sets, groups.n
    bitsets: dict[str, int] = {}
    positions_of: list[list[int]] | None = None
    group_array: npt.NDArray[np.intp] | None = None
    for tag in popular:
        if tag_totals[tag] > _NUMPY_BITSET:
            if group_array is None:
                group_array = np.asarray(groups.item_groups, dtype=np.intp)
            selected = np.zeros(len(sets) + 1, dtype=bool)  # index -1: no tags
            selected[tag_groups[tag]] = True
            packed = np.packbits(selected[group_array], bitorder="little")
            bitsets[tag] = int.from_bytes(packed.tobytes(), "little")
            continue
        if positions_of is None:
            positions_of = [[] for _ in sets]
            for position, group in enumerate(groups.item_groups):
                if group >= 0:
                    positions_of[group].append(position)
        buffer = bytearray((n + 7) >> 3)
        for group in tag_groups[tag]:
            for position in positions_of[group]:
                buffer[position >> 3] |= 1 << (position & 7)
        bitsets[tag] = int.from_bytes(buffer, "little")
    return bitsets


def _union_sizes(groups: _Groups) -> list[int]:
    """For each distinct tag set, how many positions carry a tag set that meets it.

    The count includes the set's own positions (a non-empty set meets itself).
    """
    sets = groups.sets
    tag_groups: dict[str, list[int]] = {}
    for group, tag_set in enumerate(sets):
        for tag in tag_set:
            tag_groups.setdefault(tag, []).append(group)
    tag_totals = {tag: sum(groups.counts[group] for group in members)
                  for tag, members in tag_groups.items()}
    popular = _popular(tag_groups, groups.n)
    get_bits = _bitsets(groups, popular, tag_groups, tag_totals).__getitem__

    sizes: list[int] = []
    append = sizes.append
    for own, tag_set in enumerate(sets):
        if len(tag_set) == 1:
            # One tag: the positions carrying it, each counted once.
            (only,) = tag_set
            append(tag_totals[only])
            continue
        common = tag_set & popular
        total = reduce(or_, map(get_bits, common)).bit_count() if common else 0
        if common and len(common) == len(tag_set):
            append(total)
            continue
        append(total + _rare_total(groups, own, tag_set - common, common, tag_groups))
    return sizes


def _popular(tag_groups: Mapping[str, list[int]], n: int) -> frozenset[str]:
    """The tags worth a bitset: in at least _MIN_POPULAR groups, the most widespread
    first, as many as _BITSET_BUDGET bytes of n-position bitsets allow."""
    allowed = max(1, _BITSET_BUDGET // ((n + 7) >> 3))
    candidates = [tag for tag, members in tag_groups.items() if len(members) >= _MIN_POPULAR]
    if len(candidates) > allowed:
        candidates.sort(key=lambda tag: len(tag_groups[tag]), reverse=True)
        del candidates[allowed:]
    return frozenset(candidates)


def _rare_total(groups: _Groups, own: int, rare: frozenset[str], common: frozenset[str],
                tag_groups: Mapping[str, list[int]]) -> int:
    """The positions that meet set ``own`` through its ``rare`` (not popular) tags and
    are not already counted through its ``common`` (popular) ones."""
    sets, counts = groups.sets, groups.counts
    total = 0
    seen: set[int] = set()
    for tag in rare:
        members = tag_groups[tag]
        if len(members) == 1:
            # A tag found only in this set adds nothing but the set itself.
            if not common and own not in seen:
                seen.add(own)
                total += counts[own]
            continue
        for group in members:
            if group in seen:
                continue
            seen.add(group)
            # Sets carrying one of the popular tags are already in the mask.
            if common.isdisjoint(sets[group]):
                total += counts[group]
    return total


@SCORERS.register
class FrequencyScorer(BuiltinScorer):
    """The fraction of the other items that share at least one tag with the item.

    ``matching peers / (len(all_items) - 1)``. Tags compare case-insensitively
    (ASCII folding). Peers are all positions except those holding the very
    same item object (identity, not equality); tagless peers never match, yet
    still count in the denominator. An item without tags, or a list of at
    most one item, scores 0.0. Relative: an item's score depends on the others.

    A pass groups items by their set of folded tags, so it costs about O(N·T)
    for typical tag distributions instead of the specification's O(N²·T²),
    with identical results. Table: ``{"type": "frequency"}``.
    """

    __slots__ = ()
    type_name = "frequency"
    settings = ()

    def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
        """Every item's frequency score."""
        n = len(items)
        if n <= 1:
            return [0.0] * n
        groups = _Groups(items)
        if not groups.sets:
            return [0.0] * n
        sizes = _union_sizes(groups)
        denominator = n - 1
        if len(set(map(id, items))) == n:
            # No item object appears twice: each skips only itself.
            return [
                0.0 if group < 0 else (sizes[group] - 1) / denominator
                for group in groups.item_groups
            ]
        # Every position holding this very object meets its tag set and is
        # skipped by the specification's identity check, so subtract them all.
        multiplicity = Counter(map(id, items))
        return [
            0.0 if group < 0 else (sizes[group] - multiplicity[id(item)]) / denominator
            for item, group in zip(items, groups.item_groups, strict=True)
        ]

    def __repr__(self) -> str:
        return "FrequencyScorer()"
