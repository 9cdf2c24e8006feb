"""Trimming and estimates, as the command line and the HTML page show them: `why` says
"trimmed from 1,450 to 800 tokens" and finds a trimmed item by its original content,
`report` shows the original sizes and says when counts are estimates, `select` says a
fallback to estimates in one line, and the page shows both (never as incomplete)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cupellation.chat import _tokens as tokens_module
from cupellation.chat import select_messages_with_report
from cupellation.cli import main
from cupellation.html import render_html
from cupellation.logs import AuditLog

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
OUTPUT = "".join(f"row {k}: value={k * 13} status=ok\n" for k in range(300))


def _log_a_trimmed_run(path: Path, token_counter: str = "auto") -> int:
    """A select_messages run, written to an audit log; the tool exchange's trimmed
    tokens and original tokens as the report records them."""
    messages = [
        {"role": "user", "content": "summarise the export"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read_export", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": OUTPUT},
    ]
    log = AuditLog(path)
    try:
        selection = select_messages_with_report(messages, max_tokens=5000, collector=log,
                                                trim={"ToolOutput": 800},
                                                token_counter=token_counter, now=NOW)
    finally:
        log.close()
    item = selection.report.included[-1].item
    assert item.original_tokens is not None
    return item.original_tokens


def _cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_why_says_trimmed_from_and_finds_the_original(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`why --match` prints "trimmed from N to M tokens" for the trimmed exchange, JSON
    carries original_tokens, and `--content` with the tool's original output finds the
    unit that holds its trimmed copy."""
    log = tmp_path / "audit.jsonl"
    original = _log_a_trimmed_run(log)
    code, out, _ = _cli(capsys, "why", log, "--match", "read_export")
    assert code == 0
    assert f"trimmed from {original:,} to " in out
    assert " tokens, score " in out
    code, out, _ = _cli(capsys, "why", log, "--match", "read_export", "--format", "json")
    answer = json.loads(out)["matches"][0]
    assert answer["original_tokens"] == original
    assert answer["tokens"] < original
    code, out, _ = _cli(capsys, "why", log, "--content", OUTPUT)
    assert code == 0
    assert "INCLUDED" in out


def test_report_shows_original_sizes_and_estimates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`report` shows a trimmed unit's tokens with its original size, and says when the
    run's counts are estimates; an exact run says nothing about estimates."""
    monkeypatch.setenv("COLUMNS", "200")
    exact = tmp_path / "exact.jsonl"
    original = _log_a_trimmed_run(exact)
    code, out, _ = _cli(capsys, "report", exact)
    assert code == 0
    assert f" (trimmed from {original:,})" in out
    assert "estimates" not in out
    estimated = tmp_path / "estimated.jsonl"
    _log_a_trimmed_run(estimated, token_counter="estimate")
    code, out, _ = _cli(capsys, "report", estimated)
    assert code == 0
    assert "Token counts are estimates (estimate:chars/4)" in out


def test_select_says_a_fallback_to_estimates_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the token data, `select --chat` still succeeds and says on one line of
    standard error that its counts are estimates and how to get exact ones (no Python
    warning text); its HTML page says so too, not as an incomplete report."""
    monkeypatch.setattr(tokens_module, "_shipped_file", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(tokens_module, "_ENCODINGS", {})
    monkeypatch.setattr(tokens_module, "_RESOLVED", {})
    monkeypatch.setattr(tokens_module, "_fallback_said", False)
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "hello there"}]), encoding="utf-8")
    page = tmp_path / "page.html"
    code, _, err = _cli(capsys, "select", chat, "--chat", "--max-tokens", "100",
                        "--target-tokens", "100", "--html", page)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("cupellation: warning: exact token counts are unavailable")
    assert "cupellation[tokens]" in lines[0]
    html = page.read_text(encoding="utf-8")
    assert 'id="token-estimates"' in html
    assert 'id="incomplete"' not in html


def test_the_page_shows_trimmed_items_and_estimates(tmp_path: Path) -> None:
    """The HTML page shows a trimmed item's original size beside its tokens, and a note
    when counts are estimates; exact counts get no note."""
    messages = [{"role": "user", "content": "go"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": OUTPUT}]
    exact = select_messages_with_report(messages, max_tokens=5000, trim={"ToolOutput": 100},
                                        now=NOW)
    html = render_html(exact.report)
    original = exact.report.included[-1].item.original_tokens
    assert f'data-original-tokens="{original}"' in html
    assert "trimmed from" in html
    assert 'id="token-estimates"' not in html
    estimated = select_messages_with_report(messages, max_tokens=5000,
                                            token_counter="estimate", now=NOW)
    assert 'id="token-estimates" class="note" data-counter="estimate:chars/4"' in render_html(
        estimated.report)
