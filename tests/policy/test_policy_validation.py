"""Bad policies fail with the path, the value and, for unknown keys, a suggestion."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from cupellation import ContextBudget, ContextItem, ScoredItem
from cupellation.exceptions import (
    ConfigurationError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
)
from cupellation.policy import Policy, load_policy
from cupellation.scoring import (
    CompositeScorer,
    DecayScorer,
    FixedClock,
    FunctionScorer,
    KindScorer,
    RecencyScorer,
    ScaledScorer,
    WindowCurve,
)
from cupellation.slicing import CountQuotaEntry, CountQuotaSlice, GreedySlice, QuotaSlice

_COMPOSITE = """
[scorer]
type = "composite"

[[scorer.children]]
type = "recency"
weight = 1.0

[[scorer.children]]
type = "kind"
weight = {weight}
"""


@pytest.mark.parametrize(("text", "field", "value"), [
    (_COMPOSITE.format(weight="-2.0"), "scorer.children[1].weight", -2.0),
    (_COMPOSITE.format(weight="0"), "scorer.children[1].weight", 0),
    (_COMPOSITE.format(weight="inf"), "scorer.children[1].weight", float("inf")),
    ('[scorer]\ntype = "composite"\nchildren = []\n', "scorer.children", []),
    ('[scorer]\ntype = "kind"\nweights = { Message = -1.0 }\n',
     "scorer.weights['Message']", -1.0),
    ('[scorer]\ntype = "kind"\nweights = { tool = 1.0, TOOL = 2.0 }\n',
     "scorer.weights", "TOOL"),
    ('[scorer]\ntype = "metadata_key"\nkey = "k"\nvalue = "v"\nboost = 0.0\n',
     "scorer.boost", 0.0),
    ('[scorer]\ntype = "metadata_trust"\ndefault_score = 1.5\n', "scorer.default_score", 1.5),
    ('[scorer]\ntype = "decay"\ncurve = { type = "exponential", half_life = "0s" }\n',
     "scorer.curve.half_life", "0:00:00"),
    ('[scorer]\ntype = "decay"\ncurve = { type = "window", max_age = "soon" }\n',
     "scorer.curve.max_age", "soon"),
    ('[scorer]\ntype = "decay"\ncurve = { type = "step", windows = '
     '[{ max_age = "2h", score = 1.0 }, { max_age = "1h", score = 0.5 }] }\n',
     "scorer.curve.windows[1].max_age", "1:00:00"),
    ('[scorer]\ntype = "decay"\ncurve = { type = "step", windows = '
     '[{ max_age = "1h", score = 2.0 }] }\n', "scorer.curve.windows[0].score", 2.0),
    ('[scorer]\ntype = "decay"\ncurve = { type = "window", max_age = "1h" }\n'
     'reference_time = "2024-01-01T00:00:00"\n', "scorer.reference_time",
     "2024-01-01T00:00:00"),
    ('[scorer]\ntype = "scaled"\n[scorer.inner]\ntype = "composite"\n'
     '[[scorer.inner.children]]\ntype = "tag"\nweight = 1.0\n'
     'tag_weights = { a = -1.0 }\n', "scorer.inner.children[0].tag_weights['a']", -1.0),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "knapsack"\nbucket_size = 0\n',
     "slicer.bucket_size", 0),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "quota"\n'
     'quotas = [{ kind = "A", require = 60.0 }, { kind = "B", require = 50.0 }]\n',
     "slicer.quotas", 110.0),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "quota"\n'
     'quotas = [{ kind = "A", require = 60.0, cap = 50.0 }]\n',
     "slicer.quotas[0].require", 60.0),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "count_quota"\n'
     'inner = { type = "knapsack" }\nentries = []\n', "slicer.inner", None),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "count_quota"\n'
     'entries = [{ kind = "Tool", require_count = 3, cap_count = 2 }]\n',
     "slicer.entries[0].require_count", 3),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "count_constrained_knapsack"\n'
     'entries = []\nscarcity = "panic"\n', "slicer.scarcity", "panic"),
    ('[scorer]\ntype = "recency"\n[budget]\nmax_tokens = 10\ntarget_tokens = 20\n',
     "budget.target_tokens", 20),
    ('[scorer]\ntype = "recency"\n[budget]\nmax_tokens = 10\ntarget_tokens = 5\n'
     'reserved_slots = { Tool = -1 }\n', "budget.reserved_slots['Tool']", -1),
    ('overflow_strategy = "explode"\n[scorer]\ntype = "recency"\n',
     "overflow_strategy", "explode"),
    ('name = " "\n[scorer]\ntype = "recency"\n', "name", " "),
])
def test_invalid_values_name_their_path_and_value(text: str, field: str, value: object) -> None:
    """Each out-of-range or inconsistent setting raises InvalidValueError whose
    field is the full path inside the policy and whose value is the one given."""
    with pytest.raises(InvalidValueError) as caught:
        load_policy(text)
    assert caught.value.field == field
    if value is not None:
        shown = caught.value.value
        assert shown == value or str(shown) == str(value)
    assert field in str(caught.value)


@pytest.mark.parametrize(("text", "field"), [
    (_COMPOSITE.format(weight='"heavy"'), "scorer.children[1].weight"),
    ('[scorer]\ntype = "tag"\ntag_weights = { a = 1.0 }\ncase_sensitive = "yes"\n',
     "scorer.case_sensitive"),
    ('[scorer]\ntype = "metadata_key"\nkey = 1\nvalue = "v"\nboost = 2.0\n', "scorer.key"),
    ('deduplication = "no"\n[scorer]\ntype = "recency"\n', "deduplication"),
    ("scorer = 3\n", "scorer"),
    ('[scorer]\ntype = "composite"\nchildren = "recency"\n', "scorer.children"),
    ('[scorer]\ntype = "recency"\n[budget]\nmax_tokens = 1.5\ntarget_tokens = 1\n',
     "budget.max_tokens"),
    ('[scorer]\ntype = 7\n', "scorer.type"),
])
def test_wrong_types_name_their_path(text: str, field: str) -> None:
    """A value of the wrong type raises InvalidTypeError naming the full path."""
    with pytest.raises(InvalidTypeError) as caught:
        load_policy(text)
    assert caught.value.field == field


@pytest.mark.parametrize(("text", "field", "suggestion"), [
    ('scorr = 1\n', "scorr", "scorer"),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "knapsack"\nbucket = 10\n',
     "slicer.bucket", "bucket_size"),
    (_COMPOSITE.replace("weight = {weight}", "wieght = 2.0"), "scorer.children[1].wieght",
     "weight"),
    ('[scorer]\ntype = "decay"\ncurve = { type = "exponential", halflife = "1h" }\n',
     "scorer.curve.halflife", "half_life"),
    ('[scorer]\ntype = "recency"\n[budget]\nmax_token = 10\ntarget_tokens = 5\n',
     "budget.max_token", "max_tokens"),
    ('[scorer]\ntype = "recncy"\n', "scorer.type", "recency"),
    ('[scorer]\ntype = "recency"\n[placer]\ntype = "u-shape"\n', "placer.type", "u_shaped"),
    ('[scorer]\ntype = "recency"\n[slicer]\ntype = "greddy"\n', "slicer.type", "greedy"),
])
def test_unknown_keys_and_types_are_refused_with_a_suggestion(
        text: str, field: str, suggestion: str) -> None:
    """A misspelt key or type name is never ignored: the error names it and
    suggests the closest known one."""
    with pytest.raises(ConfigurationError) as caught:
        load_policy(text)
    assert caught.value.field == field
    assert f"did you mean `{suggestion}`?" in str(caught.value)


def test_missing_required_settings_are_named() -> None:
    """A policy without a scorer, or a child without a weight, names what is missing."""
    with pytest.raises(ConfigurationError, match=r"^scorer: is required"):
        load_policy('name = "x"\n')
    with pytest.raises(ConfigurationError, match=r"scorer.children\[0\].weight: is required"):
        load_policy('[scorer]\ntype = "composite"\n[[scorer.children]]\ntype = "kind"\n')
    with pytest.raises(ConfigurationError, match=r"scorer.key: is required"):
        load_policy('[scorer]\ntype = "metadata_key"\nvalue = "v"\nboost = 2.0\n')


def test_toml_syntax_errors_give_the_line() -> None:
    """Text that is not TOML raises DecodeError carrying the line number."""
    with pytest.raises(DecodeError) as caught:
        load_policy('name = "x"\n[scorer]\ntype = = "recency"\n')
    assert caught.value.line == 3
    assert "line 3" in str(caught.value)


def test_json_syntax_errors_give_the_line_and_duplicates_are_refused() -> None:
    """Broken JSON raises DecodeError with the line; a repeated key is an error,
    not a silent overwrite."""
    with pytest.raises(DecodeError) as caught:
        load_policy('{\n  "scorer": {"type": "recency"},\n  "name" "x"\n}')
    assert caught.value.line == 3
    with pytest.raises(DecodeError, match="appears twice"):
        load_policy('{"scorer": {"type": "recency"}, "scorer": {"type": "kind"}}')


def test_json_content_errors_name_the_json_path() -> None:
    """An invalid value in a JSON policy names its JSON path."""
    text = ('{"scorer": {"type": "composite", "children": '
            '[{"type": "recency", "weight": 1}, {"type": "kind", "weight": -1}]}}')
    with pytest.raises(ConfigurationError) as caught:
        load_policy(text)
    assert caught.value.field == "scorer.children[1].weight"
    assert caught.value.value == -1


def test_errors_from_a_file_carry_a_note_with_its_path(tmp_path: Path) -> None:
    """A content error read from a file has a note naming the file."""
    path = tmp_path / "bad.toml"
    path.write_text('[scorer]\ntype = "recency"\nweight = 1\n', encoding="utf-8")
    with pytest.raises(ConfigurationError) as caught:
        load_policy(path)
    assert any(str(path) in note for note in caught.value.__notes__)


def test_a_missing_file_is_an_invalid_value(tmp_path: Path) -> None:
    """A path that does not exist is reported as such (not parsed as TOML text)."""
    with pytest.raises(InvalidValueError, match="cannot be read"):
        load_policy(tmp_path / "absent.toml")
    with pytest.raises(InvalidValueError, match="cannot be read"):
        load_policy(str(tmp_path / "absent.json"))


def test_the_top_level_must_be_a_table() -> None:
    """A JSON array is not a policy."""
    with pytest.raises(DecodeError, match="table"):
        load_policy('[{"scorer": {"type": "recency"}}]', format="json")


def test_value_types_validate_on_construction() -> None:
    """The Python constructors apply the same rules as the file format."""
    with pytest.raises(ConfigurationError) as caught:
        CompositeScorer([(RecencyScorer(), 1.0), (KindScorer(), -1.0)])
    assert caught.value.field == "children[1].weight"
    with pytest.raises(ConfigurationError):
        CompositeScorer([])
    with pytest.raises(InvalidTypeError):
        CompositeScorer([("recency", 1.0)])  # type: ignore[list-item]
    with pytest.raises(InvalidTypeError):
        ScaledScorer(object())  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        Policy(scorer=RecencyScorer(), slicer=object())  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        Policy(scorer=RecencyScorer(), placer=GreedySlice())  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="surrogate"):
        Policy(scorer=RecencyScorer(), name="bad \ud800 name")
    early = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    with pytest.raises(ConfigurationError, match="outside the datetime range"):
        FixedClock(early)
    assert Policy(scorer=DecayScorer(WindowCurve(max_age=timedelta(hours=1)),
                                     clock=FixedClock(datetime(2026, 1, 1, tzinfo=UTC))))


def _odd(item: object, items: object) -> float:
    return 0.5


class _TakeFirst:
    """A custom strategy: both a slicer and a placer of sorts."""

    def slice(self, scored: Sequence[ScoredItem], budget: ContextBudget, /
              ) -> list[ContextItem]:
        return [entry.item for entry in scored[:1]]

    def place(self, items: Sequence[ScoredItem], /) -> list[ContextItem]:
        return [entry.item for entry in items]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"scorer": FunctionScorer(_odd)}, "scorer"),
    ({"scorer": CompositeScorer([(RecencyScorer(), 1.0),
                                 (ScaledScorer(FunctionScorer(_odd)), 2.0)])},
     "scorer.children[1].inner"),
    ({"scorer": RecencyScorer(), "slicer": QuotaSlice(
        CountQuotaSlice(_TakeFirst(), [CountQuotaEntry("Tool", cap_count=1)]))},
     "slicer.inner.inner"),
    ({"scorer": RecencyScorer(), "placer": _TakeFirst()}, "placer"),
    ({"scorer": 3}, "scorer"),
])
def test_a_policy_refuses_custom_strategies_naming_where_they_are(
        kwargs: dict[str, object], field: str) -> None:
    """A policy is what a file can hold: a custom strategy, at the top or nested in
    a composite, a scaled scorer or a quota slicer, is refused with InvalidTypeError
    naming its path, so a policy file never holds an unreadable record."""
    with pytest.raises(InvalidTypeError) as caught:
        Policy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert "policy cannot describe custom strategies" in str(caught.value)


def test_a_policy_refuses_a_decay_clock_it_cannot_write() -> None:
    """A decay scorer whose clock is neither the wall clock nor a FixedClock cannot be
    written (its table would read back as another scorer): InvalidValueError."""
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    scorer = DecayScorer(WindowCurve(max_age=timedelta(hours=1)), clock=lambda: moment)
    with pytest.raises(InvalidValueError, match="cannot write") as caught:
        Policy(scorer=scorer)
    assert caught.value.field == "scorer"

