"""Generated hostile policies: every preset's table with values replaced at random
places, written as JSON and TOML, and raw text damaged byte by byte — loading ends in
a policy that builds and runs, or a named error (a CupelError), nothing else."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from _policy_strategies import json_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _mutating import damaged_text, json_paths, replaced_at
from cupellation import ContextBudget, ContextItem
from cupellation._toml import dumps
from cupellation.exceptions import CupelError
from cupellation.policy import PRESET_NAMES, Policy, get_preset, load_policy

EXAMPLES = int(os.environ.get("CUPELLATION_POLICY_EXAMPLES", "300"))
_POLICIES = [get_preset(name) for name in PRESET_NAMES]
_TABLES = [policy.to_dict() for policy in _POLICIES]
_ITEMS = [ContextItem(content=f"item {k}", tokens=5 + k, kind=kind, priority=k % 3,
                      pinned=k == 0)
          for k, kind in enumerate(["Message", "Document", "ToolOutput", "Memory",
                                    "SystemPrompt", "Message"])]
_ODD = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                 st.floats(allow_nan=True, allow_infinity=True),
                 st.sampled_from(["", "x", "greedy", "1h", "-1s", "\ud800", "Message",
                                  "2026-01-01T00:00:00Z"]),
                 st.lists(st.integers(-3, 3), max_size=3), json_like)


def _loads_or_is_named(text: str, fmt: Any) -> Policy | None:
    """The policy of ``text``, or None when it is refused with a named error."""
    try:
        return load_policy(text, format=fmt)
    except CupelError:
        return None


def _builds_and_runs(policy: Policy) -> None:
    """A loaded policy builds its pipeline and runs it, or refuses by name."""
    with contextlib.suppress(CupelError):
        policy.build_pipeline(ContextBudget(max_tokens=200, target_tokens=100)).run(_ITEMS)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), which=st.integers(0, len(_TABLES) - 1),
       changes=st.integers(1, 3))
def test_preset_tables_with_values_replaced_load_run_or_are_named(
        data: st.DataObject, which: int, changes: int) -> None:
    """A preset's table with 1 to 3 values (or whole sub-tables) replaced by odd ones
    (None, bools, huge integers, NaN, lone surrogates, lists, nested tables), written
    as JSON and as TOML: each loads into a policy that builds and runs, or raises a
    CupelError; JSON and TOML of the same table agree on which."""
    table: Any = _TABLES[which]
    for _ in range(changes):
        path = data.draw(st.sampled_from(json_paths(table)))
        table = replaced_at(table, path, data.draw(_ODD))
    if not isinstance(table, dict):
        table = {"scorer": table}
    try:
        json_text = json.dumps(table, ensure_ascii=False)
    except (ValueError, TypeError):
        return
    from_json = _loads_or_is_named(json_text, "json")
    if from_json is not None:
        _builds_and_runs(from_json)
    try:
        toml_text = dumps(table)
    except (CupelError, ValueError, TypeError):
        return  # a table TOML cannot hold (None, NaN in places): JSON alone
    from_toml = _loads_or_is_named(toml_text, "toml")
    if from_toml is not None:
        _builds_and_runs(from_toml)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(which=st.integers(0, len(_TABLES) - 1), fmt=st.sampled_from(["json", "toml"]),
       data=st.data())
def test_damaged_policy_text_loads_runs_or_is_named(which: int, fmt: str,
                                                     data: st.DataObject) -> None:
    """A preset's JSON or TOML text with characters deleted, doubled or replaced: it
    loads and runs, or raises a CupelError (with the line, for a file that does not
    parse)."""
    policy = _POLICIES[which]
    text = policy.to_json() if fmt == "json" else policy.to_toml()
    text = damaged_text(data, text, '{}[]",=:.-+0123456789 \nabxé\ud800#\'')
    loaded = _loads_or_is_named(text, fmt)
    if loaded is not None:
        _builds_and_runs(loaded)
