"""The required slicing conformance vectors, run through the slicing adapter."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import tomli
from _slicing_support import SLICING_VECTORS

from cupellation.conformance import UnsupportedConfigError, run_vector_file
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
    """The vendored folder holds the 16 required slicing vectors this suite runs."""
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


def test_quota_inside_count_quota_keeps_its_quotas() -> None:
    """A count-quota slicer whose inner slicer is a quota slicer hands it the
    [[config.quotas]] (they used to be dropped, leaving an unconstrained QuotaSlice)."""
    slicer = build_slicer("count_quota", {
        "inner_slicer": "quota",
        "quotas": [{"kind": "Document", "require": 20.0, "cap": 50.0}],
        "entries": [{"kind": "tool", "require_count": 1, "cap_count": 2}],
    })
    assert isinstance(slicer, CountQuotaSlice)
    assert isinstance(slicer.inner, QuotaSlice)
    assert [(q.kind.value, q.require, q.cap) for q in slicer.inner.quotas] == [
        ("Document", 20.0, 50.0)]
    assert slicer.entries[0].cap_count == 2


def test_quota_inside_count_quota_changes_the_selection() -> None:
    """The nested quotas are honoured when slicing: a 0% cap on Message leaves the
    messages out that the unconstrained inner slicer would have picked."""
    doc = {
        "test": {"slicer": "count_quota"},
        "budget": {"target_tokens": 300},
        "config": {"inner_slicer": "quota",
                   "quotas": [{"kind": "Message", "require": 0.0, "cap": 0.0}],
                   "entries": [{"kind": "tool", "require_count": 1, "cap_count": 1}]},
        "scored_items": [
            {"content": "t", "tokens": 100, "score": 0.9, "kind": "tool"},
            {"content": "m", "tokens": 100, "score": 0.8, "kind": "Message"},
            {"content": "d", "tokens": 100, "score": 0.5, "kind": "Document"},
        ],
        "expected": {"selected_contents": ["t", "d"]},
    }
    run_slicing_vector(doc)


def test_inner_slicer_as_a_table_holds_its_own_settings() -> None:
    """inner_slicer may be a table {type = ..., settings...}: a quota slicer with its
    own inner knapsack and bucket size, inside a count quota."""
    slicer = build_slicer("count_quota", {
        "inner_slicer": {"type": "quota", "inner_slicer": "knapsack", "bucket_size": 5,
                         "quotas": [{"kind": "Memory", "cap": 40.0}]},
    })
    assert isinstance(slicer, CountQuotaSlice)
    assert isinstance(slicer.inner, QuotaSlice)
    assert slicer.inner.inner == KnapsackSlice(5)
    assert slicer.inner.quotas[0].cap == 40.0


@pytest.mark.parametrize(("name", "config", "path"), [
    ("greedy", {"bucket_size": 10}, "config.bucket_size"),
    ("knapsack", {"bucket": 10}, "config.bucket"),
    ("quota", {"quotas": [{"kind": "Tool", "require": 10.0, "maximum": 20.0}]},
     "config.quotas[0].maximum"),
    ("count_quota", {"quotas": [{"kind": "Tool", "cap": 20.0}]}, "config.quotas"),
    ("count_quota", {"entries": [{"kind": "tool", "cap_count": 2, "require": 1}]},
     "config.entries[0].require"),
    ("count_quota", {"inner_slicer": {"type": "greedy"}, "bucket_size": 5},
     "config.bucket_size"),
    ("count_quota", {"inner_slicer": {"type": "knapsack", "size": 5}},
     "config.inner_slicer.size"),
    ("count_constrained_knapsack", {"quotas": []}, "config.quotas"),
    ("count_constrained_knapsack", {"scarcity": "throw"}, "config.scarcity"),
])
def test_unknown_slicer_config_keys_are_refused(
        name: str, config: dict[str, Any], path: str) -> None:
    """A key that neither the slicer nor its inner slicer takes (at any depth) raises
    UnsupportedConfigError naming its path, never dropped silently."""
    with pytest.raises(UnsupportedConfigError) as caught:
        build_slicer(name, config)
    assert caught.value.path == path


def test_unknown_slicer_key_suggests_the_setting_meant() -> None:
    """The message suggests the closest known key."""
    with pytest.raises(UnsupportedConfigError, match="did you mean 'scarcity_behavior'"):
        build_slicer("count_constrained_knapsack", {"scarcity_behaviour": "throw"})


def test_unknown_budget_key_fails_the_vector() -> None:
    """[budget] keys are checked too: a reserved_slots the runner would not apply fails
    the vector rather than being ignored."""
    doc = copy.deepcopy(_load(SLICING_VECTORS / "greedy-density.toml"))
    doc["budget"]["output_reserve"] = 10
    with pytest.raises(UnsupportedConfigError, match=r"budget\.output_reserve"):
        run_slicing_vector(doc)


def test_unknown_config_key_fails_through_the_runner(tmp_path: Path) -> None:
    """Through run_vector_file a vector with an unknown [config] key fails, naming it."""
    text = (SLICING_VECTORS / "knapsack-basic.toml").read_text(encoding="utf-8")
    path = tmp_path / "knapsack-extra.toml"
    path.write_text(text.replace("[config]", "[config]\nbucket_sise = 7", 1), encoding="utf-8")
    result = run_vector_file(path)
    assert not result.passed
    assert result.reason is not None
    assert "config.bucket_sise" in result.reason
