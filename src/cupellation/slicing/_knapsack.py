"""KnapsackSlice (``spec/src/slicers/knapsack.md``).

The dynamic programme is the specification's KNAPSACK-SLICE exactly (same
discretisation, same strict ``>`` update, same reverse reconstruction), run
with one vectorised numpy update per item instead of the inner ``w`` loop.
Two transformations keep it exact while making it cheaper:

- Items that can never be kept are left out of the table: an item whose
  discretised weight exceeds the capacity (its row is all false) and an item
  of value 0 (``dp`` is non-decreasing in ``w``, so ``dp[w - dw] + 0 > dp[w]``
  never holds).
- The capacity is clamped to the sum of the remaining weights ``S``: for every
  ``w >= S_i`` (the prefix sum up to item ``i``) both ``dp`` and ``keep[i]``
  are constant, and the reconstruction from ``capacity`` stays in that region
  exactly when the one from ``S`` does, so both pick the same items.

A table the specification's would make larger than :data:`MAX_TABLE_CELLS`
(``n x (capacity + 1)`` cells, ``n`` the positive-token candidates) raises
:class:`~cupellation.exceptions.TableTooLargeError` before anything is
allocated, even when the two transformations would have shrunk it.

The keep table is ``n x (capacity + 1)`` booleans. When that exceeds
``max_keep_cells`` the items are processed in chunks: ``dp`` is saved at each
chunk start and a chunk's keep rows are recomputed from its checkpoint during
the reconstruction, bounding memory at the cost of at most one extra DP pass.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from .._model import ContextBudget, ContextItem, ScoredItem
from .._tables import built
from ..exceptions import InvalidValueError, TableTooLargeError
from ._common import check_budget, check_count, unpack
from ._protocol import SLICERS

__all__ = ["DEFAULT_MAX_KEEP_CELLS", "MAX_TABLE_CELLS", "KnapsackSlice", "knapsack_select"]

#: Score scaling factor of the specification (4 decimal digits).
SCORE_SCALE = 10000.0

#: The specification's limit on the DP table (``TableTooLarge``): a table of
#: more than 50 million cells is refused before it is allocated.
MAX_TABLE_CELLS = 50_000_000

#: Keep-table cells (one byte each) held at once before chunking kicks in:
#: 32 MiB, i.e. 32,000 items at the default capacity of 1,000 buckets.
DEFAULT_MAX_KEEP_CELLS = 32 * 1024 * 1024

_INFINITY = math.inf
_INT32_LIMIT = 2**31 - 1
_INT64_LIMIT = 2**63 - 1


@SLICERS.register
@dataclass(frozen=True, slots=True)
class KnapsackSlice:
    """Selects the subset with the largest total score that fits the budget
    (0/1 knapsack over token counts discretised into ``bucket_size`` buckets).

    Scores are scaled to integers ``max(0, floor(score * 10000))``; weights
    round up (``ceil(tokens / bucket_size)``) and the capacity rounds down
    (``floor(target_tokens / bucket_size)``), so every selection fits the
    original budget but may under-fill it. Zero-token items are always
    selected and come first in the result, followed by the DP selection in
    reconstruction order (last candidate first).

    Raises :class:`~cupellation.exceptions.TableTooLargeError` when the
    table (items with positive tokens x ``floor(target / bucket_size) + 1``)
    would exceed :data:`MAX_TABLE_CELLS` cells.

    Table: ``{"type": "knapsack", "bucket_size": 100}``.
    """

    type_name: ClassVar[str] = "knapsack"
    settings: ClassVar[tuple[str, ...]] = ("bucket_size",)
    bucket_size: int = 100

    def __post_init__(self) -> None:
        check_count("bucket_size", self.bucket_size, positive=True)

    def to_dict(self) -> dict[str, Any]:
        """``type`` and ``bucket_size``."""
        return {"type": self.type_name, "bucket_size": self.bucket_size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, path: str = "slicer") -> Self:
        """The knapsack slicer a table describes (``bucket_size`` defaults to 100)."""
        data = SLICERS.read(cls, data, path)
        return built(path, lambda: cls(data.get("bucket_size", 100)))

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> list[ContextItem]:
        """Return the knapsack selection of ``scored`` within ``budget.target_tokens``."""
        budget = check_budget(budget, "KnapsackSlice")
        items, tokens, scores = unpack(scored, "KnapsackSlice")
        if not items or budget.target_tokens <= 0:
            return []
        picked = knapsack_select(tokens, scores, budget.target_tokens, self.bucket_size)
        return [items[i] for i in picked]


def knapsack_select(
    tokens: Sequence[int],
    scores: Sequence[float],
    target_tokens: int,
    bucket_size: int,
    *,
    max_keep_cells: int = DEFAULT_MAX_KEEP_CELLS,
    label: str = "KnapsackSlice",
    positions: Sequence[int] | None = None,
) -> list[int]:
    """Indices KNAPSACK-SLICE returns, in its output order: zero-token items
    (input order), then the DP selection in reconstruction order.

    ``scores`` must be finite; ``target_tokens`` and ``bucket_size`` positive.
    Raises :class:`~cupellation.exceptions.TableTooLargeError` naming
    ``label`` when ``n * (capacity + 1) > MAX_TABLE_CELLS``, with ``n`` the
    entries of positive ``tokens`` and ``capacity = target_tokens //
    bucket_size`` (the table KNAPSACK-SLICE allocates), before any work.
    A score whose scaled value ``score * 10000`` overflows a double raises
    :class:`~cupellation.exceptions.InvalidValueError` naming
    ``"<label> scored[<i>].score"``, where ``i`` is ``positions[index]`` (the
    caller's own index of the entry) or the index itself.
    """
    zero_token = [i for i, t in enumerate(tokens) if t == 0]
    capacity = target_tokens // bucket_size
    if capacity == 0:
        return zero_token
    # TableTooLarge: the specification's keep table is n x (capacity + 1)
    # booleans, n the positive-token candidates (KNAPSACK-SLICE allocates it
    # only when n > 0 and capacity > 0). Counting n is skipped when even
    # every entry being a candidate would stay within the limit.
    if len(tokens) * (capacity + 1) > MAX_TABLE_CELLS:
        candidates = sum(1 for t in tokens if t > 0)
        if candidates * (capacity + 1) > MAX_TABLE_CELLS:
            raise TableTooLargeError(label, candidates, capacity, MAX_TABLE_CELLS)
    # An item fits the capacity exactly when ceil(t / b) <= C, i.e. t <= C * b.
    limit = capacity * bucket_size
    floor = math.floor
    eligible: list[int] = []
    weights: list[int] = []
    values: list[int] = []
    for i, t in enumerate(tokens):
        if 0 < t <= limit:
            scaled = scores[i] * SCORE_SCALE
            if scaled <= 0.0:
                # max(0, floor(...)) is 0 (also for -inf: floor(-inf) would raise).
                continue
            if scaled == _INFINITY:
                position = i if positions is None else positions[i]
                raise InvalidValueError(
                    f"{label} scored[{position}].score", scores[i],
                    "too large for KnapsackSlice's integer values "
                    "(score * 10000 overflows a double)",
                )
            value = floor(scaled)
            if value > 0:
                eligible.append(i)
                weights.append(-(-t // bucket_size))
                values.append(value)
    if not eligible:
        return zero_token
    capacity = min(capacity, sum(weights))
    chosen = _solve(weights, values, capacity, max_keep_cells)
    zero_token.extend(eligible[j] for j in chosen)
    return zero_token


def _dtype_for(values: list[int]) -> type[Any]:
    total = sum(values)
    if total <= _INT32_LIMIT:
        return np.int32
    if total <= _INT64_LIMIT:
        return np.int64
    return object  # exact Python integers; slow, but only for absurd scores


def _solve(weights: list[int], values: list[int], capacity: int, max_cells: int) -> list[int]:
    """Rows chosen by the reconstruction, last row first."""
    n = len(weights)
    width = capacity + 1
    dtype = _dtype_for(values)
    # One chunk when the whole table fits the cell budget; otherwise enough
    # rows per chunk to use that budget, and at least sqrt(n) so that the
    # checkpoints (one dp row per chunk) stay few.
    chunk = n if n * width <= max_cells else max(1, max_cells // width, math.isqrt(n))
    starts = list(range(0, n, chunk))
    dp = np.zeros(width, dtype=dtype)
    scratch = np.empty(width, dtype=dtype)
    keep = np.empty((min(chunk, n), width), dtype=np.bool_)
    checkpoints: list[npt.NDArray[Any]] = []
    for start in starts:
        if len(starts) > 1:
            checkpoints.append(dp.copy())
        _fill_rows(dp, scratch, keep, weights, values, start=start, stop=min(start + chunk, n))

    chosen: list[int] = []
    remaining = capacity
    for block in range(len(starts) - 1, -1, -1):
        start = starts[block]
        stop = min(start + chunk, n)
        if block != len(starts) - 1:
            dp[:] = checkpoints[block]
            _fill_rows(dp, scratch, keep, weights, values, start=start, stop=stop)
        for j in range(stop - 1, start - 1, -1):
            if keep[j - start, remaining]:
                chosen.append(j)
                remaining -= weights[j]
                if remaining == 0:
                    # keep[i][0] is never set (every weight is >= 1).
                    return chosen
    return chosen


def _fill_rows(
    dp: npt.NDArray[Any],
    scratch: npt.NDArray[Any],
    keep: npt.NDArray[np.bool_],
    weights: list[int],
    values: list[int],
    *,
    start: int,
    stop: int,
) -> None:
    """Apply items ``start..stop-1`` to ``dp``, writing their keep rows.

    For ``w`` from capacity down to ``dw`` the spec compares
    ``dp[w - dw] + dv`` with ``dp[w]``; the reverse order means ``dp[w - dw]``
    is still the previous item's value, so the whole row is one vectorised
    comparison against a copy.
    """
    width = dp.shape[0]
    add = np.add
    greater = np.greater
    maximum = np.maximum
    for j in range(start, stop):
        dw = weights[j]
        span = width - dw
        row = keep[j - start]
        row[:dw] = False
        with_item = scratch[:span]
        add(dp[:span], values[j], out=with_item)
        tail = dp[dw:]
        greater(with_item, tail, out=row[dw:])
        maximum(tail, with_item, out=tail)
