"""Reading the items of a conformance vector, shared by every stage's runner."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from .._model import (
    ContextItem,
    ContextKind,
    ContextSource,
    ScoredItem,
    check_finite,
    parse_timestamp,
)
from ..exceptions import InvalidTypeError

__all__ = ["item_from_vector", "scored_item_from_vector", "vector_timestamp"]


def vector_timestamp(value: Any, field: str) -> datetime:
    """A vector's date-time (TOML value or ISO string) as an aware UTC datetime."""
    if isinstance(value, datetime):
        # A TOML local date-time has no offset; vectors mean UTC.
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        return parse_timestamp(value, field_name=field)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    raise InvalidTypeError(field, value, "a TOML date-time")


# (vector key, ContextItem field) for the optional fields.
_ITEM_FIELDS: tuple[tuple[str, str], ...] = (
    ("kind", "kind"),
    ("source", "source"),
    ("priority", "priority"),
    ("tags", "tags"),
    ("metadata", "metadata"),
    ("timestamp", "timestamp"),
    ("futureRelevanceHint", "future_relevance_hint"),
    ("pinned", "pinned"),
    ("originalTokens", "original_tokens"),
)


def item_from_vector(table: Mapping[str, Any]) -> ContextItem:
    """The :class:`~cupellation.ContextItem` a vector's ``[[items]]`` table describes.

    Reads ``content``, ``tokens``, ``kind``, ``source``, ``timestamp``,
    ``priority``, ``tags``, ``futureRelevanceHint``, ``pinned``, ``metadata``
    and ``originalTokens``; other keys (``score`` in slicing vectors, say) are
    ignored. Raises :class:`KeyError` when ``content`` or ``tokens`` is missing.
    """
    fields: dict[str, Any] = {"content": table["content"], "tokens": table["tokens"]}
    for key, name in _ITEM_FIELDS:
        if key in table:
            fields[name] = table[key]
    if "kind" in fields:
        fields["kind"] = ContextKind(fields["kind"])
    if "source" in fields:
        fields["source"] = ContextSource(fields["source"])
    if "tags" in fields:
        fields["tags"] = tuple(fields["tags"])
    if fields.get("timestamp") is not None:
        fields["timestamp"] = vector_timestamp(fields["timestamp"], "timestamp")
    return ContextItem(**fields)


def scored_item_from_vector(table: Mapping[str, Any]) -> ScoredItem:
    """A slicing or placing vector's item table (with its ``score``) as a ScoredItem."""
    return ScoredItem(item_from_vector(table), check_finite("score", table["score"]))
