"""The specification's pipeline vectors with expected diagnostics, checked a second way:
each expectation written with the testing vocabulary (cupellation.testing.expect) over
the report of the vector's run, beside the conformance runner's own comparison."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tomli

from cupellation import ContextBudget, ContextItem
from cupellation._report import IncludedItem
from cupellation.conformance._pipeline import build_pipeline
from cupellation.conformance._vectors import item_from_vector
from cupellation.testing import expect

PIPELINE_DIR = (Path(__file__).resolve().parents[1] / "data" / "conformance" / "required"
                / "pipeline")
VECTORS = sorted(path for path in PIPELINE_DIR.glob("*.toml")
                 if "diagnostics" in tomli.loads(path.read_text(encoding="utf-8"))
                 .get("expected", {}))


def test_the_diagnostic_vectors_are_there() -> None:
    """The vendored vectors include the five with expected diagnostics."""
    assert len(VECTORS) == 5


@pytest.mark.parametrize("path", VECTORS, ids=lambda path: path.stem)
def test_each_diagnostic_vector_reads_true_in_the_vocabulary(path: Path) -> None:
    """Every expected inclusion (content and reason), every expected exclusion
    (content and reason; BudgetExceeded with its exact token figures), the number of
    exclusions and the conformance assertion hold on the vector's report."""
    doc: dict[str, Any] = tomli.loads(path.read_text(encoding="utf-8"))
    budget_table = doc["budget"]
    budget = ContextBudget(max_tokens=budget_table["max_tokens"],
                           target_tokens=budget_table["target_tokens"],
                           output_reserve=budget_table.get("output_reserve", 0))
    items = [item_from_vector(table) for table in doc.get("items", ())]
    report = build_pipeline(doc.get("config", {})).dry_run(items, budget)
    diagnostics = doc["expected"]["diagnostics"]
    chain = expect(report).excluded_items_are_sorted_by_score_descending()
    chain.have_at_least_n_exclusions(len(diagnostics.get("excluded", ())))
    for want in diagnostics.get("included", ()):
        def included(entry: IncludedItem, want: dict[str, Any] = want) -> bool:
            return bool(entry.item.content == want["content"]
                        and entry.reason.name == want.get("inclusion_reason", entry.reason.name))

        chain.include_item_matching(included)
    for want in diagnostics.get("excluded", ()):
        def matches(item: ContextItem, want: dict[str, Any] = want) -> bool:
            return bool(item.content == want["content"])

        chain.exclude_item_matching_with_reason(matches, want["exclusion_reason"])
        if want["exclusion_reason"] == "BudgetExceeded":
            chain.exclude_item_with_budget_details(matches, want["item_tokens"],
                                                   want["available_tokens"])
