"""``cupellation select`` with policies: the placed items on stdout, presets and policy
files (every strategy, including those the old flags could not configure), budget
precedence, the shorthand flags, exit status 1 for failed selections, and the
outputs (``--report``/``--events``/``--html``, ``-`` for stdout, ``--out``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli_support import BUDGET, assert_one_line_error, cli, files_in, run_main

from cupellation import ContextItem, SelectionReport
from cupellation.cli import main
from cupellation.events import event_from_json
from cupellation.policy import get_preset

ITEMS = [
    {"content": "You are terse.", "tokens": 5, "kind": "SystemPrompt", "pinned": True},
    {"content": "old question", "tokens": 10, "timestamp": "2024-01-01T10:00:00Z",
     "priority": 1},
    {"content": "tool said 42", "tokens": 10, "kind": "ToolOutput", "source": "Tool",
     "timestamp": "2024-01-01T10:01:00Z", "tags": ["math"], "priority": 9,
     "metadata": {"trust": "high"}},
    {"content": "second tool output", "tokens": 10, "kind": "ToolOutput", "source": "Tool",
     "timestamp": "2024-01-01T10:02:00Z", "priority": 5},
    {"content": "latest question", "tokens": 10, "timestamp": "2024-01-01T10:03:00Z",
     "priority": 2},
]


@pytest.fixture
def items_file(tmp_path: Path) -> Path:
    """The five items above as a JSON array."""
    path = tmp_path / "items.json"
    path.write_text(json.dumps(ITEMS, indent=2))
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_help_names_the_default_preset_stdout_rules_and_exit_codes() -> None:
    """select --help says which preset is the default, that stdout gets the placed items
    (or the one output named '-'), and lists the exit statuses."""
    result = cli("select", "--help")
    assert result.code == 0
    text = " ".join(result.out.split())
    assert "default: the Chat preset" in text
    assert "placed items as a JSON array" in text
    assert "--report -" in text
    for status in ("0 success", "1 the selection failed", "2 bad input or usage", "130",
                   "141"):
        assert status in text


def test_stdout_is_the_placed_items_in_placed_order(
        items_file: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Without options stdout is a JSON array of the wire format's item shape, in the order
    the report's ``included`` gives, each equal to its input item."""
    status, out, _ = _run(capsys, "select", items_file, *BUDGET, "--report",
                          tmp_path / "r.json")
    assert status == 0
    placed = [ContextItem.from_dict(row) for row in json.loads(out)]
    report = SelectionReport.from_json((tmp_path / "r.json").read_text())
    assert placed == [entry.item for entry in report.included]
    assert {row["content"] for row in json.loads(out)} == {row["content"] for row in ITEMS}


def test_standard_input_and_the_default_chat_preset_with_its_note(items_file: Path) -> None:
    """``select -`` reads stdin; the default (Chat, chronological) puts the untimed
    pinned system prompt last and says so in one note on stderr; --quiet silences it
    and stdout."""
    result = cli("select", "-", *BUDGET, stdin=items_file.read_text())
    assert result.code == 0, result.err
    contents = [row["content"] for row in json.loads(result.out)]
    assert contents == ["old question", "tool said 42", "second tool output",
                        "latest question", "You are terse."]
    assert len(result.err_lines) == 1
    assert result.err_lines[0].startswith("cupellation: note: the chronological placer put 1 "
                                          "item(s) without a timestamp after the timestamped")
    assert "pinned SystemPrompt 'You are terse.'" in result.err_lines[0]
    quiet = cli("select", "-", *BUDGET, "--quiet", stdin=items_file.read_text())
    assert (quiet.code, quiet.out, quiet.err) == (0, "", "")


def test_u_shaped_presets_put_the_pinned_prompt_first(
        items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--policy rag`` (U-shaped) and ``--placer u-shaped`` place the pinned system
    prompt first, with no note."""
    for extra in (["--policy", "rag"], ["--placer", "u-shaped"]):
        status, out, err = _run(capsys, "select", items_file, *BUDGET, *extra)
        assert status == 0
        assert json.loads(out)[0]["content"] == "You are terse."
        assert err == ""


def test_policy_files_configure_every_strategy(
        items_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TOML policy with decay, scaled, metadata_key and tag scorers in a composite and
    a count_quota slicer (what the old flags could not configure) runs, and its
    settings take effect: the ToolOutput cap of 1 excludes the second tool output."""
    policy = tmp_path / "p.toml"
    policy.write_text("""
name = "everything"
overflow_strategy = "Truncate"

[scorer]
type = "composite"

[[scorer.children]]
type = "decay"
weight = 1.0
curve = { type = "exponential", half_life = "1h" }
reference_time = "2024-01-01T11:00:00Z"

[[scorer.children]]
type = "scaled"
weight = 1.0
inner = { type = "priority" }

[[scorer.children]]
type = "metadata_key"
weight = 1.0
key = "trust"
value = "high"
boost = 2.0

[[scorer.children]]
type = "tag"
weight = 1.0
tag_weights = { math = 1.0 }

[slicer]
type = "count_quota"
inner = { type = "greedy" }
entries = [{ kind = "ToolOutput", require_count = 1, cap_count = 1 }]

[placer]
type = "u_shaped"

[budget]
max_tokens = 1000
target_tokens = 500
""")
    status, out, err = _run(capsys, "select", items_file, "--policy", policy, "--report", "-")
    assert status == 0, err
    report = SelectionReport.from_json(out)
    excluded = {e.item.content: e.reason.name for e in report.excluded}
    assert excluded == {"second tool output": "CountCapExceeded"}
    # U-shaped: the two best scores at the two ends (the boosted tool output may score
    # above the pinned item's 1.0).
    ends = {report.included[0].item.content, report.included[-1].item.content}
    assert ends == {"You are terse.", "tool said 42"}


def test_json_policy_files_and_preset_names_in_any_case(
        items_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON policy file works like its TOML twin; preset names ignore case and
    separators."""
    policy = tmp_path / "p.json"
    policy.write_text(get_preset("DocumentQa").to_json())
    by_file = _run(capsys, "select", items_file, *BUDGET, "--policy", policy)
    by_name = _run(capsys, "select", items_file, *BUDGET, "--policy", "document-qa")
    assert by_file[0] == by_name[0] == 0
    assert by_file[1] == by_name[1]


def test_policy_errors_name_the_file_line_and_path(
        tmp_path: Path, items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TOML syntax error names file and line; a bad value names the path inside the
    policy; an unknown preset lists the presets with a suggestion."""
    policy = tmp_path / "bad.toml"
    policy.write_text('[scorer]\ntype = "composite"\nchildren = [\n')
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--policy", policy), 2,
                          "bad.toml:", "is not valid TOML")
    policy.write_text('[scorer]\ntype = "composite"\n[[scorer.children]]\ntype = "recency"\n'
                      'weight = -1\n')
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--policy", policy), 2,
                          "bad.toml: scorer.children[0].weight")
    policy.write_text('[scorer]\ntype = "recncy"\n')
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--policy", policy), 2,
                          "bad.toml: scorer.type", "did you mean `recency`")
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--policy", "chatt"), 2,
                          "--policy chatt: no such file, and not a preset; did you mean Chat?",
                          "CodeReview")
    missing = tmp_path / "no.toml"
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--policy", missing),
                          2, "no.toml: no such policy file")


def test_budget_comes_from_flags_over_the_policy(
        items_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A policy with a [budget] needs no flags; a flag overrides only its own part;
    --max-tokens alone sets the target too (as the library does); with neither there
    is a clear error; an impossible budget names the flag."""
    policy = tmp_path / "p.toml"
    policy.write_text(get_preset("rag").to_toml() + "\n[budget]\nmax_tokens = 100\n"
                      "target_tokens = 25\noutput_reserve = 10\n")
    status, out, _ = _run(capsys, "select", items_file, "--policy", policy, "--report", "-")
    assert status == 0
    tokens = sum(e.item.tokens for e in SelectionReport.from_json(out).included)
    assert tokens <= 25
    status, out, _ = _run(capsys, "select", items_file, "--policy", policy,
                          "--target-tokens", "45", "--report", "-")
    assert sum(e.item.tokens for e in SelectionReport.from_json(out).included) > 25
    assert_one_line_error(run_main(capsys, "select", items_file), 2,
                          "no budget: give --max-tokens (--target-tokens defaults to it)",
                          "the policy Chat has no [budget]")
    # --target-tokens defaults to --max-tokens, as select_messages' target does.
    status, out, _ = _run(capsys, "select", items_file, "--max-tokens", "30", "--report", "-")
    assert status == 0
    report = SelectionReport.from_json(out)
    assert 0 < sum(e.item.tokens for e in report.included) <= 30
    assert report.excluded  # the 45 tokens of items do not fit: the target is 30
    assert_one_line_error(run_main(capsys, "select", items_file, "--max-tokens", "10",
                                   "--target-tokens", "20"), 2, "--target-tokens:")


def test_shorthand_flags_name_what_needs_a_policy_file(
        items_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--scorer decay/scaled/tag/metadata_key and --slicer quota/count_quota point to a
    policy file instead of failing with '...is required' or running with an empty
    configuration; weighted simple scorers make a composite."""
    for flag, name in (("--scorer", "decay"), ("--scorer", "scaled"), ("--scorer", "tag"),
                       ("--scorer", "metadata_key"), ("--scorer", "composite")):
        assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, flag, name), 2,
                              f"{flag} {name}: {name} needs settings", "policy show chat")
    for name in ("quota", "count_quota"):
        assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--slicer", name), 2,
                              f"--slicer {name}: one of greedy, knapsack", "need settings")
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--scorer",
                                   "priority:x"), 2, "the weight must be a number")
    best = {}
    for scorers in (["--scorer", "priority:3", "--scorer", "recency"], ["--scorer", "recency"]):
        status, out, _ = _run(capsys, "select", items_file, *BUDGET, *scorers, "--report", "-")
        assert status == 0
        scored = [e for e in SelectionReport.from_json(out).included if not e.item.pinned]
        best[len(scorers)] = max(scored, key=lambda e: e.score).item.content
    assert best == {4: "tool said 42", 2: "latest question"}


def test_failed_selections_exit_1_and_still_write_the_report(tmp_path: Path) -> None:
    """Pinned items over the window (PinnedBudgetError) and a pinned item over the
    target under Throw (BudgetOverflowError) exit 1 with one line naming the failure;
    the report and events are written, the items are not; --overflow truncate keeps
    the selection."""
    source = tmp_path / "pin.json"
    source.write_text('[{"content": "sys", "tokens": 60, "pinned": true}, '
                      '{"content": "a", "tokens": 5}]')
    report = tmp_path / "r.json"
    result = cli("select", source, "--max-tokens", "100", "--target-tokens", "50",
                 "--report", report, "--events", tmp_path / "e.jsonl", "-o", tmp_path / "i.json")
    assert_one_line_error(result, 1, "selection failed: Selected items require 60 tokens, "
                                     "exceeding target budget of 50", "--overflow truncate")
    assert sorted(files_in(tmp_path)) == ["e.jsonl", "pin.json", "r.json"]
    last = json.loads((tmp_path / "e.jsonl").read_text().splitlines()[-1])
    assert last["error_type"] == "BudgetOverflowError"
    result = cli("select", source, "--max-tokens", "50", "--target-tokens", "40")
    assert_one_line_error(result, 1, "selection failed: Pinned items require 60 tokens")
    ok = cli("select", source, "--max-tokens", "100", "--target-tokens", "50",
             "--overflow", "truncate")
    assert ok.code == 0
    assert [row["content"] for row in json.loads(ok.out)] == ["sys"]


def test_dash_outputs_replace_the_items_and_files_are_whole(
        items_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--report -, --events - and --html - each replace the items on stdout; two '-'
    outputs, or one with --format text, are a usage error; files named by --report,
    --events, --html, -o and --out are complete and nothing else is left behind."""
    status, report_text, _ = _run(capsys, "select", items_file, *BUDGET, "--report", "-")
    assert status == 0
    report = SelectionReport.from_json(report_text)
    status, events_text, _ = _run(capsys, "select", items_file, *BUDGET, "--events", "-")
    events = [event_from_json(line) for line in events_text.splitlines()]
    assert events[0].type == "run_started"
    assert events[-1].type == "run_completed"
    status, page, _ = _run(capsys, "select", items_file, *BUDGET, "--html", "-")
    assert page.startswith("<!DOCTYPE html>")
    assert f'id="count-included" data-count="{len(report.included)}"' in page
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--report", "-",
                                   "--html", "-"), 2, "only one output can go to standard output")
    assert_one_line_error(run_main(capsys, "select", items_file, *BUDGET, "--report", "-",
                                   "--format", "text"), 2, "both want standard output")
    out = tmp_path / "outs"
    out.mkdir()
    status, stdout, _ = _run(capsys, "select", items_file, *BUDGET, "--report",
                             out / "r.json", "--events", out / "e.jsonl", "--html",
                             out / "p.html", "-o", out / "items.json", "--out", out / "dir")
    assert status == 0
    assert stdout == ""
    assert files_in(out) == ["dir/events.jsonl", "dir/report.html", "dir/report.json",
                             "e.jsonl", "items.json", "p.html", "r.json"]
    written = SelectionReport.from_json((out / "r.json").read_text())
    assert (written.included, written.excluded) == (report.included, report.excluded)
    assert (out / "dir" / "report.json").read_text() == (out / "r.json").read_text()
    placed = json.loads((out / "items.json").read_text())
    assert [row["content"] for row in placed] == [e.item.content for e in report.included]


def test_format_text_prints_the_decisions(items_file: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--format text prints the tables: included items in placed order with their
    reasons, and excluded ones with the reason's data."""
    status, out, _ = _run(capsys, "select", items_file, "--max-tokens", "100",
                          "--target-tokens", "30", "--format", "text")
    assert status == 0
    assert "with the Chat policy: selected" in out
    assert "Included, in placed order" in out
    assert "BudgetExceeded(item_tokens=10, available_tokens=" in out


def test_chat_transcripts_are_recognised_or_forced(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An OpenAI message list, an Anthropic {system, messages} object and OpenAI JSON
    Lines are read as transcripts (a tool call and its result become one ToolOutput
    item, the exchange, as select_messages selects it); the system prompt
    is pinned and placed first by the chronological default; --items refuses a
    transcript and a broken message names its line."""
    openai = [{"role": "system", "content": "Be terse."},
              {"role": "user", "content": "Weather in Oslo?"},
              {"role": "assistant", "content": None, "tool_calls": [
                  {"id": "c1", "type": "function",
                   "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]},
              {"role": "tool", "tool_call_id": "c1", "content": "4°C, rain"}]
    anthropic = {"system": "Be terse.", "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "weather",
                                           "input": {"city": "Oslo"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "4°C, rain"}]}]}
    files = {"openai.json": json.dumps(openai), "anthropic.json": json.dumps(anthropic),
             "openai.jsonl": "\n".join(json.dumps(m) for m in openai)}
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text)
        status, out, err = _run(capsys, "select", path, *BUDGET, "--estimate-tokens")
        assert status == 0, err
        rows = json.loads(out)
        assert [row["kind"] for row in rows] == ["SystemPrompt", "Message", "ToolOutput"], name
        assert "weather(" in rows[2]["content"]
        assert "4°C, rain" in rows[2]["content"]
        assert rows[0]["pinned"] is True
        assert err == ""
    assert_one_line_error(run_main(capsys, "select", tmp_path / "anthropic.json", *BUDGET,
                                   "--items"), 2, "a chat transcript")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"role": "user", "content": "hi"}\n{"role": "user", "content": 5}\n')
    assert_one_line_error(run_main(capsys, "select", broken, *BUDGET, "--estimate-tokens"), 2,
                          "broken.jsonl:2: messages[1].content")
    forced = tmp_path / "ambiguous.json"  # a 'tokens' key: read as items unless --chat
    forced.write_text('[{"role": "user", "content": "hi", "tokens": 3}]')
    assert_one_line_error(run_main(capsys, "select", forced, *BUDGET), 2,
                          "items[0].role: is not a ContextItem field")
    status, out, err = _run(capsys, "select", forced, *BUDGET, "--chat", "--estimate-tokens")
    assert status == 0, err
    assert json.loads(out)[0]["metadata"]["chat.role"] == "user"
