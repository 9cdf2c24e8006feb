"""Every public constructor refuses an argument of the wrong type with a named error:
each public class (``__all__`` of ``cupellation``, of its public subpackages and of
``cupellation_exporters``) is built
from valid arguments with one of them replaced by a value of another type (None, a
number, text, bytes, a bare object, a list or mapping of bare objects, and generated
values), and either accepts it or raises a CupelError, never a bare TypeError,
AttributeError or other exception from inside (an ``InvalidTypeError`` is also a
``TypeError``: the check is that the class is a CupelError).

``MessageHistory(None)`` and ``MessageHistory(5)`` raised a bare TypeError."""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import pkgutil
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import cupellation
from cupellation import (
    ContextBudget,
    ContextItem,
    ContextKind,
    DiagnosticTraceCollector,
    GreedySlice,
    MessageHistory,
    Pipeline,
    PriorityScorer,
    SelectionReport,
    TraceDetailLevel,
)
from cupellation.analytics import MessageUnit
from cupellation.exceptions import CupelError, InvalidTypeError
from cupellation.policy import Policy
from cupellation.reasons import InclusionReason
from cupellation.scoring import FixedClock, WindowCurve
from cupellation.slicing import CapExclusion, CountQuotaEntry

AT = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
ITEM = ContextItem(content="a", tokens=3)
BUDGET = ContextBudget(100, 60)
_FOLDER = Path(tempfile.mkdtemp(prefix="cupellation-constructors-"))


@pytest.fixture(autouse=True, scope="module")
def _remove_folder() -> Iterator[None]:
    """The files the constructors made (audit logs named by wrong values) go at the end."""
    yield
    shutil.rmtree(_FOLDER, ignore_errors=True)


def _report() -> SelectionReport:
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=PriorityScorer()).run([ITEM], BUDGET, collector)
    return collector.build_report()


def _score(item: ContextItem, items: Any) -> float:
    return 0.5


#: Valid arguments of each public constructor with required parameters, by name
#: (keyword arguments; ``*args`` under ``"*"``).
VALID: dict[str, Callable[[], dict[str, Any]]] = {
    "CompositeScorer": lambda: {"children": [(PriorityScorer(), 1.0)]},
    "ContextBudget": lambda: {"max_tokens": 100, "target_tokens": 60},
    "ContextItem": lambda: {"content": "a", "tokens": 3},
    "ContextKind": lambda: {"value": "Message"},
    "ContextSource": lambda: {"value": "Chat"},
    "CountConstrainedKnapsackSlice": lambda: {
        "entries": [CountQuotaEntry("Tool", 0, cap_count=2)]},
    "CountQuotaSlice": lambda: {"inner": GreedySlice(),
                                "entries": [CountQuotaEntry("Tool", 0, cap_count=2)]},
    "DecayScorer": lambda: {"curve": WindowCurve(timedelta(hours=1)), "clock": FixedClock(AT)},
    "FunctionScorer": lambda: {"fn": _score},
    "MetadataKeyScorer": lambda: {"key": "k", "value": "v", "boost": 1.5},
    "Pipeline": lambda: {"scorer": PriorityScorer()},
    "QuotaSlice": lambda: {"inner": GreedySlice()},
    "ScaledScorer": lambda: {"inner": PriorityScorer()},
    "SelectionReport": lambda: {"events": (), "included": (), "excluded": (),
                                "total_candidates": 0, "total_tokens_considered": 0},
    "TagScorer": lambda: {"tag_weights": {"t": 1.0}},
    "FanOutCollector": lambda: {"*": (DiagnosticTraceCollector(),)},
    "AgainstAnswer": lambda: {"label": "a", "included": True, "reason": None, "error": None},
    "BudgetAnswer": lambda: {"budget": 5, "increase": 1, "ceiling": 9, "dry_runs": 2,
                             "explanation": None},
    "BudgetSearch": lambda: {"budget": 5, "low": 1, "ceiling": 9, "dry_runs": 2,
                             "excluded_before_slice": False},
    "KindQuotaUtilization": lambda: {"kind": ContextKind("Tool"), "unit": "items", "used": 1,
                                     "require": 0, "cap": 2, "utilization": 0.5},
    "PolicySensitivityDiffEntry": lambda: {"content": "a", "statuses": ()},
    "PolicySensitivityReport": lambda: {"variants": (), "diffs": ()},
    "PreparedCandidates": lambda: {"pipeline": Pipeline(scorer=PriorityScorer()),
                                   "candidates": [ITEM]},
    "ReplaySummary": lambda: {"policy": Policy(scorer=PriorityScorer()), "label": "a"},
    "ReplayableRun": lambda: {"run_id": "r", "started_at": AT, "budget": BUDGET, "policy": {},
                              "content_capture": "full", "candidates": (ITEM,),
                              "logged_reasons": ()},
    "ReportDiff": lambda: {"gained": (), "lost": (), "reason_changed": (), "only_in_a": (),
                           "only_in_b": (), "kept": 1, "included_tokens": (1, 1),
                           "included_count": (1, 1), "incomplete": ((), ())},
    "MessageSelection": lambda: {"messages": [], "report": _report(), "kept": (),
                                 "dropped": (), "trimmed": (), "thinking_stripped": (),
                                 "tokens": 0, "token_counter": "estimate",
                                 "token_estimates": True},
    "TextCounter": lambda: {"name": "len", "count": len, "estimate": True},
    "ConformanceSummary": lambda: {"results": ()},
    "VectorResult": lambda: {"path": Path("v.toml"), "name": "v", "stage": None,
                             "passed": True},
    "CountShortfall": lambda: {"run_id": "r", "seq": 1, "kind": "Tool", "required_count": 2,
                               "satisfied_count": 1},
    "ItemEventBatch": lambda: {"run_id": "r", "first_seq": 3, "stage": None,
                               "candidate_indices": [0], "items": [ITEM], "scores": [0.5],
                               "reasons": [InclusionReason.SCORED], "positions": [0]},
    "ItemExcluded": lambda: {"run_id": "r", "seq": 1, "stage": "Slice", "candidate_index": 0,
                             "score": 0.5, "item": ITEM,
                             "reason": cupellation.reasons.Filtered(filter_name="f")},
    "ItemIncluded": lambda: {"run_id": "r", "seq": 1, "candidate_index": 0, "position": 0,
                             "score": 0.5, "item": ITEM, "reason": InclusionReason.SCORED},
    "Overflow": lambda: {"run_id": "r", "seq": 1, "tokens_over_budget": 3,
                         "item_indices": (0,), "budget": BUDGET},
    "RunCompleted": lambda: {"run_id": "r", "seq": 1, "duration_ms": 1.0, "included_count": 1,
                             "included_tokens": 3, "excluded_count": 0},
    "RunFailed": lambda: {"run_id": "r", "seq": 1, "error_type": "E", "error_text": "boom",
                          "duration_ms": 1.0},
    "RunLineEncoder": lambda: {"capture": cupellation.events.ContentCapture.FULL},
    "RunStarted": lambda: {"run_id": "r", "seq": 0, "started_at": AT, "budget": BUDGET,
                           "pipeline": {"scorer": "Priority"}, "candidate_count": 1,
                           "candidate_tokens": 3, "detail_level": "Full"},
    "StageCompleted": lambda: {"run_id": "r", "seq": 1, "stage": "Slice", "duration_ms": 1.0,
                               "items_in": 1, "items_out": 1},
    "StageStarted": lambda: {"run_id": "r", "seq": 1, "stage": "Slice", "items_in": 1},
    "UnknownEvent": lambda: {"run_id": "r", "seq": 1, "event_type": "future", "fields": {}},
    "AuditLog": lambda: {"path": _FOLDER / "audit.jsonl"},
    "DamagedLine": lambda: {"source": "f", "line": 1, "problem": "bad"},
    "LogReader": lambda: {"sources": [_FOLDER / "none.jsonl"]},
    "LoggedRun": lambda: {"run_id": "r", "report": _report(), "started": None,
                          "completed": None, "failed": None, "source": "f", "line": 1,
                          "event_count": 0},
    "RebuiltRun": lambda: {"run_id": "r", "report": _report(), "events": ()},
    "SpanData": lambda: {"name": "s"},
    "SpanEventData": lambda: {"name": "e"},
    "ScoredItem": lambda: {"item": ITEM, "score": 0.5},
    "CountQuotaEntry": lambda: {"kind": "Tool", "cap_count": 2},
    "ExponentialCurve": lambda: {"half_life": timedelta(hours=1)},
    "Policy": lambda: {"scorer": PriorityScorer()},
    "QuotaEntry": lambda: {"kind": "Tool"},
    "StepCurve": lambda: {"windows": [(timedelta(hours=1), 0.5)]},
    "WindowCurve": lambda: {"max_age": timedelta(hours=1)},
    "BudgetExceeded": lambda: {"item_tokens": 1, "available_tokens": 0},
    "CountCapExceeded": lambda: {"kind": "Tool", "cap": 1, "count": 2},
    "CountRequireCandidatesExhausted": lambda: {"kind": "Tool"},
    "Deduplicated": lambda: {"deduplicated_against": 1},
    "Filtered": lambda: {"filter_name": "f"},
    "InclusionReason": lambda: {"name": "Scored"},
    "NegativeTokens": lambda: {"tokens": -1},
    "PinnedOverride": lambda: {"displaced_by": 1},
    "QuotaCapExceeded": lambda: {"kind": "Tool", "cap": 1, "actual": 2},
    "QuotaRequireDisplaced": lambda: {"displaced_by_kind": "Tool"},
    "ScoredTooLow": lambda: {"score": 0.1, "threshold": 0.5},
    "UnknownExclusionReason": lambda: {"reason_name": "X"},
    "FixedClock": lambda: {"moment": AT},
    "CapExclusion": lambda: {"item": ITEM, "kind": ContextKind("Tool"), "cap": 1, "count": 2},
    "CountRequirementShortfall": lambda: {"kind": ContextKind("Tool"), "required_count": 2,
                                          "satisfied_count": 1},
    "ScoredItems": lambda: {"items": [ITEM], "scores": [0.5]},
    "SliceOutcome": lambda: {"selected": (ITEM,)},
    "SelectionReportAssertionChain": lambda: {"report": _report()},
    # cupellation.store and cupellation.integrations (issues 23 and 24)
    "StoreLocation": lambda: {"url": "chdb:///tmp/x", "scheme": "chdb", "database": "d"},
    "ExclusionCount": lambda: {"bucket": None, "service": "s", "reason": "BudgetExceeded",
                               "kind": "Tool", "count": 1},
    "FailureCount": lambda: {"service": "s", "error_type": "E", "runs": 1},
    "SourceCount": lambda: {"source": "s", "count": 1, "top_reason": "BudgetExceeded"},
    "UtilizationStats": lambda: {"service": "s", "runs": 1, "p50": 0.5, "p90": 0.5,
                                 "p99": 0.5, "minimum": 0.5, "maximum": 0.5},
    "FleetStats": lambda: {"bucket": "day", "runs": 0, "completed_runs": 0, "failed_runs": 0,
                           "incomplete_runs": 0, "incomplete_causes": {},
                           "overflow_events": 0, "exclusions": (), "utilization": (),
                           "failures": (), "top_sources": ()},
    "Window": lambda: {"options": None, "on_select": None, "keywords": {}},
    # cupellation_exporters
    "DropCountingSpanExporter": lambda: {"exporter": InMemorySpanExporter()},
    "DropCountingSpanProcessor": lambda: {"exporter": InMemorySpanExporter()},
    "EventLogExporter": lambda: {"path": _FOLDER / "events.jsonl"},
    "OtlpJsonFileSpanExporter": lambda: {"destination": _FOLDER / "spans.jsonl"},
    "ReportFileExporter": lambda: {"path": _FOLDER / "report.json"},
    "ReplayedRun": lambda: {"run_id": "r", "source": "s", "spans": ()},
    # cupellation.settings (issue 27)
    "Variable": lambda: {"name": "X", "owner": "cupellation", "meaning": "m", "read_by": "r"},
    # the reasons' own words (issue 27) and the analytics on messages (issue 24)
    "Rivals": lambda: {"kind": "none"},
    "BudgetPoint": lambda: {"budget": BUDGET, "report": None, "failure": "f"},
    "MessageBudgetPoint": lambda: {"budget": BUDGET, "selection": None, "failure": "f"},
    "MessageUnit": lambda: {"indices": (0,), "messages": ("a",), "tokens": 1,
                            "kind": "Message", "pinned": False},
    "MessageSwing": lambda: {"unit": MessageUnit(
        indices=(0,), messages=("a",), tokens=1, kind="Message", pinned=False),
        "statuses": ()},
    "MessageSensitivityReport": lambda: {"variants": (), "diffs": ()},
}
#: What releases the files, threads and locks a constructor took.
RELEASE = {"AuditLog": "close", "EventLogExporter": "shutdown",
           "OtlpJsonFileSpanExporter": "shutdown", "ReportFileExporter": "shutdown",
           "DropCountingSpanProcessor": "shutdown", "DropCountingSpanExporter": "shutdown"}

#: Public classes not built here: protocols and abstract bases (no constructor of
#: their own), a test helper built by ``capture_spans``, the open store handle built
#: by ``open_store`` (tests/store opens real ones) and the runs it reads
#: (``StoreRuns``, built by ``Store.read_runs`` over an open store), and
#: ``SelectKeywords``, the TypedDict that types SelectOptions' fields as keywords.
NOT_BUILT = {"TraceCollector", "Subcommand", "Placer", "Slicer", "DetailedSlicer", "Scorer",
             "ScorerBase", "DecayCurve", "CapturedSpans", "OtlpProviders", "ReplaySource",
             "Store", "StoreRuns", "SelectKeywords"}

_OPAQUE = object()
WRONG: list[Any] = [None, 5, -1, "x", "", 1.5, float("nan"), True, b"x", _OPAQUE, [_OPAQUE],
                    {"k": _OPAQUE}, {_OPAQUE}, (_OPAQUE,), CapExclusion, ITEM]


def _public_classes() -> Iterator[type]:
    names = ["cupellation", "cupellation_exporters"] + [
        module.name for module in pkgutil.walk_packages(cupellation.__path__, "cupellation.")
        if not any(part.startswith("_") for part in module.name.split("."))]
    seen: set[type] = set()
    for name in names:
        module = importlib.import_module(name)
        for attribute in getattr(module, "__all__", ()):
            value = getattr(module, attribute)
            if (inspect.isclass(value) and not issubclass(value, BaseException | enum.Enum)
                    and value not in seen and value.__name__ not in NOT_BUILT):
                seen.add(value)
                yield value


CLASSES = sorted(_public_classes(), key=lambda cls: cls.__name__)


def _parameters(cls: type) -> list[str]:
    """The parameters of ``cls``'s constructor (``"*"`` for ``*args``)."""
    out = []
    for parameter in inspect.signature(cls).parameters.values():
        if parameter.kind is parameter.VAR_POSITIONAL:
            out.append("*")
        elif parameter.kind is not parameter.VAR_KEYWORD:
            out.append(parameter.name)
    return out


def _build(cls: type, replaced: str, value: Any) -> None:
    """``cls`` from its valid arguments with ``replaced`` set to ``value``: accepted, or
    a CupelError."""
    arguments = VALID.get(cls.__name__, dict)()
    arguments[replaced] = (value,) if replaced == "*" else value
    positional = arguments.pop("*", ())
    try:
        with contextlib.chdir(_FOLDER):  # a file named by a wrong value lands there
            made = cls(*positional, **arguments)
    except CupelError:
        return
    except Exception as error:
        pytest.fail(f"{cls.__name__}({replaced}={value!r}) raised "
                    f"{type(error).__name__}: {error}")
    if cls.__name__ in RELEASE:
        getattr(made, RELEASE[cls.__name__])()


def test_every_public_class_is_built_here_or_named_as_not_built() -> None:
    """Each public class (cupellation_exporters' too) has valid arguments here (or needs
    none), or is a protocol, an abstract base or a helper named in NOT_BUILT: none
    escapes the sweep."""
    for cls in CLASSES:
        arguments = VALID.get(cls.__name__, dict)()
        positional = arguments.pop("*", ())
        made = cls(*positional, **arguments)
        if cls.__name__ in RELEASE:
            getattr(made, RELEASE[cls.__name__])()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.__name__)
def test_wrong_typed_arguments_to_public_constructors_raise_only_named_errors(
        cls: type) -> None:
    """Every parameter of every public constructor, given each value of WRONG in turn
    (the other arguments valid): accepted, or a CupelError."""
    for replaced in _parameters(cls):
        for value in WRONG:
            _build(cls, replaced, value)


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
    | st.binary(max_size=4) | st.sampled_from([_OPAQUE, ITEM, BUDGET, AT, GreedySlice()]),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_generated_arguments_to_public_constructors_raise_only_named_errors(
        data: st.DataObject) -> None:
    """A drawn public constructor, a drawn parameter, a generated value (nested lists,
    tuples and mappings of anything): accepted, or a CupelError."""
    cls = data.draw(st.sampled_from([cls for cls in CLASSES if _parameters(cls)]))
    replaced = data.draw(st.sampled_from(_parameters(cls)))
    _build(cls, replaced, data.draw(_VALUES))


@pytest.mark.parametrize("messages", [None, 5, 1.5, True, object()])
def test_a_message_history_of_what_is_not_a_list_is_refused_by_name(messages: Any) -> None:
    """MessageHistory(None), MessageHistory(5) and other values that are not an
    iterable of messages: an InvalidTypeError naming ``messages`` and the value (it
    was a bare TypeError: 'NoneType' object is not iterable)."""
    with pytest.raises(InvalidTypeError) as caught:
        MessageHistory(messages)
    assert (caught.value.field, caught.value.value) == ("messages", messages)
    history: MessageHistory[Any] = MessageHistory()
    with pytest.raises(InvalidTypeError):
        history.extend(messages)
