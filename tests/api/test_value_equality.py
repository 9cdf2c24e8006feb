"""``==`` and ``!=`` agree, and ``hash`` follows ``==``, for every public value type:
each is built twice from the same fields and once from other fields, and compared
as built, after ``copy.copy``, ``copy.deepcopy`` and pickle, and rebuilt from the
same fields. Every public class (the classes in ``__all__`` of ``cupellation`` and
of its public subpackages, and the report's entry types) is either a value type
here or named, with the reason, as not one: a new public class must join one or
the other.

IncludedItem and ExcludedItem had their own ``__eq__`` and msgspec's identity
``__ne__``: ``a == b`` and ``a != b`` were both true for equal entries."""

from __future__ import annotations

import copy
import importlib
import inspect
import io
import pickle
import pkgutil
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import cupellation
import cupellation_exporters
from cupellation import (
    ChronologicalPlacer,
    CompositeScorer,
    ContextBudget,
    ContextItem,
    ContextKind,
    ContextSource,
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    DecayScorer,
    EventCollector,
    FrequencyScorer,
    FunctionScorer,
    GreedySlice,
    KindScorer,
    KnapsackSlice,
    MetadataKeyScorer,
    MetadataTrustScorer,
    Pipeline,
    PriorityScorer,
    QuotaSlice,
    RecencyScorer,
    ReflexiveScorer,
    RunInfo,
    ScaledScorer,
    ScoredItem,
    SelectionReport,
    TagScorer,
    UShapedPlacer,
    analytics,
    chat,
    conformance,
    events,
    logs,
    otel,
    reasons,
    slicing,
    store,
)
from cupellation._report import ExcludedItem, IncludedItem, OverflowReport, TraceEvent
from cupellation.policy import Policy
from cupellation.reasons import Rivals
from cupellation.scoring import ExponentialCurve, FixedClock, StepCurve, WindowCurve
from cupellation.settings import Variable
from cupellation.slicing import CountQuotaEntry, QuotaEntry

AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
BUDGET = ContextBudget(100, 60)


def _item(content: str = "a", tokens: int = 10) -> ContextItem:
    return ContextItem(content=content, tokens=tokens, kind="Document", priority=2,
                       tags=["t"], metadata={"k": [1, {"n": None}]}, timestamp=AT)


def _score_half(item: ContextItem, items: Sequence[ContextItem]) -> float:
    """A module-level (so picklable) scorer."""
    return 0.5


def _score_one(item: ContextItem, items: Sequence[ContextItem]) -> float:
    """Another."""
    return 1.0


class _Recorder(EventCollector):
    """Keeps every event of a run."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[Any] = []

    def on_event(self, event: Any, /) -> None:
        self.events.append(event)


@cache
def _run() -> tuple[SelectionReport, tuple[Any, ...]]:
    """A report with inclusions and exclusions of several reasons, and its events."""
    items = [_item("a", 10), ContextItem(content="a", tokens=10, priority=1),
             ContextItem(content="pin", tokens=5, pinned=True), _item("big", 90),
             ContextItem(content="neg", tokens=-1)]
    collector = _Recorder()
    Pipeline(scorer=PriorityScorer()).run(items, BUDGET, collector)
    return cupellation.build_report(collector.events), tuple(collector.events)


@cache
def _logged() -> tuple[Any, ...]:
    """The same run read back from its log lines: its entries are deferred (built from
    the records the first time they are read)."""
    text = "".join(events.event_to_json(event) + "\n" for event in _run()[1])
    (run,) = list(logs.read_runs(io.StringIO(text)))
    return (run,)


def _entries(kind: str, index: int, *, logged: bool = False) -> Callable[[], Any]:
    def build() -> Any:
        report = _logged()[0].report if logged else _run()[0]
        entry = getattr(report, kind)[index]
        if logged:
            return entry
        return type(entry)(item=entry.item, score=entry.score, reason=entry.reason)
    return build


def _event(index: int) -> Callable[[], Any]:
    return lambda: events.event_from_json(events.event_to_json(_run()[1][index]))


#: Every public value type, with factories: each call builds a new instance from the
#: same fields; different factories use different fields (a class with no fields has
#: one). Pairs of instances are drawn from these.
VALUE_TYPES: dict[type, list[Callable[[], Any]]] = {
    ContextItem: [lambda: _item("a"), lambda: _item("b"), lambda: _item("a", 11)],
    ContextBudget: [lambda: ContextBudget(100, 60), lambda: ContextBudget(100, 50),
                    lambda: ContextBudget(100, 60, reserved_slots={"Message": 2})],
    ContextKind: [lambda: ContextKind("Message"), lambda: ContextKind("message"),
                  lambda: ContextKind("Memory")],
    ContextSource: [lambda: ContextSource("Chat"), lambda: ContextSource("Rag")],
    Variable: [lambda: Variable(name="A", owner="cupellation", meaning="m", read_by="r"),
               lambda: Variable(name="A", owner="tiktoken", meaning="m", read_by="r")],
    RunInfo: [lambda: RunInfo(session_id="s"), lambda: RunInfo(session_id="t"),
              lambda: RunInfo(user_id="s")],
    ChronologicalPlacer: [ChronologicalPlacer],
    UShapedPlacer: [UShapedPlacer],
    GreedySlice: [GreedySlice],
    KnapsackSlice: [KnapsackSlice, lambda: KnapsackSlice(bucket_size=10)],
    QuotaSlice: [lambda: QuotaSlice(GreedySlice(), [QuotaEntry("Message", cap=50.0)]),
                 lambda: QuotaSlice(GreedySlice(), [QuotaEntry("Message", cap=40.0)])],
    CountQuotaSlice: [
        lambda: CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Message", 1, cap_count=3)]),
        lambda: CountQuotaSlice(GreedySlice(), [CountQuotaEntry("Message", 1, cap_count=2)])],
    CountConstrainedKnapsackSlice: [
        lambda: CountConstrainedKnapsackSlice([CountQuotaEntry("Tool", 0, cap_count=3)]),
        lambda: CountConstrainedKnapsackSlice([CountQuotaEntry("Tool", 1, cap_count=3)])],
    PriorityScorer: [PriorityScorer],
    RecencyScorer: [RecencyScorer],
    ReflexiveScorer: [ReflexiveScorer],
    FrequencyScorer: [FrequencyScorer],
    KindScorer: [KindScorer, lambda: KindScorer({"Message": 0.5})],
    MetadataTrustScorer: [MetadataTrustScorer, lambda: MetadataTrustScorer(0.25)],
    MetadataKeyScorer: [lambda: MetadataKeyScorer("k", "v", 1.5),
                        lambda: MetadataKeyScorer("k", "w", 1.5)],
    TagScorer: [lambda: TagScorer({"t": 1.0}), lambda: TagScorer({"t": 2.0})],
    ScaledScorer: [lambda: ScaledScorer(PriorityScorer()), lambda: ScaledScorer(KindScorer())],
    CompositeScorer: [lambda: CompositeScorer([(PriorityScorer(), 1.0), (KindScorer(), 2.0)]),
                      lambda: CompositeScorer([(PriorityScorer(), 1.0), (KindScorer(), 3.0)])],
    DecayScorer: [lambda: DecayScorer(WindowCurve(timedelta(hours=1)), clock=FixedClock(AT)),
                  lambda: DecayScorer(WindowCurve(timedelta(hours=2)), clock=FixedClock(AT))],
    FunctionScorer: [lambda: FunctionScorer(_score_half, "half"),
                     lambda: FunctionScorer(_score_one, "one")],
    FixedClock: [lambda: FixedClock(AT), lambda: FixedClock(AT + timedelta(seconds=1))],
    ExponentialCurve: [lambda: ExponentialCurve(timedelta(hours=1)),
                       lambda: ExponentialCurve(timedelta(hours=2))],
    WindowCurve: [lambda: WindowCurve(timedelta(hours=1)),
                  lambda: WindowCurve(timedelta(hours=3))],
    StepCurve: [lambda: StepCurve([(timedelta(hours=1), 0.5)]),
                lambda: StepCurve([(timedelta(hours=1), 0.25)])],
    QuotaEntry: [lambda: QuotaEntry("Message", cap=50.0), lambda: QuotaEntry("Tool", cap=50.0)],
    CountQuotaEntry: [lambda: CountQuotaEntry("Message", 1, cap_count=3),
                      lambda: CountQuotaEntry("Message", 2, cap_count=3)],
    Policy: [lambda: Policy(scorer=PriorityScorer()), lambda: Policy(scorer=RecencyScorer()),
             lambda: Policy(scorer=PriorityScorer(), name="p")],
    Pipeline: [lambda: Pipeline(scorer=PriorityScorer()),
               lambda: Pipeline(scorer=PriorityScorer(), budget=BUDGET)],
    SelectionReport: [lambda: _run()[0], lambda: SelectionReport.from_json(_run()[0].to_json()),
                      lambda: _logged()[0].report,
                      lambda: SelectionReport(events=(), included=(), excluded=(),
                                              total_candidates=0, total_tokens_considered=0)],
    IncludedItem: [_entries("included", 0), _entries("included", 1),
                   _entries("included", 0, logged=True), _entries("included", 1, logged=True)],
    ExcludedItem: [_entries("excluded", 0), _entries("excluded", 1),
                   _entries("excluded", 0, logged=True), _entries("excluded", 1, logged=True)],
    TraceEvent: [lambda: TraceEvent(stage="Slice", duration_ms=1.0, item_count=2),
                 lambda: TraceEvent(stage="Slice", duration_ms=1.0, item_count=3)],
    OverflowReport: [lambda: OverflowReport(tokens_over_budget=3, overflowing_items=(_item(),),
                                            budget=BUDGET),
                     lambda: OverflowReport(tokens_over_budget=4, overflowing_items=(_item(),),
                                            budget=BUDGET)],
    ScoredItem: [lambda: ScoredItem(_item(), 0.5), lambda: ScoredItem(_item(), 0.25)],
    slicing.ScoredItems: [lambda: slicing.ScoredItems([_item()], [0.5]),
                          lambda: slicing.ScoredItems([_item()], [0.25])],
    slicing.CapExclusion: [lambda: slicing.CapExclusion(_item(), ContextKind("Tool"), 1, 2),
                           lambda: slicing.CapExclusion(_item(), ContextKind("Tool"), 1, 3)],
    slicing.CountRequirementShortfall: [
        lambda: slicing.CountRequirementShortfall(ContextKind("Tool"), 2, 1),
        lambda: slicing.CountRequirementShortfall(ContextKind("Tool"), 2, 0)],
    slicing.SliceOutcome: [lambda: slicing.SliceOutcome((_item(),)),
                           lambda: slicing.SliceOutcome((_item("b"),))],
    analytics.AgainstAnswer: [
        lambda: analytics.AgainstAnswer(label="a", included=True, reason=None, error=None),
        lambda: analytics.AgainstAnswer(label="a", included=False, reason=None, error=None)],
    analytics.BudgetAnswer: [
        lambda: analytics.BudgetAnswer(budget=5, increase=1, ceiling=9, dry_runs=2,
                                       explanation=None),
        lambda: analytics.BudgetAnswer(budget=6, increase=1, ceiling=9, dry_runs=2,
                                       explanation=None)],
    analytics.BudgetSearch: [
        lambda: analytics.BudgetSearch(budget=5, low=1, ceiling=9, dry_runs=2,
                                       excluded_before_slice=False),
        lambda: analytics.BudgetSearch(budget=5, low=2, ceiling=9, dry_runs=2,
                                       excluded_before_slice=False)],
    analytics.KindQuotaUtilization: [
        lambda: analytics.KindQuotaUtilization(kind=ContextKind("Tool"), unit="items", used=1,
                                               require=0, cap=2, utilization=0.5),
        lambda: analytics.KindQuotaUtilization(kind=ContextKind("Tool"), unit="items", used=2,
                                               require=0, cap=2, utilization=1.0)],
    analytics.BudgetPoint: [
        lambda: analytics.BudgetPoint(budget=ContextBudget(100, 60), report=None, failure="f"),
        lambda: analytics.BudgetPoint(budget=ContextBudget(100, 50), report=None, failure="f")],
    analytics.MessageBudgetPoint: [
        lambda: analytics.MessageBudgetPoint(budget=ContextBudget(100, 60), selection=None,
                                             failure="f"),
        lambda: analytics.MessageBudgetPoint(budget=ContextBudget(100, 60), selection=None,
                                             failure="g")],
    analytics.MessageUnit: [
        lambda: analytics.MessageUnit(indices=(0,), messages=("a",), tokens=1,
                                      kind="Message", pinned=False),
        lambda: analytics.MessageUnit(indices=(1,), messages=("a",), tokens=1,
                                      kind="Message", pinned=True)],
    analytics.MessageSwing: [
        lambda: analytics.MessageSwing(unit=analytics.MessageUnit(
            indices=(0,), messages=("a",), tokens=1, kind="Message", pinned=False),
            statuses=()),
        lambda: analytics.MessageSwing(unit=analytics.MessageUnit(
            indices=(2,), messages=("b",), tokens=1, kind="Message", pinned=False),
            statuses=())],
    analytics.MessageSensitivityReport: [
        lambda: analytics.MessageSensitivityReport(variants=(), diffs=()),
        lambda: analytics.MessageSensitivityReport(variants=(), diffs=(
            analytics.MessageSwing(unit=analytics.MessageUnit(
                indices=(0,), messages=("a",), tokens=1, kind="Message", pinned=False),
                statuses=()),))],
    Rivals: [lambda: Rivals(kind="none"), lambda: Rivals(kind="pinned", reference=1)],
    analytics.PolicySensitivityDiffEntry: [
        lambda: analytics.PolicySensitivityDiffEntry(content="a", statuses=()),
        lambda: analytics.PolicySensitivityDiffEntry(content="b", statuses=())],
    analytics.PolicySensitivityReport: [
        lambda: analytics.PolicySensitivityReport(variants=(("a", _run()[0]),), diffs=()),
        lambda: analytics.PolicySensitivityReport(variants=(), diffs=())],
    analytics.ReportDiff: [
        lambda: analytics.ReportDiff(gained=(), lost=(), reason_changed=(), only_in_a=(),
                                     only_in_b=(), kept=1, included_tokens=(1, 1),
                                     included_count=(1, 1), incomplete=((), ())),
        lambda: analytics.ReportDiff(gained=(), lost=(), reason_changed=(), only_in_a=("x",),
                                     only_in_b=(), kept=1, included_tokens=(1, 1),
                                     included_count=(1, 1), incomplete=((), ()))],
    analytics.ReplayableRun: [
        lambda: analytics.ReplayableRun(run_id="r", started_at=AT, budget=BUDGET, policy={},
                                        content_capture="full", candidates=(_item(),),
                                        logged_reasons=()),
        lambda: analytics.ReplayableRun(run_id="s", started_at=AT, budget=BUDGET, policy={},
                                        content_capture="full", candidates=(_item(),),
                                        logged_reasons=())],
    chat.MessageSelection: [
        lambda: chat.MessageSelection(messages=[], report=_run()[0], kept=(), dropped=(),
                                      trimmed=(), thinking_stripped=(), tokens=0,
                                      token_counter="estimate", token_estimates=True),
        lambda: chat.MessageSelection(messages=[], report=_run()[0], kept=(), dropped=(),
                                      trimmed=(), thinking_stripped=(), tokens=1,
                                      token_counter="estimate", token_estimates=True)],
    conformance.VectorResult: [
        lambda: conformance.VectorResult(Path("v.toml"), "v", "slice", True),
        lambda: conformance.VectorResult(Path("v.toml"), "v", "slice", False, "why")],
    conformance.ConformanceSummary: [
        lambda: conformance.ConformanceSummary(()),
        lambda: conformance.ConformanceSummary(
            (conformance.VectorResult(Path("v.toml"), "v", None, True),))],
    logs.DamagedLine: [lambda: logs.DamagedLine("f", 1, "bad"),
                       lambda: logs.DamagedLine("f", 2, "bad")],
    logs.ReadStats: [logs.ReadStats, lambda: logs.ReadStats(lines=3)],
    logs.LoggedRun: [lambda: _logged()[0],
                     lambda: logs.LoggedRun("r", _run()[0], None, None, None, "f", 1, 0)],
    otel.SpanEventData: [lambda: otel.SpanEventData("e", {"a": 1}),
                         lambda: otel.SpanEventData("e", {"a": 2})],
    otel.SpanData: [lambda: otel.SpanData("s", {"a": (1, 2)}),
                    lambda: otel.SpanData("s", {"a": (1, 3)})],
    otel.RebuiltRun: [lambda: otel.RebuiltRun("r", _run()[0], ()),
                      lambda: otel.RebuiltRun("r", _run()[0], (), problems=("gap",))],
    events.ItemEventBatch: [
        lambda: events.ItemEventBatch(run_id="r", first_seq=3, stage=None,
                                      candidate_indices=[0], items=[_item()], scores=[0.5],
                                      reasons=[reasons.InclusionReason.SCORED], positions=[0]),
        lambda: events.ItemEventBatch(run_id="r", first_seq=3, stage=None,
                                      candidate_indices=[0], items=[_item()], scores=[0.25],
                                      reasons=[reasons.InclusionReason.SCORED], positions=[0])],
    events.RunDigest: [],  # filled below: a hash in progress, compared by identity
    reasons.InclusionReason: [lambda: reasons.InclusionReason.SCORED,
                              lambda: reasons.InclusionReason(name="Pinned")],
    reasons.UnknownExclusionReason: [
        lambda: reasons.UnknownExclusionReason(reason_name="X", fields={"a": [1]}),
        lambda: reasons.UnknownExclusionReason(reason_name="X", fields={"a": [2]})],
    reasons.BudgetExceeded: [lambda: reasons.BudgetExceeded(item_tokens=1, available_tokens=0),
                             lambda: reasons.BudgetExceeded(item_tokens=2, available_tokens=0)],
    reasons.ScoredTooLow: [lambda: reasons.ScoredTooLow(score=0.1, threshold=0.5),
                           lambda: reasons.ScoredTooLow(score=0.2, threshold=0.5)],
    reasons.Deduplicated: [lambda: reasons.Deduplicated(deduplicated_against=3),
                           lambda: reasons.Deduplicated(deduplicated_against="x")],
    reasons.QuotaCapExceeded: [lambda: reasons.QuotaCapExceeded(kind="M", cap=1, actual=2),
                               lambda: reasons.QuotaCapExceeded(kind="M", cap=1, actual=3)],
    reasons.QuotaRequireDisplaced: [
        lambda: reasons.QuotaRequireDisplaced(displaced_by_kind="M"),
        lambda: reasons.QuotaRequireDisplaced(displaced_by_kind="N")],
    reasons.NegativeTokens: [lambda: reasons.NegativeTokens(tokens=-1),
                             lambda: reasons.NegativeTokens(tokens=-2)],
    reasons.PinnedOverride: [lambda: reasons.PinnedOverride(displaced_by=1),
                             lambda: reasons.PinnedOverride(displaced_by="p")],
    reasons.Filtered: [lambda: reasons.Filtered(filter_name="f"),
                       lambda: reasons.Filtered(filter_name="g")],
    reasons.CountCapExceeded: [lambda: reasons.CountCapExceeded(kind="M", cap=1, count=2),
                               lambda: reasons.CountCapExceeded(kind="M", cap=2, count=2)],
    reasons.CountRequireCandidatesExhausted: [
        lambda: reasons.CountRequireCandidatesExhausted(kind="M"),
        lambda: reasons.CountRequireCandidatesExhausted(kind="N")],
    reasons.Rivals: [lambda: reasons.Rivals(kind="pinned", reference="p", takes_room=True),
                     lambda: reasons.Rivals(kind="pinned", reference="q", takes_room=True)],
    events.CountShortfall: [
        lambda: events.CountShortfall(run_id="r", seq=6, kind="M", required_count=2,
                                      satisfied_count=1),
        lambda: events.CountShortfall(run_id="r", seq=6, kind="M", required_count=3,
                                      satisfied_count=1)],
    events.UnknownEvent: [
        lambda: events.event_from_json('{"schema": 2, "type": "future", "run_id": "r", '
                                       '"seq": 8, "x": {"y": [1]}}'),
        lambda: events.event_from_json('{"schema": 2, "type": "future", "run_id": "r", '
                                       '"seq": 8, "x": {"y": [2]}}')],
}
del VALUE_TYPES[events.RunDigest]
VALUE_TYPES[cupellation_exporters.ReplayedRun] = [
    lambda: cupellation_exporters.ReplayedRun("r", "s", ()),
    lambda: cupellation_exporters.ReplayedRun("r", "s", (), problem="gap")]
VALUE_TYPES[cupellation_exporters.ReplayResult] = [
    cupellation_exporters.ReplayResult, lambda: cupellation_exporters.ReplayResult(runs=2)]


def _events_of(kind: type) -> list[Callable[[], Any]]:
    """Factories of the demo run's events of ``kind``, read back from their JSON."""
    return [_event(index) for index, event in enumerate(_run()[1]) if type(event) is kind]


for _kind in (events.RunStarted, events.StageStarted, events.StageCompleted,
              events.ItemIncluded, events.ItemExcluded, events.RunCompleted):
    VALUE_TYPES[_kind] = _events_of(_kind)
VALUE_TYPES[events.RunFailed] = [
    lambda: events.RunFailed(run_id="r", seq=3, stage="Score", error_type="ValueError",
                             error_text="boom", duration_ms=1.0),
    lambda: events.RunFailed(run_id="r", seq=3, stage="Score", error_type="ValueError",
                             error_text="bang", duration_ms=1.0)]
VALUE_TYPES[events.Overflow] = [
    lambda: events.Overflow(run_id="r", seq=5, tokens_over_budget=3, item_indices=(0, 1),
                            budget=BUDGET),
    lambda: events.Overflow(run_id="r", seq=5, tokens_over_budget=4, item_indices=(0, 1),
                            budget=BUDGET)]

#: Public classes that are not value types, and why: equality means identity for them.
NOT_VALUE_TYPES: dict[str, str] = {
    "DiagnosticTraceCollector": "a sink collecting one run",
    "EventCollector": "a base for sinks",
    "BaseExclusionReason": "a base for reasons (each reason is a value type)",
    "FanOutCollector": "a sink forwarding to others",
    "TraceCollector": "a protocol",
    "ReportBuilder": "a fold in progress",
    "MessageHistory": "a growing conversation",
    "TextCounter": "a counter with its cache of counts",
    "PreparedCandidates": "a cache for repeated dry runs",
    "ReplaySummary": "an accumulator",
    "Subcommand": "a protocol",
    "RunDigest": "a hash in progress",
    "RunLineEncoder": "an encoder with a digest in progress",
    "AuditLog": "an open file sink",
    "LogReader": "an iterator over files",
    "StoreRuns": "an iterator over a store's runs",
    "StructlogSink": "a sink",
    "SpanCollector": "a sink",
    "Placer": "a protocol",
    "Slicer": "a protocol",
    "DetailedSlicer": "a protocol",
    "Scorer": "a protocol",
    "ScorerBase": "an abstract base",
    "DecayCurve": "an abstract base",
    "SelectionReportAssertionChain": "a test helper",
    "CapturedSpans": "a test helper holding providers",
    "DropCounter": "a tally that grows",
    "DropCountingSpanExporter": "an exporter",
    "DropCountingSpanProcessor": "a span processor with a queue and a thread",
    "EventLogExporter": "a file sink",
    "OtlpJsonFileSpanExporter": "an exporter holding a file",
    "ReportFileExporter": "a file sink",
    "OtlpProviders": "the providers setup_otlp made",
    "ReplaySource": "a protocol",
    "SelectKeywords": "a TypedDict: the keyword form of SelectOptions",
    "LogRecordCollector": "a sink",
    "Window": "a framework hook holding its last selection",
    "WindowMiddleware": "a framework hook holding its last selection",
    "InputFilter": "a framework hook holding its last selection",
    "HistoryProcessor": "a framework hook holding its last selection",
    "Store": "an open connection",
}

# Issues 23 and 24: the selection options and the fleet store's values.
VALUE_TYPES[cupellation.SelectOptions] = [
    lambda: cupellation.SelectOptions(max_tokens=800),
    lambda: cupellation.SelectOptions(max_tokens=800, trim={"ToolOutput": 200})]
VALUE_TYPES[store.StoreLocation] = [
    lambda: store.StoreLocation(url="chdb:///a", scheme="chdb", database="d", path="/a"),
    lambda: store.StoreLocation(url="chdb:///b", scheme="chdb", database="d", path="/b")]
VALUE_TYPES[store.RunQuery] = [
    lambda: store.RunQuery(services=("a",)), lambda: store.RunQuery(match="contract.*")]
VALUE_TYPES[store.LoadStats] = [
    lambda: store.LoadStats(sources=["a.jsonl"], lines=3, loaded=3),
    lambda: store.LoadStats(sources=["a.jsonl"], lines=3, loaded=2, skipped=1)]
VALUE_TYPES[store.ExclusionCount] = [
    lambda: store.ExclusionCount(bucket=AT, service="s", reason="BudgetExceeded",
                                 kind="Tool", count=2),
    lambda: store.ExclusionCount(bucket=None, service="s", reason="BudgetExceeded",
                                 kind="Tool", count=2)]
VALUE_TYPES[store.FailureCount] = [
    lambda: store.FailureCount(service="s", error_type="PinnedBudgetError", runs=1),
    lambda: store.FailureCount(service="t", error_type="PinnedBudgetError", runs=1)]
VALUE_TYPES[store.SourceCount] = [
    lambda: store.SourceCount(source="Chat", count=3, top_reason="BudgetExceeded"),
    lambda: store.SourceCount(source="Chat", count=4, top_reason="BudgetExceeded")]
VALUE_TYPES[store.UtilizationStats] = [
    lambda: store.UtilizationStats(service="s", runs=2, p50=0.5, p90=0.9, p99=0.9,
                                   minimum=0.1, maximum=0.9),
    lambda: store.UtilizationStats(service="s", runs=2, p50=0.4, p90=0.9, p99=0.9,
                                   minimum=0.1, maximum=0.9)]
VALUE_TYPES[store.FleetStats] = [
    lambda: store.FleetStats(bucket="day", runs=2, completed_runs=2, failed_runs=0,
                             incomplete_runs=1, incomplete_causes=(("no end event", 1),),
                             overflow_events=0, exclusions=(), utilization=(),
                             failures=(), top_sources=()),
    lambda: store.FleetStats(bucket="hour", runs=2, completed_runs=2, failed_runs=0,
                             incomplete_runs=0, incomplete_causes=(), overflow_events=0,
                             exclusions=(), utilization=(), failures=(), top_sources=())]


def _public_classes() -> Iterator[type]:
    """The classes in ``__all__`` of cupellation, its public subpackages and
    cupellation_exporters (exceptions and enumerations aside), and the report's entry
    types."""
    names = ["cupellation", "cupellation_exporters"] + [
        module.name for module in pkgutil.walk_packages(cupellation.__path__, "cupellation.")
        if not any(part.startswith("_") for part in module.name.split("."))]
    seen: set[type] = set()
    for name in names:
        module = importlib.import_module(name)
        for attribute in getattr(module, "__all__", ()):
            value = getattr(module, attribute)
            if (inspect.isclass(value) and not issubclass(value, BaseException)
                    and not _is_enum(value) and value not in seen):
                seen.add(value)
                yield value
    yield from (IncludedItem, ExcludedItem, TraceEvent, OverflowReport)


def _is_enum(value: type) -> bool:
    import enum  # noqa: PLC0415

    return issubclass(value, enum.Enum)


def test_every_public_class_is_a_value_type_here_or_named_as_not_one() -> None:
    """No public class escapes the equality property below: each is in VALUE_TYPES
    (with a factory) or in NOT_VALUE_TYPES (with the reason)."""
    missing = [cls.__qualname__ for cls in _public_classes()
               if cls not in VALUE_TYPES and cls.__name__ not in NOT_VALUE_TYPES]
    assert missing == []
    assert all(VALUE_TYPES.values())


def _round_trips() -> list[Callable[[Any], Any]]:
    """As built, copied, deep-copied and pickled."""
    return [lambda value: value, copy.copy, copy.deepcopy,
            lambda value: pickle.loads(pickle.dumps(value))]


def _agree(a: Any, b: Any) -> None:
    equal = a == b
    unequal = a != b
    assert isinstance(equal, bool), (type(a), equal)
    assert isinstance(unequal, bool), (type(a), unequal)
    assert equal != unequal, (type(a).__qualname__, a, b, equal, unequal)
    assert (b == a) == equal, (type(a).__qualname__, a, b)
    if equal and _hashable(a) and _hashable(b):
        assert hash(a) == hash(b), (type(a).__qualname__, a, b)


def _hashable(value: Any) -> bool:
    """Whether ``hash(value)`` answers (a frozen dataclass holding a dict is not, as a
    tuple holding a list is not)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_equal_and_unequal_pairs_agree_on_eq_ne_and_hash(data: st.DataObject) -> None:
    """For a drawn public value type, two instances built from drawn (the same or
    other) fields, each as built, copied, deep-copied, pickled or rebuilt:
    ``(a == b) != (a != b)``, ``==`` is symmetric, and equal hashable values hash
    alike."""
    kind = data.draw(st.sampled_from(sorted(VALUE_TYPES, key=lambda cls: cls.__qualname__)))
    factories = VALUE_TYPES[kind]
    first = data.draw(st.sampled_from(factories))
    second = data.draw(st.sampled_from(factories))
    trips = _round_trips()
    a = data.draw(st.sampled_from(trips))(first())
    b = data.draw(st.sampled_from(trips))(second())
    _agree(a, b)
    _agree(a, a)
    _agree(first(), first())


def test_every_value_type_against_every_round_trip_of_itself() -> None:
    """Exhaustively, for each factory of each value type: the instance compared with
    its copy, deep copy, pickle and a rebuild from the same fields (all equal), and
    with every other factory's instance, agrees on ``==``, ``!=`` and ``hash``; the
    equal pairs really are equal (so the agreement is tested where it broke)."""
    for kind, factories in VALUE_TYPES.items():
        for factory in factories:
            value = factory()
            twins = [trip(value) for trip in _round_trips()] + [factory()]
            for twin in twins:
                _agree(value, twin)
                assert value == twin, kind.__qualname__
            for other in factories:
                _agree(value, other())
