"""Span event attributes for item decisions: the reference path over the events' flat
mapping, and a column-wise fast path that gives the same attributes.

The reference is ``exclusion_attributes(event_to_dict(apply_content_capture(e)))``
(and its inclusion twin): the one definition. Building an event object, capturing
its content and flattening it costs tens of microseconds per item, so a stage's
batch is encoded straight from its columns instead; the tests check, over random
runs and every capture policy, that both paths give equal attributes. Anything
the fast path does not handle (metadata under ``full`` capture, a reason of an
unknown variant or with data, a value that cannot be projected) goes through the
reference path, item by item.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from operator import attrgetter
from typing import Any

from .._model import ContextItem
from .._model.wire import ITEM_FIELDS, column_writer, flat_writer
from ..events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineStage,
    StageCompleted,
    StageStarted,
    apply_content_capture,
    content_digest,
    event_to_dict,
)
from ..exceptions import InvalidTypeError, InvalidValueError
from ..reasons import (
    KNOWN_EXCLUSION_REASONS,
    ExclusionReason,
    InclusionReason,
    UnknownExclusionReason,
    reason_fields,
)
from ._names import (
    RUN_ID,
    STAGE_DURATION,
    STAGE_END_SEQ,
    STAGE_EXACT,
    STAGE_IN,
    STAGE_NAME,
    STAGE_OUT,
    STAGE_START_SEQ,
    exclusion_attributes,
    included_attributes,
    reason_field_attribute,
    shares_item_field,
    stage_attributes,
    stage_from_label,
)

__all__ = [
    "Columns",
    "Encoded",
    "exclusion_batch_columns",
    "included_batch_columns",
    "exclusion_batch_attributes",
    "flat_stage",
    "included_batch_attributes",
    "reference_attributes",
    "stage_event_attributes",
    "text_totals",
]


def flat_stage(stage: PipelineStage | str | None) -> str | None:
    """A stage as the flat mapping writes it (``"Slice"``)."""
    return stage.value if isinstance(stage, PipelineStage) else stage


def stage_event_attributes(event: StageStarted | StageCompleted) -> dict[str, Any]:
    """``stage_attributes(event_to_dict(event))``, built directly."""
    stage = event.stage
    value = stage.value if isinstance(stage, PipelineStage) else stage
    label = value.lower()
    out: dict[str, Any] = {RUN_ID: event.run_id, STAGE_NAME: label,
                           STAGE_IN: event.items_in}
    if stage_from_label(label) != value:
        out[STAGE_EXACT] = value
    if type(event) is StageStarted:
        out[STAGE_START_SEQ] = event.seq
        return out
    assert isinstance(event, StageCompleted)
    if not math.isfinite(event.duration_ms):
        return stage_attributes(event_to_dict(event))  # raises, as the flat mapping does
    out[STAGE_END_SEQ] = event.seq
    out[STAGE_DURATION] = event.duration_ms
    out[STAGE_OUT] = event.items_out
    return out


def reference_attributes(event: ItemExcluded | ItemIncluded, capture: ContentCapture,
                         carrier_stage: str | None) -> dict[str, Any] | None:
    """The attributes of one item event by the definition: capture, flatten, rename.
    None when the event holds a value no projection can carry (a non-finite number)."""
    try:
        flat = event_to_dict(apply_content_capture(event, capture))
    except (InvalidValueError, InvalidTypeError):
        return None
    keep = capture is not ContentCapture.NONE
    if isinstance(event, ItemExcluded):
        return exclusion_attributes(flat, carrier_stage, keep)
    return included_attributes(flat, keep)


def _item_is_plain(item: ContextItem, full: bool) -> bool:
    """True when the fast path encodes ``item`` exactly as the flat mapping would."""
    if full and item.metadata:
        return False
    hint = item.future_relevance_hint
    return hint is None or math.isfinite(hint)


#: The item's attributes other than content, kind, tokens and metadata (which each
#: caller writes its own way), derived from ContextItem's wire declaration.
_write_item_rest = flat_writer(ITEM_FIELDS, "cupel.item.",
                               skip=("content", "kind", "tokens", "metadata"))


def _put_item(out: dict[str, Any], item: ContextItem, capture: ContentCapture) -> int:
    """The ``cupel.item.*`` attributes other than kind and tokens (the flat mapping's
    ``item.*`` keys under ``capture``); returns the characters of text written."""
    length = 0
    if capture is not ContentCapture.NONE:
        content = item.content if capture is ContentCapture.FULL else content_digest(
            item.content)
        out["cupel.item.content"] = content
        length += len(content)
    return length + _write_item_rest(item, out)


#: A known reason's name, its fixed attributes, their text length, and its fields
#: shared with the item.
_ReasonParts = tuple[str, dict[str, Any], int, tuple[tuple[str, Any], ...]]


def _reason_parts(reason: ExclusionReason) -> _ReasonParts | None:
    """What the fast path needs of a reason; None for what it leaves to the reference
    (an unknown variant, a non-finite number)."""
    if isinstance(reason, UnknownExclusionReason):
        return None
    name = reason.name
    fixed: dict[str, Any] = {}
    shared: list[tuple[str, Any]] = []
    for field, value in reason_fields(reason).items():
        if type(value) is float and not math.isfinite(value):
            return None
        if shares_item_field(name, field):
            shared.append((field, value))
        else:
            fixed[reason_field_attribute(field)] = value
    length = len(name) + sum(len(v) for v in fixed.values() if type(v) is str)
    return name, fixed, length, tuple(shared)


#: Attribute mappings of a batch's events (None for one that cannot be projected),
#: with their total attribute count and text length.
Encoded = tuple[list[dict[str, Any] | None], int, int]


def _reference_totals(attributes: dict[str, Any] | None, totals: list[int]) -> None:
    if attributes is not None:
        count, length = text_totals(attributes)
        totals[0] += count
        totals[1] += length


def exclusion_batch_attributes(batch: ItemEventBatch, capture: ContentCapture,
                               carrier_stage: str | None) -> Encoded:
    """One ``cupel.exclusion`` attribute mapping per event of an exclusion batch (None
    for an event that cannot be projected), and their totals for the span's checks."""
    out: list[dict[str, Any] | None] = []
    totals = [0, 0]
    full = capture is ContentCapture.FULL
    stage = flat_stage(batch.stage)
    explicit_stage = stage != carrier_stage
    stage_length = len(stage) if explicit_stage and isinstance(stage, str) else 0
    parts_by_id: dict[int, _ReasonParts | None] = {}
    first = batch.first_seq
    isfinite = math.isfinite
    count = length = 0
    reasons: tuple[ExclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    for k, (index, item, score, reason) in enumerate(zip(
            batch.candidate_indices, batch.items, batch.scores, reasons, strict=True)):
        key = id(reason)
        if key in parts_by_id:
            parts = parts_by_id[key]
        else:
            parts = parts_by_id[key] = _reason_parts(reason)
        hint = item.future_relevance_hint
        if (parts is None or not isfinite(score) or (full and item.metadata)
                or (hint is not None and not isfinite(hint))):
            attributes = reference_attributes(batch[k], capture, carrier_stage)
            _reference_totals(attributes, totals)
            out.append(attributes)
            continue
        name, fixed, fixed_length, shared = parts
        kind = item.kind.value
        encoded: dict[str, Any] = {
            "cupel.exclusion.reason": name,
            "cupel.exclusion.item_kind": kind,
            "cupel.exclusion.item_tokens": item.tokens,
            "cupel.exclusion.candidate_index": index,
            "cupel.exclusion.score": score,
            "cupel.exclusion.seq": first + k,
        }
        if explicit_stage:
            encoded["cupel.exclusion.stage"] = stage
        length += _put_item(encoded, item, capture) + len(kind) + fixed_length + stage_length
        if fixed:
            encoded.update(fixed)
        for field, value in shared:
            if value != item.tokens:
                encoded[reason_field_attribute(field)] = value
        count += len(encoded)
        out.append(encoded)
    return out, count + totals[0], length + totals[1]


def included_batch_attributes(batch: ItemEventBatch, capture: ContentCapture) -> Encoded:
    """One ``cupel.item.included`` attribute mapping per event of an inclusion batch,
    and their totals for the span's checks."""
    out: list[dict[str, Any] | None] = []
    totals = [0, 0]
    full = capture is ContentCapture.FULL
    first = batch.first_seq
    positions = batch.positions
    assert positions is not None
    isfinite = math.isfinite
    count = length = 0
    reasons: tuple[InclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    for k, (index, item, score, reason, position) in enumerate(zip(
            batch.candidate_indices, batch.items, batch.scores, reasons, positions,
            strict=True)):
        hint = item.future_relevance_hint
        if (reason.fields or not isfinite(score) or (full and item.metadata)
                or (hint is not None and not isfinite(hint))):
            attributes = reference_attributes(batch[k], capture, None)
            _reference_totals(attributes, totals)
            out.append(attributes)
            continue
        name, kind = reason.name, item.kind.value
        encoded: dict[str, Any] = {
            "cupel.item.reason": name,
            "cupel.item.kind": kind,
            "cupel.item.tokens": item.tokens,
            "cupel.item.candidate_index": index,
            "cupel.item.position": position,
            "cupel.item.score": score,
            "cupel.item.seq": first + k,
        }
        length += _put_item(encoded, item, capture) + len(name) + len(kind)
        count += len(encoded)
        out.append(encoded)
    return out, count + totals[0], length + totals[1]


def text_totals(attributes: Mapping[str, Any]) -> tuple[int, int]:
    """(attribute count, characters of string values) of one event's attributes, all
    of which are ``cupel.*``: the same figures as ``check_totals``, computed faster."""
    length = 0
    for value in attributes.values():
        kind = type(value)
        if kind is str:
            length += len(value)
        elif kind is list:
            length += sum(len(v) for v in value if type(v) is str)
    return len(attributes), length


# -- the columns layout: a batch straight into columns, no per-item objects ------------------

#: The item's ``cupel.item.*`` columns other than content, kind and tokens (metadata
#: included: under ``full`` capture it is written as the flat mapping writes it).
_write_item_columns = column_writer(ITEM_FIELDS, "cupel.item.",
                                    skip=("content", "kind", "tokens", "metadata"))
_write_metadata_column = column_writer(
    [f for f in ITEM_FIELDS if f.name == "metadata"], "cupel.item.")

#: (item count, columns) of a batch, or None when it needs the row-wise path.
Columns = tuple[int, dict[str, list[Any]]] | None


def _item_columns(items: tuple[ContextItem, ...], capture: ContentCapture,
                  out: dict[str, list[Any]]) -> None:
    if capture is ContentCapture.FULL:
        out["cupel.item.content"] = [item.content for item in items]
        _write_metadata_column(items, out)
    elif capture is ContentCapture.HASH:
        out["cupel.item.content"] = [content_digest(item.content) for item in items]
    _write_item_columns(items, out)


#: The known exclusion reason variants (each named by its class, fields declared).
_KNOWN_REASON_CLASSES: frozenset[type] = frozenset(KNOWN_EXCLUSION_REASONS.values())


def _all_finite(column: list[Any]) -> bool:
    """True when no value of ``column`` is a non-finite float (one C-level sum for a
    column of numbers; value by value otherwise)."""
    try:
        if math.isfinite(math.fsum(column)):
            return True
    except (TypeError, OverflowError):
        pass
    return not any(type(v) is float and not math.isfinite(v) for v in column)


def _reason_columns(reasons: tuple[ExclusionReason, ...], tokens: list[int],
                    out: dict[str, list[Any]]) -> bool:
    """The reasons' name column and field columns, class by class (each known variant
    declares its fields); False when a reason needs the row-wise path (an unknown
    variant, a non-finite number)."""
    kinds = [type(reason) for reason in reasons]
    classes = set(kinds)
    if not classes <= _KNOWN_REASON_CLASSES:
        return False
    out["cupel.exclusion.reason"] = [kind.__name__ for kind in kinds]
    fields_by_attribute: dict[str, dict[type, str]] = {}
    shared: set[str] = set()
    for kind in classes:
        for field in kind.__struct_fields__:
            attribute = reason_field_attribute(field)
            fields_by_attribute.setdefault(attribute, {})[kind] = field
            if shares_item_field(kind.__name__, field):
                shared.add(attribute)
    for attribute, fields in fields_by_attribute.items():
        if len(fields) == len(classes) and len(set(fields.values())) == 1:
            (field,) = set(fields.values())
            column = list(map(attrgetter(field), reasons))
        else:
            column = [getattr(reason, fields[kind]) if kind in fields else None
                      for reason, kind in zip(reasons, kinds, strict=True)]
        if not _all_finite(column):
            return False
        if attribute in shared:  # written once, as the item's, when they agree
            column = [None if v == t and t is not None else v
                      for v, t in zip(column, tokens, strict=True)]
            if column.count(None) == len(column):
                continue
        out[attribute] = column
    return True


def exclusion_batch_columns(batch: ItemEventBatch, capture: ContentCapture,
                            carrier_stage: str | None) -> Columns:
    """The ``cupel.exclusion`` columns of an exclusion batch: for each item, what
    :func:`exclusion_batch_attributes` gives (None where it gives nothing); None when
    the batch needs that row-wise path (a non-finite number, an unknown reason)."""
    scores = batch.scores
    if not all(map(math.isfinite, scores)):
        return None
    items: tuple[ContextItem, ...] = batch.items
    reasons: tuple[ExclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    tokens = [item.tokens for item in items]
    out: dict[str, list[Any]] = {}
    if not _reason_columns(reasons, tokens, out):
        return None
    out["cupel.exclusion.item_kind"] = [item.kind.value for item in items]
    out["cupel.exclusion.item_tokens"] = tokens
    out["cupel.exclusion.candidate_index"] = list(batch.candidate_indices)
    out["cupel.exclusion.score"] = list(scores)
    first = batch.first_seq
    out["cupel.exclusion.seq"] = list(range(first, first + len(items)))
    stage = flat_stage(batch.stage)
    if stage != carrier_stage:
        out["cupel.exclusion.stage"] = [stage] * len(items)
    try:
        _item_columns(items, capture, out)
    except (InvalidValueError, InvalidTypeError):
        return None
    return len(items), out


def included_batch_columns(batch: ItemEventBatch, capture: ContentCapture) -> Columns:
    """The ``cupel.item.included`` columns of an inclusion batch (see
    :func:`exclusion_batch_columns`); None when it needs the row-wise path."""
    scores = batch.scores
    reasons: tuple[InclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    positions = batch.positions
    assert positions is not None
    if not all(map(math.isfinite, scores)) or any(reason.fields for reason in reasons):
        return None
    items: tuple[ContextItem, ...] = batch.items
    out: dict[str, list[Any]] = {
        "cupel.item.reason": [reason.name for reason in reasons],
        "cupel.item.kind": [item.kind.value for item in items],
        "cupel.item.tokens": [item.tokens for item in items],
        "cupel.item.candidate_index": list(batch.candidate_indices),
        "cupel.item.position": list(positions),
        "cupel.item.score": list(scores),
    }
    first = batch.first_seq
    out["cupel.item.seq"] = list(range(first, first + len(items)))
    try:
        _item_columns(items, capture, out)
    except (InvalidValueError, InvalidTypeError):
        return None
    return len(items), out
