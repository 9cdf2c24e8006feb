"""Every built-in slicer writes its table and reads it back through the strategy
registry; nested slicers nest their tables."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation._registry import SLICER_TYPES, build_slicer, describe_slicer
from cupellation.exceptions import ConfigurationError, CustomStrategyError
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
    Slicer,
)

SLICERS: list[tuple[Slicer, dict[str, Any]]] = [
    (GreedySlice(), {"type": "greedy"}),
    (KnapsackSlice(25), {"type": "knapsack", "bucket_size": 25}),
    (QuotaSlice(KnapsackSlice(5), [QuotaEntry("Message", 10.0, 60.0)]),
     {"type": "quota", "inner": {"type": "knapsack", "bucket_size": 5},
      "quotas": [{"kind": "Message", "require": 10.0, "cap": 60.0}]}),
    (CountQuotaSlice(QuotaSlice(GreedySlice()), [CountQuotaEntry("Tool", 1, cap_count=2)],
                     "throw"),
     {"type": "count_quota", "inner": {"type": "quota", "inner": {"type": "greedy"},
                                       "quotas": []},
      "entries": [{"kind": "Tool", "require_count": 1, "cap_count": 2}],
      "scarcity": "Throw"}),
    (CountConstrainedKnapsackSlice([CountQuotaEntry("Memory", cap_count=0)], 9),
     {"type": "count_constrained_knapsack",
      "entries": [{"kind": "Memory", "require_count": 0, "cap_count": 0}],
      "bucket_size": 9, "scarcity": "Degrade"}),
]


def test_the_cases_cover_every_slicer_type() -> None:
    """The table below holds one slicer of each registered type."""
    assert {table["type"] for _s, table in SLICERS} == set(SLICER_TYPES)


@pytest.mark.parametrize(("slicer", "table"), SLICERS, ids=lambda value: repr(value)[:40])
def test_each_slicer_writes_its_table_and_reads_it_back(slicer: Slicer,
                                                        table: dict[str, Any]) -> None:
    """to_dict() is the documented table (nested slicers as nested tables) and
    build_slicer() of it gives an equal slicer."""
    assert describe_slicer(slicer) == table
    assert build_slicer(table) == slicer
    assert type(slicer).from_dict(table) == slicer  # type: ignore[attr-defined]


def test_slicer_tables_refuse_what_they_cannot_hold() -> None:
    """A custom inner slicer is recorded by repr and cannot be built back; an invalid
    setting is refused naming its path."""

    class Mine:
        def slice(self, scored: object, budget: object) -> list[object]:
            return []

    table = describe_slicer(QuotaSlice(Mine()))  # type: ignore[arg-type]
    assert table["inner"]["type"] == "custom"
    with pytest.raises(CustomStrategyError, match=r"^slicer\.inner: "):
        build_slicer(table)
    with pytest.raises(ConfigurationError, match=r"^slicer\.entries\[0\]\.cap_count: "):
        build_slicer({"type": "count_quota", "entries": [{"kind": "Tool"}]})
    with pytest.raises(ConfigurationError, match=r"did you mean `knapsack`"):
        build_slicer({"type": "knapsak"})
