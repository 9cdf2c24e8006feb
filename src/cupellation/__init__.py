"""cupellation: choose the context items that fit an LLM's token budget, following
the Cupel specification, and explain every decision.

    from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
    from cupellation import DiagnosticTraceCollector, TraceDetailLevel

    pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(8000, 6000))
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    window = pipeline.run(candidates, collector=collector)
    report = collector.build_report()   # why each candidate was or was not chosen

The library logs only through the ``cupellation`` logger, which stays silent
(a ``NullHandler``) until the application configures logging.
"""

from __future__ import annotations

import logging as _logging

from ._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    EventObserver,
    FanOutCollector,
    NullTraceCollector,
    TraceCollector,
    TraceDetailLevel,
)
from ._events import (
    EVENT_SCHEMA_VERSION,
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
    UnknownEvent,
    event_from_json,
    event_to_json,
)
from ._model import (
    ContextBudget,
    ContextItem,
    ContextKind,
    ContextSource,
    OverflowStrategy,
    ScoredItem,
    ScoredItems,
)
from ._pipeline import Pipeline
from ._reasons import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequireCandidatesExhausted,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    UnknownExclusionReason,
)
from ._report import (
    ExcludedItem,
    IncludedItem,
    OverflowReport,
    SelectionReport,
    TraceEvent,
    build_report,
)
from .exceptions import (
    BudgetOverflowError,
    ConfigurationError,
    CountRequirementError,
    CupelError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
    PinnedBudgetError,
    PipelineError,
    ScorerError,
)
from .placing import ChronologicalPlacer, Placer, UShapedPlacer
from .scoring import (
    CompositeScorer,
    DecayScorer,
    FrequencyScorer,
    FunctionScorer,
    KindScorer,
    MetadataKeyScorer,
    MetadataTrustScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    ScaledScorer,
    Scorer,
    TagScorer,
)
from .slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    CountRequirementShortfall,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    ScarcityBehavior,
    Slicer,
)

__version__ = "0.1.0"

# A library never configures logging; it only makes sure its logger is quiet
# until the application does.
_logging.getLogger("cupellation").addHandler(_logging.NullHandler())

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "NULL_COLLECTOR",
    "BudgetExceeded",
    "BudgetOverflowError",
    "ChronologicalPlacer",
    "CompositeScorer",
    "ConfigurationError",
    "ContextBudget",
    "ContextItem",
    "ContextKind",
    "ContextSource",
    "CountCapExceeded",
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "CountRequireCandidatesExhausted",
    "CountRequirementError",
    "CountRequirementShortfall",
    "CountShortfall",
    "CupelError",
    "DecayScorer",
    "DecodeError",
    "Deduplicated",
    "DiagnosticTraceCollector",
    "EventObserver",
    "ExcludedItem",
    "ExclusionReason",
    "FanOutCollector",
    "Filtered",
    "FrequencyScorer",
    "FunctionScorer",
    "GreedySlice",
    "IncludedItem",
    "InclusionReason",
    "InvalidTypeError",
    "InvalidValueError",
    "ItemEventBatch",
    "ItemExcluded",
    "ItemIncluded",
    "KindScorer",
    "KnapsackSlice",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "NegativeTokens",
    "NullTraceCollector",
    "Overflow",
    "OverflowReport",
    "OverflowStrategy",
    "PinnedBudgetError",
    "PinnedOverride",
    "Pipeline",
    "PipelineError",
    "PipelineEvent",
    "PipelineStage",
    "Placer",
    "PriorityScorer",
    "QuotaCapExceeded",
    "QuotaEntry",
    "QuotaRequireDisplaced",
    "QuotaSlice",
    "RecencyScorer",
    "ReflexiveScorer",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "ScaledScorer",
    "ScarcityBehavior",
    "ScoredItem",
    "ScoredItems",
    "ScoredTooLow",
    "Scorer",
    "ScorerError",
    "SelectionReport",
    "Slicer",
    "StageCompleted",
    "TagScorer",
    "TraceCollector",
    "TraceDetailLevel",
    "TraceEvent",
    "UShapedPlacer",
    "UnknownEvent",
    "UnknownExclusionReason",
    "__version__",
    "build_report",
    "event_from_json",
    "event_to_json",
]
