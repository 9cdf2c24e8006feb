"""Policies survive every conversion exactly: table, TOML and JSON."""

from __future__ import annotations

import json
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _policy_strategies import json_like, policies
from hypothesis import given, settings

from cupellation._tables import decode_duration, encode_duration
from cupellation._toml import dumps
from cupellation.policy import Policy, load_policy, presets


def _canonical(data: Any) -> str:
    """JSON text that tells 1 from 1.0 and 0.0 from -0.0 (dict equality does not)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(policies)
def test_a_policy_round_trips_through_its_table(policy: Policy) -> None:
    """from_dict(to_dict(p)) equals p, and writes the very same table again."""
    data = policy.to_dict()
    again = Policy.from_dict(data)
    assert again == policy
    assert _canonical(again.to_dict()) == _canonical(data)


@settings(max_examples=300, deadline=None)
@given(policies)
def test_a_policy_round_trips_through_toml(policy: Policy) -> None:
    """load_policy(p.to_toml()) equals p; tomllib reads exactly p.to_dict() back."""
    text = policy.to_toml()
    assert _canonical(tomllib.loads(text)) == _canonical(policy.to_dict())
    loaded = load_policy(text)
    assert loaded == policy
    assert _canonical(loaded.to_dict()) == _canonical(policy.to_dict())


@settings(max_examples=300, deadline=None)
@given(policies)
def test_a_policy_round_trips_through_json(policy: Policy) -> None:
    """load_policy(p.to_json()) equals p and writes the same table again."""
    loaded = load_policy(policy.to_json())
    assert loaded == policy
    assert _canonical(loaded.to_dict()) == _canonical(policy.to_dict())


@settings(max_examples=300, deadline=None)
@given(json_like)
def test_the_toml_writer_round_trips_any_json_like_table(data: dict[str, Any]) -> None:
    """Any table of strings (control characters, quotes, non-ASCII), integers,
    floats, booleans, arrays and nested tables reads back from TOML unchanged."""
    assert _canonical(tomllib.loads(dumps(data))) == _canonical(data)


@settings(max_examples=300, deadline=None)
@given(policies)
def test_policies_are_hashable_values(policy: Policy) -> None:
    """Equal policies hash equally (a policy can key a dict or sit in a set)."""
    assert hash(Policy.from_dict(policy.to_dict())) == hash(policy)


@pytest.mark.parametrize(("text", "expected"), [
    ("90s", timedelta(seconds=90)),
    ("15m", timedelta(minutes=15)),
    ("24h", timedelta(hours=24)),
    ("7d", timedelta(days=7)),
    ("2w", timedelta(days=14)),
    ("1h30m", timedelta(hours=1, minutes=30)),
    ("1.5s", timedelta(seconds=1.5)),
    ("250ms", timedelta(milliseconds=250)),
    ("3us", timedelta(microseconds=3)),
    ("0.000001s", timedelta(microseconds=1)),
    (90, timedelta(seconds=90)),
    (0.25, timedelta(milliseconds=250)),
])
def test_durations_read_in_every_documented_form(text: str | float, expected: timedelta) -> None:
    """Durations read from unit text (w, d, h, m, s, ms, us, combined) and from seconds."""
    assert decode_duration(text, "d") == expected


@pytest.mark.parametrize(("value", "text"), [
    (timedelta(days=1), "1d"),
    (timedelta(hours=1, minutes=30), "1h30m"),
    (timedelta(seconds=2, microseconds=500000), "2.5s"),
    (timedelta(microseconds=7), "0.000007s"),
    (timedelta(days=400, seconds=1), "400d1s"),
])
def test_durations_are_written_in_their_shortest_exact_form(value: timedelta, text: str) -> None:
    """Durations are written as the non-zero components, and read back equal."""
    assert encode_duration(value) == text
    assert decode_duration(text, "d") == value


def test_every_preset_round_trips_through_files(tmp_path: Path) -> None:
    """Each preset written as .toml and .json files loads back equal, by path."""
    for name, policy in presets().items():
        toml_file = tmp_path / f"{name}.toml"
        toml_file.write_text(policy.to_toml(), encoding="utf-8")
        json_file = tmp_path / f"{name}.json"
        json_file.write_text(policy.to_json(), encoding="utf-8")
        assert load_policy(toml_file) == policy
        assert load_policy(str(json_file)) == policy
