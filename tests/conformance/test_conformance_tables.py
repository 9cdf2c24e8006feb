"""The conformance runner builds strategies with the registry policies use: it only
renames a vector's keys to the strategy table's, so a vector and the policy table
it becomes build equal strategies."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from cupellation import _registry as registry
from cupellation.conformance._pipeline import build_pipeline
from cupellation.conformance._scoring import build_scorer, scorer_table
from cupellation.conformance._slicing import build_slicer, slicer_table
from cupellation.policy import Policy

NOON = datetime(2025, 1, 1, 12, tzinfo=UTC)

SCORER_CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("metadata_trust", {"default_score": 0.2}, {"type": "metadata_trust", "default_score": 0.2}),
    ("kind", {"use_default_weights": True}, {"type": "kind"}),
    ("kind", {"weights": [{"kind": "Memory", "weight": 2.0}]},
     {"type": "kind", "weights": {"Memory": 2.0}}),
    ("tag", {"tag_weights": [{"tag": "a", "weight": 1.0}], "case_sensitive": True},
     {"type": "tag", "tag_weights": {"a": 1.0}, "case_sensitive": True}),
    ("scaled", {"inner_scorer": "kind", "inner_config": {"use_default_weights": True}},
     {"type": "scaled", "inner": {"type": "kind"}}),
    ("scaled", {"inner_scorer": {"type": "recency", "weight": 3.0}},
     {"type": "scaled", "inner": {"type": "recency"}}),
    ("composite", {"scorers": [{"type": "recency"},
                               {"type": "composite", "weight": 2.0, "children": [
                                   {"type": "priority", "config": {}}]}]},
     {"type": "composite", "children": [
         {"type": "recency", "weight": 1.0},
         {"type": "composite", "weight": 2.0, "children": [{"type": "priority",
                                                            "weight": 1.0}]}]}),
    ("decay", {"reference_time": NOON, "null_timestamp_score": 0.1,
               "curve": {"type": "step", "windows": [{"max_age_secs": 60.0, "score": 0.5}]}},
     {"type": "decay", "reference_time": NOON, "null_timestamp_score": 0.1,
      "curve": {"type": "step", "windows": [{"max_age": 60.0, "score": 0.5}]}}),
    ("decay", {"reference_time": NOON, "curve": {"type": "exponential",
                                                 "half_life_secs": 30}},
     {"type": "decay", "reference_time": NOON,
      "curve": {"type": "exponential", "half_life": 30}}),
]


@pytest.mark.parametrize(("name", "config", "table"), SCORER_CASES,
                         ids=lambda value: str(value)[:30])
def test_a_scoring_vector_becomes_the_policy_table_by_renaming(
        name: str, config: dict[str, Any], table: dict[str, Any]) -> None:
    """scorer_table renames the vector's keys (seconds, arrays of weights, scorers,
    inner_scorer, default weights) to the table's; the runner's scorer equals the
    registry's and a policy's built from that table."""
    assert scorer_table(name, config) == table
    built = build_scorer(name, config)
    assert built == registry.build_scorer(table)
    assert Policy.from_dict({"scorer": table}).scorer == built


def test_a_slicing_vector_becomes_the_policy_table_by_renaming() -> None:
    """inner_slicer becomes inner (a named inner slicer takes the keys handed on),
    scarcity_behavior becomes scarcity; the slicer equals a policy's."""
    config = {"inner_slicer": "quota", "quotas": [{"kind": "Document", "cap": 50.0}],
              "entries": [{"kind": "tool", "require_count": 1, "cap_count": 2}],
              "scarcity_behavior": "throw"}
    table = slicer_table("count-quota", config)
    assert table == {"type": "count_quota",
                     "inner": {"type": "quota", "inner": {"type": "greedy"},
                               "quotas": [{"kind": "Document", "cap": 50.0}]},
                     "entries": [{"kind": "tool", "require_count": 1, "cap_count": 2}],
                     "scarcity": "throw"}
    assert build_slicer("count-quota", config) == Policy.from_dict(
        {"scorer": {"type": "recency"}, "slicer": table}).slicer
    assert slicer_table("count_constrained_knapsack", {"inner_slicer": "knapsack",
                                                       "bucket_size": 10}) == {
        "type": "count_constrained_knapsack", "entries": [], "bucket_size": 10}


def test_a_pipeline_vector_builds_the_pipeline_its_policy_table_does() -> None:
    """A pipeline vector's [config] gives the pipeline that the equivalent policy
    table builds: one entry alone, several as a composite, the slicer's settings
    beside its name."""
    pipeline = build_pipeline({"slicer": "knapsack", "bucket_size": 50, "placer": "u-shaped",
                               "deduplication": False, "overflow_strategy": "truncate",
                               "scorers": [{"type": "recency", "weight": 2.0},
                                           {"type": "kind", "weight": 1.0}]})
    assert pipeline == Policy.from_dict({
        "scorer": {"type": "composite", "children": [{"type": "recency", "weight": 2.0},
                                                     {"type": "kind", "weight": 1.0}]},
        "slicer": {"type": "knapsack", "bucket_size": 50}, "placer": {"type": "u_shaped"},
        "deduplication": False, "overflow_strategy": "Truncate"}).build_pipeline()
    single = build_pipeline({"scorers": [{"type": "priority", "weight": 5.0}]})
    assert single.describe()["scorer"] == '{"type":"priority"}'
