"""A span's column block decoded column by column: the fast path of the span reader.

Why it exists: issue 26 asks a rebuild from spans to read 200,000 decisions per
second. The row path (:meth:`._spandecode.RunDecoding.decode_rows`) turns each
row of a block into a flat mapping, converts the mappings into the log reader's
typed records, checks each record and builds its event from it: about a dozen
Python steps per decision, of which building the item is one. Here each column
is validated once, in one ``msgspec.convert`` call against the very type its
record field declares, each distinct kind, source and metadata text is checked
once, and the events are built straight from the columns.

What keeps it equal to the row path (the oracle):

- It decides nothing the row path would decide otherwise. It gives the block's
  events only when every row would go through the row path's typed record with
  no failure and no note: every attribute maps to a field of the record, every
  required field is present in every row, every value converts to its field's
  type, the reason is one the record checks accept with exactly its own fields,
  and an item decoded without content gets the ``none`` capture's placeholder
  and nothing else. Anything else (a damaged value, an unknown reason, a row
  needing the events module's path, a run whose capture is unknown) returns
  ``None`` before anything is recorded, and the caller decodes the block row by
  row as before, which names what is wrong.
- The values it builds from are what the records would hold: the same field
  types, the same conversions (a ``str`` time to an aware ``datetime``, kept in
  UTC by ``trusted_item``, the data model's positional ``ContextItem.trusted``),
  the same defaults for what a row leaves out, the same names (``name_of``) and
  metadata (``item_metadata``).
- ``tests/otel/test_column_blocks.py`` compares the two paths' events on runs of
  every reason, field and capture, and on blocks damaged at random.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from typing import Any, Final, NamedTuple, Union, get_args, get_origin

import msgspec

from .._model import EMPTY_METADATA, ContextItem, ContextKind, ContextSource
from .._model.item import trusted_item
from ..events import ItemExcluded, ItemIncluded
from ..events._capture import placeholder_content
from ..events._flat import stage_from_name
from ..events._records import (
    EXCLUDED_RECORD,
    INCLUDED_RECORD,
    INCLUSIONS,
    RecordError,
    item_metadata,
    name_of,
)
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, reason_field_types
from ._columns import Columns
from ._names import EXCLUSION_EVENT, exclusion_key, included_key, shares_item_field

__all__ = ["block_events"]

_convert = msgspec.convert


def _field_types(record: type[msgspec.Struct]) -> dict[str, tuple[str, Any, bool]]:
    """Each flat key of ``record``: its attribute, its value type (without
    ``UnsetType``) and whether every row must hold it."""
    out: dict[str, tuple[str, Any, bool]] = {}
    for info in msgspec.structs.fields(record):
        kind = info.type
        if get_origin(kind) is Union or type(kind).__name__ == "UnionType":
            kept = [arg for arg in get_args(kind) if arg is not msgspec.UnsetType]
            kind = kept[0] if len(kept) == 1 else Union[tuple(kept)]  # noqa: UP007
        out[info.encode_name] = (info.name, kind, info.required)
    return out


_FIELDS: Final = {True: _field_types(EXCLUDED_RECORD), False: _field_types(INCLUDED_RECORD)}
#: What no column carries: the decoder's own members of every row.
_HEAD: Final = frozenset({"schema", "type", "run_id"})
#: The required fields a row may leave out: the decoder fills them in (the carrier's
#: stage; the none capture's placeholder content).
_FILLED: Final = frozenset({"stage", "item.content"})
#: The list types columns are converted with, by (value type, nullable).
_LIST_TYPES: dict[tuple[Any, bool], Any] = {}
#: Each known reason: its own fields, and the field that must equal the item's tokens.
_REASONS: Final[Mapping[str, tuple[tuple[str, ...], str | None]]] = {
    name: (tuple(reason_field_types(name) or ()), cls.tokens_field)
    for name, cls in KNOWN_EXCLUSION_REASONS.items()}
_REASON_KEYS: Final = frozenset(key for key in _FIELDS[True] if key.startswith("reason."))


class _Refused(Exception):
    """The block needs the row path."""


def _list_type(kind: Any, nullable: bool) -> Any:
    found = _LIST_TYPES.get((kind, nullable))
    if found is None:
        found = _LIST_TYPES[(kind, nullable)] = list[kind | None] if nullable else list[kind]
    return found


def _converted(columns: Columns, excluded: bool) -> dict[str, list[Any]]:
    """The block's columns by flat key, each converted to its record field's type
    (a null stays None: the row leaves the field out)."""
    names, values, count = columns
    fields = _FIELDS[excluded]
    out: dict[str, list[Any]] = {}
    for name, column in zip(names, values, strict=True):
        key = exclusion_key(name) if excluded else included_key(name)
        if key is None:
            continue
        spec = fields.get(key)
        # (No attribute maps to a head member: exclusion_key and included_key never
        # give one.)
        if spec is None or key in out or len(column) != count:
            raise _Refused
        # A null is a field the row leaves out: refused by the type of a required field
        # (but the stage, which the carrier gives, and the content, which none capture
        # leaves out).
        nullable = (not spec[2] or key in _FILLED) and None in column
        try:
            out[key] = _convert(column, _list_type(spec[1], nullable))
        except (msgspec.ValidationError, TypeError):
            raise _Refused from None
    for key, (_, _, required) in fields.items():
        if required and key not in out and key not in _HEAD and key not in _FILLED:
            raise _Refused
    return out


def _checked_names(texts: Iterable[str], make: Callable[[str], Any]) -> dict[str, Any]:
    """Each distinct text's value, checked once (a refusal refuses the block)."""
    try:
        return {text: make(text) for text in set(texts)}
    except (RecordError, ValueError, TypeError):
        raise _Refused from None


def _contents(cols: dict[str, list[Any]], capture: str | None, count: int) -> list[str]:
    """Each row's content: its own, or (``none`` capture) the placeholder naming its
    candidate index, which is what the row path's fill gives and keeps."""
    content = cols.get("item.content")
    if content is not None and None not in content:
        return content
    if capture != "none":
        raise _Refused  # content missing from a row whose capture keeps it, or unknown
    indices = cols["candidate_index"]
    metadata = cols.get("item.metadata")
    out: list[str] = []
    for k in range(count):
        text = None if content is None else content[k]
        if text is None:
            index = indices[k]
            if index < 0 or (metadata is not None and metadata[k] is not None):
                raise _Refused  # the row path fills "-" or drops the metadata after
            text = placeholder_content(index)
        out.append(text)
    return out


def _items(cols: dict[str, list[Any]], capture: str | None, count: int) -> list[ContextItem]:
    """Each row's item, as ``_build_item`` builds it from the row's record."""
    kinds = _checked_names(cols["item.kind"], lambda text: name_of(ContextKind, text))
    sources = _checked_names(cols["item.source"], lambda text: name_of(ContextSource, text))
    metadata_texts = cols.get("item.metadata")
    metadata: Iterable[Any] = repeat(EMPTY_METADATA, count)
    if metadata_texts is not None:
        known = _checked_names(filter(None, metadata_texts), item_metadata)
        known[None] = EMPTY_METADATA  # type: ignore[index]
        metadata = map(known.__getitem__, metadata_texts)
    tags = cols.get("item.tags")
    pinned = cols.get("item.pinned")
    return list(map(
        trusted_item, _contents(cols, capture, count), cols["item.tokens"],
        map(kinds.__getitem__, cols["item.kind"]), map(sources.__getitem__, cols["item.source"]),
        _column(cols, "item.priority", count),
        repeat((), count) if tags is None else [() if tag is None else tag for tag in tags],
        metadata, _column(cols, "item.timestamp", count),
        _column(cols, "item.future_relevance_hint", count),
        repeat(False, count) if pinned is None else [value is True for value in pinned],
        _column(cols, "item.original_tokens", count)))


def _column(cols: dict[str, list[Any]], key: str, count: int) -> Iterable[Any]:
    """The column ``key``, or None for every row when no row holds it."""
    column = cols.get(key)
    return repeat(None, count) if column is None else column


class _ReasonPlan(NamedTuple):
    """How a block's rows of one known reason are read."""

    cls: Callable[..., ExclusionReason]  # the reason's class
    own: tuple[str, ...]                 # its own fields, in declaration order
    columns: list[list[Any] | None]      # their columns (None: no row holds it)
    others: list[list[Any]]              # the other reasons' columns: left empty
    shared: tuple[bool, ...]             # per own field: the item's tokens stand in
    tokens_at: int | None                # the own field that must equal the item's tokens
    shareable: bool                      # equal values may share one reason object


def _reason_plan(name: str, present: dict[str, list[Any]]) -> _ReasonPlan:
    """The plan of the reason ``name``; equal values share one reason object only
    when its fields are integers and text (``0.0`` and ``-0.0`` are equal floats that
    print differently)."""
    spec = _REASONS.get(name)
    if spec is None:
        raise _Refused
    own, tokens_field = spec
    kinds = (reason_field_types(name) or {}).values()
    return _ReasonPlan(
        KNOWN_EXCLUSION_REASONS[name], own, [present.get(field) for field in own],
        [column for field, column in present.items() if field not in own],
        tuple(shares_item_field(name, field) for field in own),
        None if tokens_field is None else own.index(tokens_field),
        all(kind in (int, str) for kind in kinds))


def _exclusion_reasons(cols: dict[str, list[Any]], count: int) -> list[ExclusionReason]:
    """Each row's reason, refused unless the record checks would accept it: a known
    reason holding exactly its own fields (the item's tokens standing in for a shared
    field the row leaves out), its tokens field equal to the item's. Equal integer
    and text values share one reason (a block's BudgetExceeded rows repeat theirs)."""
    names = cols["reason.name"]
    present = {key[7:]: column for key, column in cols.items()
               if key in _REASON_KEYS and key != "reason.name"}
    tokens = cols["item.tokens"]
    plans: dict[str, _ReasonPlan] = {}
    reused: dict[tuple[Any, ...], ExclusionReason] = {}
    out: list[ExclusionReason] = []
    for k in range(count):
        name = names[k]
        plan = plans.get(name)
        if plan is None:
            plan = plans[name] = _reason_plan(name, present)
        if any(column[k] is not None for column in plan.others):
            raise _Refused  # a field of another reason
        values = [None if column is None else column[k] for column in plan.columns]
        for position, shared in enumerate(plan.shared):
            if values[position] is None:
                if not shared:
                    raise _Refused  # a field of its own missing
                values[position] = tokens[k]
        if plan.tokens_at is not None and values[plan.tokens_at] != tokens[k]:
            raise _Refused  # the fold names the disagreement, from the row path's event
        key = (name, *values)
        reason = reused.get(key) if plan.shareable else None
        if reason is None:
            reason = plan.cls(**dict(zip(plan.own, values, strict=True)))
            if plan.shareable:
                reused[key] = reason
        out.append(reason)
    return out


def block_events(name: str, columns: Columns, run_id: str, carrier_stage: str | None,
                 capture: str | None) -> list[ItemExcluded | ItemIncluded] | None:
    """The events of one block of column rows (``name``: the block's event name), in
    row order, exactly as the row path decodes them when none fails; None when any
    row would take another way (nothing is recorded then)."""
    excluded = name == EXCLUSION_EVENT
    count = columns[2]
    if not run_id:
        return None
    try:
        cols = _converted(columns, excluded)
        items = _items(cols, capture, count)
        seqs, indices, scores = cols["seq"], cols["candidate_index"], cols["score"]
        if excluded:
            stages = _stages(cols.get("stage"), carrier_stage, count)
            reasons = _exclusion_reasons(cols, count)
            return [ItemExcluded(run_id=run_id, seq=seq, stage=stage, candidate_index=index,
                                 score=score, item=item, reason=reason)
                    for seq, stage, index, score, item, reason in zip(
                        seqs, stages, indices, scores, items, reasons, strict=True)]
        inclusions = _checked_names(cols["reason.name"], _inclusion)
        return [ItemIncluded(run_id=run_id, seq=seq, candidate_index=index, position=position,
                             score=score, item=item, reason=inclusions[reason])
                for seq, index, position, score, item, reason in zip(
                    seqs, indices, cols["position"], scores, items, cols["reason.name"],
                    strict=True)]
    except _Refused:
        return None


def _inclusion(text: str) -> Any:
    found = INCLUSIONS.get(text)
    if found is None:
        raise ValueError(text)
    return found


def _stages(column: list[Any] | None, carrier_stage: str | None, count: int) -> list[Any]:
    """Each exclusion row's stage: its own, else its carrier's."""
    if column is None:
        if carrier_stage is None:
            raise _Refused
        return [stage_from_name(carrier_stage)] * count
    out = []
    for own in column:
        stage = carrier_stage if own is None else own
        if stage is None:
            raise _Refused
        out.append(stage_from_name(stage))
    return out
