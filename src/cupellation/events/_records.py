"""Typed records: the flat form of the frequent events as ``msgspec`` structs,
generated from the event, item and reason declarations.

A log line holding one canonical record decodes straight into one of these
structs, validating every field in C (integers within int64, a non-empty content,
a timezone-aware time). The report fold reads their columns by name, and the
item and the reason a record stands for are built only when something reads them
(``build_item()``, ``build_reason()``), so rebuilding a
report from a log builds no event object and no ContextItem per line.

Nothing here is written by hand per field: :func:`_struct_fields` maps each
declared field to its flat key and type (an item's fields from ``ITEM_FIELDS``;
a reason's from every known reason's declaration, in name order, the order the
flat form writes them), and a test checks the structs against the declarations.
A record refuses any key it does not declare, and encoding a record gives
exactly the canonical line of the event it stands for. Besides its fields, a
record has ``event()`` (the event it stands for); an item record also has
``excluded``, ``tokens`` (the item's), ``stage_name`` (exclusions),
``build_item()`` and ``build_reason()``, which is all the report fold reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, get_type_hints

import msgspec

from .._model import (
    EMPTY_METADATA,
    ContextItem,
    ContextKind,
    ContextSource,
    freeze_json,
)
from .._model.item import trusted_item
from .._model.wire import ITEM_FIELDS, flat_struct_fields
from ..reasons import (
    KNOWN_EXCLUSION_REASONS,
    ExclusionReason,
    InclusionReason,
    reason_field_types,
)
from ._flat import stage_from_name
from ._types import (
    BaseEvent,
    CountShortfall,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    StageCompleted,
    StageName,
    StageStarted,
)

__all__ = [
    "EXCLUDED_RECORD",
    "INCLUDED_RECORD",
    "INCLUSIONS",
    "METADATA",
    "REASON_FIELDS",
    "RECORD_CLASSES",
    "RECORD_DECODER",
    "RUN_COMPLETED_RECORD",
    "RUN_FAILED_RECORD",
    "RecordError",
    "item_metadata",
    "name_of",
    "record_types",
]

_UNSET = msgspec.UNSET
_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
_SEQ = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_RUN_ID = Annotated[str, msgspec.Meta(min_length=1)]
_SCALARS: Final[Mapping[Any, Any]] = {str: str, int: _INT64, float: float, StageName: str}

#: Every known exclusion reason's fields and their wire types, in name order (the
#: flat form writes a reason's fields in that order).
REASON_FIELDS: Final[Mapping[str, Any]] = dict(sorted(
    {field: kind for name in KNOWN_EXCLUSION_REASONS
     for field, kind in (reason_field_types(name) or {}).items()}.items()))
_REASON_ATTRIBUTES: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    name: tuple((field, "reason_" + field) for field in (reason_field_types(name) or {}))
    for name in KNOWN_EXCLUSION_REASONS
}
INCLUSIONS: Final[Mapping[str, InclusionReason]] = {
    reason.name: reason for reason in
    (InclusionReason.SCORED, InclusionReason.PINNED, InclusionReason.ZERO_TOKEN)}


class RecordError(Exception):
    """A record the fast path does not decide (the slow path will)."""


def _check_reason_types() -> None:
    """Two reasons declaring one field name must agree on its type (one struct holds
    every reason's fields)."""
    for name in KNOWN_EXCLUSION_REASONS:
        for field, kind in (reason_field_types(name) or {}).items():
            if REASON_FIELDS[field] is not kind:  # pragma: no cover - a declaration error
                raise TypeError(f"reason field {field!r} has two types")


_check_reason_types()


def _struct_fields(cls: type[BaseEvent]) -> list[tuple[str, Any, Any]]:
    """The struct fields of ``cls``'s flat form, in its canonical key order."""
    hints = get_type_hints(cls)
    out: list[tuple[str, Any, Any]] = [("schema", int, msgspec.field()),
                                       ("run_id", _RUN_ID, msgspec.field()),
                                       ("seq", _SEQ, msgspec.field())]
    for name in cls.__struct_fields__:
        hint = hints[name]
        if name in ("run_id", "seq") or hint == BaseException | None:
            continue
        if hint in _SCALARS:
            out.append((name, _SCALARS[hint], msgspec.field()))
        elif hint in (str | None, StageName | None):
            out.append((name, str | msgspec.UnsetType, msgspec.field(default=_UNSET)))
        elif hint is ContextItem:
            out.extend(flat_struct_fields(ITEM_FIELDS, "item_", "item."))
        elif hint in (ExclusionReason, InclusionReason):
            out.append(("reason", str, msgspec.field(name="reason.name")))
            if hint == ExclusionReason:
                out.extend(("reason_" + field, _SCALARS[kind] | msgspec.UnsetType,
                            msgspec.field(name="reason." + field, default=_UNSET))
                           for field, kind in REASON_FIELDS.items())
        else:  # pragma: no cover - a declaration this generator cannot map
            raise TypeError(f"{cls.__name__}.{name}: no record type for {hint!r}")
    return out


# -- names and metadata, validated once and shared ---------------------------------------

_CACHE_LIMIT: Final = 4096
#: Kind and source names already made, by class and text (each validated once when made).
_NAMES: Final[Mapping[type, dict[str, Any]]] = {ContextKind: {}, ContextSource: {}}
#: Metadata texts already validated, with their read-only value (shared, bounded).
METADATA: dict[str, Mapping[str, Any]] = {}


def name_of(cls: type[ContextKind] | type[ContextSource], text: str) -> Any:
    """``cls(text)`` (which validates; raises on a blank name), shared."""
    names = _NAMES[cls]
    found = names.get(text)
    if found is None:
        found = cls(text)
        if len(names) >= _CACHE_LIMIT:
            names.clear()
        names[text] = found
    return found


def item_metadata(text: str) -> Mapping[str, Any]:
    """The read-only metadata of a flat ``item.metadata`` text, validated as the data
    model does (a non-empty JSON object within the depth limit); shared."""
    found = METADATA.get(text)
    if found is None:
        try:
            value = msgspec.json.decode(text)
        except (ValueError, RecursionError):
            raise RecordError from None
        if not isinstance(value, dict) or not value:
            raise RecordError  # the writer leaves empty metadata out
        try:
            found = freeze_json(value, "metadata", set())
        except (ValueError, TypeError):
            raise RecordError from None
        if len(METADATA) >= _CACHE_LIMIT:
            METADATA.clear()
        METADATA[text] = found
    return found


# -- building what a record stands for ----------------------------------------------------


def _build_item(record: Any) -> ContextItem:
    """The ContextItem of an item record (its values were validated when decoded)."""
    metadata = record.item_metadata
    tags = record.item_tags
    timestamp = record.item_timestamp
    hint = record.item_future_relevance_hint
    original = record.item_original_tokens
    return trusted_item(
        record.item_content, record.item_tokens,
        name_of(ContextKind, record.item_kind), name_of(ContextSource, record.item_source),
        None if record.item_priority is _UNSET else record.item_priority,
        () if tags is _UNSET else tags,
        EMPTY_METADATA if metadata is _UNSET else item_metadata(metadata),
        None if timestamp is _UNSET else timestamp, None if hint is _UNSET else hint,
        record.item_pinned is True, None if original is _UNSET else original)


def _build_exclusion(record: Any) -> ExclusionReason:
    name = record.reason
    cls = KNOWN_EXCLUSION_REASONS[name]
    reason: ExclusionReason = cls(**{field: getattr(record, attribute)
                                     for field, attribute in _REASON_ATTRIBUTES[name]})
    return reason


def _build_inclusion(record: Any) -> InclusionReason:
    return INCLUSIONS[record.reason]


def _stage_name(record: Any) -> StageName:
    return stage_from_name(record.stage)


def _tokens(record: Any) -> int:
    tokens: int = record.item_tokens
    return tokens


def _converter(cls: type[BaseEvent]) -> Callable[[Any], PipelineEvent]:
    """The function turning a record of ``cls`` into the event it stands for.

    Generated from the declaration, one keyword argument per field, as ``msgspec``
    and ``dataclasses`` generate their own methods: ``cls(run_id=r.run_id, ...)``.
    The loops it replaces (a dict of every field read by name, then passes over
    the stage names and the unset values, then ``cls(**values)``) cost an item
    event 3.8 µs where this costs 2.6 µs (the 1,000 decisions of
    benchmarks/bench_otel.py's rebuild from spans)."""
    hints = get_type_hints(cls)
    unset = {name for name, _, spec in _struct_fields(cls) if spec.default is _UNSET}
    arguments: list[str] = []
    for name in cls.__struct_fields__:
        hint = hints[name]
        if hint == BaseException | None:
            continue  # not in the flat form: the event's default
        if hint is ContextItem:
            value = "build_item(r)"
        elif hint in (ExclusionReason, InclusionReason):
            value = "build_exclusion(r)" if hint is ExclusionReason else "build_inclusion(r)"
        elif hint in (StageName, StageName | None):
            value = f"stage_from_name(r.{name})"
        else:
            value = f"r.{name}"
        if name in unset:  # a field a record may leave unset: None in the event
            value = f"None if r.{name} is UNSET else {value}"
        arguments.append(f"{name}={value}")
    source = f"def convert(r):\n    return cls({', '.join(arguments)})"
    namespace: dict[str, Any] = {
        "cls": cls, "UNSET": _UNSET, "stage_from_name": stage_from_name,
        "build_item": _build_item, "build_exclusion": _build_exclusion,
        "build_inclusion": _build_inclusion}
    exec(source, namespace)  # the source is built above from the fields
    convert: Callable[[Any], PipelineEvent] = namespace["convert"]
    return convert


def _record_type(cls: type[BaseEvent]) -> type[msgspec.Struct]:
    namespace: dict[str, Any] = {"event": _converter(cls)}
    if cls in (ItemExcluded, ItemIncluded):
        namespace["excluded"] = cls is ItemExcluded
        namespace["tokens"] = property(_tokens)
        if cls is ItemExcluded:
            namespace["stage_name"] = property(_stage_name)
        namespace["build_item"] = _build_item
        namespace["build_reason"] = (_build_exclusion if cls is ItemExcluded
                                     else _build_inclusion)
    return msgspec.defstruct(
        f"{cls.__name__}Record", _struct_fields(cls), tag_field="type", tag=cls.type,
        kw_only=True, gc=False, omit_defaults=True, forbid_unknown_fields=True,
        namespace=namespace, module=__name__)


_RECORD_EVENTS: Final = (StageStarted, StageCompleted, ItemExcluded, ItemIncluded,
                         RunCompleted, RunFailed, CountShortfall)
_TYPES: Final[dict[type[BaseEvent], type[msgspec.Struct]]] = {
    cls: _record_type(cls) for cls in _RECORD_EVENTS}


def record_types() -> Mapping[type[BaseEvent], type[msgspec.Struct]]:
    """The generated record struct of each event type that has one."""
    return dict(_TYPES)


#: Decodes a line holding one record of any record type and no other key
#: (``msgspec.ValidationError`` and ``msgspec.DecodeError`` for anything else).
RECORD_DECODER: Final = msgspec.json.Decoder(
    _TYPES[StageStarted] | _TYPES[StageCompleted] | _TYPES[ItemExcluded]
    | _TYPES[ItemIncluded] | _TYPES[RunCompleted] | _TYPES[RunFailed]
    | _TYPES[CountShortfall])

#: Every generated record class.
RECORD_CLASSES: Final = frozenset(_TYPES.values())
EXCLUDED_RECORD: Final = _TYPES[ItemExcluded]
INCLUDED_RECORD: Final = _TYPES[ItemIncluded]
RUN_COMPLETED_RECORD: Final = _TYPES[RunCompleted]
RUN_FAILED_RECORD: Final = _TYPES[RunFailed]
