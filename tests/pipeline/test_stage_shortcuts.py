"""A traced run's Slice stage takes GreedySlice's selection as positions, and its Place
stage UShapedPlacer's order as positions (``_run.Run``), where any other slicer goes
through ``slice_with_details`` and any other placer through ``place``, each with the
identity map back: the two give the same decisions, reasons and window."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, OverflowStrategy, Pipeline
from cupellation._collectors import DiagnosticTraceCollector, TraceDetailLevel
from cupellation.placing import UShapedPlacer
from cupellation.scoring import PriorityScorer, RecencyScorer
from cupellation.slicing import GreedySlice, slice_with_details
from pipeline._runs import budgets, candidates


class _AnyGreedy(GreedySlice):
    """GreedySlice's rule under another type: the stage path treats it as any slicer."""

    __slots__ = ()


class _AnyUShaped(UShapedPlacer):
    """UShapedPlacer's order under another type: the stage path treats it as any placer."""

    __slots__ = ()


def _traced(slicer: GreedySlice, placer: Any, items: list[ContextItem], budget: ContextBudget,
            options: dict[str, Any]) -> tuple[Any, ...]:
    """A Full-traced run's window and report entries (or its exception)."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    try:
        window = Pipeline(slicer=slicer, placer=placer, **options).run(items, budget,
                                                                       collector)
    except Exception as exc:  # the outcome compared
        return ("raised", type(exc), str(exc))
    report = collector.build_report()
    return ([id(item) for item in window],
            [(id(e.item), e.score, e.reason) for e in report.included],
            [(id(e.item), e.score, e.reason) for e in report.excluded])


@settings(max_examples=300, deadline=None)
@given(candidates, budgets, st.sampled_from([RecencyScorer(), PriorityScorer()]),
       st.booleans(), st.booleans(),
       st.sampled_from([OverflowStrategy.PROCEED, OverflowStrategy.TRUNCATE]))
def test_positions_decide_as_the_slicer_and_placer_protocols_do(
        items: list[ContextItem], budget: ContextBudget, scorer: Any, ushaped: bool,
        deduplication: bool, overflow: OverflowStrategy) -> None:
    """Generated runs (pinned items, zero and negative tokens, duplicates, every
    budget down to a zero target, overflows truncated or kept) traced at Full:
    GreedySlice and UShapedPlacer, taken as positions, give the very window,
    entries, scores and reasons that the same rules under other types give through
    slice_with_details and place (the default placer on both sides otherwise)."""
    options = {"scorer": scorer, "deduplication": deduplication,
               "overflow_strategy": overflow}
    placers = (UShapedPlacer(), _AnyUShaped()) if ushaped else (None, None)
    assert _traced(GreedySlice(), placers[0], items, budget, options) == _traced(
        _AnyGreedy(), placers[1], items, budget, options)


def test_only_greedy_itself_skips_slice_with_details(monkeypatch: Any) -> None:
    """GreedySlice itself never calls slice_with_details in a traced run; a subclass
    (which may override anything) does. Likewise UShapedPlacer's place."""
    calls: list[object] = []
    real = slice_with_details

    def counting(slicer: Any, *args: Any) -> Any:
        calls.append(slicer)
        return real(slicer, *args)

    monkeypatch.setattr("cupellation._run.slice_with_details", counting)
    items = [ContextItem(content=f"c{k}", tokens=10 + k) for k in range(6)]
    budget = ContextBudget(max_tokens=40, target_tokens=30)
    for slicer in (GreedySlice(), _AnyGreedy()):
        Pipeline(scorer=PriorityScorer(), slicer=slicer).run(items, budget,
                                                             DiagnosticTraceCollector(TraceDetailLevel.FULL))
    assert [type(slicer) for slicer in calls] == [_AnyGreedy]
    placed: list[object] = []

    def place(self: UShapedPlacer, scored: Any) -> list[ContextItem]:
        placed.append(self)
        return [entry.item for entry in scored]

    monkeypatch.setattr(UShapedPlacer, "place", place)
    for placer in (UShapedPlacer(), _AnyUShaped()):
        Pipeline(scorer=PriorityScorer(), placer=placer).run(
            items, budget, DiagnosticTraceCollector(TraceDetailLevel.FULL))
    assert [type(placer) for placer in placed] == [_AnyUShaped]
