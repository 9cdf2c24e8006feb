"""``cupellation presets`` and ``cupellation policy show|check``: listing, exact
round trips through files, and one-line errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from _cli_support import BUDGET, assert_one_line_error, cli, run_main

from cupellation.cli import main
from cupellation.policy import PRESET_NAMES, get_preset, load_policy, presets

ITEMS = '[{"content": "sys", "tokens": 3, "kind": "SystemPrompt", "pinned": true},' \
        ' {"content": "a", "tokens": 4, "timestamp": "2024-01-01T00:00:00Z"},' \
        ' {"content": "b", "tokens": 5, "kind": "ToolOutput"}]'


def test_presets_in_a_pipe_are_tab_separated_plain_text() -> None:
    """In a pipe: a header and one tab-separated line per preset (name, description,
    scorers with weights, slicer, placer), no escape sequences or box drawing."""
    result = cli("presets")
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0].split("\t") == ["name", "description", "scorers", "slicer", "placer"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[0] for row in rows] == list(PRESET_NAMES)
    assert rows[0][2:] == ["recency x3, kind x1", "greedy", "chronological"]
    assert rows[3][2:] == ["kind x2, reflexive x2, priority x1", "knapsack(bucket_size=100)",
                           "u_shaped"]
    assert "\x1b" not in result.out
    assert "┃" not in result.out


def test_presets_on_a_terminal_is_a_rich_table_and_json_on_request(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the presets are a rich table with every name; --format json gives
    the same rows as objects."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["presets"]) == 0
    table = capsys.readouterr().out
    assert "Presets" in table
    for name in PRESET_NAMES:
        assert name in table
    monkeypatch.undo()
    assert main(["presets", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == list(presets())
    assert rows[2] == {"name": "Rag", "description": get_preset("rag").description,
                       "scorers": "reflexive x3, kind x1", "slicer": "greedy",
                       "placer": "u_shaped"}


def test_policy_show_prints_exactly_to_toml_and_to_json(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``policy show NAME`` is exactly ``Policy.to_toml()``; ``--format json`` exactly
    ``to_json()``."""
    for name in PRESET_NAMES:
        assert main(["policy", "show", name]) == 0
        assert capsys.readouterr().out == get_preset(name).to_toml()
    assert main(["policy", "show", "code-review", "--format", "json"]) == 0
    assert capsys.readouterr().out == get_preset("CodeReview").to_json()


def test_policy_show_round_trips_through_select(tmp_path: Path) -> None:
    """``policy show chat > x.toml`` then ``select --policy x.toml`` gives the same
    placement as ``--policy chat``; ``policy show`` with budget flags writes a policy
    that needs no budget flags; showing a file prints it back equal."""
    items = tmp_path / "items.json"
    items.write_text(ITEMS)
    shown = cli("policy", "show", "chat")
    assert shown.code == 0
    saved = tmp_path / "x.toml"
    saved.write_text(shown.out)
    assert load_policy(saved) == get_preset("chat")
    by_file = cli("select", items, *BUDGET, "--policy", saved)
    by_name = cli("select", items, *BUDGET, "--policy", "chat")
    assert by_file.code == by_name.code == 0
    assert json.loads(by_file.out) == json.loads(by_name.out)
    with_budget = cli("policy", "show", "chat", "--max-tokens", "100", "--target-tokens", "8",
                      "--format", "json")
    saved_json = tmp_path / "b.json"
    saved_json.write_text(with_budget.out)
    assert load_policy(saved_json).budget is not None
    alone = cli("select", items, "--policy", saved_json, "--report", "-")
    assert alone.code == 0, alone.err
    assert sum(e["item"]["tokens"] for e in json.loads(alone.out)["included"]) <= 8
    again = cli("policy", "show", saved_json, "--format", "json")
    assert again.out == with_budget.out


def test_policy_check_says_what_a_file_describes_or_what_is_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``policy check`` prints one 'ok' line per valid file; a bad one gives one line
    naming the file and the path inside it, status 2; no action is a usage error."""
    good = tmp_path / "good.toml"
    good.write_text(get_preset("debugging").to_toml())
    result = run_main(capsys, "policy", "check", good, "rag")
    assert result.code == 0
    assert result.out.splitlines() == [
        f"{good}: ok: Debugging: scorers priority x3, kind x2, recency x1; slicer greedy; "
        "placer chronological; overflow Throw; no budget",
        "rag: ok: Rag: scorers reflexive x3, kind x1; slicer greedy; placer u_shaped; "
        "overflow Throw; no budget"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"scorer": {"type": "composite", "children": [{"type": "kind", '
                   '"weight": 1, "wieghts": {}}]}}')
    assert_one_line_error(run_main(capsys, "policy", "check", bad), 2,
                          "bad.json: scorer.children[0]", "did you mean `weights`")
    both = run_main(capsys, "policy", "check", good, bad)
    assert both.code == 2
    assert both.out.startswith(f"{good}: ok:")
    assert_one_line_error(run_main(capsys, "policy"), 2, "an action is required: show or check")
    latin = tmp_path / "latin.toml"
    latin.write_bytes(b'name = "caf\xe9"\n[scorer]\ntype = "recency"\n')
    assert_one_line_error(run_main(capsys, "policy", "check", latin), 2,
                          "latin.toml: not UTF-8 at byte 11 (line 1)")
