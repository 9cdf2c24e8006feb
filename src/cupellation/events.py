"""The pipeline's event stream: every decision a run makes, as typed, sequenced events.

The SelectionReport, OpenTelemetry spans, log records and files are all
projections of this one stream, and decoders turn spans and logs back into it.

- **Declared once.** Events are frozen, slotted ``msgspec`` structs, built by
  keyword and read by name. ``msgspec`` was chosen over plain slotted classes
  for speed that matters at 100,000 candidates: construction runs in C, and
  ``gc=False`` keeps a run's event objects out of the cyclic garbage collector
  (events hold no reference cycles).
- **Sequenced.** Every event carries its ``run_id`` and a ``seq`` (0, 1, 2, ...
  within the run), so a consumer can see gaps, duplicates and reordering.
- **Items by index.** Item events refer to candidates by their index in the
  candidate list and carry the item; reasons that point at another candidate
  hold its index (see :mod:`cupellation.reasons`).
- **One flat mapping.** :func:`event_to_dict` turns any event into a flat
  dictionary with dotted keys (``item.content``, ``reason.name``,
  ``reason.item_tokens``) whose values are strings, numbers, booleans or lists
  of them — exactly what a span attribute, a log record field or a JSON member
  can hold — and :func:`event_from_dict` turns it back, validating every field.
  The mapping is derived from the event declarations; JSON
  (:func:`event_to_json`), log records and span attributes are thin adapters
  over it.
- **One content policy.** :func:`apply_content_capture` is the one place where
  content is kept, hashed or dropped; every projection calls it, and the policy
  in force is recorded in the stream's ``run_started``.

Schema: every dictionary carries ``schema`` (:data:`EVENT_SCHEMA_VERSION`) and
``type``. Decoding rejects another schema version, null or mistyped fields,
and non-finite numbers with :class:`~cupellation.exceptions.DecodeError`
naming the field (and the line, for files). An event of an unknown ``type`` is
kept as :class:`UnknownEvent` with its fields; unknown fields of a known event
are ignored.
"""

import enum
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias, get_type_hints, overload

import msgspec

from ._model import (
    ContextBudget,
    ContextItem,
    _thaw_json,
    first_wide_int,
    fits_int64,
    format_timestamp,
    parse_timestamp,
)
from .exceptions import DecodeError, InvalidTypeError, InvalidValueError
from .reasons import (
    REFERENCE_FIELDS,
    ExclusionReason,
    InclusionReason,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
    reason_fields,
)

__all__ = [
    "EVENT_SCHEMA_VERSION",
    "ContentCapture",
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
    "StageStarted",
    "UnknownEvent",
    "apply_content_capture",
    "content_digest",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "events_from_json_lines",
]

#: Version of the events' flat form; written as ``schema`` on every event.
EVENT_SCHEMA_VERSION = 2


class PipelineStage(enum.Enum):
    """The pipeline's stages. ``Sort`` is internal: the specification's
    PipelineStage omits it, so reports and spans leave it out, but the event
    stream still times it."""

    CLASSIFY = "Classify"
    SCORE = "Score"
    DEDUPLICATE = "Deduplicate"
    SORT = "Sort"
    SLICE = "Slice"
    PLACE = "Place"

    def __str__(self) -> str:
        return self.value

    # Members are singletons compared by identity, so the identity hash agrees
    # with equality; Enum's own __hash__ is a Python-level call, and the report
    # fold keys several dicts by stage on every run.
    __hash__ = object.__hash__


#: A stage as found in events: a known :class:`PipelineStage`, or the name of
#: a stage this version does not know (decoded from elsewhere).
StageName: TypeAlias = PipelineStage | str


class ContentCapture(enum.Enum):
    """How much item content a projection keeps (see :func:`apply_content_capture`).

    ``FULL`` keeps it; ``HASH`` replaces it with ``sha256:<hex>`` (equal content
    stays equal) and drops metadata; ``NONE`` replaces it with a placeholder
    naming the candidate index and drops metadata.
    """

    FULL = "full"
    HASH = "hash"
    NONE = "none"

    @classmethod
    def parse(cls, value: "ContentCapture | str") -> "ContentCapture":
        """Accept a member or its name (``"hash"``), case-insensitively."""
        if isinstance(value, ContentCapture):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.value == value.strip().lower():
                    return member
        raise InvalidValueError("content_capture", value, "must be 'full', 'hash' or 'none'")


# -- the events -----------------------------------------------------------------


class _Event(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Fields every event has: its run and its place in the run's sequence."""

    type: ClassVar[str]
    run_id: str
    seq: int


class RunStarted(_Event, frozen=True, kw_only=True):
    """A run began.

    ``pipeline`` describes the configuration (scorer, slicer, placer,
    deduplication, overflow strategy); ``candidate_tokens`` sums every
    candidate's tokens, negative ones included. ``detail_level`` names what the
    stream records (``StageOnly``, ``StageAndExclusions`` or ``Full``) and
    ``content_capture`` how item content was kept, so a rebuilt report knows
    what it holds. ``trace_id``/``span_id`` are the W3C ids of the span current
    when the run started, if any.
    """

    type: ClassVar[str] = "run_started"

    def __hash__(self) -> int:  # the pipeline description is a (read-only) mapping
        return hash((self.run_id, self.seq, self.started_at, self.budget,
                     frozenset(self.pipeline.items()), self.candidate_count))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only description cannot be pickled or deep-copied: carry a copy.
        values = msgspec.structs.asdict(self)
        values["pipeline"] = (dict(self.pipeline), isinstance(self.pipeline, MappingProxyType))
        return (_rebuild_event, (RunStarted, values, "pipeline"))
    started_at: datetime
    budget: ContextBudget
    pipeline: Mapping[str, str | bool]
    candidate_count: int
    candidate_tokens: int
    detail_level: str
    content_capture: str = "full"
    trace_id: str | None = None
    span_id: str | None = None


class StageStarted(_Event, frozen=True, kw_only=True):
    """A stage began with ``items_in`` items."""

    type: ClassVar[str] = "stage_started"
    stage: StageName
    items_in: int


class StageCompleted(_Event, frozen=True, kw_only=True):
    """A stage finished: wall-clock ``duration_ms``, items in and out."""

    type: ClassVar[str] = "stage_completed"
    stage: StageName
    duration_ms: float
    items_in: int
    items_out: int


class ItemExcluded(_Event, frozen=True, kw_only=True):
    """Candidate ``candidate_index`` was excluded at ``stage`` with ``score`` (its score
    when the decision was made; 0.0 before scoring) for ``reason``."""

    type: ClassVar[str] = "item_excluded"
    stage: StageName
    candidate_index: int
    score: float
    item: ContextItem
    reason: ExclusionReason


class ItemIncluded(_Event, frozen=True, kw_only=True):
    """Candidate ``candidate_index`` was placed at ``position`` (0-based, final order)."""

    type: ClassVar[str] = "item_included"
    candidate_index: int
    position: int
    score: float
    item: ContextItem
    reason: InclusionReason


class Overflow(_Event, frozen=True, kw_only=True):
    """Under the Proceed strategy, the merged selection exceeded ``targetTokens``.

    The specification's OverflowEvent: ``item_indices`` are the candidate
    indices of every item present at the time (pinned and sliced).
    """

    type: ClassVar[str] = "overflow"
    tokens_over_budget: int
    item_indices: tuple[int, ...]
    budget: ContextBudget


class CountShortfall(_Event, frozen=True, kw_only=True):
    """A count-quota slicer could not meet ``required_count`` items of ``kind``."""

    type: ClassVar[str] = "count_shortfall"
    kind: str
    required_count: int
    satisfied_count: int


class RunCompleted(_Event, frozen=True, kw_only=True):
    """The run returned ``included_count`` items holding ``included_tokens``."""

    type: ClassVar[str] = "run_completed"
    duration_ms: float
    included_count: int
    included_tokens: int
    excluded_count: int


class RunFailed(_Event, frozen=True, kw_only=True):
    """The run raised during ``stage`` (None before the first stage).

    ``error_type`` and ``error_text`` are the exception's class name and text;
    ``exception`` is the exception object itself, in process only (it is not
    part of the flat mapping, so a decoded event has None).
    """

    type: ClassVar[str] = "run_failed"
    stage: StageName | None = None
    error_type: str
    error_text: str
    duration_ms: float
    exception: BaseException | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The live exception (its traceback, its frames) does not travel:
        # ``error_type`` and ``error_text`` say what it was.
        return (_rebuild_event, (RunFailed, {**msgspec.structs.asdict(self),
                                             "exception": None}, None))

    def __deepcopy__(self, memo: dict[int, Any]) -> "RunFailed":
        # Every field is immutable but the exception, which is a live object, not
        # part of the value: the copy refers to the same one.
        return self


class UnknownEvent(_Event, frozen=True, kw_only=True):
    """An event of a type this version does not know, kept with its fields."""

    type: ClassVar[str] = "unknown"
    event_type: str
    fields: Mapping[str, Any]

    def __hash__(self) -> int:  # decoded values may be unhashable: hash the keys
        return hash((self.run_id, self.seq, self.event_type, frozenset(self.fields)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only fields cannot be pickled or deep-copied: carry a copy.
        values = msgspec.structs.asdict(self)
        values["fields"] = (dict(self.fields), isinstance(self.fields, MappingProxyType))
        return (_rebuild_event, (UnknownEvent, values, "fields"))


def _rebuild_event(cls: type[_Event], values: dict[str, Any], mapping: str | None) -> Any:
    """An event rebuilt by pickle or deepcopy; ``mapping`` names the field that
    travelled as (a plain copy, whether it was read-only)."""
    if mapping is not None:
        copied, read_only = values[mapping]
        values = {**values, mapping: MappingProxyType(copied) if read_only else copied}
    return cls(**values)


PipelineEvent: TypeAlias = (
    RunStarted
    | StageStarted
    | StageCompleted
    | ItemExcluded
    | ItemIncluded
    | Overflow
    | CountShortfall
    | RunCompleted
    | RunFailed
    | UnknownEvent
)

_KNOWN_EVENTS: tuple[type[_Event], ...] = (
    RunStarted, StageStarted, StageCompleted, ItemExcluded, ItemIncluded, Overflow,
    CountShortfall, RunCompleted, RunFailed,
)


def event_type_name(event: PipelineEvent) -> str:
    """The wire ``type`` of ``event`` (an unknown event's own type name)."""
    return event.event_type if isinstance(event, UnknownEvent) else event.type


# -- batches ----------------------------------------------------------------------


class ItemEventBatch(Sequence[ItemExcluded | ItemIncluded]):
    """One stage's item decisions, delivered to collectors in one call.

    A read-only sequence of :class:`ItemExcluded` events (a batch of
    exclusions, with ``stage`` set) or :class:`ItemIncluded` events (a batch of
    inclusions, with ``positions`` set), numbered ``first_seq``,
    ``first_seq + 1``, ... Each event is built only when it is read, so a run
    recorded only for its report builds no per-item event object: the report
    fold reads the columns (all tuples) by name.
    """

    __slots__ = ("candidate_indices", "first_seq", "items", "positions", "reasons", "run_id",
                 "scores", "stage")

    run_id: str
    first_seq: int
    stage: StageName | None
    candidate_indices: tuple[int, ...]
    items: tuple[ContextItem, ...]
    scores: tuple[float, ...]
    reasons: tuple[ExclusionReason, ...] | tuple[InclusionReason, ...]
    positions: tuple[int, ...] | None

    def __init__(self, *, run_id: str, first_seq: int, stage: StageName | None,
                 candidate_indices: Iterable[int], items: Iterable[ContextItem],
                 scores: Iterable[float],
                 reasons: Iterable[ExclusionReason] | Iterable[InclusionReason],
                 positions: Iterable[int] | None = None) -> None:
        if (stage is None) == (positions is None):
            raise InvalidValueError("positions", positions, "an ItemEventBatch has a stage "
                                    "(exclusions) or positions (inclusions), not both")
        set_ = object.__setattr__
        set_(self, "run_id", run_id)
        set_(self, "first_seq", first_seq)
        set_(self, "stage", stage)
        set_(self, "candidate_indices", tuple(candidate_indices))
        set_(self, "items", tuple(items))
        set_(self, "scores", tuple(scores))
        set_(self, "reasons", tuple(reasons))
        set_(self, "positions", None if positions is None else tuple(positions))
        if not (len(self.candidate_indices) == len(self.items) == len(self.scores)
                == len(self.reasons)) or (self.positions is not None
                                          and len(self.positions) != len(self.items)):
            raise InvalidValueError("items", len(self.items),
                                    "an ItemEventBatch's columns must have equal lengths")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ItemEventBatch is immutable")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Slots set once through object.__setattr__: rebuild through __init__.
        return (_rebuild_batch, (self.run_id, self.first_seq, self.stage,
                                 self.candidate_indices, self.items, self.scores,
                                 self.reasons, self.positions))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ItemEventBatch):
            return NotImplemented
        return (self.run_id, self.first_seq, self.stage, self.candidate_indices, self.items,
                self.scores, self.reasons, self.positions) == (
            other.run_id, other.first_seq, other.stage, other.candidate_indices, other.items,
            other.scores, other.reasons, other.positions)

    def __hash__(self) -> int:  # equal batches share their run, first seq and length
        return hash((self.run_id, self.first_seq, len(self.items)))

    @property
    def excluded(self) -> bool:
        """True for a batch of exclusions, False for a batch of inclusions."""
        return self.positions is None

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the batch's last event (``first_seq - 1`` when empty)."""
        return self.first_seq + len(self.items) - 1

    def __len__(self) -> int:
        return len(self.items)

    def _event(self, k: int) -> ItemExcluded | ItemIncluded:
        if self.positions is None:
            assert self.stage is not None
            return ItemExcluded(run_id=self.run_id, seq=self.first_seq + k, stage=self.stage,
                                candidate_index=self.candidate_indices[k],
                                score=self.scores[k], item=self.items[k],
                                reason=self.reasons[k])  # type: ignore[arg-type]
        return ItemIncluded(run_id=self.run_id, seq=self.first_seq + k,
                            candidate_index=self.candidate_indices[k],
                            position=self.positions[k], score=self.scores[k],
                            item=self.items[k], reason=self.reasons[k])  # type: ignore[arg-type]

    @overload
    def __getitem__(self, index: int) -> ItemExcluded | ItemIncluded: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemExcluded | ItemIncluded]: ...

    def __getitem__(self, index: int | slice
                    ) -> ItemExcluded | ItemIncluded | list[ItemExcluded | ItemIncluded]:
        if isinstance(index, slice):
            return [self._event(k) for k in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._event(index)

    def __iter__(self) -> Iterator[ItemExcluded | ItemIncluded]:
        return map(self._event, range(len(self)))

    def __repr__(self) -> str:
        what = f"{len(self)} exclusions at {self.stage}" if self.excluded else (
            f"{len(self)} inclusions")
        return f"ItemEventBatch({what}, seq {self.first_seq}..{self.last_seq})"


def _rebuild_batch(run_id: str, first_seq: int, stage: StageName | None,
                   candidate_indices: tuple[int, ...], items: tuple[ContextItem, ...],
                   scores: tuple[float, ...],
                   reasons: tuple[ExclusionReason, ...] | tuple[InclusionReason, ...],
                   positions: tuple[int, ...] | None) -> ItemEventBatch:
    """An ItemEventBatch rebuilt by pickle or deepcopy."""
    return ItemEventBatch(run_id=run_id, first_seq=first_seq, stage=stage,
                          candidate_indices=candidate_indices, items=items, scores=scores,
                          reasons=reasons, positions=positions)


# -- content capture --------------------------------------------------------------


def content_digest(content: str) -> str:
    """The stable digest that replaces content under ``hash`` capture."""
    return "sha256:" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def _captured_item(item: ContextItem, capture: ContentCapture, index: int) -> ContextItem:
    content = (content_digest(item.content) if capture is ContentCapture.HASH
               else f"<candidate {index}: content not captured>")
    return ContextItem(
        content=content, tokens=item.tokens, kind=item.kind, source=item.source,
        priority=item.priority, tags=item.tags, metadata=None, timestamp=item.timestamp,
        future_relevance_hint=item.future_relevance_hint, pinned=item.pinned,
        original_tokens=item.original_tokens,
    )


def apply_content_capture(event: PipelineEvent, capture: ContentCapture | str) -> PipelineEvent:
    """``event`` as a projection under ``capture`` may show it.

    ``full`` returns the event unchanged. ``hash`` replaces an item's content
    with :func:`content_digest` and ``none`` with a placeholder naming the
    candidate index; both drop the item's metadata (it may hold anything).
    Reasons refer to other candidates by index, so they need no change.
    ``run_started`` records the policy, so whatever is rebuilt from the
    projection knows its content is not the original.
    """
    capture = ContentCapture.parse(capture)
    if capture is ContentCapture.FULL:
        return event
    if isinstance(event, ItemExcluded | ItemIncluded):
        return msgspec.structs.replace(
            event, item=_captured_item(event.item, capture, event.candidate_index))
    if isinstance(event, RunStarted):
        return msgspec.structs.replace(event, content_capture=capture.value)
    return event


# -- the flat mapping ---------------------------------------------------------------
#
# Each event field gets a codec chosen from its declared type. A codec writes
# its value under one key or, for a nested value (an item, a budget, a reason,
# the pipeline description), under ``<field>.<name>`` keys; values are only
# str, int, float, bool or lists of those. Absent optional values are omitted,
# never null.

_Flat = dict[str, Any]


_INT64_PROBLEM = ("must fit in a signed 64-bit integer (the specification's integers, and "
                  "what OpenTelemetry and protobuf carry)")


def _check_int(key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise DecodeError(key, value, "must be an integer")
    number = value if type(value) is int else int(value)
    if not fits_int64(number):
        raise DecodeError(key, value, _INT64_PROBLEM)
    return number


def _check_json_ints(key: str, value: Any) -> Any:
    """``value`` (decoded JSON kept as it is: an unknown event's or reason's field),
    after checking it holds no integer beyond int64."""
    wide = first_wide_int(value)
    if wide is not None:
        raise DecodeError(key + wide[0], wide[1], _INT64_PROBLEM)
    return value


def _check_float(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(key, value, "must be a number")
    if not math.isfinite(value):
        raise DecodeError(key, value, "must be a finite number")
    return float(value)


def _check_str(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise DecodeError(key, value, "must be a string")
    return value


def _finite(key: str, value: float) -> float:
    if not math.isfinite(value):
        raise InvalidValueError(key, value, "must be finite to be projected")
    return value


def _required(data: Mapping[str, Any], key: str) -> Any:
    try:
        value = data[key]
    except KeyError:
        raise DecodeError(key, None, "is required") from None
    if value is None:
        raise DecodeError(key, None, "must not be null")
    return value


def _optional(data: Mapping[str, Any], key: str) -> Any:
    value = data.get(key, _MISSING)
    if value is None:
        raise DecodeError(key, None, "must be omitted, not null, when absent")
    return None if value is _MISSING else value


_MISSING: Any = object()


class _Codec:
    """Encodes one event field into the flat mapping and decodes it back."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def encode(self, value: Any, out: _Flat) -> None:
        raise NotImplementedError

    def decode(self, data: Mapping[str, Any]) -> Any:
        raise NotImplementedError


class _Scalar(_Codec):
    __slots__ = ("check", "optional")

    def __init__(self, key: str, check: Callable[[str, Any], Any], optional: bool) -> None:
        super().__init__(key)
        self.check = check
        self.optional = optional

    def encode(self, value: Any, out: _Flat) -> None:
        if value is None:
            if not self.optional:
                raise InvalidValueError(self.key, None, "is required")
            return
        if type(value) is float:
            _finite(self.key, value)
        out[self.key] = value

    def decode(self, data: Mapping[str, Any]) -> Any:
        value = (_optional if self.optional else _required)(data, self.key)
        return None if value is None else self.check(self.key, value)


class _Bool(_Codec):
    __slots__ = ()

    def encode(self, value: Any, out: _Flat) -> None:
        out[self.key] = value

    def decode(self, data: Mapping[str, Any]) -> Any:
        value = _required(data, self.key)
        if not isinstance(value, bool):
            raise DecodeError(self.key, value, "must be true or false")
        return value


class _Timestamp(_Codec):
    __slots__ = ()

    def encode(self, value: datetime, out: _Flat) -> None:
        out[self.key] = format_timestamp(value)

    def decode(self, data: Mapping[str, Any]) -> datetime:
        return parse_timestamp(_check_str(self.key, _required(data, self.key)),
                               field_name=self.key)


_STAGES_BY_NAME = {stage.value: stage for stage in PipelineStage}


class _Stage(_Codec):
    __slots__ = ("optional",)

    def __init__(self, key: str, optional: bool) -> None:
        super().__init__(key)
        self.optional = optional

    def encode(self, value: StageName | None, out: _Flat) -> None:
        if value is not None:
            out[self.key] = value.value if isinstance(value, PipelineStage) else value

    def decode(self, data: Mapping[str, Any]) -> StageName | None:
        value = (_optional if self.optional else _required)(data, self.key)
        if value is None:
            return None
        name = _check_str(self.key, value)
        return _STAGES_BY_NAME.get(name, name)


class _IntTuple(_Codec):
    __slots__ = ()

    def encode(self, value: tuple[int, ...], out: _Flat) -> None:
        out[self.key] = list(value)

    def decode(self, data: Mapping[str, Any]) -> tuple[int, ...]:
        value = _required(data, self.key)
        if not isinstance(value, list | tuple):
            raise DecodeError(self.key, value, "must be a list of integers")
        return tuple(_check_int(f"{self.key}[{k}]", v) for k, v in enumerate(value))


class _InProcessOnly(_Codec):
    """A field that never leaves the process (a run's exception object)."""

    __slots__ = ()

    def encode(self, value: Any, out: _Flat) -> None:
        pass

    def decode(self, data: Mapping[str, Any]) -> Any:
        return None


class _ScalarMap(_Codec):
    """A mapping of names to scalars, as ``<field>.<name>`` keys."""

    __slots__ = ("prefix",)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.prefix = key + "."

    def encode(self, value: Mapping[str, Any], out: _Flat) -> None:
        prefix = self.prefix
        for name, inner in value.items():
            if not isinstance(inner, str | int | float | bool):
                raise InvalidTypeError(prefix + name, inner, "a string, number or bool")
            out[prefix + name] = inner

    def decode(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        prefix, start = self.prefix, len(self.prefix)
        found = {}
        for key, value in data.items():
            if key.startswith(prefix):
                if not isinstance(value, str | int | float | bool):
                    raise DecodeError(key, value, "must be a string, number or bool")
                if type(value) is int:
                    _check_int(key, value)
                found[key[start:]] = value
        return MappingProxyType(found)


def _json_text(key: str, value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, sort_keys=True,
                          separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(key, value, f"cannot be written as JSON ({exc})") from None


def _json_value(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise DecodeError(key, value, "must be a JSON text")
    try:
        return msgspec.json.decode(value)
    except RecursionError:
        raise DecodeError(key, value, "nests arrays or objects too deeply") from None
    except ValueError as exc:  # msgspec.DecodeError, or a lone surrogate in the text
        raise DecodeError(key, value, f"is not valid JSON ({exc})") from None


class _Item(_Codec):
    """A ContextItem as ``item.<field>`` keys; metadata as one JSON text."""

    __slots__ = ("content", "fields", "kind", "metadata", "source", "tags", "timestamp",
                 "tokens")

    _OPTIONAL: ClassVar[tuple[tuple[str, str], ...]] = (
        ("priority", "int"), ("future_relevance_hint", "float"), ("original_tokens", "int"))

    def __init__(self, key: str) -> None:
        super().__init__(key)
        p = key + "."
        self.content, self.tokens, self.kind, self.source = (
            p + "content", p + "tokens", p + "kind", p + "source")
        self.tags, self.metadata, self.timestamp = p + "tags", p + "metadata", p + "timestamp"
        self.fields = tuple((name, p + name, kind) for name, kind in self._OPTIONAL)

    def encode(self, item: ContextItem, out: _Flat) -> None:
        out[self.content] = item.content
        out[self.tokens] = item.tokens
        out[self.kind] = item.kind.value
        out[self.source] = item.source.value
        if item.pinned:
            out[self.key + ".pinned"] = True
        if item.tags:
            out[self.tags] = list(item.tags)
        if item.metadata:
            out[self.metadata] = _json_text(self.metadata, _thaw_json(item.metadata))
        if item.timestamp is not None:
            out[self.timestamp] = format_timestamp(item.timestamp)
        for name, key, kind in self.fields:
            value = getattr(item, name)
            if value is not None:
                out[key] = _finite(key, value) if kind == "float" else value

    def decode(self, data: Mapping[str, Any]) -> ContextItem:
        tags = _optional(data, self.tags)
        if tags is not None and not (isinstance(tags, list | tuple)
                                     and all(isinstance(t, str) for t in tags)):
            raise DecodeError(self.tags, tags, "must be a list of strings")
        metadata = _optional(data, self.metadata)
        timestamp = _optional(data, self.timestamp)
        pinned = _optional(data, self.key + ".pinned")
        if pinned is not None and not isinstance(pinned, bool):
            raise DecodeError(self.key + ".pinned", pinned, "must be true or false")
        optional = {}
        for name, key, kind in self.fields:
            value = _optional(data, key)
            if value is not None:
                value = _check_float(key, value) if kind == "float" else _check_int(key, value)
            optional[name] = value
        try:
            return ContextItem(
                content=_check_str(self.content, _required(data, self.content)),
                tokens=_check_int(self.tokens, _required(data, self.tokens)),
                kind=_check_str(self.kind, _required(data, self.kind)),
                source=_check_str(self.source, _required(data, self.source)),
                tags=tags or (),
                metadata=None if metadata is None else _json_value(self.metadata, metadata),
                timestamp=None if timestamp is None else parse_timestamp(
                    _check_str(self.timestamp, timestamp), field_name=self.timestamp),
                pinned=bool(pinned),
                **optional,
            )
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(f"{self.key}.{exc.field}", exc.value, exc.problem) from None


class _Budget(_Codec):
    """A ContextBudget as ``budget.<field>`` keys; reserved slots as one JSON text."""

    __slots__ = ("prefix",)

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.prefix = key + "."

    def encode(self, budget: ContextBudget, out: _Flat) -> None:
        p = self.prefix
        out[p + "max_tokens"] = budget.max_tokens
        out[p + "target_tokens"] = budget.target_tokens
        out[p + "output_reserve"] = budget.output_reserve
        if budget.reserved_slots:
            out[p + "reserved_slots"] = _json_text(
                p + "reserved_slots", {k.value: v for k, v in budget.reserved_slots.items()})
        out[p + "estimation_safety_margin_percent"] = budget.estimation_safety_margin_percent

    def decode(self, data: Mapping[str, Any]) -> ContextBudget:
        p = self.prefix
        slots = _optional(data, p + "reserved_slots")
        margin = _optional(data, p + "estimation_safety_margin_percent")
        try:
            return ContextBudget(
                max_tokens=_check_int(p + "max_tokens", _required(data, p + "max_tokens")),
                target_tokens=_check_int(p + "target_tokens",
                                         _required(data, p + "target_tokens")),
                output_reserve=_check_int(p + "output_reserve",
                                          _required(data, p + "output_reserve")),
                reserved_slots=None if slots is None else _json_value(p + "reserved_slots",
                                                                      slots),
                estimation_safety_margin_percent=0.0 if margin is None else _check_float(
                    p + "estimation_safety_margin_percent", margin),
            )
        except (InvalidValueError, InvalidTypeError) as exc:
            raise DecodeError(f"{self.key}.{exc.field}", exc.value, exc.problem) from None


class _Reason(_Codec):
    """A reason as ``reason.name`` plus ``reason.<field>`` keys."""

    __slots__ = ("exclusion", "name", "prefix")

    def __init__(self, key: str, exclusion: bool) -> None:
        super().__init__(key)
        self.prefix = key + "."
        self.name = key + ".name"
        self.exclusion = exclusion

    def encode(self, reason: ExclusionReason | InclusionReason, out: _Flat) -> None:
        out[self.name] = reason.name
        prefix = self.prefix
        for name, value in reason_fields(reason).items():
            flat = value
            if isinstance(reason, UnknownExclusionReason | InclusionReason) and not isinstance(
                    value, str | int | float | bool):
                flat = _json_text(prefix + name, value)
            elif type(value) is float:
                _finite(prefix + name, value)
            out[prefix + name] = flat

    def decode(self, data: Mapping[str, Any]) -> ExclusionReason | InclusionReason:
        name = _check_str(self.name, _required(data, self.name))
        prefix, start = self.prefix, len(self.prefix)
        envelope: dict[str, Any] = {"reason": name}
        for key, value in data.items():
            if key.startswith(prefix) and key != self.name:
                envelope[key[start:]] = _check_json_ints(key, value)
        if self.exclusion:
            reason = exclusion_reason_from_dict(envelope)
            for field in REFERENCE_FIELDS & envelope.keys():
                if not isinstance(envelope[field], int):
                    raise DecodeError(f"{prefix}{field}", envelope[field],
                                      "must be a candidate index in an event")
            return reason
        return inclusion_reason_from_dict(envelope)


def _codec_for(cls: type[_Event], name: str, hint: Any) -> _Codec:
    """The codec for one declared field, chosen by its type."""
    scalars: dict[Any, Callable[[str, Any], Any]] = {
        str: _check_str, int: _check_int, float: _check_float}
    if hint in scalars:
        return _Scalar(name, scalars[hint], optional=False)
    for base, check in scalars.items():
        if hint == base | None:
            return _Scalar(name, check, optional=True)
    table: dict[Any, Callable[[], _Codec]] = {
        bool: lambda: _Bool(name),
        datetime: lambda: _Timestamp(name),
        StageName: lambda: _Stage(name, optional=False),
        StageName | None: lambda: _Stage(name, optional=True),
        tuple[int, ...]: lambda: _IntTuple(name),
        ContextItem: lambda: _Item(name),
        ContextBudget: lambda: _Budget(name),
        Mapping[str, str | bool]: lambda: _ScalarMap(name),
        ExclusionReason: lambda: _Reason(name, exclusion=True),
        InclusionReason: lambda: _Reason(name, exclusion=False),
        BaseException | None: lambda: _InProcessOnly(name),
    }
    for known, make in table.items():
        if hint == known:
            return make()
    raise TypeError(f"{cls.__name__}.{name}: no flat codec for {hint!r}")  # pragma: no cover


class _EventCodec:
    """The flat mapping of one event type, derived from its declaration."""

    __slots__ = ("cls", "fields", "type_name")

    def __init__(self, cls: type[_Event]) -> None:
        self.cls = cls
        self.type_name = cls.type
        hints = get_type_hints(cls)
        self.fields = tuple((name, _codec_for(cls, name, hints[name]))
                            for name in cls.__struct_fields__
                            if name not in ("run_id", "seq"))

    def encode(self, event: _Event) -> _Flat:
        out: _Flat = {"schema": EVENT_SCHEMA_VERSION, "type": self.type_name,
                      "run_id": event.run_id, "seq": event.seq}
        for name, codec in self.fields:
            codec.encode(getattr(event, name), out)
        return out

    def decode(self, data: Mapping[str, Any], run_id: str, seq: int) -> _Event:
        values = {name: codec.decode(data) for name, codec in self.fields}
        return self.cls(run_id=run_id, seq=seq, **values)


_CODECS: dict[str, _EventCodec] = {cls.type: _EventCodec(cls) for cls in _KNOWN_EVENTS}
_CODECS_BY_CLASS: dict[type, _EventCodec] = {codec.cls: codec for codec in _CODECS.values()}
_ENVELOPE = frozenset({"schema", "type", "run_id", "seq"})


def event_to_dict(event: PipelineEvent) -> dict[str, Any]:
    """The flat mapping of ``event``: dotted keys, JSON-native scalar or list values.

    Raises :class:`~cupellation.exceptions.InvalidValueError` for a value no
    projection can carry (a NaN score, metadata that is not JSON).
    """
    if isinstance(event, UnknownEvent):
        out: _Flat = {"schema": EVENT_SCHEMA_VERSION, "type": event.event_type,
                      "run_id": event.run_id, "seq": event.seq}
        out.update(event.fields)
        return out
    codec = _CODECS_BY_CLASS.get(type(event))
    if codec is None:
        raise InvalidTypeError("event", event, "a cupellation event")
    return codec.encode(event)


def event_from_dict(data: Mapping[str, Any], *, line: int | None = None) -> PipelineEvent:
    """Decode one event from its flat mapping (the inverse of :func:`event_to_dict`).

    Raises :class:`~cupellation.exceptions.DecodeError` naming the field (and
    ``line``, when given) for a missing, null, mistyped or non-finite value,
    or a ``schema`` other than :data:`EVENT_SCHEMA_VERSION`.
    """
    try:
        if not isinstance(data, Mapping):
            raise DecodeError("event", data, "must be a JSON object")
        if set(map(type, data)) - {str}:
            key = next(k for k in data if not isinstance(k, str))
            raise DecodeError("event", key, "keys must be strings, as JSON object keys are")
        schema = _required(data, "schema")
        if type(schema) is not int or schema != EVENT_SCHEMA_VERSION:
            raise DecodeError("schema", schema,
                              f"is not an event schema this version reads "
                              f"({EVENT_SCHEMA_VERSION})")
        type_name = _check_str("type", _required(data, "type"))
        run_id = _check_str("run_id", _required(data, "run_id"))
        if not run_id:
            raise DecodeError("run_id", run_id, "must not be empty")
        seq = _check_int("seq", _required(data, "seq"))
        if seq < 0:
            raise DecodeError("seq", seq, "must be >= 0")
        codec = _CODECS.get(type_name)
        if codec is None:
            rest = {k: _check_json_ints(k, v) for k, v in data.items() if k not in _ENVELOPE}
            return UnknownEvent(run_id=run_id, seq=seq, event_type=type_name,
                                fields=MappingProxyType(rest))
        return codec.decode(data, run_id, seq)  # type: ignore[return-value]
    except DecodeError as exc:
        if line is None or exc.line is not None:
            raise
        raise DecodeError(exc.field, exc.value, exc.problem, line=line) from None


def event_to_json(event: PipelineEvent) -> str:
    """One event as a line of JSON text (its flat mapping), without a newline."""
    return msgspec.json.encode(event_to_dict(event)).decode("utf-8")


def event_from_json(text: str | bytes, *, line: int | None = None) -> PipelineEvent:
    """Decode one event from JSON text. Invalid JSON, NaN or infinity, and every
    problem :func:`event_from_dict` finds raise :class:`DecodeError`."""
    if not isinstance(text, str | bytes | bytearray | memoryview):
        raise DecodeError("event", type(text).__name__, "must be JSON text (str or bytes)",
                          line=line)
    try:
        data = msgspec.json.decode(text)
    except (ValueError, RecursionError) as exc:
        # msgspec.DecodeError; UnicodeError for text that is not UTF-8 or holds a
        # lone surrogate; RecursionError for arrays or objects nested past
        # Python's recursion limit.
        shown = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        problem = ("nests arrays or objects too deeply" if isinstance(exc, RecursionError)
                   else f"is not valid JSON ({exc})")
        raise DecodeError("event", shown, problem, line=line) from None
    return event_from_dict(data, line=line)


def events_from_json_lines(lines: Iterable[str | bytes] | str | bytes, *, first_line: int = 1
                           ) -> Iterator[PipelineEvent]:
    """Decode JSON lines (one event per line; blank lines are skipped), naming the
    line number in any :class:`DecodeError`.

    ``lines`` is an iterable of lines (a file object, a list), or the whole text,
    which is split at ``\n`` only: U+2028, U+2029 and U+0085 may stand inside a
    JSON string. Anything else raises :class:`InvalidTypeError`.
    """
    if isinstance(lines, str):
        lines = lines.split("\n")
    elif isinstance(lines, bytes):
        lines = lines.split(b"\n")
    elif not isinstance(lines, Iterable):
        raise InvalidTypeError("lines", lines, "an iterable of JSON lines, or JSON text")
    for number, text in enumerate(lines, start=first_line):
        if not isinstance(text, str | bytes | bytearray | memoryview):
            raise DecodeError("event", type(text).__name__, "must be a line of JSON text",
                              line=number)
        if (bytes(text) if isinstance(text, memoryview) else text).strip():
            yield event_from_json(text, line=number)
