"""Placing conformance vectors (``spec/src/conformance/format.md``, "Placing Vectors")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._model import ContextItem, ScoredItem, ascii_fold, check_finite, parse_timestamp
from ..exceptions import ConfigurationError, InvalidTypeError
from ..placing import ChronologicalPlacer, Placer, UShapedPlacer
from ._errors import VectorFailure

__all__ = ["PLACER_NAMES", "build_placer", "run_placing_vector"]

_PLACERS: dict[str, type[ChronologicalPlacer] | type[UShapedPlacer]] = {
    "chronological": ChronologicalPlacer,
    "u-shaped": UShapedPlacer,
}

#: The placer names vectors use, in the specification's spelling.
PLACER_NAMES: tuple[str, ...] = tuple(_PLACERS)


def build_placer(name: str) -> Placer:
    """The built-in placer a vector names: ``"chronological"`` or ``"u-shaped"``.

    Names are compared ignoring ASCII case. Raises
    :class:`~cupellation.exceptions.ConfigurationError` for any other name.
    """
    if not isinstance(name, str):
        raise InvalidTypeError("placer", name, "a string")
    placer_type = _PLACERS.get(ascii_fold(name))
    if placer_type is None:
        raise ConfigurationError(
            "placer", name, f"must be one of {', '.join(map(repr, PLACER_NAMES))}"
        )
    return placer_type()


def _timestamp(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return parse_timestamp(value)
    raise InvalidTypeError("timestamp", value, "a TOML offset date-time")


def _scored_item(table: Mapping[str, Any]) -> ScoredItem:
    """One ``[[items]]`` table as a ScoredItem (unknown keys are ignored)."""
    item = ContextItem(
        content=table["content"],
        tokens=table["tokens"],
        kind=table.get("kind", "Message"),
        priority=table.get("priority"),
        tags=tuple(table.get("tags", ())),
        timestamp=_timestamp(table.get("timestamp")),
        future_relevance_hint=table.get("futureRelevanceHint"),
        pinned=table.get("pinned", False),
    )
    return ScoredItem(item, check_finite("score", table["score"]))


def _contents(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidTypeError(where, value, "an array of strings")
    return value


def run_placing_vector(doc: Mapping[str, Any]) -> None:
    """Run one placing vector; raise :class:`VectorFailure` when the order differs.

    A missing key raises ``KeyError``; a mistyped value a ``TypeError`` or
    ``ValueError`` (the runner reports both as a malformed vector).
    """
    placer = build_placer(doc["test"]["placer"])
    tables: Sequence[Mapping[str, Any]] = doc.get("items", [])
    scored = [_scored_item(table) for table in tables]
    expected = _contents(doc["expected"]["ordered_contents"], "expected.ordered_contents")

    placed = placer.place(scored)

    inputs = {id(entry.item) for entry in scored}
    if len(placed) != len(scored) or {id(item) for item in placed} != inputs:
        raise VectorFailure(
            f"{placer!r} did not return a permutation of its {len(scored)} input items"
        )
    actual = [item.content for item in placed]
    if actual != expected:
        raise VectorFailure(f"{placer!r}: expected order {expected}, got {actual}")
