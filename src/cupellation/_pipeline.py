"""The fixed six-stage pipeline (``spec/src/pipeline*``): Classify, Score,
Deduplicate, Sort, Slice, Place — emitting the event stream as it runs."""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import attrgetter
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt
from opentelemetry import trace as otel_trace

from ._attribution import (
    Decisions,
    Merged,
    Pinned,
    Ranked,
    Sliced,
    deduplicated,
    inclusions,
    negative_tokens,
    slice_exclusions,
    truncation_exclusions,
)
from ._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    TraceCollector,
    TraceDetailLevel,
    check_collector,
)
from ._model import ContextBudget, ContextItem, OverflowStrategy, ScoredItems
from ._registry import (
    build_placer,
    build_scorer,
    build_slicer,
    describe_placer,
    describe_scorer,
    describe_slicer,
    strategy_json,
)
from ._report import SelectionReport
from ._tables import bool_value, built, check_keys, table
from .events import (
    CountShortfall,
    ItemEventBatch,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunInfo,
    RunStarted,
    StageCompleted,
    StageStarted,
)
from .exceptions import (
    BudgetOverflowError,
    ConfigurationError,
    DecodeError,
    InvalidTypeError,
    PinnedBudgetError,
    PipelineError,
    ScorerError,
)
from .placing import ChronologicalPlacer, Placer
from .scoring import Clock, Scorer, score_array
from .slicing import GreedySlice, SliceOutcome, Slicer, slice_with_details
from .slicing._greedy import greedy_density_order, greedy_take

__all__ = ["Pipeline", "PreparedCandidates"]

_logger = logging.getLogger("cupellation")

#: The keys of a recorded policy (``run_started.pipeline``, :meth:`Pipeline.policy`).
_POLICY_KEYS = ("scorer", "slicer", "placer", "deduplication", "overflow_strategy")

_TOKENS = attrgetter("tokens")
_PINNED = attrgetter("pinned")
_CLASSIFY = PipelineStage.CLASSIFY
_SCORE = PipelineStage.SCORE
_DEDUPLICATE = PipelineStage.DEDUPLICATE
_SORT = PipelineStage.SORT
_SLICE = PipelineStage.SLICE
_PLACE = PipelineStage.PLACE


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _name(strategy: object) -> str:
    """How errors name a strategy: its repr when short (``FunctionScorer(odd)``),
    otherwise its type."""
    text = repr(strategy)
    return text if len(text) <= 80 and "object at 0x" not in text else type(strategy).__name__


@dataclass(frozen=True, slots=True, init=False)
class Pipeline:
    """A configured Cupel pipeline: immutable, reusable and safe to share.

    Configure it once, then call :meth:`run` per request with the candidates,
    optionally a budget (overriding ``budget``) and a collector::

        pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(8000, 6000))
        window = pipeline.run(candidates)

    ``slicer`` defaults to :class:`GreedySlice`, ``placer`` to
    :class:`ChronologicalPlacer`; ``with_*`` methods return modified copies.
    """

    scorer: Scorer
    slicer: Slicer
    placer: Placer
    deduplication: bool
    overflow_strategy: OverflowStrategy
    budget: ContextBudget | None
    #: describe()'s answer, made when first asked: the strategies are immutable.
    _description: Mapping[str, str | bool] | None = field(init=False, repr=False,
                                                          compare=False)

    def __init__(
        self,
        scorer: Scorer,
        slicer: Slicer | None = None,
        placer: Placer | None = None,
        *,
        deduplication: bool = True,
        overflow_strategy: OverflowStrategy | str = OverflowStrategy.THROW,
        budget: ContextBudget | None = None,
    ) -> None:
        slicer = GreedySlice() if slicer is None else slicer
        placer = ChronologicalPlacer() if placer is None else placer
        for name, strategy in (("scorer", scorer), ("slicer", slicer), ("placer", placer)):
            if isinstance(strategy, type):
                raise ConfigurationError(name, strategy,
                                         f"pass an instance: {strategy.__name__}()")
        if not callable(getattr(scorer, "score_all", None)):
            raise ConfigurationError("scorer", scorer, "must have a score_all(items) method")
        if not callable(getattr(slicer, "slice", None)):
            raise ConfigurationError("slicer", slicer, "must have a slice(scored, budget) method")
        if not callable(getattr(placer, "place", None)):
            raise ConfigurationError("placer", placer, "must have a place(items) method")
        if not isinstance(deduplication, bool):
            raise InvalidTypeError("deduplication", deduplication, "a bool")
        if budget is not None and not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget or None")
        set_ = object.__setattr__
        set_(self, "scorer", scorer)
        set_(self, "slicer", slicer)
        set_(self, "placer", placer)
        set_(self, "deduplication", deduplication)
        set_(self, "overflow_strategy", OverflowStrategy.parse(overflow_strategy))
        set_(self, "budget", budget)
        set_(self, "_description", None)

    @classmethod
    def from_policy(cls, policy: Mapping[str, Any], *, budget: ContextBudget | None = None,
                    clock: Clock | None = None) -> Pipeline:
        """The pipeline a recorded policy describes: ``run_started``'s ``pipeline``
        mapping (each strategy as JSON text, see :meth:`describe`) or the plain
        form :meth:`policy` returns; the inverse of both.

        ``budget`` becomes the pipeline's default budget (the record carries the
        run's budget separately). ``clock`` is the time provider of decay scorers
        whose table has no ``reference_time`` (default: the wall clock): such a
        scorer measured ages at the time of its run, which the record does not
        fix (``run_started.started_at`` is a good choice:
        ``clock=FixedClock(started_at)``).

        Only built-in strategies can be rebuilt: a custom one (a
        :class:`~cupellation.scoring.FunctionScorer`, a user's own slicer),
        recorded as ``{"type": "custom", "repr": ...}``, raises
        :class:`~cupellation.exceptions.CustomStrategyError` naming its path
        (``pipeline.scorer.children[1]``) and its repr. Other damage raises
        :class:`~cupellation.exceptions.DecodeError` (text that is not JSON) or
        ``InvalidValueError`` / ``InvalidTypeError`` naming the path.
        """
        data = table(policy, "pipeline")
        check_keys(data, "pipeline", _POLICY_KEYS, _POLICY_KEYS)
        return cls(
            build_scorer(_strategy_table(data, "scorer"), path="pipeline.scorer", clock=clock),
            build_slicer(_strategy_table(data, "slicer"), path="pipeline.slicer"),
            build_placer(_strategy_table(data, "placer"), path="pipeline.placer"),
            deduplication=bool_value(data["deduplication"], "pipeline.deduplication"),
            overflow_strategy=built("pipeline", lambda: OverflowStrategy.parse(
                data["overflow_strategy"])),
            budget=budget,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Rebuilt through __init__ (describe()'s cached mapping proxy cannot be
        # pickled, and is made again when asked).
        return (_rebuilt_pipeline, (self.scorer, self.slicer, self.placer, self.deduplication,
                                    self.overflow_strategy, self.budget))

    # -- configuration ------------------------------------------------------------

    def with_budget(self, budget: ContextBudget) -> Pipeline:
        """A copy with ``budget`` as the default budget."""
        return replace(self, budget=budget)

    def with_scorer(self, scorer: Scorer) -> Pipeline:
        """A copy with another scorer."""
        return replace(self, scorer=scorer)

    def with_slicer(self, slicer: Slicer) -> Pipeline:
        """A copy with another slicer."""
        return replace(self, slicer=slicer)

    def with_placer(self, placer: Placer) -> Pipeline:
        """A copy with another placer."""
        return replace(self, placer=placer)

    def with_overflow_strategy(self, strategy: OverflowStrategy | str) -> Pipeline:
        """A copy with another overflow strategy."""
        return replace(self, overflow_strategy=OverflowStrategy.parse(strategy))

    def with_deduplication(self, enabled: bool) -> Pipeline:
        """A copy with deduplication switched on or off."""
        return replace(self, deduplication=enabled)

    def describe(self) -> Mapping[str, str | bool]:
        """The configuration as ``run_started`` records it (a read-only mapping).

        ``scorer``, ``slicer`` and ``placer`` are each strategy's table
        (``to_dict()``) as compact JSON text with sorted keys, such as
        ``{"children":[{"type":"recency","weight":3.0},...],"type":"composite"}``;
        a strategy that is not a built-in is recorded as ``{"type":"custom",
        "repr":...}`` (its repr, 200 characters at most). ``deduplication`` is a
        bool and ``overflow_strategy`` the strategy's name. :meth:`from_policy`
        rebuilds the pipeline from it; :meth:`policy` is the same as plain data.
        """
        description = self._description
        if description is None:
            description = MappingProxyType({
                "scorer": strategy_json(describe_scorer(self.scorer)),
                "slicer": strategy_json(describe_slicer(self.slicer)),
                "placer": strategy_json(describe_placer(self.placer)),
                "deduplication": self.deduplication,
                "overflow_strategy": self.overflow_strategy.value,
            })
            object.__setattr__(self, "_description", description)
        return description

    def policy(self) -> dict[str, Any]:
        """The configuration as plain data: ``deduplication``, ``overflow_strategy``
        and the ``scorer``, ``slicer`` and ``placer`` tables (a custom strategy as
        ``{"type": "custom", "repr": ...}``).

        It is a policy file's table without name, description and budget:
        ``Policy.from_dict(pipeline.policy())`` gives the pipeline's policy when
        every strategy is a built-in, and :meth:`from_policy` the pipeline.
        """
        return {
            "deduplication": self.deduplication,
            "overflow_strategy": self.overflow_strategy.value,
            "scorer": describe_scorer(self.scorer),
            "slicer": describe_slicer(self.slicer),
            "placer": describe_placer(self.placer),
        }

    # -- running -------------------------------------------------------------------

    def dry_run(
        self, candidates: Iterable[ContextItem], budget: ContextBudget | None = None, *,
        run_info: RunInfo | None = None,
    ) -> SelectionReport:
        """Run with an Item-level diagnostic collector and return only the report.

        Errors (pinned items over budget, Throw overflow) still raise.
        """
        collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
        self.run(candidates, budget, collector, run_info=run_info)
        return collector.build_report()

    def prepare(self, candidates: Iterable[ContextItem]) -> PreparedCandidates:
        """Run Classify, Score, Deduplicate and Sort once over ``candidates``, untraced,
        and keep their results, so that :meth:`PreparedCandidates.select` can slice
        the same candidates at many budgets (budget simulation's dry runs: the
        budget changes none of those four stages' results).

        Raises what :meth:`run` raises for bad candidates or a failing scorer.
        """
        return PreparedCandidates(self, candidates)

    def run(
        self,
        candidates: Iterable[ContextItem],
        budget: ContextBudget | None = None,
        collector: TraceCollector | None = None,
        *,
        run_info: RunInfo | None = None,
    ) -> list[ContextItem]:
        """Select and order the candidates that fit ``budget``; returns the window.

        ``budget`` defaults to the pipeline's own. ``collector`` receives the
        run's events (none are built for the default null collector); ``run_info``
        is copied into the run's ``run_started``.

        Raises :class:`~cupellation.exceptions.PinnedBudgetError` when pinned
        items alone exceed ``max_tokens - output_reserve``,
        :class:`~cupellation.exceptions.BudgetOverflowError` under the Throw
        strategy, :class:`~cupellation.exceptions.ScorerError` for scores that
        are NaN, infinite or not real numbers (text, ``None``),
        :class:`~cupellation.exceptions.PipelineError` for a slicer or placer
        that returns ``None`` or items it was not given, and
        :class:`~cupellation.exceptions.InvalidTypeError` for ``candidates``
        that are not an iterable of ContextItem. A failed run still emits
        ``run_failed`` (carrying the exception object) and then re-raises its
        own exception. A collector that raises never changes the outcome: the
        failure is logged once on the ``cupellation`` logger and that collector
        gets nothing more from the run.
        """
        resolved = budget if budget is not None else self.budget
        if resolved is None:
            raise ConfigurationError("budget", None, "pass a budget to run() or to Pipeline()")
        if not isinstance(resolved, ContextBudget):
            raise InvalidTypeError("budget", resolved, "a ContextBudget")
        if collector is None:
            collector = NULL_COLLECTOR
        elif collector is not NULL_COLLECTOR:
            check_collector("collector", collector)
        if isinstance(candidates, list | tuple):
            items: Sequence[ContextItem] = candidates
        elif candidates is None or isinstance(candidates, str | bytes | Mapping) or (
                not isinstance(candidates, Iterable)):
            raise InvalidTypeError("candidates", candidates, "an iterable of ContextItem")
        else:
            items = list(candidates)
        level = _level_of(collector)
        if level is None:
            return _Run(self, items, resolved, collector, "", None, run_info).execute()
        run_id = _new_run_id()
        run = _Run(self, items, resolved, collector, run_id, level, run_info)
        start = time.perf_counter()
        try:
            return run.execute()
        except BaseException as exc:
            if run.enabled:
                run.deliver((RunFailed(
                    run_id=run_id, seq=run.next_seq(), stage=run.stage,
                    error_type=type(exc).__name__, error_text=_error_text(exc),
                    duration_ms=_ms(start), exception=exc),))
            raise  # the run's own exception, whatever the collector did


class PreparedCandidates:
    """A pipeline's Classify, Score, Deduplicate and Sort results over fixed
    candidates (:meth:`Pipeline.prepare`): the part of a run that no budget changes.

    :meth:`select` then runs Slice and the Place stage's overflow handling at a
    given budget, untraced: the items a run at that budget includes, exactly as
    :meth:`Pipeline.run` would (the same stage code), before placement orders
    them. :meth:`run` also places them. ``dry_runs`` counts the calls of either.
    """

    __slots__ = ("_greedy_order", "_pinned_idx", "_pinned_items", "_pinned_tokens", "_ranked",
                 "candidates", "dry_runs", "pipeline")

    def __init__(self, pipeline: Pipeline, candidates: Iterable[ContextItem]) -> None:
        if isinstance(candidates, list | tuple):
            items: Sequence[ContextItem] = candidates
        elif candidates is None or isinstance(candidates, str | bytes | Mapping) or (
                not isinstance(candidates, Iterable)):
            raise InvalidTypeError("candidates", candidates, "an iterable of ContextItem")
        else:
            items = list(candidates)
        self.pipeline = pipeline
        self.candidates = items
        self.dry_runs = 0
        run = _Run(pipeline, items, ContextBudget(0, 0), NULL_COLLECTOR, "", None)
        pinned_items, pinned_idx, scoreable, scoreable_idx = run._classify()
        scores = run._score_stage(scoreable, scoreable_idx)
        survivors = run._deduplicate_stage(scoreable, scoreable_idx, scores)
        self._ranked = run._sort_stage(scoreable, scoreable_idx, scores, survivors)
        self._pinned_items = pinned_items
        self._pinned_idx = pinned_idx
        self._pinned_tokens: int = sum(map(_TOKENS, pinned_items))
        # GreedySlice's visiting order depends on the scores, not the budget: made
        # once, each dry run is only its take loop (the same functions it runs).
        self._greedy_order: list[int] | None = None
        if type(pipeline.slicer) is GreedySlice and self._ranked.items:
            self._greedy_order = greedy_density_order(self._ranked.tokens,
                                                      self._ranked.scores)

    @property
    def ranked(self) -> list[ContextItem]:
        """The scoreable candidates that survived deduplication, in score order."""
        return list(self._ranked.items)

    @property
    def pinned(self) -> list[ContextItem]:
        """The pinned candidates, in candidate order."""
        return list(self._pinned_items)

    def select(self, budget: ContextBudget) -> list[ContextItem]:
        """The items a run at ``budget`` includes: pinned ones first, then the sliced
        ones in score order (Place's input, after its overflow handling).

        Raises :class:`~cupellation.exceptions.PinnedBudgetError` and
        :class:`~cupellation.exceptions.BudgetOverflowError` as :meth:`Pipeline.run`
        does at that budget.
        """
        return self._merged(budget).items

    def run(self, budget: ContextBudget) -> list[ContextItem]:
        """The window a run at ``budget`` returns: :meth:`select`'s items, placed."""
        merged = self._merged(budget)
        placer = self.pipeline.placer
        placed = _placed(placer, placer.place(ScoredItems._trusted(merged.items,
                                                                   merged.scores)))
        if len(placed) != len(merged.items):
            raise PipelineError(
                f"placer {_name(placer)} returned {len(placed)} items "
                f"for {len(merged.items)}: a placer must return a permutation of its input")
        return placed

    def _merged(self, budget: ContextBudget) -> Merged:
        if not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget")
        self.dry_runs += 1
        available = budget.max_tokens - budget.output_reserve
        if self._pinned_tokens > available:
            raise PinnedBudgetError(self._pinned_tokens, available)
        run = _Run(self.pipeline, self.candidates, budget, NULL_COLLECTOR, "", None)
        pinned = Pinned(self._pinned_items, self._pinned_idx, self._pinned_tokens, budget)
        ranked = self._ranked
        if self._greedy_order is None:
            sliced = run._slice_stage(ranked, pinned)
        else:
            effective = budget.effective(pinned.tokens)
            target = effective.target_tokens
            chosen = greedy_take(self._greedy_order, ranked.tokens, target) if target > 0 else []
            chosen.sort()
            items, tokens = ranked.items, ranked.tokens
            sliced = Sliced(SliceOutcome(tuple([items[k] for k in chosen])), chosen,
                            sum([tokens[k] for k in chosen]), effective)
        merged = run._merge(ranked, sliced, pinned)
        if merged.tokens > budget.target_tokens:
            merged = run._overflow(merged, pinned)
        return merged


class _Run:
    """The state of one pipeline run; ``execute`` walks the six stages.

    Items travel as parallel lists (items, scores, tokens, candidate indices)
    rather than as pairs, and each stage's item decisions go to the collector
    as one column-wise :class:`ItemEventBatch`: both matter at 100,000
    candidates, and the null path builds none of it. Why an item was left out
    or kept is worked out by the pure functions of ``_attribution``, from the
    small values the stages pass along.

    Every call into the collector goes through :meth:`deliver`, which numbers
    nothing and decides nothing: it only guards. A collector that raises is
    logged once and dropped for the rest of the run (``enabled`` turns off, so
    no further event is even built); the run itself never sees the error.
    """

    __slots__ = ("budget", "candidates", "collector", "enabled", "exclusions_on", "items_on",
                 "pipeline", "run_id", "run_info", "seq", "stage", "started")

    def __init__(self, pipeline: Pipeline, candidates: Sequence[ContextItem],
                 budget: ContextBudget, collector: TraceCollector, run_id: str,
                 level: TraceDetailLevel | None, run_info: RunInfo | None = None) -> None:
        if run_info is not None and not isinstance(run_info, RunInfo):
            raise InvalidTypeError("run_info", run_info, "a RunInfo or None")
        self.run_info = run_info
        self.pipeline = pipeline
        self.candidates = candidates
        self.budget = budget
        self.collector = collector
        self.run_id = run_id
        self.enabled = level is not None
        self.exclusions_on = level is not None and level >= TraceDetailLevel.STAGE_AND_EXCLUSIONS
        self.items_on = level is not None and level >= TraceDetailLevel.FULL
        self.seq = 0
        self.stage: PipelineStage | None = None
        self.started = 0.0

    # -- delivery -----------------------------------------------------------------------

    def deliver(self, events: Sequence[PipelineEvent]) -> None:
        """Hand ``events`` to the collector; a collector that raises is dropped."""
        try:
            self.collector.record(events)
        except Exception:
            _logger.exception(
                "cupellation: collector %r raised on %s of run %s; it gets nothing more "
                "from this run, which carries on", self.collector,
                events[0].type if events else "an empty batch", self.run_id)
            self.enabled = self.exclusions_on = self.items_on = False

    def next_seq(self) -> int:
        seq = self.seq
        self.seq = seq + 1
        return seq

    def _decisions(self, stage: PipelineStage | None, decisions: Decisions) -> None:
        """Deliver one stage's item decisions as a batch (none when there are none)."""
        batch = ItemEventBatch(run_id=self.run_id, first_seq=self.seq, stage=stage,
                               candidate_indices=decisions.indices, items=decisions.items,
                               scores=decisions.scores, reasons=decisions.reasons,
                               positions=decisions.positions)
        if batch:
            self.seq += len(batch)
            self.deliver(batch)

    def _stage_start(self, stage: PipelineStage, items_in: int) -> float:
        self.stage = stage
        if self.enabled:
            self.deliver((StageStarted(run_id=self.run_id, seq=self.next_seq(), stage=stage,
                                       items_in=items_in),))
        return time.perf_counter()

    def _stage_done(self, stage: PipelineStage, start: float, items_in: int,
                    items_out: int) -> None:
        if self.enabled:
            self.deliver((StageCompleted(run_id=self.run_id, seq=self.next_seq(), stage=stage,
                                         duration_ms=_ms(start), items_in=items_in,
                                         items_out=items_out),))

    # -- the run ------------------------------------------------------------------------

    def execute(self) -> list[ContextItem]:
        """Run the six stages and return the placed items."""
        self._run_started()
        pinned, scoreable, scoreable_idx = self._classify_stage()
        scores = self._score_stage(scoreable, scoreable_idx)
        survivors = self._deduplicate_stage(scoreable, scoreable_idx, scores)
        ranked = self._sort_stage(scoreable, scoreable_idx, scores, survivors)
        sliced = self._slice_stage(ranked, pinned)
        placed = self._place_stage(ranked, sliced, pinned)
        self._run_completed(placed)
        return placed

    def _run_started(self) -> None:
        self.started = time.perf_counter()
        if not self.enabled:
            return
        trace_id, span_id = _current_span_ids()
        detail = (TraceDetailLevel.FULL if self.items_on
                  else TraceDetailLevel.STAGE_AND_EXCLUSIONS if self.exclusions_on
                  else TraceDetailLevel.STAGE_ONLY)
        self.deliver((RunStarted(
            run_id=self.run_id, seq=self.next_seq(), started_at=datetime.now(UTC),
            budget=self.budget, pipeline=self.pipeline.describe(),
            candidate_count=len(self.candidates),
            candidate_tokens=_candidate_tokens(self.candidates), detail_level=detail.tier,
            trace_id=trace_id, span_id=span_id,
            **({} if self.run_info is None else self.run_info.to_dict())),))

    def _run_completed(self, placed: list[ContextItem]) -> None:
        self.stage = None
        if self.enabled:
            self.deliver((RunCompleted(
                run_id=self.run_id, seq=self.next_seq(), duration_ms=_ms(self.started),
                included_count=len(placed), included_tokens=sum(map(_TOKENS, placed)),
                excluded_count=len(self.candidates) - len(placed)),))

    # -- 1. Classify ----------------------------------------------------------------------

    def _classify_stage(self) -> tuple[Pinned, list[ContextItem], list[int]]:
        """Split the candidates into pinned and scoreable items (negative token
        counts are excluded); refuse pinned items over ``max_tokens - output_reserve``."""
        budget = self.budget
        count = len(self.candidates)
        start = self._stage_start(_CLASSIFY, count)
        pinned_items, pinned_idx, scoreable, scoreable_idx = self._classify()
        pinned = Pinned(pinned_items, pinned_idx, sum(map(_TOKENS, pinned_items)), budget)
        # The specification compares pinned tokens with maxTokens - outputReserve
        # only; reserved slots belong to the Slice stage's effective budget.
        available_for_pinned = budget.max_tokens - budget.output_reserve
        if pinned.tokens > available_for_pinned:
            raise PinnedBudgetError(pinned.tokens, available_for_pinned)
        self._stage_done(_CLASSIFY, start, count, len(pinned_items) + len(scoreable))
        return pinned, scoreable, scoreable_idx

    def _classify(self) -> tuple[list[ContextItem], list[int], list[ContextItem], list[int]]:
        candidates = self.candidates
        # The common case — only real items, none negative, few pinned — settled
        # by C-level passes (map, set, min) instead of one branching Python loop.
        if set(map(type, candidates)) <= {ContextItem} and (
                not candidates or min(map(_TOKENS, candidates)) >= 0):
            if not any(map(_PINNED, candidates)):
                return [], [], list(candidates), list(range(len(candidates)))
            pinned_at = [k for k, item in enumerate(candidates) if item.pinned]
            is_pinned = set(pinned_at)
            scoreable_at = [k for k in range(len(candidates)) if k not in is_pinned]
            return ([candidates[k] for k in pinned_at], pinned_at,
                    [candidates[k] for k in scoreable_at], scoreable_at)
        pinned: list[ContextItem] = []
        pinned_idx: list[int] = []
        scoreable: list[ContextItem] = []
        scoreable_idx: list[int] = []
        negative: list[int] = []
        for index, item in enumerate(candidates):
            if type(item) is not ContextItem and not isinstance(item, ContextItem):
                raise InvalidTypeError(f"candidates[{index}]", item, "a ContextItem")
            if item.tokens < 0:
                negative.append(index)
            elif item.pinned:
                pinned.append(item)
                pinned_idx.append(index)
            else:
                scoreable.append(item)
                scoreable_idx.append(index)
        if self.exclusions_on and negative:
            self._decisions(_CLASSIFY, negative_tokens(candidates, negative))
        return pinned, pinned_idx, scoreable, scoreable_idx

    # -- 2. Score -------------------------------------------------------------------------

    def _score_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int]
                     ) -> npt.NDArray[np.float64]:
        count = len(scoreable)
        start = self._stage_start(_SCORE, count)
        scores = _checked_scores(self.pipeline.scorer, scoreable, scoreable_idx)
        self._stage_done(_SCORE, start, count, count)
        return scores

    # -- 3. Deduplicate -------------------------------------------------------------------

    def _deduplicate_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int],
                           scores: npt.NDArray[np.float64]) -> list[int] | None:
        """Positions that survive, in input order; None when nothing was removed."""
        count = len(scoreable)
        start = self._stage_start(_DEDUPLICATE, count)
        best = (_best_of_each_content(scoreable, scores)
                if self.pipeline.deduplication else None)
        survivors = None
        if best is not None:
            survivors = [p for p, item in enumerate(scoreable) if best[item.content] == p]
            if self.exclusions_on:
                self._decisions(_DEDUPLICATE, deduplicated(scoreable, scoreable_idx,
                                                           scores.tolist(), best))
        self._stage_done(_DEDUPLICATE, start, count,
                         count if survivors is None else len(survivors))
        return survivors

    # -- 4. Sort --------------------------------------------------------------------------

    def _sort_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int],
                    scores: npt.NDArray[np.float64], survivors: list[int] | None) -> Ranked:
        count = len(scoreable) if survivors is None else len(survivors)
        start = self._stage_start(_SORT, count)
        # A stable sort of the negated scores is (score desc, index asc), P1.
        if survivors is None:
            order_arr = np.argsort(-scores, kind="stable")
        else:
            kept = np.asarray(survivors, dtype=np.intp)
            order_arr = kept[np.argsort(-scores[kept], kind="stable")]
        order: list[int] = order_arr.tolist()
        # Token counts travel beside the items, read once in input order: the
        # later stages then need not chase every item in score order again.
        scoreable_tokens = list(map(_TOKENS, scoreable))
        ranked = Ranked([scoreable[p] for p in order], scores[order_arr].tolist(),
                        [scoreable_tokens[p] for p in order], order, scoreable_idx)
        self._stage_done(_SORT, start, count, count)
        return ranked

    # -- 5. Slice -------------------------------------------------------------------------

    def _slice_stage(self, ranked: Ranked, pinned: Pinned) -> Sliced:
        slicer = self.pipeline.slicer
        count = len(ranked.items)
        start = self._stage_start(_SLICE, count)
        effective = self.budget.effective(pinned.tokens)
        outcome = slice_with_details(
            slicer, ScoredItems._trusted(ranked.items, ranked.scores, ranked.tokens), effective)
        chosen = _positions(outcome.selected, ranked.items, f"slicer {_name(slicer)}")
        chosen.sort()  # back to score order, as Place's merge expects
        tokens = ranked.tokens  # a local: the comprehension reads it per item
        sliced = Sliced(outcome, chosen, sum([tokens[k] for k in chosen]), effective)
        if self.enabled:
            for shortfall in outcome.shortfalls:
                self.deliver((CountShortfall(
                    run_id=self.run_id, seq=self.next_seq(), kind=str(shortfall.kind),
                    required_count=shortfall.required_count,
                    satisfied_count=shortfall.satisfied_count),))
        if self.exclusions_on:
            self._decisions(_SLICE, slice_exclusions(ranked, sliced, pinned))
        self._stage_done(_SLICE, start, count, len(chosen))
        return sliced

    # -- 6. Place -------------------------------------------------------------------------

    def _place_stage(self, ranked: Ranked, sliced: Sliced, pinned: Pinned
                     ) -> list[ContextItem]:
        placer = self.pipeline.placer
        count = len(pinned.items) + len(sliced.chosen)
        start = self._stage_start(_PLACE, count)
        merged = self._merge(ranked, sliced, pinned)
        if merged.tokens > self.budget.target_tokens:
            merged = self._overflow(merged, pinned)
        placed = _placed(placer, placer.place(ScoredItems._trusted(merged.items, merged.scores)))
        if len(placed) != len(merged.items):
            raise PipelineError(
                f"placer {_name(placer)} returned {len(placed)} items "
                f"for {len(merged.items)}: a placer must return a permutation of its input"
            )
        if self.items_on:
            where = _positions(placed, merged.items, f"placer {_name(placer)}")
            self._decisions(None, inclusions(placed, where, merged, len(pinned.items)))
        self._stage_done(_PLACE, start, count, len(placed))
        return list(placed)

    def _merge(self, ranked: Ranked, sliced: Sliced, pinned: Pinned) -> Merged:
        """Pinned items (score 1.0) then the sliced ones, in score order; candidate
        indices only when something will ask for them."""
        chosen = sliced.chosen
        tokens = pinned.tokens + sliced.tokens
        indices: list[int] = []
        if self.exclusions_on or (self.enabled and tokens > self.budget.target_tokens):
            order, scoreable_idx = ranked.order, ranked.scoreable_idx
            indices = pinned.indices + [scoreable_idx[order[k]] for k in chosen]
        # Locals, not attributes, inside the comprehensions: they run per item.
        items, scores = ranked.items, ranked.scores
        return Merged(pinned.items + [items[k] for k in chosen],
                      [1.0] * len(pinned.items) + [scores[k] for k in chosen], indices, tokens)

    def _overflow(self, merged: Merged, pinned: Pinned) -> Merged:
        """The merged items over ``target_tokens``, by the overflow strategy: Throw
        raises, Proceed reports and keeps all, Truncate keeps pinned items always
        and the others while they fit, in merged order."""
        budget = self.budget
        strategy = self.pipeline.overflow_strategy
        target = budget.target_tokens
        if strategy is OverflowStrategy.THROW:
            raise BudgetOverflowError(merged.tokens, target)
        if strategy is OverflowStrategy.PROCEED:
            if self.enabled:
                self.deliver((Overflow(
                    run_id=self.run_id, seq=self.next_seq(),
                    tokens_over_budget=merged.tokens - target,
                    item_indices=tuple(merged.indices), budget=budget),))
            return merged
        kept, removed, kept_tokens, pinned_kept = _truncate(merged.items, target)
        if self.exclusions_on and removed:
            self._decisions(_PLACE, truncation_exclusions(merged, removed, kept_tokens,
                                                          pinned_kept, pinned))
        return Merged(items=[merged.items[k] for k in kept],
                      scores=[merged.scores[k] for k in kept],
                      indices=[merged.indices[k] for k in kept] if merged.indices else [],
                      tokens=kept_tokens)


def _checked_scores(scorer: Scorer, scoreable: list[ContextItem],
                    scoreable_idx: list[int]) -> npt.NDArray[np.float64]:
    """The scorer's scores of ``scoreable``, checked: a ScorerError names the
    candidate index of a score that is not a finite real number."""
    if not scoreable:
        return np.zeros(0, dtype=np.float64)
    try:
        scores = score_array(_name(scorer), scorer.score_all(scoreable), len(scoreable))
    except OverflowError as exc:
        # A Python int beyond float64's range, met inside the scorer.
        raise ScorerError(_name(scorer), None,
                          f"returned a number outside float64's range ({exc})") from exc
    except ScorerError as exc:
        # Scorers (and composites' children) name the position among the items
        # they were given, the scoreable ones: say which candidate that is.
        if exc.index is None or not 0 <= exc.index < len(scoreable_idx):
            raise
        raise ScorerError(exc.scorer, scoreable_idx[exc.index], exc.detail) from exc
    except (TypeError, ValueError) as exc:
        # A scorer that fails on the items it was given: named as a ScorerError,
        # with its own exception as the cause.
        raise ScorerError(_name(scorer), None,
                          f"raised {type(exc).__name__}: {exc}") from exc
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ScorerError(_name(scorer), scoreable_idx[bad],
                          f"returned {scores[bad]!r} (scores must be finite)")
    return scores


def _best_of_each_content(scoreable: list[ContextItem], scores: npt.NDArray[np.float64]
                          ) -> dict[str, int] | None:
    """For each content, the position of the item that keeps it (the best score;
    on equal scores the earlier item, P3); None when every content is distinct."""
    if not scoreable:
        return None
    contents = [item.content for item in scoreable]
    if len(set(contents)) == len(contents):
        return None  # the common case, settled by one set of (cached) string hashes
    score_list: list[float] = scores.tolist()
    best: dict[str, int] = {}
    for position, content in enumerate(contents):
        held = best.get(content)
        # Strictly greater: on equal scores the earlier item stays (P3 tie rule).
        if held is None or score_list[position] > score_list[held]:
            best[content] = position
    return best


def _truncate(items: list[ContextItem], target: int) -> tuple[list[int], list[int], int, int]:
    """Truncate: the merged positions kept (pinned items always, others while they
    fit, in merged order) and removed, the kept tokens, and how many are pinned."""
    kept: list[int] = []
    removed: list[int] = []
    current = 0
    pinned_kept = 0
    for position, item in enumerate(items):
        tokens = item.tokens
        if item.pinned:
            pinned_kept += tokens
        elif current + tokens > target:
            removed.append(position)
            continue
        kept.append(position)
        current += tokens
    return kept, removed, current, pinned_kept


_run_numbers = itertools.count()
_run_prefix = os.urandom(8).hex()


def _reset_run_ids_after_fork() -> None:
    global _run_numbers, _run_prefix  # noqa: PLW0603 - a forked child must not repeat ids
    _run_numbers = itertools.count()
    _run_prefix = os.urandom(8).hex()


os.register_at_fork(after_in_child=_reset_run_ids_after_fork)


def _new_run_id() -> str:
    """32 hex digits: a random per-process prefix and a counter. As unique as a
    UUID4 across processes and runs, at a tenth of its cost."""
    return f"{_run_prefix}{next(_run_numbers):016x}"


def _level_of(collector: TraceCollector) -> TraceDetailLevel | None:
    """The level a collector records at, or None when it is disabled. A collector
    whose ``is_enabled`` or ``detail_level`` raises is logged and treated as
    disabled: the run goes on untraced."""
    if collector is NULL_COLLECTOR:
        return None
    try:
        if not collector.is_enabled:
            return None
        return TraceDetailLevel.parse(collector.detail_level)
    except Exception:
        _logger.exception("cupellation: collector %r failed to say whether and how much it "
                          "records; the run goes on without it", collector)
        return None


def _current_span_ids() -> tuple[str | None, str | None]:
    """The W3C hex ids of the OpenTelemetry span current when the run starts, if any.

    Only the API is used: with no SDK configured there is no valid span and
    both are None.
    """
    context = otel_trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None, None
    return (otel_trace.format_trace_id(context.trace_id),
            otel_trace.format_span_id(context.span_id))


def _candidate_tokens(candidates: Sequence[ContextItem]) -> int:
    """Sum of the candidates' tokens for ``run_started``; stray objects count as 0
    (Classify reports them by index a moment later)."""
    try:
        return sum(map(_TOKENS, candidates))
    except (AttributeError, TypeError):
        return sum(c.tokens for c in candidates if isinstance(c, ContextItem))


def _error_text(exc: BaseException) -> str:
    """``str(exc)`` as text every sink can write: a lone surrogate (a file name
    decoded with surrogateescape, say) becomes its escape, and an exception whose
    ``__str__`` itself raises is named instead of hiding the run's own error."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() raised>"
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _rebuilt_pipeline(scorer: Scorer, slicer: Slicer, placer: Placer, deduplication: bool,
                      overflow_strategy: OverflowStrategy, budget: ContextBudget | None
                      ) -> Pipeline:
    """A pickled or copied :class:`Pipeline`, made again."""
    return Pipeline(scorer, slicer, placer, deduplication=deduplication,
                    overflow_strategy=overflow_strategy, budget=budget)


def _strategy_table(data: Mapping[str, Any], key: str) -> Any:
    """A recorded strategy: its table, or the JSON text of it (``run_started``'s form)."""
    value = data[key]
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"pipeline.{key}", value,
                          f"is not the JSON text of a strategy table ({exc.msg}); runs "
                          "recorded before cupellation 0.3.0 carry a repr, which cannot be "
                          "rebuilt") from None


def _placed(placer: Placer, placed: object) -> list[ContextItem]:
    """What ``placer.place`` returned, as a list; a placer that returned ``None`` (or
    anything but an iterable of items) raises PipelineError naming it."""
    if isinstance(placed, list):
        return placed
    if placed is None or isinstance(placed, str | bytes | Mapping) or not isinstance(
            placed, Iterable):
        raise PipelineError(f"placer {_name(placer)} returned {type(placed).__name__}, not "
                            "the list of its items in their final order")
    return list(placed)


def _positions(selected: Sequence[ContextItem], pool: list[ContextItem], who: str) -> list[int]:
    """Where each selected item sits in ``pool``, matched by identity.

    Raises :class:`PipelineError` when a stage returned an item it was not
    given, or returned one more often than it was given.
    """
    by_id = dict(zip(map(id, pool), range(len(pool)), strict=True))
    if len(by_id) == len(pool):
        try:
            # pop, not get: an item returned twice is caught as a KeyError.
            return list(map(by_id.pop, map(id, selected)))
        except KeyError:
            pass
    # The same object passed as several candidates (deduplication off), or a
    # misbehaving stage: hand out positions in order, and name the culprit.
    queues: dict[int, list[int]] = {}
    for k, item in enumerate(pool):
        queues.setdefault(id(item), []).append(k)
    positions: list[int] = []
    for item in selected:
        queue = queues.get(id(item))
        if not queue:
            raise PipelineError(f"{who} returned {item!r}, which was not among its inputs "
                                "(or returned it more often than it was given)")
        positions.append(queue.pop(0))
    return positions
