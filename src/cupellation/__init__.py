"""cupellation: choose the context items that fit an LLM's token budget, following
the Cupel specification, and explain every decision.

    from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
    from cupellation import DiagnosticTraceCollector, TraceDetailLevel

    pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(8000, 6000))
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    window = pipeline.run(candidates, collector=collector)
    report = collector.build_report()   # why each candidate was or was not chosen

The top level holds what most programs import: the data model, the pipeline and
its built-in strategies, the collectors, the report, and the chat helpers. The
rest lives in one module per concern:

- :mod:`cupellation.scoring`, :mod:`~cupellation.slicing`,
  :mod:`~cupellation.placing`: the strategies, and how to write your own;
- :mod:`cupellation.policy`: a whole pipeline configuration as a value or a file;
- :mod:`cupellation.events`, :mod:`~cupellation.reasons`: the decisions a run
  makes, as events and reasons;
- :mod:`cupellation.otel`, :mod:`~cupellation.logs`, :mod:`~cupellation.store`:
  those decisions as spans, log records and rows in ClickHouse, and read back;
- :mod:`cupellation.chat`, :mod:`~cupellation.integrations`: chat messages and
  agent frameworks;
- :mod:`cupellation.analytics`, :mod:`~cupellation.testing`,
  :mod:`~cupellation.html`: questions about runs, assertions in tests, a report
  as a web page;
- :mod:`cupellation.exceptions` and :mod:`~cupellation.settings`: every error and
  every environment variable.

The library logs only through the ``cupellation`` logger, which stays silent
(a ``NullHandler``) until the application configures logging.
"""

from __future__ import annotations

import logging as _logging

from . import events, exceptions, reasons
from ._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    EventCollector,
    FanOutCollector,
    TraceCollector,
    TraceDetailLevel,
)
from ._model import (
    ContextBudget,
    ContextItem,
    ContextKind,
    ContextSource,
    OverflowStrategy,
    ScoredItem,
)
from ._pipeline import Pipeline
from ._report import ReportBuilder, SelectionReport, build_report
from ._run import use_trace_context as _use_trace_context
from ._tracecontext import current_span_ids as _current_span_ids
from ._version import __version__
from .chat import MessageHistory, SelectOptions, select_messages, select_messages_with_report
from .events import RunInfo
from .exceptions import CupelError
from .placing import ChronologicalPlacer, UShapedPlacer
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
    TagScorer,
)
from .slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
)

# A library never configures logging; it only makes sure its logger is quiet
# until the application does.
_logging.getLogger("cupellation").addHandler(_logging.NullHandler())

# The pipeline records the OpenTelemetry span current when a run starts; it asks
# for it through this source rather than importing OpenTelemetry itself (design.md).
_use_trace_context(_current_span_ids)

# The top level holds what most programs import; the rest lives in its module:
# events and their flat form in ``cupellation.events``, reasons in
# ``cupellation.reasons``, strategy protocols and helper types in
# ``cupellation.scoring`` / ``slicing`` / ``placing``, every exception in
# ``cupellation.exceptions``.
__all__ = [
    "NULL_COLLECTOR",
    "ChronologicalPlacer",
    "CompositeScorer",
    "ContextBudget",
    "ContextItem",
    "ContextKind",
    "ContextSource",
    "CountConstrainedKnapsackSlice",
    "CountQuotaSlice",
    "CupelError",
    "DecayScorer",
    "DiagnosticTraceCollector",
    "EventCollector",
    "FanOutCollector",
    "FrequencyScorer",
    "FunctionScorer",
    "GreedySlice",
    "KindScorer",
    "MessageHistory",
    "KnapsackSlice",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "OverflowStrategy",
    "Pipeline",
    "PriorityScorer",
    "QuotaSlice",
    "RecencyScorer",
    "ReflexiveScorer",
    "ReportBuilder",
    "RunInfo",
    "ScaledScorer",
    "ScoredItem",
    "SelectOptions",
    "SelectionReport",
    "TagScorer",
    "TraceCollector",
    "TraceDetailLevel",
    "UShapedPlacer",
    "__version__",
    "build_report",
    "events",
    "exceptions",
    "reasons",
    "select_messages",
    "select_messages_with_report",
]
