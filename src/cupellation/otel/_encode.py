"""Span event attributes for item decisions: the reference path over the spine's flat
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
from typing import Any

from .._model import ContextItem, format_timestamp
from ..events import (
    ContentCapture,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    PipelineStage,
    apply_content_capture,
    content_digest,
    event_to_dict,
)
from ..exceptions import InvalidTypeError, InvalidValueError
from ..reasons import ExclusionReason, InclusionReason, UnknownExclusionReason, reason_fields
from ._names import (
    exclusion_attributes,
    included_attributes,
    reason_field_attribute,
    shares_item_field,
)

__all__ = [
    "exclusion_batch_attributes",
    "flat_stage",
    "included_batch_attributes",
    "reference_attributes",
]


def flat_stage(stage: PipelineStage | str | None) -> str | None:
    """A stage as the flat mapping writes it (``"Slice"``)."""
    return stage.value if isinstance(stage, PipelineStage) else stage


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


def _put_item(out: dict[str, Any], item: ContextItem, capture: ContentCapture) -> None:
    """The ``cupel.item.*`` attributes other than kind and tokens (the flat mapping's
    ``item.*`` keys under ``capture``)."""
    if capture is ContentCapture.FULL:
        out["cupel.item.content"] = item.content
    elif capture is ContentCapture.HASH:
        out["cupel.item.content"] = content_digest(item.content)
    out["cupel.item.source"] = item.source.value
    if item.pinned:
        out["cupel.item.pinned"] = True
    if item.tags:
        out["cupel.item.tags"] = list(item.tags)
    if item.timestamp is not None:
        out["cupel.item.timestamp"] = format_timestamp(item.timestamp)
    if item.priority is not None:
        out["cupel.item.priority"] = item.priority
    if item.future_relevance_hint is not None:
        out["cupel.item.future_relevance_hint"] = item.future_relevance_hint
    if item.original_tokens is not None:
        out["cupel.item.original_tokens"] = item.original_tokens


_ReasonParts = tuple[str, dict[str, Any], tuple[tuple[str, Any], ...]]


def _reason_parts(reason: ExclusionReason) -> _ReasonParts | None:
    """A known reason's name, its fixed attributes and its fields shared with the item;
    None for what the fast path leaves to the reference (an unknown variant)."""
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
    return name, fixed, tuple(shared)


def exclusion_batch_attributes(batch: ItemEventBatch, capture: ContentCapture,
                               carrier_stage: str | None) -> list[dict[str, Any] | None]:
    """One ``cupel.exclusion`` attribute mapping per event of an exclusion batch (None
    for an event that cannot be projected)."""
    out: list[dict[str, Any] | None] = []
    full = capture is ContentCapture.FULL
    stage = flat_stage(batch.stage)
    explicit_stage = stage != carrier_stage
    parts_by_id: dict[int, _ReasonParts | None] = {}
    first = batch.first_seq
    isfinite = math.isfinite
    reasons: tuple[ExclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    for k, (index, item, score, reason) in enumerate(zip(
            batch.candidate_indices, batch.items, batch.scores, reasons, strict=True)):
        key = id(reason)
        if key in parts_by_id:
            parts = parts_by_id[key]
        else:
            parts = parts_by_id[key] = _reason_parts(reason)
        if parts is None or not isfinite(score) or not _item_is_plain(item, full):
            out.append(reference_attributes(batch[k], capture, carrier_stage))
            continue
        name, fixed, shared = parts
        attributes: dict[str, Any] = {
            "cupel.exclusion.reason": name,
            "cupel.exclusion.item_kind": item.kind.value,
            "cupel.exclusion.item_tokens": item.tokens,
            "cupel.exclusion.candidate_index": index,
            "cupel.exclusion.score": score,
            "cupel.exclusion.seq": first + k,
        }
        if explicit_stage:
            attributes["cupel.exclusion.stage"] = stage
        _put_item(attributes, item, capture)
        if fixed:
            attributes.update(fixed)
        for field, value in shared:
            if value != item.tokens:
                attributes[reason_field_attribute(field)] = value
        out.append(attributes)
    return out


def included_batch_attributes(batch: ItemEventBatch, capture: ContentCapture
                              ) -> list[dict[str, Any] | None]:
    """One ``cupel.item.included`` attribute mapping per event of an inclusion batch."""
    out: list[dict[str, Any] | None] = []
    full = capture is ContentCapture.FULL
    first = batch.first_seq
    positions = batch.positions
    assert positions is not None
    isfinite = math.isfinite
    reasons: tuple[InclusionReason, ...] = batch.reasons  # type: ignore[assignment]
    for k, (index, item, score, reason, position) in enumerate(zip(
            batch.candidate_indices, batch.items, batch.scores, reasons, positions,
            strict=True)):
        if reason.fields or not isfinite(score) or not _item_is_plain(item, full):
            out.append(reference_attributes(batch[k], capture, None))
            continue
        attributes: dict[str, Any] = {
            "cupel.item.reason": reason.name,
            "cupel.item.kind": item.kind.value,
            "cupel.item.tokens": item.tokens,
            "cupel.item.candidate_index": index,
            "cupel.item.position": position,
            "cupel.item.score": score,
            "cupel.item.seq": first + k,
        }
        _put_item(attributes, item, capture)
        out.append(attributes)
    return out


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
