"""The state and stages of one pipeline run (``spec/src/pipeline*``): Classify,
Score, Deduplicate, Sort, Slice and Place as :class:`Run` walks them, emitting the
event stream; Pipeline.run and PreparedCandidates drive it.

:class:`~cupellation.Pipeline` configures and validates; this module runs. A
:class:`Configured` is what a run reads of its pipeline, so that this module
never imports the one that drives it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from math import isfinite
from operator import attrgetter
from typing import Protocol

import numpy as np
import numpy.typing as npt

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
from ._collectors import TraceCollector, TraceDetailLevel
from ._model import ContextBudget, ContextItem, OverflowStrategy, ScoredItems
from ._order import descending_order
from .events import (
    CountShortfall,
    ItemEventBatch,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunInfo,
    RunStarted,
    StageCompleted,
    StageStarted,
)
from .exceptions import (
    BudgetOverflowError,
    InvalidTypeError,
    PinnedBudgetError,
    PipelineError,
    ScorerError,
)
from .placing import Placer, UShapedPlacer
from .placing._u_shaped import u_shaped_positions
from .scoring import Scorer, score_array
from .scoring._composite import builtin_scores_array, finite_float_lists
from .slicing import GreedySlice, SliceOutcome, Slicer, slice_with_details
from .slicing._greedy import checked_greedy_select

__all__ = ["HASHED_CONTENTS", "SMALL_SORT", "Configured", "Run", "TraceContextSource",
           "best_of_each_content", "candidate_sequence", "checked_scores", "score_order",
           "score_order_array", "truncate", "use_trace_context"]

#: Gives the (trace id, span id) current when a run starts, or None: how the
#: pipeline learns the application's trace without importing OpenTelemetry.
TraceContextSource = Callable[[], "tuple[str, str] | None"]


def _no_trace_context() -> tuple[str, str] | None:
    return None


_trace_context: list[TraceContextSource] = [_no_trace_context]


def use_trace_context(source: TraceContextSource) -> None:
    """Make ``source`` what every run asks for the current trace and span ids.

    The package's ``__init__`` sets the OpenTelemetry API's (so the pipeline layer
    itself imports no telemetry library); a source that raises counts as none.
    """
    _trace_context[0] = source

_logger = logging.getLogger("cupellation")

#: Up to this many items, Sort orders them with Python's sort and the scorer's list of
#: plain finite floats skips ``score_array``'s conversion: numpy's fixed cost per call
#: outweighs the work below about 150 items.
#: 128 by a joint measurement in whole untraced runs (all four SMALL_ thresholds
#: moved together, 2026-11-28): plain Python took 0.79x numpy's time at 65 items,
#: 0.92x at 100, the same at 150 and 1.2x at 200.
SMALL_SORT = 128
#: Past this many items Deduplicate first compares the contents' hashes in numpy
#: (``_distinct_hashes``). Measured in whole untraced runs: 0.94-0.96 of the set's
#: time at 100,000-300,000 items, 1.0-1.1 from 1,000 to 10,000.
HASHED_CONTENTS = 50_000

_TOKENS = attrgetter("tokens")
_PINNED = attrgetter("pinned")
_CONTENT = attrgetter("content")
_SEQUENCES = (list, tuple)
_CLASSIFY = PipelineStage.CLASSIFY
_SCORE = PipelineStage.SCORE
_DEDUPLICATE = PipelineStage.DEDUPLICATE
_SORT = PipelineStage.SORT
_SLICE = PipelineStage.SLICE
_PLACE = PipelineStage.PLACE


class Configured(Protocol):
    """What a run reads of its pipeline (:class:`~cupellation.Pipeline` is one)."""

    @property
    def scorer(self) -> Scorer: ...

    @property
    def slicer(self) -> Slicer: ...

    @property
    def placer(self) -> Placer: ...

    @property
    def deduplication(self) -> bool: ...

    @property
    def overflow_strategy(self) -> OverflowStrategy: ...

    def describe(self) -> Mapping[str, str | bool]: ...


def candidate_sequence(candidates: Iterable[ContextItem]) -> Sequence[ContextItem]:
    """``candidates`` as a sequence (a list or tuple as it is, any other iterable
    listed); text, a mapping, ``None`` or a non-iterable raise InvalidTypeError."""
    # A tuple of types: ``list | tuple`` would build a union on every call (4x the check).
    if isinstance(candidates, _SEQUENCES):
        return candidates
    if candidates is None or isinstance(candidates, str | bytes | Mapping) or (
            not isinstance(candidates, Iterable)):
        raise InvalidTypeError("candidates", candidates, "an iterable of ContextItem")
    return list(candidates)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


def _name(strategy: object) -> str:
    """How errors name a strategy: its repr when short (``FunctionScorer(odd)``),
    otherwise its type."""
    text = repr(strategy)
    return text if len(text) <= 80 and "object at 0x" not in text else type(strategy).__name__



class Run:
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

    def __init__(self, pipeline: Configured, candidates: Sequence[ContextItem],
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
        scores = self.score_stage(scoreable, scoreable_idx)
        survivors = self.deduplicate_stage(scoreable, scoreable_idx, scores)
        ranked = self.sort_stage(scoreable, scoreable_idx, scores, survivors)
        sliced = self.slice_stage(ranked, pinned)
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
        pinned_items, pinned_idx, scoreable, scoreable_idx = self.classify()
        pinned = Pinned(pinned_items, pinned_idx, sum(map(_TOKENS, pinned_items)), budget)
        # The specification compares pinned tokens with maxTokens - outputReserve
        # only; reserved slots belong to the Slice stage's effective budget.
        available_for_pinned = budget.max_tokens - budget.output_reserve
        if pinned.tokens > available_for_pinned:
            raise PinnedBudgetError(pinned.tokens, available_for_pinned)
        self._stage_done(_CLASSIFY, start, count, len(pinned_items) + len(scoreable))
        return pinned, scoreable, scoreable_idx

    def classify(self) -> tuple[list[ContextItem], list[int], list[ContextItem], list[int]]:
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

    def score_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int]
                     ) -> npt.NDArray[np.float64]:
        count = len(scoreable)
        start = self._stage_start(_SCORE, count)
        scores = _checked_scores(self.pipeline.scorer, scoreable, scoreable_idx)
        self._stage_done(_SCORE, start, count, count)
        return scores

    # -- 3. Deduplicate -------------------------------------------------------------------

    def deduplicate_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int],
                           scores: npt.NDArray[np.float64]) -> list[int] | None:
        """Positions that survive, in input order; None when nothing was removed."""
        count = len(scoreable)
        start = self._stage_start(_DEDUPLICATE, count)
        best = (best_of_each_content(scoreable, scores)
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

    def sort_stage(self, scoreable: list[ContextItem], scoreable_idx: list[int],
                    scores: npt.NDArray[np.float64], survivors: list[int] | None) -> Ranked:
        count = len(scoreable) if survivors is None else len(survivors)
        start = self._stage_start(_SORT, count)
        order, ranked_scores = score_order(scores, survivors, count)
        # Token counts travel beside the items, read once in input order: the
        # later stages then need not chase every item in score order again.
        scoreable_tokens = list(map(_TOKENS, scoreable))
        ranked = Ranked([scoreable[p] for p in order], ranked_scores,
                        [scoreable_tokens[p] for p in order], order, scoreable_idx)
        self._stage_done(_SORT, start, count, count)
        return ranked

    # -- 5. Slice -------------------------------------------------------------------------

    def slice_stage(self, ranked: Ranked, pinned: Pinned) -> Sliced:
        slicer = self.pipeline.slicer
        count = len(ranked.items)
        start = self._stage_start(_SLICE, count)
        effective = self.budget.effective(pinned.tokens)
        if type(slicer) is GreedySlice:
            # GreedySlice's own rule over the ranked columns, its selection taken as
            # positions (as the fused path takes it): its slice_with_details wrappers
            # and the identity map back were ~10% of a traced 1,000-item run.
            target = effective.target_tokens
            chosen = (checked_greedy_select(ranked.tokens, ranked.scores, target)
                      if ranked.items and target > 0 else [])
            outcome = _NO_DETAILS
        else:
            outcome = slice_with_details(
                slicer, ScoredItems._trusted(ranked.items, ranked.scores, ranked.tokens),
                effective)
            chosen = _positions(outcome.selected, ranked.items, "slicer", slicer)
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
        merged = self.merge(ranked, sliced, pinned)
        if merged.tokens > self.budget.target_tokens:
            merged = self.overflow(merged, pinned)
        where: list[int] | None = None
        if type(placer) is UShapedPlacer:
            # The placer's own order, taken as positions: no identity map back (as in
            # the Slice stage; the pipeline's scores are finite, as place checks).
            where = u_shaped_positions(merged.scores)
            placed = [merged.items[k] for k in where]
        else:
            placed = self.place(merged)
        if self.items_on:
            if where is None:
                where = _positions(placed, merged.items, "placer", placer)
            self._decisions(None, inclusions(placed, where, merged, len(pinned.items)))
        self._stage_done(_PLACE, start, count, len(placed))
        return list(placed)

    def place(self, merged: Merged) -> list[ContextItem]:
        """The placer's order of the merged items; a placer that returns other than
        as many items as it was given raises PipelineError naming it."""
        placer = self.pipeline.placer
        placed = _placed(placer, placer.place(ScoredItems._trusted(merged.items, merged.scores)))
        if len(placed) != len(merged.items):
            raise PipelineError(
                f"placer {_name(placer)} returned {len(placed)} items "
                f"for {len(merged.items)}: a placer must return a permutation of its input"
            )
        return placed

    def merge(self, ranked: Ranked, sliced: Sliced, pinned: Pinned) -> Merged:
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

    def overflow(self, merged: Merged, pinned: Pinned) -> Merged:
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
        kept, removed, kept_tokens, pinned_kept = truncate(merged.items, target)
        if self.exclusions_on and removed:
            self._decisions(_PLACE, truncation_exclusions(merged, removed, kept_tokens,
                                                          pinned_kept, pinned))
        return Merged(items=[merged.items[k] for k in kept],
                      scores=[merged.scores[k] for k in kept],
                      indices=[merged.indices[k] for k in kept] if merged.indices else [],
                      tokens=kept_tokens)


def _checked_scores(scorer: Scorer, scoreable: list[ContextItem],
                    scoreable_idx: Sequence[int]) -> npt.NDArray[np.float64]:
    """The scorer's scores of ``scoreable``, checked (:func:`checked_scores`), as an array."""
    scores = checked_scores(scorer, scoreable, scoreable_idx)
    return np.array(scores, dtype=np.float64) if isinstance(scores, list) else scores


def checked_scores(scorer: Scorer, scoreable: list[ContextItem], scoreable_idx: Sequence[int]
                   ) -> list[float] | npt.NDArray[np.float64]:
    """The scorer's scores of ``scoreable``, checked: a ScorerError names the
    candidate index of a score that is not a finite real number.

    The scorer's own list when it returned plain finite floats for at most
    SMALL_SORT items (nothing to convert, name or refuse; not even checked for a
    scorer that always returns them, :func:`finite_float_lists`), else a float64
    array (made as one from the start for the built-in rank scorers and their
    composites, :func:`builtin_scores_array`).
    """
    if not scoreable:
        return np.zeros(0, dtype=np.float64)
    count = len(scoreable)
    try:
        if count > SMALL_SORT:
            # Inside the try: an item whose key property raises is the scorer's
            # error here too, as it is through score_all.
            built = builtin_scores_array(scorer, scoreable)
            if built is not None:
                return built  # the built-ins' ranks and their weighted sums: finite
        raw = scorer.score_all(scoreable)
        if count <= SMALL_SORT and type(raw) is list and len(raw) == count and (
                finite_float_lists(scorer) or all(
                    type(value) is float and isfinite(value) for value in raw)):
            return raw
        scores = score_array(_name(scorer), raw, count)
    except OverflowError as exc:
        # A Python int beyond float64's range, met inside the scorer.
        raise ScorerError(_name(scorer), None,
                          f"returned a number outside float64's range ({exc})") from exc
    except ScorerError as exc:
        # Scorers (and composites' children) name the position among the items
        # they were given, the scoreable ones: say which candidate that is.
        if exc.index is None or not 0 <= exc.index < len(scoreable_idx):
            raise
        raise ScorerError(exc.scorer, int(scoreable_idx[exc.index]), exc.detail) from exc
    except (TypeError, ValueError) as exc:
        # A scorer that fails on the items it was given: named as a ScorerError,
        # with its own exception as the cause.
        raise ScorerError(_name(scorer), None,
                          f"raised {type(exc).__name__}: {exc}") from exc
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.argmin(finite))
        raise ScorerError(_name(scorer), int(scoreable_idx[bad]),
                          f"returned {float(scores[bad])!r} (scores must be finite)")
    return scores


def best_of_each_content(scoreable: list[ContextItem],
                         scores: list[float] | npt.NDArray[np.float64]) -> dict[str, int] | None:
    """For each content, the position of the item that keeps it (the best score;
    on equal scores the earlier item, P3); None when every content is distinct."""
    if not scoreable:
        return None
    if len(scoreable) > HASHED_CONTENTS and _distinct_hashes(scoreable):
        return None  # distinct hashes are distinct contents
    contents = [item.content for item in scoreable]
    if len(set(contents)) == len(contents):
        return None  # the common case, settled by one set of (cached) string hashes
    score_list: list[float] = scores if isinstance(scores, list) else scores.tolist()
    best: dict[str, int] = {}
    for position, content in enumerate(contents):
        held = best.get(content)
        # Strictly greater: on equal scores the earlier item stays (P3 tie rule).
        if held is None or score_list[position] > score_list[held]:
            best[content] = position
    return best


def _distinct_hashes(items: list[ContextItem]) -> bool:
    """Whether the items' contents have pairwise distinct hashes (then the contents
    are distinct too; equal hashes prove nothing and the caller compares contents).

    Why: at a million items, sorting the (cached) string hashes in numpy costs about
    half of building a set of the contents (0.17-0.19 s against 0.28-0.38 s,
    measured), and the contents' list is not built when nothing repeats."""
    hashes = np.fromiter(map(hash, map(_CONTENT, items)), dtype=np.int64, count=len(items))
    hashes.sort()
    return not bool((hashes[1:] == hashes[:-1]).any())


def score_order(scores: list[float] | npt.NDArray[np.float64], survivors: list[int] | None,
                count: int) -> tuple[list[int], list[float]]:
    """Sort's order of the ``count`` survivors (all scoreable positions when
    ``survivors`` is None) by score descending, then position ascending (P1), and
    their scores in that order."""
    if count <= SMALL_SORT:
        # Few items: Python's stable sort, descending with reverse=True (which keeps
        # equal scores in position order), is (score desc, index asc) as well, and
        # costs less than numpy's fixed cost per call at this size.
        score_list: list[float] = scores if isinstance(scores, list) else scores.tolist()
        order = sorted(range(count) if survivors is None else survivors,
                       key=score_list.__getitem__, reverse=True)
        return order, [score_list[p] for p in order]
    order_arr, ranked = score_order_array(scores, survivors)
    ranked_list: list[float] = ranked.tolist()
    return order_arr.tolist(), ranked_list


def score_order_array(scores: list[float] | npt.NDArray[np.float64], survivors: list[int] | None
                      ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]:
    """:func:`score_order` as arrays, at any size (the fused path's large runs keep
    them as arrays: a million positions as a list cost more than the sort)."""
    array = np.asarray(scores, dtype=np.float64)
    # Score descending, then index ascending (P1): descending_order's contract.
    if survivors is None:
        order_arr = descending_order(array)
    else:
        kept = np.asarray(survivors, dtype=np.intp)
        order_arr = kept[descending_order(array[kept])]
    return order_arr, array[order_arr]


def truncate(items: list[ContextItem], target: int) -> tuple[list[int], list[int], int, int]:
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


def _current_span_ids() -> tuple[str | None, str | None]:
    """The ids the trace-context source gives when the run starts; (None, None)
    when there is no current span, or the source fails (it never breaks a run)."""
    try:
        ids = _trace_context[0]()
    except Exception:
        _logger.debug("the trace-context source raised; the run records no span",
                      exc_info=True)
        return None, None
    return (None, None) if ids is None else ids


def _candidate_tokens(candidates: Sequence[ContextItem]) -> int:
    """Sum of the candidates' tokens for ``run_started``; stray objects count as 0
    (Classify reports them by index a moment later)."""
    try:
        return sum(map(_TOKENS, candidates))
    except (AttributeError, TypeError):
        return sum(c.tokens for c in candidates if isinstance(c, ContextItem))


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


#: The details of a slicer that reports none (GreedySlice): no cap exclusions,
#: shortfalls or count caps. Its ``selected`` is empty: the stage keeps the
#: selection as positions (``Sliced.chosen``) and never reads it.
_NO_DETAILS: SliceOutcome = SliceOutcome(())


def _positions(selected: Sequence[ContextItem], pool: list[ContextItem], role: str,
               strategy: object) -> list[int]:
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
            # Named only here: a strategy's repr can cost more than a small run.
            raise PipelineError(f"{role} {_name(strategy)} returned {item!r}, which was not "
                                "among its inputs (or returned it more often than it was "
                                "given)")
        positions.append(queue.pop(0))
    return positions
