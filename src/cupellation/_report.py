"""The SelectionReport and the one function that makes it: ``build_report(events)``.

The report is a pure fold of a run's events (``spec/src/diagnostics/selection-report.md``
and the seeds): it is never assembled from side data, so a report rebuilt from
a log file or from spans is the same value as the one folded in process.

JSON is the seeds' shape to the letter: ``events``, ``included``, ``excluded``,
``total_candidates``, ``total_tokens_considered``. Three optional members are
cupellation's own and appear only when they carry something:
``count_requirement_shortfalls``, ``overflow`` and ``incomplete`` (the reasons a
report rebuilt from lossy telemetry cannot be trusted to be whole).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from ._events import (
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
    StageName,
)
from ._model import ContextBudget, ContextItem, ContextKind
from ._reasons import (
    ExclusionReason,
    InclusionReason,
    exclusion_reason_from_json,
    exclusion_reason_to_json,
    inclusion_reason_from_json,
)
from .exceptions import DecodeError, InvalidValueError
from .slicing import CountRequirementShortfall

__all__ = [
    "ExcludedItem",
    "IncludedItem",
    "OverflowReport",
    "SelectionReport",
    "TraceEvent",
    "build_report",
]


class TraceEvent(NamedTuple):
    """The specification's TraceEvent: one per stage in a report's ``events``."""

    stage: StageName
    duration_ms: float
    item_count: int
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        stage = self.stage.value if isinstance(self.stage, PipelineStage) else self.stage
        out: dict[str, Any] = {"stage": stage, "duration_ms": self.duration_ms,
                               "item_count": self.item_count}
        if self.message is not None:
            out["message"] = self.message
        return out


class IncludedItem(NamedTuple):
    """A selected item with its score at inclusion and why it was included."""

    item: ContextItem
    score: float
    reason: InclusionReason

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item.to_json(), "score": self.score,
                "reason": self.reason.to_json()}


class ExcludedItem(NamedTuple):
    """A candidate left out, with its score when excluded and the reason."""

    item: ContextItem
    score: float
    reason: ExclusionReason

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item.to_json(), "score": self.score,
                "reason": exclusion_reason_to_json(self.reason)}


def _shortfall_to_json(shortfall: CountRequirementShortfall) -> dict[str, Any]:
    return {"kind": shortfall.kind.value, "required_count": shortfall.required_count,
            "satisfied_count": shortfall.satisfied_count}


class OverflowReport(NamedTuple):
    """The specification's OverflowEvent, as a report carries it (Proceed only)."""

    tokens_over_budget: int
    overflowing_items: tuple[ContextItem, ...]
    budget: ContextBudget

    def to_json(self) -> dict[str, Any]:
        return {"tokens_over_budget": self.tokens_over_budget,
                "overflowing_items": [i.to_json() for i in self.overflowing_items],
                "budget": self.budget.to_json()}


@dataclass(frozen=True, slots=True)
class SelectionReport:
    """Why every candidate was or was not selected in one run.

    ``included`` is in final placed order; ``excluded`` is sorted by score
    descending, ties in exclusion order. ``incomplete`` lists what the events
    lacked (empty for a report folded from a whole Item-level run).
    """

    events: tuple[TraceEvent, ...]
    included: tuple[IncludedItem, ...]
    excluded: tuple[ExcludedItem, ...]
    total_candidates: int
    total_tokens_considered: int
    count_requirement_shortfalls: tuple[CountRequirementShortfall, ...] = ()
    overflow: OverflowReport | None = None
    incomplete: tuple[str, ...] = ()

    @property
    def is_complete(self) -> bool:
        """True when the events accounted for every candidate of a finished run."""
        return not self.incomplete

    def to_json(self) -> dict[str, Any]:
        """The seeds' JSON shape (plus the optional members, only when non-empty)."""
        out: dict[str, Any] = {
            "events": [e.to_json() for e in self.events],
            "included": [i.to_json() for i in self.included],
            "excluded": [e.to_json() for e in self.excluded],
            "total_candidates": self.total_candidates,
            "total_tokens_considered": self.total_tokens_considered,
        }
        if self.count_requirement_shortfalls:
            out["count_requirement_shortfalls"] = [
                _shortfall_to_json(s) for s in self.count_requirement_shortfalls
            ]
        if self.overflow is not None:
            out["overflow"] = self.overflow.to_json()
        if self.incomplete:
            out["incomplete"] = list(self.incomplete)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SelectionReport:
        """Decode the JSON shape; unknown reason variants and stages are kept."""
        if not isinstance(data, Mapping):
            raise DecodeError("report", data, "must be a JSON object")
        for key in ("events", "included", "excluded"):
            if not isinstance(data.get(key), list):
                raise DecodeError(key, data.get(key), "is required and must be a JSON array")
        for key in ("total_candidates", "total_tokens_considered"):
            value = data.get(key)
            if not isinstance(value, int) or isinstance(value, bool):
                raise DecodeError(key, value, "is required and must be an integer")
        incomplete = data.get("incomplete", [])
        if not isinstance(incomplete, list) or not all(isinstance(r, str) for r in incomplete):
            raise DecodeError("incomplete", incomplete, "must be a JSON array of strings")
        where = "report"
        try:
            where = "events"
            events = tuple(_trace_event_from_json(e) for e in data["events"])
            where = "included"
            included = tuple(
                IncludedItem(ContextItem.from_json(i["item"]), _number(i["score"]),
                             inclusion_reason_from_json(i["reason"]))
                for i in data["included"]
            )
            where = "excluded"
            excluded = tuple(
                ExcludedItem(ContextItem.from_json(e["item"]), _number(e["score"]),
                             exclusion_reason_from_json(e["reason"]))
                for e in data["excluded"]
            )
            where = "count_requirement_shortfalls"
            shortfalls = tuple(
                CountRequirementShortfall(ContextKind(s["kind"]), s["required_count"],
                                          s["satisfied_count"])
                for s in data.get("count_requirement_shortfalls", ())
            )
            where = "overflow"
            overflow_data = data.get("overflow")
            overflow = None if overflow_data is None else OverflowReport(
                overflow_data["tokens_over_budget"],
                tuple(ContextItem.from_json(i) for i in overflow_data["overflowing_items"]),
                ContextBudget.from_json(overflow_data["budget"]),
            )
        except DecodeError as exc:
            raise DecodeError(f"{where}.{exc.field}", exc.value, exc.problem) from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DecodeError(where, str(exc), "has a missing or mistyped member") from exc
        return cls(
            events=events, included=included, excluded=excluded,
            total_candidates=data["total_candidates"],
            total_tokens_considered=data["total_tokens_considered"],
            count_requirement_shortfalls=shortfalls, overflow=overflow,
            incomplete=tuple(incomplete),
        )


def _number(value: Any, field: str = "score") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(field, value, "must be a number")
    return float(value)


def _trace_event_from_json(data: Mapping[str, Any]) -> TraceEvent:
    stage_name = data["stage"]
    stage: StageName = next(
        (s for s in PipelineStage if s.value == stage_name), stage_name
    )
    item_count = data["item_count"]
    if not isinstance(item_count, int) or isinstance(item_count, bool):
        raise DecodeError("item_count", item_count, "must be an integer")
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise DecodeError("message", message, "must be a string")
    return TraceEvent(stage, _number(data["duration_ms"], "duration_ms"), item_count, message)


def _run_id_of(entry: PipelineEvent | ItemEventBatch) -> str:
    return entry.run_id


def _single_run_id(events: Sequence[PipelineEvent | ItemEventBatch],
                   run_id: str | None) -> str | None:
    if run_id is not None:
        return run_id
    run_ids = set(map(_run_id_of, events))
    if len(run_ids) > 1:
        raise InvalidValueError(
            "run_id", sorted(run_ids), "events come from several runs; pass run_id="
        )
    return next(iter(run_ids), None)


def build_report(
    events: Iterable[PipelineEvent | ItemEventBatch], *, run_id: str | None = None
) -> SelectionReport:
    """Fold one run's events into its SelectionReport (a pure function).

    ``events`` may hold several runs only if ``run_id`` picks one; it may mix
    single events with :class:`~cupellation.ItemEventBatch` columns, as a
    collector holds them. What the events do not show — a missing start or
    end, candidates with no item event (Stage detail level, dropped span
    events, a truncated log) — is listed in ``incomplete`` rather than guessed at.
    """
    all_events = events if isinstance(events, Sequence) else list(events)
    wanted = _single_run_id(all_events, run_id)
    if run_id is not None:
        all_events = [event for event in all_events if _run_id_of(event) == wanted]
    new = tuple.__new__  # a named tuple's own __new__ costs a Python frame per call
    entry_fields = itemgetter(slice(3, None))  # both item events end in (item, score, reason)
    excluded: list[ExcludedItem] = []
    included: list[IncludedItem] = []
    positions: list[int] = []
    decided: list[int] = []
    item_events: list[ItemExcluded | ItemIncluded] = []
    others: dict[type, list[Any]] = defaultdict(list)
    # One ordered pass: exclusion order is the tie-break of the excluded sort.
    for event in all_events:
        kind = type(event)
        if kind is ItemEventBatch:
            assert isinstance(event, ItemEventBatch)
            decided.extend(event.indices)
            columns = zip(event.items, event.scores, event.reasons, strict=True)
            if event.positions is None:
                excluded.extend(map(new, repeat(ExcludedItem), columns))
            else:
                included.extend(map(new, repeat(IncludedItem), columns))
                positions.extend(event.positions)
        elif kind is ItemExcluded:
            excluded.append(new(ExcludedItem, entry_fields(event)))
            decided.append(event[2])  # type: ignore[arg-type]
            item_events.append(event)  # type: ignore[arg-type]
        elif kind is ItemIncluded:
            included.append(new(IncludedItem, entry_fields(event)))
            positions.append(event[2])  # type: ignore[arg-type]
            decided.append(event[1])  # type: ignore[arg-type]
            item_events.append(event)  # type: ignore[arg-type]
        else:
            others[kind].append(event)
    trace_events = [TraceEvent(e.stage, e.duration_ms, e.items_in)
                    for e in others[StageCompleted] if e.stage is not PipelineStage.SORT]
    started: RunStarted | None = others[RunStarted][-1] if others[RunStarted] else None
    finished = bool(others[RunCompleted])
    failure: RunFailed | None = others[RunFailed][-1] if others[RunFailed] else None
    overflow: Overflow | None = others[Overflow][-1] if others[Overflow] else None
    shortfalls = [CountRequirementShortfall(ContextKind(e.kind), e.required_count,
                                            e.satisfied_count)
                  for e in others[CountShortfall]]

    # Placed order by position; excluded by score descending, and Python's
    # sort stays stable with reverse=True, so ties keep their exclusion order.
    if positions != sorted(positions):
        included = [entry for _, entry in sorted(zip(positions, included, strict=True),
                                                 key=itemgetter(0))]
    excluded.sort(key=itemgetter(1), reverse=True)
    included_items = tuple(included)

    incomplete: list[str] = []
    if started is None:
        incomplete.append("no run_started event: the candidate count is unknown")
    if failure is not None:
        incomplete.append(f"the run failed: {failure.error_type}: {failure.message}")
    elif not finished:
        incomplete.append("no run_completed event: the run's end was not recorded")
    distinct = set(decided)
    if started is not None and len(distinct) != started.candidate_count:
        missing = started.candidate_count - len(distinct)
        incomplete.append(
            f"{missing} of {started.candidate_count} candidates have no item event "
            "(Stage detail level, or telemetry lost on the way)"
        )
    if len(distinct) != len(decided):
        repeated = sorted(i for i, n in Counter(decided).items() if n > 1)
        incomplete.append(f"candidate indices decided more than once: {repeated}")

    overflow_report = None
    if overflow is not None:
        by_index = {e.candidate_index: e.item for e in item_events}
        for batch in all_events:
            if type(batch) is ItemEventBatch:
                assert isinstance(batch, ItemEventBatch)
                by_index.update(zip(batch.indices, batch.items, strict=True))
        overflow_report = OverflowReport(
            overflow.tokens_over_budget,
            tuple(by_index[i] for i in overflow.item_indices if i in by_index),
            overflow.budget,
        )
        if len(overflow_report.overflowing_items) != len(overflow.item_indices):
            incomplete.append("some overflowing items have no item event")

    # Summed from the entries themselves, never taken from run_started: a
    # damaged start event must not make the totals disagree with the lists.
    item_tokens = attrgetter("tokens")
    first = itemgetter(0)
    tokens = (sum(map(item_tokens, map(first, included_items)))
              + sum(map(item_tokens, map(first, excluded))))
    return SelectionReport(
        events=tuple(trace_events),
        included=included_items,
        excluded=tuple(excluded),
        total_candidates=len(included_items) + len(excluded),
        total_tokens_considered=tokens,
        count_requirement_shortfalls=tuple(shortfalls),
        overflow=overflow_report,
        incomplete=tuple(incomplete),
    )
