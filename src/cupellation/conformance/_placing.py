"""Placing conformance vectors (``spec/src/conformance/format.md``, "Placing Vectors").

The placer is built by the strategy registry from ``{"type": <the vector's
name>}``; names compare ignoring ASCII case, ``-`` and ``_`` (``"u-shaped"``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _registry as registry
from ..exceptions import InvalidTypeError
from ..placing import Placer
from ._errors import VectorFailure
from ._vectors import scored_item_from_vector

__all__ = ["PLACER_NAMES", "build_placer", "run_placing_vector"]

#: The placer names vectors use (the registry's; ``u-shaped`` is ``u_shaped``).
PLACER_NAMES: tuple[str, ...] = registry.PLACER_TYPES


def build_placer(name: Any) -> Placer:
    """The built-in placer a vector names (``"chronological"``, ``"u-shaped"``).

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``placer.type`` for any other name.
    """
    if not isinstance(name, str):
        raise InvalidTypeError("placer", name, "a string")
    return registry.build_placer({"type": name}, path="placer")


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
    scored = [scored_item_from_vector(table) for table in tables]
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
