"""``cupellation simulate`` and ``cupellation sensitivity`` (issue 24): over a chat file
they say what ``select_messages`` keeps, the tool exchange whole; over items what a
dry run keeps; over an audit log what each run re-run keeps; bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _cli_support import assert_one_line_error, run_main

from cupellation import ContextBudget, ContextItem, SelectOptions, select_messages_with_report
from cupellation.analytics import (
    budget_sweep,
    message_policy_sensitivity,
    policy_sensitivity_from_pipelines,
    replayable,
    scaled_budget,
)
from cupellation.cli import main
from cupellation.exceptions import PinnedBudgetError
from cupellation.logs import read_runs
from cupellation.policy import get_preset


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "lookup", "arguments": '{"q": "' + call_id + '"}'}}


#: Parallel tool calls (messages 2-4 are one exchange), pinned system and last user.
CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Compare the two invoices for October, please. " * 8},
    {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
    {"role": "tool", "tool_call_id": "a", "content": "Invoice A: 12 lines, 340 EUR. " * 6},
    {"role": "tool", "tool_call_id": "b", "content": "Invoice B: 12 lines, 340 EUR. " * 6},
    {"role": "assistant", "content": "They are the same invoice, sent twice. " * 2},
    {"role": "user", "content": "Refund one."},
]
ESTIMATE = SelectOptions(token_counter="estimate")
BUDGETS = [20, 60, 120, 200, 400]


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    """The transcript as a JSON file."""
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT), encoding="utf-8")
    return path


def _json(result: Any) -> dict[str, Any]:
    assert result.code == 0, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_simulate_on_a_chat_file_keeps_what_select_messages_keeps(
        chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each budget's kept and dropped messages are select_messages' at that budget;
    the exchange's three messages are dropped together (one entry naming all three)
    or kept together, and both happen over the sweep."""
    data = _json(run_main(capsys, "simulate", chat_file, "--budgets",
                          ",".join(map(str, BUDGETS)), "--estimate-tokens", "--format", "json"))
    assert data["input"] == "chat"
    seen = set()
    for size, point in zip(BUDGETS, data["points"], strict=True):
        try:
            chosen = select_messages_with_report(CHAT, ESTIMATE.replace(max_tokens=size))
        except PinnedBudgetError:
            assert point["failure"] is not None
            continue
        assert point["kept"] == len(chosen.kept)
        assert point["dropped_messages"] == list(chosen.dropped)
        assert point["tokens"] == chosen.tokens
        assert [entry["reason"] for entry in point["dropped"]] == [
            excluded.reason.name for excluded in chosen.report.excluded]
        exchange_dropped = [entry for entry in point["dropped"] if 3 in entry["messages"]]
        seen.add(bool(exchange_dropped))
        if exchange_dropped:
            assert exchange_dropped[0]["messages"] == [2, 3, 4]
    assert seen == {True, False}


def test_simulate_prints_a_table_naming_the_dropped_messages(
        chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The text form: one row per budget (--from/--to/--step), and the dropped units
    as message ranges with kind, tokens and reason."""
    result = run_main(capsys, "simulate", chat_file, "--from", "100", "--to", "300",
                      "--step", "100", "--estimate-tokens")
    assert result.code == 0, result.err
    rows = [line.split() for line in result.out.splitlines() if line.strip()[:3].isdigit()]
    assert [row[0] for row in rows] == ["100", "200", "300"]
    assert "messages[2-4]  ToolOutput" in result.out
    assert "BudgetExceeded" in result.out


def test_simulate_on_items_is_the_dry_run_at_each_budget(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An items file: each point is the chat preset's dry run at that budget (kept
    count, tokens, each dropped content with its reason)."""
    items = [ContextItem(content=f"note {k}", tokens=10 * (k + 1)) for k in range(6)]
    path = tmp_path / "items.json"
    path.write_text(json.dumps([item.to_dict() for item in items]), encoding="utf-8")
    data = _json(run_main(capsys, "simulate", path, "--budgets", "30,100,250",
                          "--format", "json"))
    expected = budget_sweep(get_preset("chat").build_pipeline(), items, [30, 100, 250])
    for point, want in zip(data["points"], expected, strict=True):
        assert want.report is not None
        assert point["kept"] == len(want.report.included)
        assert [(d["content"], d["reason"]) for d in point["dropped"]] == [
            (e.item.content, e.reason.name) for e in want.report.excluded]
    assert data["points"][0]["kept"] < data["points"][2]["kept"]


def test_sensitivity_on_a_chat_file_lists_the_swinging_units(
        chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The swings are message_policy_sensitivity's units, each with every policy's
    verdict and, when dropped, the reason."""
    data = _json(run_main(capsys, "sensitivity", chat_file, "--policy", "chat", "--policy",
                          "documentqa", "--max-tokens", "120", "--estimate-tokens",
                          "--format", "json"))
    found = message_policy_sensitivity(CHAT, [("a", "chat"), ("b", "documentqa")],
                                       ESTIMATE.replace(max_tokens=120))
    assert [swing["messages"] for swing in data["swings"]] == [
        list(swing.unit.indices) for swing in found.diffs]
    assert data["swings"]
    for swing in data["swings"]:
        verdicts = {s["status"]: s["reason"] for s in swing["statuses"]}
        assert set(verdicts) == {"Included", "Excluded"}
        assert verdicts["Excluded"] == "BudgetExceeded"
    assert [row["kept"] for row in data["policies"]] == [
        len(selection.kept) for _, selection in found.variants]


@pytest.fixture(scope="module")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An audit log of two demo runs at different targets (made once: read only)."""
    folder = tmp_path_factory.mktemp("simulate")
    log = folder / "audit.jsonl"
    for target in ("400", "200"):
        assert main(["demo", "-q", "--out", str(folder / f"demo{target}"), "--audit-log",
                     str(log), "--target-tokens", target]) == 0
    return log


def test_simulate_and_sensitivity_re_run_each_logged_run(
        audit_log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An audit log: each run's candidates are re-run under its logged policy at each
    budget scaled from its own, and under each --policy at its own budget, as the
    library does on replayable runs."""
    runs = [replayable(run) for run in read_runs(audit_log, keep_candidates=True)]
    sweep = _json(run_main(capsys, "simulate", audit_log, "--budgets", "300,1024",
                           "--format", "json"))
    assert [run["run_id"] for run in sweep["runs"]] == [run.run_id for run in runs]
    for shown, run in zip(sweep["runs"], runs, strict=True):
        want = budget_sweep(run.logged_pipeline(), run.candidates, [300, 1024],
                            budget=run.budget)
        assert [p["target_tokens"] for p in shown["points"]] == [
            scaled_budget(run.budget, size).target_tokens for size in (300, 1024)]
        assert [p["kept"] for p in shown["points"]] == [
            len(w.report.included) if w.report else 0 for w in want]
    side = _json(run_main(capsys, "sensitivity", audit_log, "--policy", "chat",
                          "--policy", "rag", "--run", runs[1].run_id, "--format", "json"))
    (only,) = side["runs"]
    found = policy_sensitivity_from_pipelines(runs[1].candidates, runs[1].budget, [
        (label, runs[1].pipeline_for(get_preset(label))) for label in ("chat", "rag")])
    assert [swing["content"] for swing in only["swings"]] == [d.content for d in found.diffs]
    assert only["swings"]


def test_a_run_that_cannot_be_re_run_is_named_and_exits_3(
        audit_log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log whose last run lost its final lines: the whole run is simulated, the cut
    one is listed with its cause, and the status is 3 (the data was not whole)."""
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(audit_log.read_bytes().splitlines(keepends=True)[:-4]))
    result = run_main(capsys, "simulate", cut, "--budgets", "500")
    assert result.code == 3
    assert "cannot re-run it (incomplete)" in result.out
    assert result.out.count("Budget sweep of run") == 1
    assert "could not be re-run" in result.err


@pytest.mark.parametrize(("argv", "code", "says"), [
    (["simulate", "{chat}"], 2, "give the budgets"),
    (["simulate", "{chat}", "--budgets", "10", "--from", "1", "--to", "5", "--step", "1"],
     2, "not both"),
    (["simulate", "{chat}", "--from", "0", "--to", "100000", "--step", "1"], 2, "at most 200"),
    (["simulate", "{chat}", "--budgets", "10,-4"], 2, "--budgets"),
    (["simulate", "{chat}", "--budgets", "10", "--trim", "ToolOutput"], 2, "--trim"),
    (["simulate", "{orphan}", "--budgets", "10", "--estimate-tokens"], 2, "messages[1]"),
    (["simulate", "{audit}", "--budgets", "10", "--run", "nope"], 1, "no runs found"),
    (["sensitivity", "{chat}", "--policy", "chat", "--max-tokens", "50"], 2, "two policies"),
    (["sensitivity", "{chat}", "--policy", "chat", "--policy", "rag"], 2, "--max-tokens"),
    (["sensitivity", "{chat}", "--policy", "chat", "--policy", "nope", "--max-tokens", "9"],
     2, "not a preset"),
])
def test_bad_input_is_one_line_and_the_promised_status(
        argv: list[str], code: int, says: str, chat_file: Path, audit_log: Path,
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Missing or doubled budgets, too many, a bad --trim, a chat file breaking the
    provider's rules, too few policies, no budget for sensitivity: exit 2 with one
    line saying so; a --run that is not in the log: exit 1."""
    orphan = tmp_path / "orphan.json"
    orphan.write_text(json.dumps([{"role": "user", "content": "hi"},
                                  {"role": "tool", "tool_call_id": "x", "content": "r"}]))
    paths = {"{chat}": str(chat_file), "{orphan}": str(orphan), "{audit}": str(audit_log)}
    result = run_main(capsys, *[paths.get(arg, arg) for arg in argv])
    if code == 1:
        assert result.code == 1
        assert says in result.err
        return
    assert_one_line_error(result, code, says)


def test_a_budget_the_pinned_messages_do_not_fit_is_a_row_not_an_error(
        chat_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At 5 tokens the pinned messages alone do not fit: that point says so, and the
    sweep goes on to the budgets that do (exit 0)."""
    data = _json(run_main(capsys, "simulate", chat_file, "--budgets", "5,400",
                          "--estimate-tokens", "--format", "json"))
    small, large = data["points"]
    assert "Pinned" in small["failure"]
    assert large["failure"] is None
    assert large["kept"] == len(CHAT)
    assert ContextBudget(400, 400) == scaled_budget(ContextBudget(400, 400), 400)
