"""The Python API's own errors for misuse (candidates that are not a list, strategies
that return None or text), and every public value type surviving copy.deepcopy and
pickle."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import msgspec
import numpy as np
import pytest

from cupellation import (
    CompositeScorer,
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    Pipeline,
    PriorityScorer,
    ScaledScorer,
    SelectionReport,
    TraceDetailLevel,
)
from cupellation._model import ScoredItem, ScoredItems
from cupellation.events import (
    CountShortfall,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageStarted,
    event_from_json,
)
from cupellation.exceptions import (
    ConfigurationError,
    CupelError,
    InvalidTypeError,
    PipelineError,
    ScorerError,
)
from cupellation.reasons import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequireCandidatesExhausted,
    Deduplicated,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
)

BUDGET = ContextBudget(100, 60)
ITEMS = [ContextItem(content="a", tokens=10, priority=2),
         ContextItem(content="b", tokens=20, priority=1),
         ContextItem(content="c", tokens=50, priority=3)]


class _Scores:
    """A scorer returning whatever it was given."""

    def __init__(self, scores: Any) -> None:
        self.scores = scores

    def score_all(self, items: Sequence[ContextItem], /) -> Any:
        return self.scores

    def __repr__(self) -> str:
        return "_Scores"


class _NoneSlicer:
    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> Any:
        return None


class _TextSlicer:
    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /) -> Any:
        return "abc"


class _NonePlacer:
    def place(self, items: Sequence[ScoredItem], /) -> Any:
        return None


@pytest.mark.parametrize("candidates", [None, 42, "abc", b"abc", {"content": "a"}])
def test_candidates_that_are_not_an_iterable_of_items_raise_invalid_type_error(
        candidates: Any) -> None:
    """run(None), a number, text or a mapping: InvalidTypeError naming ``candidates``
    (a CupelError), never a bare TypeError from list(None) or a per-character
    error."""
    with pytest.raises(InvalidTypeError) as info:
        Pipeline(scorer=PriorityScorer()).run(candidates, BUDGET)
    assert info.value.field == "candidates"
    with pytest.raises(InvalidTypeError):
        Pipeline(scorer=PriorityScorer()).dry_run(candidates, BUDGET)


def test_a_generator_of_items_is_still_fine() -> None:
    """Any iterable of items runs (a generator is read once)."""
    out = Pipeline(scorer=PriorityScorer()).run((item for item in ITEMS), BUDGET)
    assert {item.content for item in out} == {"a", "c"}


@pytest.mark.parametrize(("slicer", "placer", "who"), [
    (_NoneSlicer(), None, "slicer _NoneSlicer returned NoneType"),
    (_TextSlicer(), None, "slicer _TextSlicer returned str"),
    (None, _NonePlacer(), "returned NoneType, not the list of its items"),
])
def test_a_slicer_or_placer_returning_none_is_a_pipeline_error(
        slicer: Any, placer: Any, who: str) -> None:
    """A slicer or placer that returns None (or text) raises PipelineError naming it,
    and a traced run records run_failed with that error."""
    pipeline = Pipeline(scorer=PriorityScorer(), slicer=slicer, placer=placer)
    collector = DiagnosticTraceCollector()
    with pytest.raises(PipelineError, match=who) as info:
        pipeline.run(ITEMS, BUDGET, collector)
    failed = collector.events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.error_type == "PipelineError"
    assert failed.exception is info.value


@pytest.mark.parametrize(("scores", "index"), [
    (["0.5", "0.2", "0.9"], 0),                   # numpy would convert text silently
    ([0.5, "0.2", 0.9], 1),
    (np.array(["0.5", "0.2", "0.9"]), 0),
    ([True, False, True], 0),
    ([0.5, None, 0.9], 1),
    (None, None),
    ("0.5", None),
    ({0: 0.5}, None),
    (7, None),
    ([0.5, 0.2], None),                           # one score short
    ([[0.5], [0.2], [0.9]], None),
])
def test_a_scorer_returning_what_is_not_scores_raises_scorer_error(
        scores: Any, index: int | None) -> None:
    """Text, bools, None, a mapping or a number, the wrong count: ScorerError naming
    the scorer and, when one entry is wrong, the candidate index; never a plain
    TypeError or ValueError, and never a run on converted text."""
    with pytest.raises(ScorerError) as info:
        Pipeline(scorer=_Scores(scores)).run(ITEMS, BUDGET)
    assert info.value.scorer == "_Scores"
    assert info.value.index == index


@pytest.mark.parametrize("wrap", [
    lambda inner: CompositeScorer([(inner, 1.0), (PriorityScorer(), 1.0)]),
    ScaledScorer,
])
def test_composites_check_their_children_s_scores_the_same_way(wrap: Any) -> None:
    """A child of a composite or scaled scorer returning text raises ScorerError at
    Score naming the child and the candidate (index 2 here: after two pinned items)."""
    pinned = [ContextItem(content="p", tokens=1, pinned=True),
              ContextItem(content="q", tokens=1, pinned=True)]
    with pytest.raises(ScorerError) as info:
        Pipeline(scorer=wrap(_Scores([0.5, "x", 0.1]))).run(pinned + ITEMS, BUDGET)
    assert info.value.scorer == "_Scores"
    assert info.value.index == 3


def test_numpy_and_fraction_scores_are_real_numbers() -> None:
    """Float32 arrays, numpy integers and Fractions are real numbers and run."""
    from fractions import Fraction  # noqa: PLC0415

    for scores in (np.array([0.5, 0.2, 0.9], dtype=np.float32),
                   [np.int64(1), np.int64(0), np.int64(2)],
                   [Fraction(1, 2), Fraction(1, 5), Fraction(9, 10)]):
        out = Pipeline(scorer=_Scores(scores)).run(ITEMS, BUDGET)
        assert {item.content for item in out} == {"a", "c"}


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), 0.0, -1.0, True, "1"])
def test_a_single_childs_weight_is_checked_as_in_any_composite(weight: Any) -> None:
    """A one-child composite checks its weight exactly as a composite of several
    does: the same error type for the same bad weight."""
    errors = []
    for children in ([(PriorityScorer(), weight)],
                     [(PriorityScorer(), weight), (PriorityScorer(), 1.0)]):
        with pytest.raises((ConfigurationError, InvalidTypeError)) as info:
            CompositeScorer(children)
        error = info.value
        assert isinstance(error, ConfigurationError | InvalidTypeError)
        errors.append((type(error), error.field))
    assert errors[0] == errors[1]


# -- deepcopy and pickle ---------------------------------------------------------------

AT = datetime(2024, 5, 1, 12, tzinfo=UTC)
ITEM = ContextItem(content="x", tokens=3, kind="Document", source="Rag", priority=2,
                   tags=["t"], metadata={"a": [1, {"b": None}]}, timestamp=AT,
                   future_relevance_hint=0.5, original_tokens=9)
FULL_BUDGET = ContextBudget(100, 50, output_reserve=10, reserved_slots={"Message": 2},
                           estimation_safety_margin_percent=5.0)

REASONS: list[Any] = [
    BudgetExceeded(item_tokens=1, available_tokens=0), ScoredTooLow(score=0.1, threshold=0.5),
    Deduplicated(deduplicated_against=3), Deduplicated(deduplicated_against="x"),
    QuotaCapExceeded(kind="Message", cap=1, actual=2),
    QuotaRequireDisplaced(displaced_by_kind="Memory"), NegativeTokens(tokens=-1),
    PinnedOverride(displaced_by=0), Filtered(filter_name="f"),
    CountCapExceeded(kind="Message", cap=1, count=1),
    CountRequireCandidatesExhausted(kind="Message"),
    exclusion_reason_from_dict({"reason": "Future", "x": [1, {"y": 2}]}),
    UnknownExclusionReason(reason_name="Plain", fields={"z": 1}),
    InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN,
    inclusion_reason_from_dict({"reason": "Future", "why": "w"}),
]

EVENTS: list[PipelineEvent] = [
    RunStarted(run_id="r", seq=0, started_at=AT, budget=FULL_BUDGET,
               pipeline=MappingProxyType({"scorer": "s", "deduplication": True}),
               candidate_count=2, candidate_tokens=5, detail_level="Full", trace_id="a" * 32,
               span_id="b" * 16),
    StageStarted(run_id="r", seq=1, stage=PipelineStage.SLICE, items_in=2),
    StageCompleted(run_id="r", seq=2, stage="FutureStage", duration_ms=0.5, items_in=2,
                   items_out=1),
    ItemExcluded(run_id="r", seq=3, stage=PipelineStage.SLICE, candidate_index=1, score=0.2,
                 item=ITEM, reason=REASONS[11]),
    ItemIncluded(run_id="r", seq=4, candidate_index=0, position=0, score=0.9, item=ITEM,
                 reason=REASONS[-1]),
    Overflow(run_id="r", seq=5, tokens_over_budget=3, item_indices=(0, 1),
             budget=FULL_BUDGET),
    CountShortfall(run_id="r", seq=6, kind="Memory", required_count=2, satisfied_count=1),
    RunCompleted(run_id="r", seq=7, duration_ms=1.5, included_count=1, included_tokens=3,
                 excluded_count=1),
    event_from_json('{"schema": 2, "type": "future", "run_id": "r", "seq": 8, '
                    '"x": {"y": [1]}}'),
]


def _report() -> SelectionReport:
    items = [ContextItem(content="a", tokens=10, priority=2),
             ContextItem(content="a", tokens=10, priority=1),
             ContextItem(content="pin", tokens=5, pinned=True),
             ContextItem(content="z", tokens=0),
             ContextItem(content="big", tokens=90, priority=3),
             ContextItem(content="neg", tokens=-1)]
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=PriorityScorer()).run(items, BUDGET, collector)
    return collector.build_report()


def _values() -> list[Any]:
    report = _report()
    batch_out = ItemEventBatch(run_id="r", first_seq=3, stage=PipelineStage.SLICE,
                               candidate_indices=[1], items=[ITEM], scores=[0.2],
                               reasons=[REASONS[0]])
    batch_in = ItemEventBatch(run_id="r", first_seq=4, stage=None, candidate_indices=[0],
                              items=[ITEM], scores=[0.9], reasons=[InclusionReason.SCORED],
                              positions=[0])
    return [ITEM, FULL_BUDGET, *REASONS, *EVENTS, batch_out, batch_in, report,
            *report.included, *report.excluded, *report.events,
            ScoredItem(ITEM, 0.5), ScoredItems([ITEM, ITEM], [0.5, 0.25])]


@pytest.mark.parametrize("round_trip", [
    copy.deepcopy, lambda value: pickle.loads(pickle.dumps(value)),
], ids=["deepcopy", "pickle"])
def test_every_public_value_type_survives_deepcopy_and_pickle(round_trip: Any) -> None:
    """Items, budgets, every reason (read-only fields included), every event (the
    read-only pipeline description and unknown fields included), item batches,
    reports with their entries and trace events, and ScoredItem(s) come back equal
    from copy.deepcopy and from pickle; read-only mappings stay read-only."""
    values = _values()
    assert isinstance(values[-1], ScoredItems)
    for value in values:
        copied = round_trip(value)
        assert copied == value, type(value).__name__
        assert type(copied) is type(value)
    started = round_trip(EVENTS[0])
    assert isinstance(started.pipeline, MappingProxyType)
    assert isinstance(round_trip(REASONS[11]).fields, MappingProxyType)
    assert round_trip(InclusionReason.SCORED) is InclusionReason.SCORED


def test_run_failed_drops_its_live_exception_on_pickling_only() -> None:
    """RunFailed's exception is a live object (traceback, frames): pickling drops it
    and keeps error_type and error_text; a deepcopy refers to the same exception."""
    error = ValueError("boom")
    failed = RunFailed(run_id="r", seq=3, stage=PipelineStage.SCORE, error_type="ValueError",
                       error_text="boom", duration_ms=0.5, exception=error)
    restored = pickle.loads(pickle.dumps(failed))
    assert restored.exception is None
    assert restored == msgspec.structs.replace(failed, exception=None)
    assert (restored.error_type, restored.error_text) == ("ValueError", "boom")
    copied = copy.deepcopy(failed)
    assert copied == failed
    assert copied.exception is error


def test_a_scorer_that_raises_value_or_type_error_is_a_scorer_error_caused_by_it() -> None:
    """A scorer failing with ValueError or TypeError on the items it was given is a
    ScorerError naming it and what it raised, with its own exception as the cause."""
    class Failing:
        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            raise ValueError("scorer down")

        def __repr__(self) -> str:
            return "Failing"

    with pytest.raises(ScorerError, match="scorer Failing raised ValueError: scorer down"
                       ) as info:
        Pipeline(scorer=Failing()).run(ITEMS, BUDGET)
    assert isinstance(info.value.__cause__, ValueError)


def test_errors_are_cupel_errors() -> None:
    """Every error these misuses raise is a CupelError (catchable as one)."""
    assert issubclass(PipelineError, CupelError)
    assert issubclass(ScorerError, CupelError)
    assert issubclass(InvalidTypeError, CupelError)


class _Odd(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(("error", "text"), [
    (RuntimeError("bad name \udcff.txt"), "bad name \\udcff.txt"),
    (_Odd(), "<_Odd whose str() raised>"),
])
def test_run_failed_error_text_is_always_writable_text(error: Exception, text: str) -> None:
    """A scorer's exception whose text holds a lone surrogate, or whose __str__
    raises: the run re-raises that very exception, and run_failed's error_text is
    text every sink can write (the surrogate escaped)."""
    class Raising:
        def score_all(self, items: Sequence[ContextItem], /) -> list[float]:
            raise error

    collector = DiagnosticTraceCollector()
    with pytest.raises(type(error)) as info:
        Pipeline(scorer=Raising()).run(ITEMS, BUDGET, collector)
    assert info.value is error
    failed = collector.events[-1]
    assert isinstance(failed, RunFailed)
    assert failed.error_text == text
    failed.error_text.encode("utf-8")
