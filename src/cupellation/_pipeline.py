"""The fixed six-stage pipeline (``spec/src/pipeline*``): Classify, Score,
Deduplicate, Sort, Slice, Place — emitting the event stream as it runs."""

from __future__ import annotations

import itertools
import logging
import os
import time
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import accumulate, compress
from operator import attrgetter
from types import MappingProxyType
from typing import Any

import numpy as np
from opentelemetry import trace as otel_trace

from ._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    TraceCollector,
    TraceDetailLevel,
    check_collector,
)
from ._model import ContextBudget, ContextItem, ContextKind, OverflowStrategy, ScoredItems
from ._report import SelectionReport
from .events import (
    CountShortfall,
    ItemEventBatch,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageStarted,
)
from .exceptions import (
    BudgetOverflowError,
    ConfigurationError,
    InvalidTypeError,
    PinnedBudgetError,
    PipelineError,
    ScorerError,
)
from .placing import ChronologicalPlacer, Placer
from .reasons import (
    BudgetExceeded,
    CountCapExceeded,
    Deduplicated,
    ExclusionReason,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
)
from .scoring import Scorer, score_array
from .slicing import GreedySlice, SliceOutcome, Slicer, slice_with_details

__all__ = ["Pipeline"]

_logger = logging.getLogger("cupellation")

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
    #: describe()'s answer, made once: the strategies are immutable.
    _description: Mapping[str, Any] = field(init=False, repr=False, compare=False)

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
        set_(self, "_description", MappingProxyType({
            "scorer": repr(scorer),
            "slicer": repr(slicer),
            "placer": repr(placer),
            "deduplication": deduplication,
            "overflow_strategy": self.overflow_strategy.value,
        }))

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

    def describe(self) -> Mapping[str, Any]:
        """The configuration as JSON-native values (carried, read-only, by ``run_started``)."""
        return self._description

    # -- running -------------------------------------------------------------------

    def dry_run(
        self, candidates: Iterable[ContextItem], budget: ContextBudget | None = None
    ) -> SelectionReport:
        """Run with an Item-level diagnostic collector and return only the report.

        Errors (pinned items over budget, Throw overflow) still raise.
        """
        collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
        self.run(candidates, budget, collector)
        return collector.build_report()

    def run(
        self,
        candidates: Iterable[ContextItem],
        budget: ContextBudget | None = None,
        collector: TraceCollector | None = None,
    ) -> list[ContextItem]:
        """Select and order the candidates that fit ``budget``; returns the window.

        ``budget`` defaults to the pipeline's own. ``collector`` receives the
        run's events (none are built for the default null collector).

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
            return _Run(self, items, resolved, collector, "", None).execute()
        run_id = _new_run_id()
        run = _Run(self, items, resolved, collector, run_id, level)
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


class _Run:
    """The state of one pipeline run; ``execute`` walks the six stages.

    Items travel as parallel lists (items, scores, tokens, candidate indices)
    rather than as pairs, and each stage's item decisions go to the collector
    as one column-wise :class:`ItemEventBatch`: both matter at 100,000
    candidates, and the null path builds none of it.

    Every call into the collector goes through :meth:`deliver`, which numbers
    nothing and decides nothing: it only guards. A collector that raises is
    logged once and dropped for the rest of the run (``enabled`` turns off, so
    no further event is even built); the run itself never sees the error.
    """

    __slots__ = ("budget", "candidates", "collector", "enabled", "exclusions_on", "items_on",
                 "pipeline", "run_id", "seq", "stage")

    def __init__(self, pipeline: Pipeline, candidates: Sequence[ContextItem],
                 budget: ContextBudget, collector: TraceCollector, run_id: str,
                 level: TraceDetailLevel | None) -> None:
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

    def _batch(self, stage: PipelineStage | None, indices: Iterable[int],
               items: Iterable[ContextItem], scores: Iterable[float],
               reasons: Iterable[ExclusionReason] | Iterable[InclusionReason],
               positions: Iterable[int] | None = None) -> None:
        batch = ItemEventBatch(run_id=self.run_id, first_seq=self.seq, stage=stage,
                               candidate_indices=indices, items=items, scores=scores,
                               reasons=reasons, positions=positions)
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

    # -- the stages ---------------------------------------------------------------------

    def execute(self) -> list[ContextItem]:
        pipeline, budget, candidates = self.pipeline, self.budget, self.candidates
        run_start = time.perf_counter()
        if self.enabled:
            trace_id, span_id = _current_span_ids()
            self.deliver((RunStarted(
                run_id=self.run_id, seq=self.next_seq(), started_at=datetime.now(UTC),
                budget=budget, pipeline=pipeline.describe(), candidate_count=len(candidates),
                candidate_tokens=_candidate_tokens(candidates),
                detail_level=(TraceDetailLevel.FULL if self.items_on
                              else TraceDetailLevel.STAGE_AND_EXCLUSIONS if self.exclusions_on
                              else TraceDetailLevel.STAGE_ONLY).tier, trace_id=trace_id,
                span_id=span_id),))

        # -- 1. Classify ------------------------------------------------------------
        start = self._stage_start(_CLASSIFY, len(candidates))
        pinned, pinned_idx, scoreable, scoreable_idx = self._classify()
        pinned_tokens = sum(item.tokens for item in pinned)
        # The specification compares pinned tokens with maxTokens - outputReserve
        # only; reserved slots belong to the Slice stage's effective budget.
        available_for_pinned = budget.max_tokens - budget.output_reserve
        if pinned_tokens > available_for_pinned:
            raise PinnedBudgetError(pinned_tokens, available_for_pinned)
        self._stage_done(_CLASSIFY, start, len(candidates), len(pinned) + len(scoreable))

        # -- 2. Score ---------------------------------------------------------------
        count = len(scoreable)
        start = self._stage_start(_SCORE, count)
        scores = self._score(scoreable, scoreable_idx)
        score_list: list[float] = scores.tolist()
        self._stage_done(_SCORE, start, count, count)

        # -- 3. Deduplicate ---------------------------------------------------------
        start = self._stage_start(_DEDUPLICATE, count)
        survivors = self._deduplicate(scoreable, scoreable_idx, score_list)
        self._stage_done(_DEDUPLICATE, start, count,
                         count if survivors is None else len(survivors))

        # -- 4. Sort ----------------------------------------------------------------
        start = self._stage_start(_SORT, count if survivors is None else len(survivors))
        # A stable sort of the negated scores is (score desc, index asc), P1.
        if survivors is None:
            order_arr = np.argsort(-scores, kind="stable")
        else:
            kept = np.asarray(survivors, dtype=np.intp)
            order_arr = kept[np.argsort(-scores[kept], kind="stable")]
        order: list[int] = order_arr.tolist()
        sorted_items = [scoreable[p] for p in order]
        sorted_scores: list[float] = scores[order_arr].tolist()
        # Token counts travel beside the items, read once in input order: the
        # later stages then need not chase every item in score order again.
        scoreable_tokens = list(map(_TOKENS, scoreable))
        sorted_tokens = [scoreable_tokens[p] for p in order]
        self._stage_done(_SORT, start, len(order), len(order))

        # -- 5. Slice ---------------------------------------------------------------
        start = self._stage_start(_SLICE, len(sorted_items))
        effective = budget.effective(pinned_tokens)
        outcome = slice_with_details(
            pipeline.slicer, ScoredItems._trusted(sorted_items, sorted_scores, sorted_tokens),
            effective
        )
        chosen = _positions(outcome.selected, sorted_items, f"slicer {_name(pipeline.slicer)}")
        chosen.sort()  # back to score order, as Place's merge expects
        sliced_tokens = sum([sorted_tokens[k] for k in chosen])
        if self.enabled:
            self._report_slice(outcome, sorted_items, sorted_scores, sorted_tokens, chosen,
                               sliced_tokens, order, scoreable_idx, effective, pinned,
                               pinned_idx)
        self._stage_done(_SLICE, start, len(sorted_items), len(chosen))

        # -- 6. Place ---------------------------------------------------------------
        merged_in = len(pinned) + len(chosen)
        start = self._stage_start(_PLACE, merged_in)
        merged_items = pinned + [sorted_items[k] for k in chosen]
        merged_scores = [1.0] * len(pinned) + [sorted_scores[k] for k in chosen]
        merged_tokens = pinned_tokens + sliced_tokens
        overflowed = merged_tokens > budget.target_tokens
        merged_idx: list[int] = []
        if self.exclusions_on or (self.enabled and overflowed):
            merged_idx = pinned_idx + [scoreable_idx[order[k]] for k in chosen]
        if overflowed:
            merged_items, merged_scores, merged_idx = self._overflow(
                merged_items, merged_scores, merged_idx, merged_tokens, pinned, pinned_idx)
        placed = _placed(pipeline.placer,
                         pipeline.placer.place(ScoredItems._trusted(merged_items, merged_scores)))
        if len(placed) != len(merged_items):
            raise PipelineError(
                f"placer {_name(pipeline.placer)} returned {len(placed)} items "
                f"for {len(merged_items)}: a placer must return a permutation of its input"
            )
        if self.items_on:
            self._report_placed(placed, merged_items, merged_scores, merged_idx, len(pinned))
        self._stage_done(_PLACE, start, merged_in, len(placed))
        self.stage = None
        if self.enabled:
            self.deliver((RunCompleted(
                run_id=self.run_id, seq=self.next_seq(), duration_ms=_ms(run_start),
                included_count=len(placed), included_tokens=sum(map(_TOKENS, placed)),
                excluded_count=len(candidates) - len(placed)),))
        return list(placed)

    # -- stage helpers ------------------------------------------------------------------

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
        for index, item in enumerate(self.candidates):
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
            items = [candidates[k] for k in negative]
            self._batch(_CLASSIFY, negative, items, [0.0] * len(items),
                        [NegativeTokens(tokens=item.tokens) for item in items])
        return pinned, pinned_idx, scoreable, scoreable_idx

    def _score(self, scoreable: list[ContextItem], scoreable_idx: list[int]
               ) -> np.ndarray[Any, np.dtype[np.float64]]:
        scorer = self.pipeline.scorer
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

    def _deduplicate(self, scoreable: list[ContextItem], scoreable_idx: list[int],
                     score_list: list[float]) -> list[int] | None:
        """Positions that survive, in input order; None when nothing was removed."""
        if not self.pipeline.deduplication or not scoreable:
            return None
        contents = [item.content for item in scoreable]
        if len(set(contents)) == len(contents):
            return None  # the common case, settled by one set of (cached) string hashes
        best: dict[str, int] = {}
        for position, item in enumerate(scoreable):
            content = item.content
            held = best.get(content)
            # Strictly greater: on equal scores the earlier item stays (P3 tie rule).
            if held is None or score_list[position] > score_list[held]:
                best[content] = position
        if len(best) == len(scoreable):
            return None
        survivors = [p for p, item in enumerate(scoreable) if best[item.content] == p]
        if self.exclusions_on:
            dropped = [p for p, item in enumerate(scoreable) if best[item.content] != p]
            self._batch(_DEDUPLICATE, [scoreable_idx[p] for p in dropped],
                        [scoreable[p] for p in dropped], [score_list[p] for p in dropped],
                        [Deduplicated(deduplicated_against=scoreable_idx[
                            best[scoreable[p].content]]) for p in dropped])
        return survivors

    def _report_slice(self, outcome: SliceOutcome, sorted_items: list[ContextItem],
                      sorted_scores: list[float], sorted_tokens: list[int],
                      chosen: list[int], selected_tokens: int, order: list[int],
                      scoreable_idx: list[int], effective: ContextBudget,
                      pinned: list[ContextItem], pinned_idx: list[int]) -> None:
        for shortfall in outcome.shortfalls:
            self.deliver((CountShortfall(
                run_id=self.run_id, seq=self.next_seq(), kind=str(shortfall.kind),
                required_count=shortfall.required_count,
                satisfied_count=shortfall.satisfied_count),))
        if not self.exclusions_on:
            return
        target = effective.target_tokens
        available = max(0, target - selected_tokens)
        # PinnedOverride (pipeline/diag-pinned-override.toml): the item is over the
        # effective target, and not over the effective target with nothing pinned.
        unpinned_target = self.budget.effective(0).target_tokens
        # C-level passes (compress, map) rather than comprehensions: this runs
        # over every left-out candidate of every traced run.
        left_flags = bytearray(b"\x01") * len(sorted_items)
        for k in chosen:
            left_flags[k] = 0
        unchosen = list(compress(range(len(sorted_items)), left_flags))
        left_out = list(map(sorted_items.__getitem__, unchosen))
        tokens = list(map(sorted_tokens.__getitem__, unchosen))
        # Most are plain BudgetExceeded(tokens, available), and ``available`` is
        # the same for the whole stage: one shared (immutable) reason per
        # distinct token count, looked up without a Python loop. The few that a
        # count cap or the pinned items explain are replaced afterwards.
        shared = _BudgetExceededByTokens(available)
        reasons: list[ExclusionReason] = list(map(shared.__getitem__, tokens))
        special: set[int] = set()
        caps = {**dict(outcome.count_caps), **{c.kind: c.cap for c in outcome.cap_exclusions}}
        selected_by_kind: Counter[ContextKind] = Counter()
        if caps:
            selected_by_kind.update(sorted_items[k].kind for k in chosen)
            special.update(j for j, item in enumerate(left_out) if item.kind in caps)
        if pinned and tokens:
            window = np.asarray(tokens, dtype=np.int64)
            special.update(np.flatnonzero(
                (window > target) & (window <= unpinned_target)).tolist())
        pinned_prefix = list(accumulate(item.tokens for item in pinned))
        for j in sorted(special):
            item, item_tokens = left_out[j], tokens[j]
            cap = caps.get(item.kind)
            if (cap is not None and selected_by_kind[item.kind] >= cap
                    and item_tokens <= target):
                # Both reference implementations' rule: the kind is at its cap and
                # the item would otherwise fit.
                reasons[j] = CountCapExceeded(kind=item.kind.value, cap=cap,
                                              count=selected_by_kind[item.kind])
            elif pinned and target < item_tokens <= unpinned_target:
                reasons[j] = PinnedOverride(displaced_by=pinned_idx[_displacer(
                    pinned_prefix, item_tokens, self.budget)])
        self._batch(_SLICE, map(scoreable_idx.__getitem__, map(order.__getitem__, unchosen)),
                    left_out, map(sorted_scores.__getitem__, unchosen), reasons)

    def _overflow(self, items: list[ContextItem], scores: list[float], indices: list[int],
                  merged_tokens: int, pinned: list[ContextItem], pinned_idx: list[int]
                  ) -> tuple[list[ContextItem], list[float], list[int]]:
        budget = self.budget
        strategy = self.pipeline.overflow_strategy
        target = budget.target_tokens
        if strategy is OverflowStrategy.THROW:
            raise BudgetOverflowError(merged_tokens, target)
        if strategy is OverflowStrategy.PROCEED:
            if self.enabled:
                self.deliver((Overflow(
                    run_id=self.run_id, seq=self.next_seq(),
                    tokens_over_budget=merged_tokens - target, item_indices=tuple(indices),
                    budget=budget),))
            return items, scores, indices
        # Truncate: keep pinned items always, others while they fit, in merged order.
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
        if self.exclusions_on and removed:
            # Decided against the final state, so each reason reads the same
            # numbers as the report's totals.
            sliced_kept = current - pinned_kept
            pinned_prefix = list(accumulate(item.tokens for item in pinned))
            reasons: list[ExclusionReason] = []
            for position in removed:
                tokens = items[position].tokens
                if pinned_kept > 0 and sliced_kept + tokens <= target:
                    reasons.append(PinnedOverride(displaced_by=pinned_idx[_room_displacer(
                        pinned_prefix, target - sliced_kept - tokens)]))
                else:
                    reasons.append(BudgetExceeded(item_tokens=tokens,
                                                  available_tokens=max(0, target - current)))
            self._batch(_PLACE, [indices[p] for p in removed], [items[p] for p in removed],
                        [scores[p] for p in removed], reasons)
        return ([items[k] for k in kept], [scores[k] for k in kept],
                [indices[k] for k in kept] if indices else [])

    def _report_placed(self, placed: Sequence[ContextItem], merged_items: list[ContextItem],
                       merged_scores: list[float], merged_idx: list[int],
                       pinned_count: int) -> None:
        where = _positions(placed, merged_items, f"placer {_name(self.pipeline.placer)}")
        # Most placed items are Scored: start from that and patch the few that are
        # not (the pinned ones sit first in the merged list), with C-level passes.
        reasons: list[InclusionReason] = [InclusionReason.SCORED] * len(placed)
        scores = list(map(merged_scores.__getitem__, where))
        if pinned_count:
            placed_at = dict(zip(where, range(len(where)), strict=True))
            for k in range(pinned_count):
                reasons[placed_at[k]] = InclusionReason.PINNED
        if 0 in map(_TOKENS, placed):
            for j, item in enumerate(placed):
                if item.tokens == 0 and not item.pinned:
                    reasons[j] = InclusionReason.ZERO_TOKEN
                    scores[j] = 0.0  # the seeds: zero-token items are reported with 0.0
        self._batch(None, map(merged_idx.__getitem__, where), placed, scores, reasons,
                    positions=range(len(placed)))


class _BudgetExceededByTokens(dict[int, ExclusionReason]):
    """``BudgetExceeded(tokens, available)`` for a fixed ``available``, made once per
    token count and reused (reasons are immutable values)."""

    __slots__ = ("available",)

    def __init__(self, available: int) -> None:
        super().__init__()
        self.available = available

    def __missing__(self, tokens: int) -> ExclusionReason:
        reason = self[tokens] = BudgetExceeded(item_tokens=tokens,
                                                    available_tokens=self.available)
        return reason


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


def _room_displacer(prefix: list[int], room: int) -> int:
    """Position (among the pinned items) of the one whose tokens, added in order,
    first left less than the item needed; ``room`` is what the item could spare."""
    return min(bisect_right(prefix, room), len(prefix) - 1)


def _displacer(prefix: list[int], item_tokens: int, budget: ContextBudget) -> int:
    """Position (among the pinned items) of the one whose tokens, added in order,
    first brought the effective target below ``item_tokens``.

    ``prefix`` holds the pinned items' running token sums. The effective target
    falls as pinned tokens grow (by the reserved tokens and the safety margin's
    floors as well, so it is computed, not subtracted), which makes the first
    such prefix a binary search.
    """
    def pushed_out(pinned_tokens: int) -> bool:
        return budget.effective(pinned_tokens).target_tokens < item_tokens

    return min(bisect_left(prefix, True, key=pushed_out), len(prefix) - 1)
