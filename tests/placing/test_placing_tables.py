"""Every built-in placer writes its table and reads it back through the strategy
registry."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation._registry import PLACER_TYPES, build_placer, describe_placer
from cupellation.placing import ChronologicalPlacer, Placer, UShapedPlacer

PLACERS: list[tuple[Placer, dict[str, Any]]] = [
    (ChronologicalPlacer(), {"type": "chronological"}),
    (UShapedPlacer(), {"type": "u_shaped"}),
]


def test_the_cases_cover_every_placer_type() -> None:
    """The table below holds one placer of each registered type."""
    assert {table["type"] for _p, table in PLACERS} == set(PLACER_TYPES)


@pytest.mark.parametrize(("placer", "table"), PLACERS, ids=repr)
def test_each_placer_writes_its_table_and_reads_it_back(placer: Placer,
                                                        table: dict[str, Any]) -> None:
    """A placer's table is its type alone; the type name is read loosely."""
    assert describe_placer(placer) == table
    assert build_placer(table) == placer
    assert build_placer({"type": type(placer).__name__}) == placer
    assert type(placer).from_dict(table) == placer  # type: ignore[attr-defined]
