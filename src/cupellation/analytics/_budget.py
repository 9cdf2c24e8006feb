"""Budget simulation (``spec/src/analytics/budget-simulation.md``): the marginal items
of a budget, and the smallest budget that includes an item.

Both build on dry runs of one pipeline over fixed candidates. Classify, Score,
Deduplicate and Sort do not depend on the budget, so they run once
(:meth:`~cupellation.Pipeline.prepare`) and each dry run is Slice plus the Place
stage's overflow handling: the DryRun Determinism Invariant holds because the
stages are the pipeline's own and GreedySlice breaks ties by index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._model import ContextBudget, ContextItem
from .._pipeline import Pipeline, PreparedCandidates
from .._report import SelectionReport
from ..exceptions import (
    BudgetOverflowError,
    ConfigurationError,
    CupelError,
    InvalidTypeError,
    InvalidValueError,
    NonMonotonicSlicerError,
    PinnedBudgetError,
    SpecArgumentError,
)
from ..slicing import CountConstrainedKnapsackSlice, CountQuotaSlice, QuotaSlice

__all__ = [
    "FIND_MIN_BUDGET_GUARD_MESSAGE",
    "MARGINAL_GUARD_MESSAGE",
    "BudgetPoint",
    "BudgetSearch",
    "budget_sweep",
    "find_min_budget_for",
    "get_marginal_items",
    "scaled_budget",
    "search_min_budget",
]

#: ``GetMarginalItems``'s QuotaSlice guard, word for word.
MARGINAL_GUARD_MESSAGE = (
    "GetMarginalItems requires monotonic item inclusion. QuotaSlice produces non-monotonic "
    "inclusion as budget changes shift percentage allocations.")
#: ``FindMinBudgetFor``'s QuotaSlice + CountQuotaSlice guard, word for word.
FIND_MIN_BUDGET_GUARD_MESSAGE = (
    "FindMinBudgetFor requires monotonic item inclusion. QuotaSlice and CountQuotaSlice "
    "produce non-monotonic inclusion as budget changes shift allocations. Use a GreedySlice "
    "or KnapsackSlice inner slicer for budget simulation.")
_NOT_AN_ELEMENT = "targetItem must be an element of items"
_CEILING_BELOW_TOKENS = "searchCeiling must be >= targetItem.Tokens"
#: The count quota slicers: inclusion follows per-kind counts, not the budget alone.
_COUNT_QUOTA = (CountQuotaSlice, CountConstrainedKnapsackSlice)


def _pipeline(pipeline: object) -> Pipeline:
    if not isinstance(pipeline, Pipeline):
        raise InvalidTypeError("pipeline", pipeline, "a Pipeline")
    return pipeline


def _items(items: object) -> list[ContextItem]:
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidTypeError("items", items, "a sequence of ContextItem")
    return list(items)


def _budget(pipeline: Pipeline, budget: object) -> ContextBudget:
    resolved = pipeline.budget if budget is None else budget
    if resolved is None:
        raise ConfigurationError("budget", None, "pass a budget, or give the pipeline one")
    if not isinstance(resolved, ContextBudget):
        raise InvalidTypeError("budget", resolved, "a ContextBudget")
    return resolved


def _int(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(field, value, "an int")
    return value


def get_marginal_items(pipeline: Pipeline, items: Sequence[ContextItem],
                       budget: ContextBudget, slack_tokens: int) -> list[ContextItem]:
    """The spec's ``GetMarginalItems``: the items a dry run at ``budget`` includes
    that a dry run at the budget reduced by ``slack_tokens`` does not, in the full
    run's placed order, compared by identity (``primary \\ margin``).

    The reduced budget takes ``slack_tokens`` off both ``max_tokens`` and
    ``target_tokens`` and keeps ``output_reserve``, ``reserved_slots`` and the
    safety margin. ``budget`` overrides the pipeline's own for both dry runs.

    Raises :class:`~cupellation.exceptions.NonMonotonicSlicerError` with the
    chapter's message when the slicer is a :class:`~cupellation.QuotaSlice`, and
    ``InvalidValueError`` naming ``slack_tokens`` when it is negative, above
    ``target_tokens``, or leaves less than ``output_reserve``.
    """
    pipeline = _pipeline(pipeline)
    if isinstance(pipeline.slicer, QuotaSlice):
        raise NonMonotonicSlicerError(MARGINAL_GUARD_MESSAGE, pipeline.slicer)
    candidates = _items(items)
    full = _budget(pipeline, budget)
    slack = _int("slack_tokens", slack_tokens)
    if not 0 <= slack <= full.target_tokens:
        raise InvalidValueError("slack_tokens", slack,
                                f"must be within [0, target_tokens] ([0, {full.target_tokens}])")
    if full.max_tokens - slack < full.output_reserve:
        raise InvalidValueError("slack_tokens", slack,
                                f"leaves max_tokens {full.max_tokens - slack}, below "
                                f"output_reserve ({full.output_reserve})")
    reduced = ContextBudget(full.max_tokens - slack, full.target_tokens - slack,
                            full.output_reserve, full.reserved_slots,
                            full.estimation_safety_margin_percent)
    prepared = pipeline.prepare(candidates)
    primary = prepared.run(full)
    margin = {id(item) for item in prepared.select(reduced)}
    return [item for item in primary if id(item) not in margin]


def scaled_budget(budget: ContextBudget, max_tokens: int) -> ContextBudget:
    """``budget`` resized to ``max_tokens``, as :func:`find_min_budget_for` tries it:
    ``target_tokens`` keeps its ratio to ``max_tokens`` (rounded down: ``max_tokens
    * target // max``; the whole of ``max_tokens`` when the budget's max is 0);
    ``output_reserve`` (at most ``max_tokens``), ``reserved_slots`` and the safety
    margin are kept."""
    size = _int("max_tokens", max_tokens)
    if size < 0:
        raise InvalidValueError("max_tokens", size, "must be >= 0")
    target = size if budget.max_tokens == 0 else size * budget.target_tokens // budget.max_tokens
    return ContextBudget(size, target, min(budget.output_reserve, size), budget.reserved_slots,
                         budget.estimation_safety_margin_percent)


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSearch:
    """What a budget search found: ``budget`` (the smallest ``max_tokens`` in
    ``[low, ceiling]`` that includes the item, or None), the search range, and
    ``dry_runs``, the dry runs it took; ``excluded_before_slice`` is True when the
    item never reaches the slicer (deduplicated against a copy, or negative
    tokens), so no budget can include it and no dry run was needed."""

    budget: int | None
    low: int
    ceiling: int
    dry_runs: int
    excluded_before_slice: bool


def _checked_search(pipeline: Pipeline, candidates: list[ContextItem],
                    target_item: ContextItem, base: ContextBudget,
                    search_ceiling: int | None) -> int:
    """The search's ceiling, once the chapter's argument checks pass: the target is
    one of the candidates, the ceiling holds its tokens, and the slicer's inclusion
    grows with the budget (else the error the specification names)."""
    ceiling = base.max_tokens if search_ceiling is None else _int("search_ceiling",
                                                                   search_ceiling)
    if not any(candidate is target_item for candidate in candidates):
        raise SpecArgumentError(_NOT_AN_ELEMENT, field="target_item", value=target_item)
    if ceiling < target_item.tokens:
        raise SpecArgumentError(_CEILING_BELOW_TOKENS, field="search_ceiling", value=ceiling)
    slicer = pipeline.slicer
    if isinstance(slicer, QuotaSlice | CountQuotaSlice | CountConstrainedKnapsackSlice):
        raise NonMonotonicSlicerError(FIND_MIN_BUDGET_GUARD_MESSAGE, slicer)
    return ceiling


def _prepared(pipeline: Pipeline, candidates: list[ContextItem],
              prepared: PreparedCandidates | None) -> PreparedCandidates:
    """``prepared`` when it is this pipeline's preparation of exactly these
    candidates (the same objects, in order); else a new one."""
    if prepared is None or prepared.pipeline is not pipeline or len(
            prepared.candidates) != len(candidates) or not all(
            a is b for a, b in zip(prepared.candidates, candidates, strict=True)):
        return pipeline.prepare(candidates)
    return prepared


def search_min_budget(pipeline: Pipeline, items: Sequence[ContextItem],
                      target_item: ContextItem, search_ceiling: int | None = None, *,
                      budget: ContextBudget | None = None,
                      prepared: PreparedCandidates | None = None,
                      above: int | None = None) -> BudgetSearch:
    """:func:`find_min_budget_for` with the details of its search (see there);
    ``prepared`` reuses a :meth:`~cupellation.Pipeline.prepare` of ``items``;
    ``above`` searches only budgets greater than it (``why`` asks what *more*
    budget would have kept an item)."""
    pipeline = _pipeline(pipeline)
    candidates = _items(items)
    if not isinstance(target_item, ContextItem):
        raise InvalidTypeError("target_item", target_item, "a ContextItem")
    base = _budget(pipeline, budget)
    ceiling = _checked_search(pipeline, candidates, target_item, base, search_ceiling)
    prepared = _prepared(pipeline, candidates, prepared)
    before = prepared.dry_runs
    low_bound = max(target_item.tokens, 0)
    reaches_slicer = target_item.pinned or any(
        item is target_item for item in prepared.ranked)
    if target_item.tokens < 0 or not reaches_slicer:
        return BudgetSearch(budget=None, low=low_bound, ceiling=ceiling, dry_runs=0,
                            excluded_before_slice=True)

    def included(size: int) -> bool:
        try:
            selected = prepared.select(scaled_budget(base, size))
        except (PinnedBudgetError, BudgetOverflowError):
            return False  # the pinned items alone do not fit this budget
        return any(item is target_item for item in selected)

    # The chapter's loop never tries its lower bound: starting one below the
    # item's tokens (a budget that cannot hold it) makes [tokens, ceiling] whole.
    low, high = low_bound - 1, ceiling
    if above is not None:
        low = max(low, _int("above", above))
        if low >= high:
            return BudgetSearch(budget=None, low=low + 1, ceiling=ceiling, dry_runs=0,
                                excluded_before_slice=False)
    high_known = False
    while high - low > 1:
        mid = low + (high - low) // 2
        if included(mid):
            high, high_known = mid, True
        else:
            low = mid
    found = high if high_known or included(high) else None
    return BudgetSearch(budget=found, low=low_bound, ceiling=ceiling,
                        dry_runs=prepared.dry_runs - before, excluded_before_slice=False)


def find_min_budget_for(pipeline: Pipeline, items: Sequence[ContextItem],
                        target_item: ContextItem, search_ceiling: int | None = None, *,
                        budget: ContextBudget | None = None) -> int | None:
    """The spec's ``FindMinBudgetFor``: the smallest ``max_tokens`` within
    ``[target_item.tokens, search_ceiling]`` at which a dry run includes
    ``target_item`` (an element of ``items``, by identity), or None.

    ``budget`` (default: the pipeline's) is the run's budget: each budget tried is
    :func:`scaled_budget` of it, so ``target_tokens`` keeps its ratio to
    ``max_tokens``; ``search_ceiling`` defaults to its ``max_tokens``. The search
    is binary (about ``log2(search_ceiling - target_item.tokens)`` dry runs, plus
    one at the ceiling when nothing below it was tried with success); Score,
    Deduplicate and Sort run once for all of them. A budget at which the pinned
    items alone do not fit (PinnedBudgetError, or the Throw overflow strategy)
    counts as not including the item.

    The answer always includes the item (a dry run at it did). It is the smallest
    when inclusion is monotonic in the budget, as the chapter assumes of GreedySlice
    and KnapsackSlice; GreedySlice is not strictly so (a larger budget can let a
    denser, larger item take the room: an item of 10 tokens kept at 50 and left out
    at 100 beside one of 95), and the search may then answer a larger budget.

    Raises :class:`~cupellation.exceptions.SpecArgumentError` with the chapter's
    messages (``"targetItem must be an element of items"``, ``"searchCeiling must
    be >= targetItem.Tokens"``) and
    :class:`~cupellation.exceptions.NonMonotonicSlicerError` with its guard's
    message for a QuotaSlice, CountQuotaSlice or CountConstrainedKnapsackSlice.
    """
    return search_min_budget(pipeline, items, target_item, search_ceiling,
                             budget=budget).budget


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetPoint:
    """One budget of :func:`budget_sweep`: the budget tried and the dry run's report
    there (``report``), or why the run failed (``failure``: the pinned items alone
    exceed it, the Throw overflow strategy, ...).

    .. versionadded:: 0.4
    """

    budget: ContextBudget
    report: SelectionReport | None
    failure: str | None


def budget_sweep(pipeline: Pipeline, items: Sequence[ContextItem], budgets: Sequence[int], *,
                 budget: ContextBudget | None = None) -> list[BudgetPoint]:
    """A dry run of ``pipeline`` over ``items`` at each of ``budgets`` (values of
    ``max_tokens``, each :func:`scaled_budget` of ``budget``, default the pipeline's,
    or ``max_tokens`` alone when neither gives one), in the order given: what is kept
    at each budget, and why each item left out was (``cupellation simulate``).

    .. versionadded:: 0.4
    """
    pipeline = _pipeline(pipeline)
    candidates = _items(items)
    if isinstance(budgets, str | bytes) or not isinstance(budgets, Sequence):
        raise InvalidTypeError("budgets", budgets, "a sequence of int")
    base = budget if budget is not None else pipeline.budget
    if base is not None and not isinstance(base, ContextBudget):
        raise InvalidTypeError("budget", base, "a ContextBudget")
    points: list[BudgetPoint] = []
    for size in budgets:
        tried = scaled_budget(ContextBudget(size, size) if base is None else base, size)
        try:
            report = pipeline.dry_run(candidates, tried)
        except CupelError as exc:
            points.append(BudgetPoint(budget=tried, report=None, failure=str(exc)))
            continue
        points.append(BudgetPoint(budget=tried, report=report, failure=None))
    return points
