"""The required scoring conformance vectors, and the scoring conformance adapter
(``build_scorer``, ``item_from_vector``, ``run_scoring_vector``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import tomli

from cupellation import ContextItem, ContextKind
from cupellation.conformance import UnsupportedConfigError, VectorFailure, run_vector_file
from cupellation.conformance._scoring import (
    SCORER_TYPES,
    build_scorer,
    item_from_vector,
    run_scoring_vector,
)
from cupellation.exceptions import ConfigurationError
from cupellation.scoring import (
    CompositeScorer,
    DecayScorer,
    ExponentialCurve,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    ScaledScorer,
    Scorer,
    StepCurve,
    TagScorer,
    WindowCurve,
)

#: The specification's required scoring vectors, vendored in tests/data.
VECTORS = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required" / "scoring"
VECTOR_FILES = sorted(VECTORS.glob("*.toml"))


def load(name: str) -> dict[str, Any]:
    """The parsed vector ``name`` (a file in the scoring folder)."""
    with (VECTORS / name).open("rb") as handle:
        doc: dict[str, Any] = tomli.load(handle)
    return doc


def test_all_required_scoring_vectors_are_present() -> None:
    """The vendored folder holds the 28 required scoring vectors this suite runs."""
    assert len(VECTOR_FILES) == 28


@pytest.mark.parametrize("path", VECTOR_FILES, ids=[path.stem for path in VECTOR_FILES])
def test_scoring_vector(path: Path) -> None:
    """Each required scoring vector passes through run_scoring_vector."""
    with path.open("rb") as handle:
        doc = tomli.load(handle)
    run_scoring_vector(doc)


def test_vectors_pass_through_the_runner_dispatch() -> None:
    """The generic runner finds the scoring stage module and reports a pass."""
    result = run_vector_file(VECTORS / "composite-weighted.toml")
    assert result.passed, result.reason
    assert result.stage == "scoring"


# -- run_scoring_vector failure reporting -------------------------------------


def test_wrong_expected_score_names_item_expected_and_actual() -> None:
    """A score outside the tolerance fails, naming the content, expected and actual."""
    doc = load("priority-basic.toml")
    doc["expected"][1]["score_approx"] = 0.75
    with pytest.raises(VectorFailure) as caught:
        run_scoring_vector(doc)
    message = str(caught.value)
    assert "'medium'" in message
    assert "0.75" in message
    assert "0.5" in message


def test_tolerance_is_honoured() -> None:
    """A difference within score_epsilon passes; a larger one fails."""
    doc = load("priority-basic.toml")
    doc["expected"][1]["score_approx"] = 0.5 + 5e-10
    run_scoring_vector(doc)
    doc["tolerance"]["score_epsilon"] = 1e-12
    with pytest.raises(VectorFailure):
        run_scoring_vector(doc)


def test_missing_construction_error_is_a_failure() -> None:
    """A vector expecting a construction error fails when the scorer builds fine."""
    doc = load("metadata-key-zero-boost-construction-error.toml")
    doc["config"]["boost"] = 2.0
    with pytest.raises(VectorFailure, match="expected a construction error"):
        run_scoring_vector(doc)


def test_unexpected_construction_error_is_a_failure() -> None:
    """A construction error where none is expected fails and quotes the error."""
    doc = load("metadata-key-match-boost.toml")
    doc["config"]["boost"] = -2.0
    with pytest.raises(VectorFailure, match="boost"):
        run_scoring_vector(doc)


def test_expected_content_not_among_items_is_a_failure() -> None:
    """An expectation for an item the vector does not list fails, naming it."""
    doc = load("reflexive-null.toml")
    doc["expected"].append({"content": "ghost", "score_approx": 0.0})
    with pytest.raises(VectorFailure, match="'ghost'"):
        run_scoring_vector(doc)


def test_unknown_fields_outside_config_are_ignored() -> None:
    """Unknown keys outside [config] are ignored (the format chapter's forward
    compatibility): a new table, [test] flag, item field or expectation note."""
    doc = copy.deepcopy(load("tag-basic.toml"))
    doc["future_table"] = {"x": 1}
    doc["test"]["new_flag"] = True
    doc["items"][0]["new_field"] = [1, 2]
    doc["expected"][0]["note"] = "ignored"
    run_scoring_vector(doc)


NESTED_COMPOSITE = """\
[test]
name = "CompositeScorer: nested composite containing composite"
stage = "scoring"
scorer = "composite"

[[config.scorers]]
type = "composite"
weight = 1.0

[[config.scorers.children]]
type = "recency"
weight = 1.0

[[config.scorers.children]]
type = "priority"
weight = 1.0

[[config.scorers]]
type = "reflexive"
weight = 1.0

[[items]]
content = "a"
tokens = 100
timestamp = 2024-01-01T00:00:00Z
priority = 1
futureRelevanceHint = 0.8

[[items]]
content = "b"
tokens = 100
timestamp = 2024-12-01T00:00:00Z
priority = 5
futureRelevanceHint = 0.2

[[expected]]
content = "a"
score_approx = 0.4

[[expected]]
content = "b"
score_approx = 0.6
"""


def test_nested_composite_children_are_read() -> None:
    """A composite entry's own children are written under ``children`` (the optional
    vector composite-nested.toml): they are built, not dropped, and the vector's
    0.4 / 0.6 scores come out."""
    doc = tomli.loads(NESTED_COMPOSITE)
    run_scoring_vector(doc)
    scorer = build_scorer("composite", doc["config"])
    assert isinstance(scorer, CompositeScorer)
    inner = scorer.scorers[0]
    assert isinstance(inner, CompositeScorer)
    assert [type(child) for child in inner.scorers] == [RecencyScorer, PriorityScorer]


def test_nested_composite_children_in_a_config_table() -> None:
    """A child's settings may also sit in a nested [config] table, children included."""
    scorer = build_scorer("composite", {"scorers": [
        {"type": "composite", "weight": 2.0,
         "config": {"children": [{"type": "tag", "tag_weights": {"x": 1.0}}]}},
        {"type": "kind"},
    ]})
    assert isinstance(scorer, CompositeScorer)
    assert scorer.weights == (2 / 3, 1 / 3)
    nested = scorer.scorers[0]
    assert isinstance(nested, CompositeScorer)
    assert isinstance(nested.scorers[0], TagScorer)


@pytest.mark.parametrize(("scorer_type", "config", "path"), [
    ("recency", {"half_life": 3}, "config.half_life"),
    ("tag", {"tag_weights": {"a": 1.0}, "case_insensitive": True}, "config.case_insensitive"),
    ("tag", {"tag_weights": [{"tag": "a", "weight": 1.0, "boost": 2}]},
     "config.tag_weights[0].boost"),
    ("kind", {"weights": [{"kind": "Memory", "wieght": 1.0}]}, "config.weights[0].wieght"),
    ("composite", {"scorers": [{"type": "recency", "wieght": 2.0}]}, "config.scorers[0].wieght"),
    ("composite", {"scorers": [{"type": "composite", "children": [
        {"type": "priority", "weight": 1.0, "extra": 1}]}]},
     "config.scorers[0].children[0].extra"),
    ("composite", {"scorers": [{"type": "kind", "config": {}, "use_default_weights": True}]},
     "config.scorers[0].use_default_weights"),
    ("scaled", {"inner_scorer": "kind", "inner_config": {"weigths": {}}},
     "config.inner_config.weigths"),
    ("scaled", {"inner_scorer": {"type": "reflexive", "clamp": False}},
     "config.inner_scorer.clamp"),
    ("decay", {"reference_time": "2025-01-01T00:00:00Z",
               "curve": {"type": "window", "max_age_secs": 60, "half_life_secs": 5}},
     "config.curve.half_life_secs"),
    ("decay", {"reference_time": "2025-01-01T00:00:00Z",
               "curve": {"type": "step", "windows": [{"max_age_secs": 60, "score": 0.5,
                                                      "label": "x"}]}},
     "config.curve.windows[0].label"),
    ("metadata_key", {"key": "k", "value": "v", "boost": 1.5, "case_sensitive": True},
     "config.case_sensitive"),
])
def test_unknown_config_keys_are_refused_naming_their_path(
        scorer_type: str, config: dict[str, Any], path: str) -> None:
    """A [config] key the scorer (or an entry, curve or window) does not take raises
    UnsupportedConfigError naming its full path; it is never silently dropped."""
    with pytest.raises(UnsupportedConfigError) as caught:
        build_scorer(scorer_type, config)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}:")


def test_unknown_config_key_suggests_the_setting_meant() -> None:
    """The error suggests the closest known key and lists them all."""
    with pytest.raises(UnsupportedConfigError, match="did you mean 'default_score'") as caught:
        build_scorer("metadata_trust", {"default_scor": 0.5})
    assert caught.value.known == ("default_score",)


def test_conflicting_config_keys_are_refused() -> None:
    """Settings that cannot all be honoured (custom weights with use_default_weights,
    scorers with children) are refused rather than one being dropped."""
    with pytest.raises(UnsupportedConfigError, match="use_default_weights"):
        build_scorer("kind", {"use_default_weights": True, "weights": {"Memory": 1.0}})
    with pytest.raises(UnsupportedConfigError, match="scorers"):
        build_scorer("composite", {"scorers": [{"type": "kind"}], "children": []})


def test_unknown_config_key_cannot_satisfy_an_expected_construction_error() -> None:
    """A vector expecting a construction error does not pass because of an unknown
    key: the error is not a ConfigurationError and the vector fails."""
    doc = copy.deepcopy(load("metadata-key-zero-boost-construction-error.toml"))
    doc["config"]["boots"] = 2.0
    with pytest.raises(UnsupportedConfigError, match=r"config\.boots"):
        run_scoring_vector(doc)


def test_unknown_config_key_fails_the_vector_through_the_runner(tmp_path: Path) -> None:
    """Through run_vector_file the vector fails, the reason naming the key's path."""
    text = (VECTORS / "tag-basic.toml").read_text(encoding="utf-8")
    path = tmp_path / "tag-extra.toml"
    path.write_text(text + "\n[config.extra]\nx = 1\n", encoding="utf-8")
    result = run_vector_file(path)
    assert not result.passed
    assert result.reason is not None
    assert "UnsupportedConfigError: config.extra" in result.reason


# -- build_scorer ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["recency", "priority", "kind", "tag", "frequency", "reflexive",
                                  "metadata_trust"])
def test_simple_types_build_from_an_empty_config(name: str) -> None:
    """Types without required settings build from ``{}`` (as pipeline vectors need)."""
    assert isinstance(build_scorer(name, {}), Scorer)


def test_scorer_types_lists_every_vector_name() -> None:
    """SCORER_TYPES names the eleven vector scorer types."""
    assert set(SCORER_TYPES) == {"recency", "priority", "kind", "tag", "frequency", "reflexive",
                                 "composite", "scaled", "decay", "metadata_trust",
                                 "metadata_key"}


def test_unknown_type_is_a_configuration_error() -> None:
    """An unknown scorer type raises ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="'semantic'"):
        build_scorer("semantic", {})


def test_missing_required_setting_names_it() -> None:
    """metadata_key without boost raises ConfigurationError naming 'boost'."""
    with pytest.raises(ConfigurationError, match="boost"):
        build_scorer("metadata_key", {"key": "k", "value": "v"})


def test_composite_children_are_built_with_their_weights() -> None:
    """[[config.scorers]] become children in order, weights normalised."""
    scorer = build_scorer("composite", {"scorers": [{"type": "recency", "weight": 3.0},
                                                    {"type": "kind", "weight": 1}]})
    assert isinstance(scorer, CompositeScorer)
    assert [type(child) for child in scorer.scorers] == [RecencyScorer, KindScorer]
    assert scorer.weights == (0.75, 0.25)


def test_scaled_inner_by_name_or_table() -> None:
    """inner_scorer may be a type name or a table with its own settings."""
    by_name = build_scorer("scaled", {"inner_scorer": "recency"})
    assert isinstance(by_name, ScaledScorer)
    assert isinstance(by_name.inner, RecencyScorer)
    by_table = build_scorer("scaled", {"inner_scorer": {"type": "tag", "tag_weights": {"a": 1}}})
    assert isinstance(by_table, ScaledScorer)
    assert isinstance(by_table.inner, TagScorer)
    assert dict(by_table.inner.tag_weights) == {"a": 1.0}


def test_kind_custom_weights_from_a_table() -> None:
    """kind with a weights table uses those weights instead of the defaults."""
    scorer = build_scorer("kind", {"weights": {"Memory": 2.0}})
    assert isinstance(scorer, KindScorer)
    assert dict(scorer.weights) == {ContextKind.MEMORY: 2.0}


def test_decay_curves_and_fixed_clock() -> None:
    """decay builds each curve type from seconds and a clock fixed at reference_time."""
    reference = datetime(2025, 1, 1, 12, tzinfo=UTC)
    for curve, expected in [
        ({"type": "exponential", "half_life_secs": 60.0}, ExponentialCurve(timedelta(minutes=1))),
        ({"type": "window", "max_age_secs": 60}, WindowCurve(timedelta(minutes=1))),
        ({"type": "step", "windows": [{"max_age_secs": 60.0, "score": 0.25}]},
         StepCurve([(timedelta(minutes=1), 0.25)])),
    ]:
        scorer = build_scorer("decay", {"reference_time": reference, "curve": curve})
        assert isinstance(scorer, DecayScorer)
        assert scorer.curve == expected
        assert scorer.clock() == reference


def test_decay_needs_a_reference_time() -> None:
    """DecayScorer has no default clock (D042), so a decay config without reference_time
    is a ConfigurationError naming it rather than a scorer reading the wall clock."""
    with pytest.raises(ConfigurationError) as caught:
        build_scorer("decay", {"curve": {"type": "window", "max_age_secs": 60}})
    assert caught.value.field == "config.reference_time"


def test_decay_unknown_curve_type_is_rejected() -> None:
    """An unknown curve type raises ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match="'linear'"):
        build_scorer("decay", {"curve": {"type": "linear"}})


# -- item_from_vector -------------------------------------------------------------


def test_item_from_vector_reads_every_field() -> None:
    """Every vector item key maps onto the matching ContextItem field."""
    stamp = datetime(2024, 1, 1, 2, 0, tzinfo=timezone(timedelta(hours=2)))
    table: Mapping[str, Any] = {
        "content": "c", "tokens": 7, "kind": "Document", "source": "Rag", "timestamp": stamp,
        "priority": 3, "tags": ["a", "B"], "futureRelevanceHint": 0.25, "pinned": True,
        "metadata": {"cupel:trust": "0.5"}, "originalTokens": 9, "score": 0.9,
    }
    item = item_from_vector(table)
    assert item == ContextItem(
        content="c", tokens=7, kind="Document", source="Rag",
        timestamp=datetime(2024, 1, 1, tzinfo=UTC), priority=3, tags=("a", "B"),
        future_relevance_hint=0.25, pinned=True, metadata={"cupel:trust": "0.5"},
        original_tokens=9,
    )
    assert item.timestamp is not None
    assert item.timestamp.tzinfo is UTC


def test_item_from_vector_defaults() -> None:
    """Only content and tokens are required; the rest take ContextItem's defaults."""
    assert item_from_vector({"content": "x", "tokens": 1}) == ContextItem(content="x", tokens=1)


def test_item_from_vector_treats_naive_datetimes_as_utc() -> None:
    """A TOML local date-time (no offset) is read as UTC."""
    item = item_from_vector({"content": "x", "tokens": 1, "timestamp": datetime(2024, 5, 1)})
    assert item.timestamp == datetime(2024, 5, 1, tzinfo=UTC)


def test_item_from_vector_reads_toml_1_1_offset_times_without_seconds() -> None:
    """tomli's parse of ``2024-01-01T00:00Z`` becomes an aware UTC timestamp."""
    doc = tomli.loads('[[items]]\ncontent = "x"\ntokens = 1\ntimestamp = 2024-01-01T00:00Z\n')
    item = item_from_vector(doc["items"][0])
    assert item.timestamp == datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("curve", "field"),
    [({"type": "exponential"}, "config.curve.half_life_secs"),
     ({"type": "window", "max_age_secs": float("nan")}, "config.curve.max_age"),
     ({"type": "exponential", "half_life_secs": -60.0}, "config.curve.half_life"),
     ({"type": "step", "windows": [{"max_age_secs": 60.0}]}, "config.curve.windows[0].score")],
    ids=["missing-half-life", "nan-seconds", "negative-half-life", "window-without-score"],
)
def test_decay_curve_settings_are_validated(curve: dict[str, Any], field: str) -> None:
    """A missing or invalid curve setting raises ConfigurationError naming its path.

    Changed deliberately with the strategy registry: the vector's seconds are renamed
    to the curve table's duration keys before the registry builds the curve, so a
    missing key is named as the vector spells it and an invalid value by the path
    of the table key it became (``config.curve.half_life``), no longer by a bare
    field name."""
    with pytest.raises(ConfigurationError) as caught:
        build_scorer("decay", {"curve": curve, "reference_time": "2025-01-01T00:00:00Z"})
    assert caught.value.field == field
