"""The pipeline's event stream: typed, immutable, versioned events and their JSON form.

Every observable thing a run does is one of these events; the SelectionReport,
spans, log records and files are all projections of the same stream. Events
identify their run (``run_id``) and refer to candidates by their index in the
candidate list, carrying the item itself.

Events are named tuples (immutable, no ``__dict__``) because an Item-level run
builds one per candidate; their equality is type-aware.

JSON form: ``{"schema": 1, "type": "<event type>", "run_id": ..., ...fields}``.
Decoding is lenient where the specification asks for it: an unknown ``type``
becomes an :class:`UnknownEvent` that keeps its data (it is *kept*, not
skipped), an unknown stage name is kept as a plain string, and unknown fields
are ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from itertools import repeat
from types import MappingProxyType
from typing import Any, NamedTuple, TypeAlias, overload

from ._model import ContextBudget, ContextItem, format_timestamp, parse_timestamp
from ._reasons import (
    ExclusionReason,
    InclusionReason,
    exclusion_reason_from_json,
    exclusion_reason_to_json,
    inclusion_reason_from_json,
)
from .exceptions import DecodeError, InvalidValueError

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "CountShortfall",
    "ItemEventBatch",
    "ItemExcluded",
    "ItemIncluded",
    "Overflow",
    "PipelineEvent",
    "PipelineStage",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "StageCompleted",
    "StageName",
    "UnknownEvent",
    "event_from_json",
    "event_to_json",
]

#: Version of the events' JSON form; written as ``schema`` on every event.
EVENT_SCHEMA_VERSION = 1


class PipelineStage(enum.Enum):
    """The pipeline's stages. ``Sort`` is internal: the specification's
    PipelineStage omits it, so reports leave it out, but the event stream
    still times it."""

    CLASSIFY = "Classify"
    SCORE = "Score"
    DEDUPLICATE = "Deduplicate"
    SORT = "Sort"
    SLICE = "Slice"
    PLACE = "Place"

    def __str__(self) -> str:
        return self.value


#: A stage as found in events: a known :class:`PipelineStage`, or the name of
#: a stage this version does not know (decoded from elsewhere).
StageName: TypeAlias = PipelineStage | str


class RunStarted(NamedTuple):
    """A run began. ``pipeline`` describes its configuration (scorer, slicer,
    placer, deduplication, overflow strategy); ``candidate_tokens`` sums every
    candidate's tokens, negative ones included."""

    run_id: str
    started_at: datetime
    budget: ContextBudget
    pipeline: Mapping[str, Any]
    candidate_count: int
    candidate_tokens: int
    trace_id: str | None = None
    span_id: str | None = None

    @property
    def type(self) -> str:
        return "run_started"


class StageCompleted(NamedTuple):
    """A stage finished: wall-clock ``duration_ms``, items in and out."""

    run_id: str
    stage: StageName
    duration_ms: float
    items_in: int
    items_out: int

    @property
    def type(self) -> str:
        return "stage_completed"


class ItemExcluded(NamedTuple):
    """Candidate ``candidate_index`` was excluded at ``stage`` with ``score`` (its score
    when the decision was made; 0.0 before scoring) for ``reason``."""

    run_id: str
    stage: StageName
    candidate_index: int
    item: ContextItem
    score: float
    reason: ExclusionReason

    @property
    def type(self) -> str:
        return "item_excluded"


class ItemIncluded(NamedTuple):
    """Candidate ``candidate_index`` was placed at ``position`` (0-based, final order)."""

    run_id: str
    candidate_index: int
    position: int
    item: ContextItem
    score: float
    reason: InclusionReason

    @property
    def type(self) -> str:
        return "item_included"


class Overflow(NamedTuple):
    """Under the Proceed strategy, the merged selection exceeded ``targetTokens``.

    The specification's OverflowEvent: ``item_indices`` are the candidate
    indices of every item present at the time (pinned and sliced).
    """

    run_id: str
    tokens_over_budget: int
    item_indices: tuple[int, ...]
    budget: ContextBudget

    @property
    def type(self) -> str:
        return "overflow"


class CountShortfall(NamedTuple):
    """A count-quota slicer could not meet ``required_count`` items of ``kind``."""

    run_id: str
    kind: str
    required_count: int
    satisfied_count: int

    @property
    def type(self) -> str:
        return "count_shortfall"


class RunCompleted(NamedTuple):
    """The run returned ``included_count`` items holding ``included_tokens``."""

    run_id: str
    duration_ms: float
    included_count: int
    included_tokens: int
    excluded_count: int

    @property
    def type(self) -> str:
        return "run_completed"


class RunFailed(NamedTuple):
    """The run raised ``error_type`` during ``stage`` (None before the first stage)."""

    run_id: str
    stage: StageName | None
    error_type: str
    message: str
    duration_ms: float

    @property
    def type(self) -> str:
        return "run_failed"


class UnknownEvent(NamedTuple):
    """An event of a type this version does not know, kept with its raw data."""

    run_id: str
    event_type: str
    data: Mapping[str, Any]

    @property
    def type(self) -> str:
        return self.event_type


PipelineEvent: TypeAlias = (
    RunStarted
    | StageCompleted
    | ItemExcluded
    | ItemIncluded
    | Overflow
    | CountShortfall
    | RunCompleted
    | RunFailed
    | UnknownEvent
)

_EVENT_TYPES: tuple[type[Any], ...] = (
    RunStarted, StageCompleted, ItemExcluded, ItemIncluded, Overflow, CountShortfall,
    RunCompleted, RunFailed, UnknownEvent,
)


def _typed_eq(self: tuple[Any, ...], other: object) -> bool:
    return type(self) is type(other) and tuple.__eq__(self, other)


def _typed_ne(self: tuple[Any, ...], other: object) -> bool:
    return not _typed_eq(self, other)


def _typed_hash(self: tuple[Any, ...]) -> int:
    # Mappings (the pipeline description, unknown events' data) may hold
    # unhashable values; their length keeps the hash consistent with equality.
    return hash((type(self).__name__,
                 *(("mapping", len(v)) if isinstance(v, Mapping) else v for v in self)))


for _cls in _EVENT_TYPES:
    # Plain tuple equality would let two different event types with equal
    # fields compare equal.
    for _name, _impl in (("__eq__", _typed_eq), ("__ne__", _typed_ne),
                         ("__hash__", _typed_hash)):
        setattr(_cls, _name, _impl)


class ItemEventBatch(Sequence[ItemExcluded | ItemIncluded]):
    """One stage's item decisions, held column by column.

    A read-only sequence of :class:`ItemExcluded` (when ``stage`` is set) or
    :class:`ItemIncluded` events (when ``positions`` is set), each built only
    when it is read. The pipeline hands collectors a batch per stage so that
    a run recorded for a report builds no per-item event object until
    something — an observer, ``collector.events``, a JSON writer — asks for
    one; ``build_report`` reads the columns directly.
    """

    __slots__ = ("indices", "items", "positions", "reasons", "run_id", "scores", "stage")

    def __init__(self, run_id: str, stage: StageName | None, indices: Sequence[int],
                 items: Sequence[ContextItem], scores: Sequence[float],
                 reasons: Sequence[ExclusionReason] | Sequence[InclusionReason],
                 positions: Sequence[int] | None = None) -> None:
        if (stage is None) == (positions is None):
            raise InvalidValueError("positions", positions, "an ItemEventBatch has a stage "
                                    "(exclusions) or positions (inclusions), not both")
        if not len(indices) == len(items) == len(scores) == len(reasons):
            raise InvalidValueError("items", len(items),
                                    "an ItemEventBatch's columns must have equal lengths")
        self.run_id = run_id
        self.stage = stage
        self.indices = indices
        self.items = items
        self.scores = scores
        self.reasons = reasons
        self.positions = positions

    @property
    def excluded(self) -> bool:
        """True for a batch of exclusions, False for a batch of inclusions."""
        return self.positions is None

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, index: int) -> ItemExcluded | ItemIncluded: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemExcluded | ItemIncluded]: ...

    def __getitem__(self, index: int | slice
                    ) -> ItemExcluded | ItemIncluded | list[ItemExcluded | ItemIncluded]:
        if isinstance(index, slice):
            return list(self)[index]
        if self.positions is None:
            assert self.stage is not None
            return ItemExcluded(self.run_id, self.stage, self.indices[index],
                                self.items[index], self.scores[index],
                                self.reasons[index])  # type: ignore[arg-type]
        return ItemIncluded(self.run_id, self.indices[index], self.positions[index],
                            self.items[index], self.scores[index],
                            self.reasons[index])  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[ItemExcluded | ItemIncluded]:
        new = tuple.__new__  # a named tuple's own __new__ costs a Python frame per call
        if self.positions is None:
            return map(new, repeat(ItemExcluded), zip(
                repeat(self.run_id), repeat(self.stage), self.indices, self.items,
                self.scores, self.reasons))
        return map(new, repeat(ItemIncluded), zip(
            repeat(self.run_id), self.indices, self.positions, self.items, self.scores,
            self.reasons))

    def __repr__(self) -> str:
        what = f"{len(self)} exclusions at {self.stage}" if self.excluded else (
            f"{len(self)} inclusions")
        return f"ItemEventBatch({what})"


# -- JSON ---------------------------------------------------------------------

_STAGES_BY_NAME = {stage.value: stage for stage in PipelineStage}


def _stage_to_json(stage: StageName) -> str:
    return stage.value if isinstance(stage, PipelineStage) else stage


def _stage_from_json(value: Any, field: str = "stage") -> StageName:
    if not isinstance(value, str):
        raise DecodeError(field, value, "must be a stage name")
    return _STAGES_BY_NAME.get(value, value)


def event_to_json(event: PipelineEvent) -> dict[str, Any]:
    """The JSON object for ``event`` (a fresh dict of JSON-native values)."""
    out: dict[str, Any] = {"schema": EVENT_SCHEMA_VERSION, "type": event.type,
                           "run_id": event.run_id}
    if isinstance(event, ItemExcluded):
        out["stage"] = _stage_to_json(event.stage)
        out["candidate_index"] = event.candidate_index
        out["item"] = event.item.to_json()
        out["score"] = event.score
        out["reason"] = exclusion_reason_to_json(event.reason)
    elif isinstance(event, ItemIncluded):
        out["candidate_index"] = event.candidate_index
        out["position"] = event.position
        out["item"] = event.item.to_json()
        out["score"] = event.score
        out["reason"] = event.reason.to_json()
    elif isinstance(event, StageCompleted):
        out["stage"] = _stage_to_json(event.stage)
        out["duration_ms"] = event.duration_ms
        out["items_in"] = event.items_in
        out["items_out"] = event.items_out
    elif isinstance(event, RunStarted):
        out["started_at"] = format_timestamp(event.started_at)
        out["budget"] = event.budget.to_json()
        out["pipeline"] = dict(event.pipeline)
        out["candidate_count"] = event.candidate_count
        out["candidate_tokens"] = event.candidate_tokens
        if event.trace_id is not None:
            out["trace_id"] = event.trace_id
        if event.span_id is not None:
            out["span_id"] = event.span_id
    elif isinstance(event, Overflow):
        out["tokens_over_budget"] = event.tokens_over_budget
        out["item_indices"] = list(event.item_indices)
        out["budget"] = event.budget.to_json()
    elif isinstance(event, CountShortfall):
        out["kind"] = event.kind
        out["required_count"] = event.required_count
        out["satisfied_count"] = event.satisfied_count
    elif isinstance(event, RunCompleted):
        out["duration_ms"] = event.duration_ms
        out["included_count"] = event.included_count
        out["included_tokens"] = event.included_tokens
        out["excluded_count"] = event.excluded_count
    elif isinstance(event, RunFailed):
        if event.stage is not None:
            out["stage"] = _stage_to_json(event.stage)
        out["error_type"] = event.error_type
        out["message"] = event.message
        out["duration_ms"] = event.duration_ms
    else:
        out.update(event.data)  # keeps the original schema version too
    return out


def _req(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    if key not in data:
        raise DecodeError(key, None, "is required")
    value = data[key]
    # bool is an int subclass; a boolean where a number belongs is damage.
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,))):
        raise DecodeError(key, value, f"has the wrong type for {key}")
    return value


def _float(data: Mapping[str, Any], key: str) -> float:
    return float(_req(data, key, (int, float)))


def event_from_json(data: Mapping[str, Any]) -> PipelineEvent:
    """Decode one event. Unknown types become :class:`UnknownEvent`; unknown
    fields are ignored; a missing or mistyped known field raises
    :class:`~cupellation.exceptions.DecodeError` naming it."""
    if not isinstance(data, Mapping):
        raise DecodeError("event", data, "must be a JSON object")
    event_type = _req(data, "type", str)
    run_id = _req(data, "run_id", str)
    if event_type == "item_excluded":
        return ItemExcluded(
            run_id, _stage_from_json(data.get("stage")), _req(data, "candidate_index", int),
            ContextItem.from_json(_req(data, "item", Mapping)), _float(data, "score"),
            exclusion_reason_from_json(_req(data, "reason", Mapping)),
        )
    if event_type == "item_included":
        return ItemIncluded(
            run_id, _req(data, "candidate_index", int), _req(data, "position", int),
            ContextItem.from_json(_req(data, "item", Mapping)), _float(data, "score"),
            inclusion_reason_from_json(_req(data, "reason", Mapping)),
        )
    if event_type == "stage_completed":
        return StageCompleted(
            run_id, _stage_from_json(data.get("stage")), _float(data, "duration_ms"),
            _req(data, "items_in", int), _req(data, "items_out", int),
        )
    if event_type == "run_started":
        return RunStarted(
            run_id, parse_timestamp(_req(data, "started_at", str), field_name="started_at"),
            ContextBudget.from_json(_req(data, "budget", Mapping)),
            MappingProxyType(dict(_req(data, "pipeline", Mapping))),
            _req(data, "candidate_count", int), _req(data, "candidate_tokens", int),
            data.get("trace_id"), data.get("span_id"),
        )
    if event_type == "overflow":
        indices = _req(data, "item_indices", list)
        if not all(isinstance(i, int) and not isinstance(i, bool) for i in indices):
            raise DecodeError("item_indices", indices, "must be a list of integers")
        return Overflow(
            run_id, _req(data, "tokens_over_budget", int), tuple(indices),
            ContextBudget.from_json(_req(data, "budget", Mapping)),
        )
    if event_type == "count_shortfall":
        return CountShortfall(
            run_id, _req(data, "kind", str), _req(data, "required_count", int),
            _req(data, "satisfied_count", int),
        )
    if event_type == "run_completed":
        return RunCompleted(
            run_id, _float(data, "duration_ms"), _req(data, "included_count", int),
            _req(data, "included_tokens", int), _req(data, "excluded_count", int),
        )
    if event_type == "run_failed":
        stage = data.get("stage")
        return RunFailed(
            run_id, None if stage is None else _stage_from_json(stage),
            _req(data, "error_type", str), _req(data, "message", str),
            _float(data, "duration_ms"),
        )
    rest = {k: v for k, v in data.items() if k not in ("type", "run_id")}
    return UnknownEvent(run_id, event_type, MappingProxyType(rest))
