"""Shared builders, strategies and spec reference transcriptions for the slicer tests."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, ScoredItem

#: The shared conformance folder beside the repository root.
SHARED = Path(__file__).resolve().parents[3] / "shared"
SLICING_VECTORS = SHARED / "conformance" / "required" / "slicing"


def scored(*specs: tuple[str, int, float] | tuple[str, int, float, str]) -> list[ScoredItem]:
    """ScoredItems from ``(content, tokens, score[, kind])`` tuples, in the given order."""
    result = []
    for spec in specs:
        content, tokens, score = spec[0], spec[1], spec[2]
        kind = spec[3] if len(spec) == 4 else "Message"
        result.append(ScoredItem(ContextItem(content, tokens, kind=kind), score))
    return result


def budget(target: int, max_tokens: int | None = None) -> ContextBudget:
    """An effective budget with ``target`` (and ``max_tokens``, default = target)."""
    return ContextBudget(max_tokens=target if max_tokens is None else max_tokens,
                         target_tokens=target)


def contents(items: Sequence[ContextItem]) -> list[str]:
    """The contents of ``items``, in order."""
    return [item.content for item in items]


def sort_by_score(entries: Sequence[ScoredItem]) -> list[ScoredItem]:
    """The Sort stage: score descending, stable."""
    return sorted(entries, key=lambda entry: entry.score, reverse=True)


# -- strategies ---------------------------------------------------------------

KINDS = ("Message", "message", "ToolOutput", "tooloutput", "Document", "Memory")

_scores = st.one_of(
    st.sampled_from([0.0, 0.00005, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
)


def scored_lists(max_size: int = 14, max_tokens: int = 300) -> st.SearchStrategy[list[ScoredItem]]:
    """Pre-sorted scored items with small token counts (zeros included),
    tied scores and kinds spelled in several cases."""
    row = st.tuples(
        st.one_of(st.just(0), st.integers(min_value=1, max_value=max_tokens)),
        st.sampled_from(KINDS),
        _scores,
    )
    return st.lists(row, max_size=max_size).map(_build_scored)


def _build_scored(rows: list[tuple[int, str, float]]) -> list[ScoredItem]:
    return sort_by_score([
        ScoredItem(ContextItem(f"item-{index}", tokens, kind=kind), score)
        for index, (tokens, kind, score) in enumerate(rows)
    ])


@st.composite
def budgets(draw: st.DrawFn, max_target: int = 1200) -> ContextBudget:
    """Effective budgets (target <= max)."""
    target = draw(st.integers(min_value=0, max_value=max_target))
    extra = draw(st.integers(min_value=0, max_value=200))
    return ContextBudget(max_tokens=target + extra, target_tokens=target)


# -- reference transcriptions of the spec's pseudocode --------------------------

def reference_greedy(tokens: Sequence[int], scores: Sequence[float], target: int) -> list[int]:
    """GREEDY-SLICE (spec/src/slicers/greedy.md) line by line, returning indices."""
    if not tokens or target <= 0:
        return []
    densities = []
    for i, t in enumerate(tokens):
        densities.append((sys.float_info.max if t == 0 else scores[i] / t, i))
    densities.sort(key=lambda pair: (-pair[0], pair[1]))
    remaining = target
    selected = []
    for _, index in densities:
        t = tokens[index]
        if t == 0:
            selected.append(index)
        elif 0 < t <= remaining:  # negative-token items are never selected here
            selected.append(index)
            remaining -= t
    return selected


def reference_knapsack(
    tokens: Sequence[int], scores: Sequence[float], target: int, bucket_size: int
) -> list[int]:
    """KNAPSACK-SLICE (spec/src/slicers/knapsack.md) line by line, returning indices."""
    if not tokens or target <= 0:
        return []
    zero_token = []
    candidates = []
    for i, t in enumerate(tokens):
        if t == 0:
            zero_token.append(i)
        elif t > 0:
            candidates.append(i)
    if not candidates:
        return zero_token
    n = len(candidates)
    weights = [tokens[i] for i in candidates]
    values = [max(0, math.floor(scores[i] * 10000)) for i in candidates]
    capacity = target // bucket_size
    if capacity == 0:
        return zero_token
    dws = [-(-w // bucket_size) for w in weights]
    dp = [0] * (capacity + 1)
    keep = [[False] * (capacity + 1) for _ in range(n)]
    for i in range(n):
        dw, dv = dws[i], values[i]
        for w in range(capacity, dw - 1, -1):
            with_item = dp[w - dw] + dv
            if with_item > dp[w]:
                dp[w] = with_item
                keep[i][w] = True
    selected = []
    remaining = capacity
    for i in range(n - 1, -1, -1):
        if keep[i][remaining]:
            selected.append(candidates[i])
            remaining -= dws[i]
    return zero_token + selected
