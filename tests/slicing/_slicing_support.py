"""Shared builders, strategies and spec reference transcriptions for the slicer tests."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, ScoredItem
from cupellation.slicing import CapExclusion, CountQuotaEntry

#: The specification's required slicing vectors, vendored in tests/data.
SLICING_VECTORS = (
    Path(__file__).resolve().parents[1] / "data" / "conformance" / "required" / "slicing"
)


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
    st.sampled_from([0.0, 0.00005, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, -0.5, 2.0, 5.0]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    # Scorers are not bound to [0, 1] (KindScorer weights, custom scorers).
    st.floats(min_value=-1.0, max_value=5.0, allow_nan=False),
)


def scored_lists(max_size: int = 14, max_tokens: int = 300) -> st.SearchStrategy[list[ScoredItem]]:
    """Pre-sorted scored items with small token counts (zeros and negatives included),
    scores inside and outside [0, 1] with ties, kinds spelled in several cases, and
    sometimes the same ContextItem object in more than one entry."""
    row = st.tuples(
        st.one_of(
            st.just(0),
            st.integers(min_value=1, max_value=max_tokens),
            st.integers(min_value=1, max_value=max_tokens),
            # Invalid for the pipeline (dropped at Classify) but a slicer can be
            # called with anything: it must never select them.
            st.integers(min_value=-max_tokens, max_value=-1),
        ),
        st.sampled_from(KINDS),
        _scores,
    )
    repeat = st.tuples(st.integers(min_value=0), st.one_of(st.none(), _scores))
    return st.tuples(
        st.lists(row, max_size=max_size), st.lists(repeat, max_size=3)
    ).map(lambda drawn: _build_scored(*drawn))


def _build_scored(
    rows: list[tuple[int, str, float]], repeats: list[tuple[int, float | None]]
) -> list[ScoredItem]:
    entries = [
        ScoredItem(ContextItem(f"item-{index}", tokens, kind=kind), score)
        for index, (tokens, kind, score) in enumerate(rows)
    ]
    if entries:
        # The same object again, with its own score or with a new one.
        for which, score in repeats:
            original = entries[which % len(rows)]
            entries.append(ScoredItem(original.item,
                                      original.score if score is None else score))
    return sort_by_score(entries)


def same_shape_copies(
    entries: Sequence[ScoredItem], make: Callable[[ContextItem], ContextItem]
) -> list[ScoredItem]:
    """``entries`` with every distinct item object replaced by ``make(item)``, keeping
    repeated objects repeated (one copy per original object)."""
    copies: dict[int, ContextItem] = {}
    result = []
    for entry in entries:
        copy = copies.get(id(entry.item))
        if copy is None:
            copy = copies[id(entry.item)] = make(entry.item)
        result.append(ScoredItem(copy, entry.score))
    return result


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


#: A phase-2 reference: (tokens, scores, target) -> selected indices, output order.
ReferenceInner = Callable[[Sequence[int], Sequence[float], int], list[int]]


def reference_count_quota(
    entries: Sequence[ScoredItem],
    budget: ContextBudget,
    quotas: Sequence[CountQuotaEntry],
    inner: ReferenceInner,
    *,
    resort: bool,
) -> tuple[list[ContextItem], list[CapExclusion]]:
    """COUNT-QUOTA-SLICE (``resort=False``, spec/src/slicers/count-quota.md) and
    COUNT-KNAPSACK-CAP (``resort=True``, count-constrained-knapsack.md) line by line:
    the selection and the cap exclusions.

    One documented departure, shared by every slicer here: candidates with negative
    token counts are not partitioned in phase 1 (never committed).
    """
    if not entries or budget.target_tokens <= 0:
        return [], []
    entry_by_kind = {quota.kind: quota for quota in quotas}
    # Phase 1: partition by kind (ContextKind compares ignoring case), then a stable
    # sort of each partition by score descending.
    partitions: dict[object, list[ScoredItem]] = {}
    for entry in entries:
        if entry.item.tokens >= 0:
            partitions.setdefault(entry.item.kind, []).append(entry)
    for members in partitions.values():
        members.sort(key=lambda e: e.score, reverse=True)  # list.sort is stable
    committed: list[ContextItem] = []
    committed_set: set[int] = set()
    selected_count: dict[object, int] = {}
    pre_allocated = 0
    for quota in quotas:
        if quota.require_count <= 0:
            continue
        satisfied = 0
        for candidate in partitions.get(quota.kind, []):
            if satisfied >= quota.require_count:
                break
            committed.append(candidate.item)
            committed_set.add(id(candidate.item))
            pre_allocated += candidate.item.tokens
            satisfied += 1
        selected_count[quota.kind] = satisfied
    # Phase 2.
    residual = [e for e in entries if id(e.item) not in committed_set]
    residual_target = max(0, budget.target_tokens - pre_allocated)
    target = min(residual_target, budget.max_tokens)
    tokens = [e.item.tokens for e in residual]
    scores = [e.score for e in residual]
    picked = inner(tokens, scores, target) if residual and target > 0 else []
    if resort:
        picked = sorted(picked, key=lambda index: scores[index], reverse=True)
    # Phase 3.
    result = list(committed)
    exclusions: list[CapExclusion] = []
    for index in picked:
        item = residual[index].item
        count = selected_count.get(item.kind, 0)
        cap_entry = entry_by_kind.get(item.kind)
        if cap_entry is not None and count >= cap_entry.cap_count:
            exclusions.append(CapExclusion(item, cap_entry.kind, cap_entry.cap_count, count))
        else:
            result.append(item)
            selected_count[item.kind] = count + 1
    return result, exclusions
