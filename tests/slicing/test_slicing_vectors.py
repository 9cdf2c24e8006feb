"""The required slicing conformance vectors, run through the slicing adapter."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import tomli
from _slicing_support import SLICING_VECTORS

from cupellation.conformance import run_vector_file
from cupellation.conformance._errors import VectorFailure
from cupellation.conformance._slicing import SLICER_NAMES, build_slicer, run_slicing_vector
from cupellation.exceptions import ConfigurationError
from cupellation.slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaSlice,
    ScarcityBehavior,
)

VECTOR_FILES = sorted(SLICING_VECTORS.glob("*.toml"))


def _load(path: Path) -> dict[str, Any]:
    with path.open("rb") as handle:
        return tomli.load(handle)


def test_all_sixteen_vectors_are_present() -> None:
    """The shared folder holds the 16 required slicing vectors this suite runs."""
    assert len(VECTOR_FILES) == 16


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_passes(path: Path) -> None:
    """Each required slicing vector holds: selection, shortfall and cap-exclusion counts."""
    run_slicing_vector(_load(path))


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_vector_passes_through_the_runner(path: Path) -> None:
    """The generic runner dispatches slicing vectors to this adapter and reports a pass."""
    result = run_vector_file(path)
    assert result.passed, result.reason


def test_wrong_selection_is_reported_with_expected_and_actual() -> None:
    """A vector whose expected selection differs raises VectorFailure naming both sets."""
    doc = copy.deepcopy(_load(SLICING_VECTORS / "greedy-density.toml"))
    doc["expected"]["selected_contents"] = ["low-score-small"]
    with pytest.raises(VectorFailure, match=r"expected selection \['low-score-small'\], got"):
        run_slicing_vector(doc)


def test_wrong_shortfall_count_is_reported() -> None:
    """A wrong shortfall_count expectation fails with expected vs actual counts."""
    doc = copy.deepcopy(_load(SLICING_VECTORS / "count-quota-scarcity-degrade.toml"))
    doc["expected"]["shortfall_count"] = 0
    with pytest.raises(VectorFailure, match="shortfall_count: expected 0, got 1"):
        run_slicing_vector(doc)


def test_wrong_cap_excluded_count_is_reported() -> None:
    """A wrong cap_excluded_count expectation fails with expected vs actual counts."""
    doc = copy.deepcopy(_load(SLICING_VECTORS / "count-constrained-knapsack-cap-exclusion.toml"))
    doc["expected"]["cap_excluded_count"] = 1
    with pytest.raises(VectorFailure, match="cap_excluded_count: expected 1, got 2"):
        run_slicing_vector(doc)


def test_max_tokens_is_used_when_the_vector_gives_it() -> None:
    """[budget].max_tokens is read when present: a value below target_tokens is refused."""
    doc = copy.deepcopy(_load(SLICING_VECTORS / "count-quota-baseline.toml"))
    doc["budget"]["max_tokens"] = 1000
    run_slicing_vector(doc)
    doc["budget"]["max_tokens"] = 500  # target 1000 > max 500: an invalid budget
    with pytest.raises(ValueError, match="target_tokens"):
        run_slicing_vector(doc)


def test_build_slicer_builds_every_vector_name() -> None:
    """Every vector slicer name builds the matching slicer, with defaults from an empty config."""
    built = {name: build_slicer(name, {}) for name in SLICER_NAMES}
    assert built["greedy"] == GreedySlice()
    assert built["knapsack"] == KnapsackSlice(100)
    assert built["quota"] == QuotaSlice(GreedySlice(), ())
    assert built["count_quota"] == CountQuotaSlice(GreedySlice(), ())
    assert built["count_constrained_knapsack"] == CountConstrainedKnapsackSlice((), 100)


def test_build_slicer_reads_config() -> None:
    """bucket_size, inner_slicer, quotas, entries and scarcity_behavior are honoured."""
    knapsack = build_slicer("Knapsack", {"bucket_size": 7})
    assert knapsack == KnapsackSlice(7)
    quota = build_slicer("quota", {"inner_slicer": "knapsack", "bucket_size": 3,
                                   "quotas": [{"kind": "Tool", "require": 10.0, "cap": 20}]})
    assert isinstance(quota, QuotaSlice)
    assert quota.inner == KnapsackSlice(3)
    assert quota.quotas[0].require == 10.0
    assert quota.quotas[0].cap == 20.0
    counted = build_slicer("count-quota", {"scarcity_behavior": "THROW",
                                           "entries": [{"kind": "tool", "cap_count": 2}]})
    assert isinstance(counted, CountQuotaSlice)
    assert counted.scarcity is ScarcityBehavior.THROW
    assert counted.entries[0].require_count == 0
    assert counted.entries[0].cap_count == 2


def test_build_slicer_rejects_unknown_names_and_bad_inner() -> None:
    """Unknown names, and a non-knapsack inner for count_constrained_knapsack, are config errors."""
    with pytest.raises(ConfigurationError, match=r"slicer.*'stream'"):
        build_slicer("stream", {})
    with pytest.raises(ConfigurationError, match="inner_slicer"):
        build_slicer("count_constrained_knapsack", {"inner_slicer": "greedy"})
    with pytest.raises(ConfigurationError, match="inner"):
        build_slicer("count_quota", {"inner_slicer": "knapsack"})
