"""The spans a run makes: names, nesting, tiers and attributes as the specification's
OpenTelemetry chapter says, plus cupellation's own additions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import cupellation
from cupellation import (
    ContextBudget,
    ContextItem,
    CountQuotaSlice,
    GreedySlice,
    OverflowStrategy,
    Pipeline,
    RecencyScorer,
    ScoredItem,
    TraceDetailLevel,
)
from cupellation.events import PipelineStage, StageCompleted
from cupellation.exceptions import ScorerError
from cupellation.scoring import FunctionScorer
from cupellation.slicing import CountQuotaEntry

from ._support import Sdk, attrs, make_sdk, no_context_leak, run_both

BUDGET = ContextBudget(max_tokens=120, target_tokens=60)
ITEMS = [
    ContextItem("system", 10, kind="SystemPrompt", pinned=True),
    ContextItem("dup", 5, kind="Message", tags=("a",)),
    ContextItem("dup", 5, kind="Message"),
    ContextItem("big document", 50, kind="Document", priority=3),
    ContextItem("tool output", 20, kind="ToolOutput"),
    ContextItem("note", 8, kind="Memory"),
    ContextItem("negative", -2, kind="Message"),
]
STAGES = ("classify", "score", "deduplicate", "slice", "place")


def _pipeline(**kw: object) -> Pipeline:
    return Pipeline(scorer=RecencyScorer(), budget=BUDGET, **kw)  # type: ignore[arg-type]


def _run(sdk: Sdk, tier: str, pipeline: Pipeline | None = None,
         items: Sequence[ContextItem] = ITEMS, layout: str = "columns") -> None:
    run_both(pipeline or _pipeline(), items, BUDGET, sdk.collector(tier, layout=layout))


def _root(sdk: Sdk) -> ReadableSpan:
    (root,) = sdk.by_name("cupel.pipeline")
    return root


def _stage(sdk: Sdk, name: str) -> ReadableSpan:
    (span,) = sdk.by_name(f"cupel.stage.{name}")
    return span


def test_a_run_is_a_root_span_under_the_callers_span_with_five_stage_children() -> None:
    """cupel.pipeline is a child of the span current in the caller; the five stage
    spans are its children, named cupel.stage.<lowercase>; Sort has no span."""
    sdk = make_sdk()
    tracer = sdk.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("agent.step") as step:
        _run(sdk, "StageOnly")
    root = _root(sdk)
    assert root.parent is not None
    assert root.parent.span_id == step.get_span_context().span_id
    assert root.context.trace_id == step.get_span_context().trace_id
    names = sorted(s.name for s in sdk.spans)
    assert names == sorted(["agent.step", "cupel.pipeline",
                            *(f"cupel.stage.{n}" for n in STAGES)])
    for name in STAGES:
        span = _stage(sdk, name)
        assert span.parent is not None
        assert span.parent.span_id == root.context.span_id
        assert attrs(span)["cupel.stage.name"] == name
    assert not [s for s in sdk.spans if "sort" in s.name]
    assert [e.name for e in root.events] == ["cupel.stage.sort"]


def test_the_instrumentation_scope_is_cupellation_with_the_package_version() -> None:
    """Every span comes from the scope named cupellation at cupellation.__version__."""
    sdk = make_sdk()
    _run(sdk, "StageOnly")
    for span in sdk.spans:
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "cupellation"
        assert span.instrumentation_scope.version == cupellation.__version__


def test_stage_only_carries_the_chapter_attributes_and_no_item_events() -> None:
    """StageOnly: root has cupel.budget.max_tokens and cupel.verbosity; each stage has
    its name and item counts in and out (those of its stage events); no span events
    but the root's Sort timing, and no cupel.exclusion.count."""
    sdk = make_sdk()
    traced = run_both(_pipeline(), ITEMS, BUDGET, sdk.collector("StageOnly"))
    root = _root(sdk)
    assert attrs(root)["cupel.budget.max_tokens"] == 120
    assert attrs(root)["cupel.verbosity"] == "StageOnly"
    completed = {e.stage: e for e in traced.events if isinstance(e, StageCompleted)}
    for name in STAGES:
        span = _stage(sdk, name)
        event = completed[PipelineStage(name.capitalize())]
        assert attrs(span)["cupel.stage.item_count_in"] == event.items_in
        assert attrs(span)["cupel.stage.item_count_out"] == event.items_out
        assert span.events == ()
        assert "cupel.exclusion.count" not in attrs(span)


def test_stage_and_exclusions_puts_each_exclusion_on_the_stage_that_made_it() -> None:
    """StageAndExclusions: one cupel.exclusion event per excluded item, on the span
    of the deciding stage, with the chapter's reason, item kind and item tokens, and
    cupel.exclusion.count on every stage span; no inclusion events."""
    sdk = make_sdk()
    traced = run_both(_pipeline(), ITEMS, BUDGET,
                      sdk.collector("StageAndExclusions", layout="events"))
    expected = dict.fromkeys(STAGES, 0)
    for entry in traced.events:
        if type(entry).__name__ == "ItemExcluded":
            expected[str(entry.stage).lower()] += 1  # type: ignore[union-attr]
    assert expected["classify"] == 1
    assert expected["deduplicate"] == 1
    assert expected["slice"] >= 1
    for name in STAGES:
        span = _stage(sdk, name)
        exclusions = [e for e in span.events if e.name == "cupel.exclusion"]
        assert len(exclusions) == expected[name] == attrs(span)["cupel.exclusion.count"]
        for event in exclusions:
            assert isinstance(attrs(event)["cupel.exclusion.reason"], str)
            assert isinstance(attrs(event)["cupel.exclusion.item_kind"], str)
            assert isinstance(attrs(event)["cupel.exclusion.item_tokens"], int)
    (negative,) = _stage(sdk, "classify").events
    assert attrs(negative)["cupel.exclusion.reason"] == "NegativeTokens"
    assert attrs(negative)["cupel.exclusion.item_tokens"] == -2
    assert attrs(negative)["cupel.exclusion.tokens"] == -2
    assert attrs(negative)["cupel.exclusion.candidate_index"] == 6
    (duplicate,) = _stage(sdk, "deduplicate").events
    assert attrs(duplicate)["cupel.exclusion.reason"] == "Deduplicated"
    assert attrs(duplicate)["cupel.exclusion.deduplicated_against"] in (1, 2)
    assert not [e for s in sdk.spans for e in s.events if e.name == "cupel.item.included"]


def test_budget_exceeded_shares_item_tokens_and_names_the_available_tokens() -> None:
    """A BudgetExceeded exclusion carries cupel.exclusion.item_tokens once (the item's
    token count, which is the reason's too) and cupel.exclusion.available_tokens."""
    sdk = make_sdk()
    _run(sdk, "StageAndExclusions", layout="events")
    budget_events = [e for e in _stage(sdk, "slice").events
                     if attrs(e)["cupel.exclusion.reason"] == "BudgetExceeded"]
    assert budget_events
    for event in budget_events:
        assert isinstance(attrs(event)["cupel.exclusion.available_tokens"], int)
        assert "cupel.exclusion.reason.item_tokens" not in attrs(event)
        assert isinstance(attrs(event)["cupel.exclusion.seq"], int)
        assert isinstance(attrs(event)["cupel.exclusion.score"], float)


def test_full_records_included_items_on_the_root_after_place_completes() -> None:
    """Full: one cupel.item.included event per placed item, with kind, tokens and
    score, on the root span, stamped after the Place span ended, in placed order."""
    sdk = make_sdk()
    traced = run_both(_pipeline(), ITEMS, BUDGET, sdk.collector("Full", layout="events"))
    assert traced.result is not None
    root, place = _root(sdk), _stage(sdk, "place")
    included = [e for e in root.events if e.name == "cupel.item.included"]
    assert [attrs(e)["cupel.item.position"] for e in included] == list(
        range(len(traced.result)))
    assert [attrs(e)["cupel.item.tokens"] for e in included] == [
        i.tokens for i in traced.result]
    assert [attrs(e)["cupel.item.kind"] for e in included] == [
        i.kind.value for i in traced.result]
    assert [attrs(e)["cupel.item.score"] for e in included] == [
        i.score for i in traced.report.included]
    assert place.end_time is not None
    assert all(e.timestamp >= place.end_time for e in included)
    assert not [e for e in place.events if e.name == "cupel.item.included"]


def test_every_span_carries_gen_ai_and_openinference_attributes() -> None:
    """Langfuse keeps spans with a gen_ai.* attribute and Phoenix reads
    openinference.span.kind: both are on the root and every stage span."""
    sdk = make_sdk()
    _run(sdk, "StageOnly")
    for span in sdk.spans:
        assert attrs(span)["gen_ai.operation.name"] == "select_context"
        assert attrs(span)["openinference.span.kind"] == "CHAIN"


def test_root_attributes_beyond_the_chapter() -> None:
    """The root holds the run id, target, tokens used, utilisation and counts."""
    sdk = make_sdk()
    traced = run_both(_pipeline(), ITEMS, BUDGET, sdk.collector("StageOnly"))
    assert traced.result is not None
    attributes = attrs(_root(sdk))
    used = sum(item.tokens for item in traced.result)
    assert attributes["cupel.run.id"] == traced.events[0].run_id
    assert attributes["cupel.budget.target_tokens"] == 60
    assert attributes["cupel.run.included_tokens"] == used
    assert attributes["cupel.budget.utilization"] == used / 60
    assert attributes["cupel.run.candidate_count"] == len(ITEMS)
    assert attributes["cupel.run.included_count"] == len(traced.result)
    assert attributes["cupel.run.excluded_count"] == len(ITEMS) - len(traced.result)
    assert attributes["cupel.run.outcome"] == "completed"
    for span in sdk.spans:
        assert attrs(span)["cupel.run.id"] == traced.events[0].run_id


def test_stage_durations_are_exact_attributes_and_spans_last_the_stage() -> None:
    """cupel.stage.duration_ms is the stage_completed duration to the bit (a rebuilt
    report's TraceEvent.duration_ms is exact); the span lasts exactly that long (to the
    nanosecond), from the pipeline's own clock."""
    sdk = make_sdk()
    traced = run_both(_pipeline(), ITEMS, BUDGET, sdk.collector("StageOnly"))
    for event in traced.events:
        if isinstance(event, StageCompleted) and event.stage is not PipelineStage.SORT:
            span = _stage(sdk, event.stage.value.lower())  # type: ignore[union-attr]
            assert attrs(span)["cupel.stage.duration_ms"] == event.duration_ms
            assert span.end_time is not None
            assert span.start_time is not None
            assert span.end_time - span.start_time == round(event.duration_ms * 1_000_000)


class SpanningSlicer:
    """A slicer that opens a span of its own (as a custom slicer might)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /
              ) -> list[ContextItem]:
        """Greedy selection inside a span named custom.slice."""
        with self.tracer.start_as_current_span("custom.slice"):
            return GreedySlice().slice(scored, budget)


def test_a_custom_scorer_and_slicer_span_nest_under_their_stage_spans() -> None:
    """The stage span is current while the stage runs: a FunctionScorer that starts a
    span is nested under cupel.stage.score, a slicer's under cupel.stage.slice; and
    the caller's context is back after the run."""
    sdk = make_sdk()
    tracer = sdk.tracer_provider.get_tracer("custom")

    def score(item: ContextItem, items: Sequence[ContextItem]) -> float:
        with tracer.start_as_current_span("custom.score"):
            return float(item.tokens)

    pipeline = Pipeline(scorer=FunctionScorer(score), slicer=SpanningSlicer(tracer),
                        budget=BUDGET)
    with tracer.start_as_current_span("agent.step") as step, no_context_leak():
        run_both(pipeline, ITEMS, BUDGET, sdk.collector("StageOnly"))
        assert trace.get_current_span() is step
    score_span, slice_span = _stage(sdk, "score"), _stage(sdk, "slice")
    scored = sdk.by_name("custom.score")
    assert len(scored) == 5  # the scoreable items: not pinned, not negative
    for span in scored:
        assert span.parent is not None
        assert span.parent.span_id == score_span.context.span_id
        assert span.start_time is not None
        assert score_span.start_time is not None
        assert score_span.end_time is not None
        assert score_span.start_time <= span.start_time
        assert span.end_time is not None
        assert span.end_time <= score_span.end_time
    (sliced,) = sdk.by_name("custom.slice")
    assert sliced.parent is not None
    assert sliced.parent.span_id == slice_span.context.span_id


def test_overflow_and_count_shortfall_are_span_events_on_their_stage() -> None:
    """Under Proceed an overflow is a cupel.overflow event on the place span; a count
    quota that cannot be met is a cupel.count_shortfall event on the slice span."""
    sdk = make_sdk()
    pipeline = Pipeline(scorer=RecencyScorer(), overflow_strategy=OverflowStrategy.PROCEED)
    run_both(pipeline, [ContextItem("pinned", 60, pinned=True), ContextItem("a", 5)],
             ContextBudget(max_tokens=70, target_tokens=58), sdk.collector("StageOnly"))
    (overflow,) = [e for e in _stage(sdk, "place").events if e.name == "cupel.overflow"]
    assert attrs(overflow)["cupel.overflow.tokens_over_budget"] == 2
    assert list(attrs(overflow)["cupel.overflow.item_indices"]) == [0]
    assert attrs(overflow)["cupel.overflow.budget.target_tokens"] == 58

    sdk = make_sdk()
    pipeline = Pipeline(scorer=RecencyScorer(), slicer=CountQuotaSlice(
        GreedySlice(), [CountQuotaEntry("Document", require_count=2, cap_count=5)]))
    run_both(pipeline, [ContextItem("a", 5), ContextItem("d", 4, kind="Document")],
             ContextBudget(max_tokens=100, target_tokens=50), sdk.collector("StageOnly"))
    (shortfall,) = [e for e in _stage(sdk, "slice").events
                    if e.name == "cupel.count_shortfall"]
    assert attrs(shortfall)["cupel.count_shortfall.kind"] == "Document"
    assert attrs(shortfall)["cupel.count_shortfall.required_count"] == 2
    assert attrs(shortfall)["cupel.count_shortfall.satisfied_count"] == 1


@pytest.mark.parametrize("tier", ["StageOnly", "Full"])
def test_a_failed_run_records_the_exception_and_ends_every_span(tier: str) -> None:
    """A run whose scorer fails: the root records the exception with an ERROR status,
    the failing stage span is ERROR too, no later stage span exists, every span is
    ended, no context stays attached, and the run's own exception reaches the caller."""
    sdk = make_sdk()

    def bad(item: ContextItem, items: Sequence[ContextItem]) -> float:
        return float("nan")

    pipeline = Pipeline(scorer=FunctionScorer(bad), budget=BUDGET)
    with no_context_leak():
        traced = run_both(pipeline, ITEMS, BUDGET, sdk.collector(tier))
    assert isinstance(traced.error, ScorerError)
    root = _root(sdk)
    assert root.status.status_code is StatusCode.ERROR
    assert "ScorerError" in (root.status.description or "")
    exceptions = [e for e in root.events if e.name == "exception"]
    assert len(exceptions) == 1
    assert attrs(exceptions[0])["exception.type"] == "cupellation.exceptions.ScorerError"
    assert attrs(root)["cupel.run.outcome"] == "failed"
    assert attrs(root)["cupel.run.stage"] == "Score"
    assert _stage(sdk, "score").status.status_code is StatusCode.ERROR
    assert _stage(sdk, "classify").status.status_code is StatusCode.UNSET
    assert sorted(s.name for s in sdk.spans) == [
        "cupel.pipeline", "cupel.stage.classify", "cupel.stage.score"]
    assert all(s.end_time is not None for s in sdk.spans)


def test_tier_and_capture_are_read_back_and_validated() -> None:
    """The tier takes the chapter's names or the enum; a bad tier or capture raises
    at construction (record never raises)."""
    sdk = make_sdk()
    collector = sdk.collector("stage_and_exclusions", "hash")
    assert collector.detail_level is TraceDetailLevel.STAGE_AND_EXCLUSIONS
    assert collector.tier == "StageAndExclusions"
    assert collector.content_capture.value == "hash"
    assert "StageAndExclusions" in repr(collector)
    with pytest.raises(cupellation.exceptions.InvalidValueError):
        sdk.collector("Everything")
    with pytest.raises(cupellation.exceptions.InvalidValueError):
        sdk.collector("Full", "some")
