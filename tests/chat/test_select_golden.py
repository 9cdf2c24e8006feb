"""Golden tests of select_messages per provider format, as dicts and as the SDKs' own
objects: the clock is pinned, the network is blocked (conftest), the result keeps the
provider's rules (0 orphaned calls or results) and matches the recorded selection.

Set CUPELLATION_REGENERATE_GOLDEN=1 to rewrite the files in tests/chat/golden/ after a
deliberate change (then read the diff)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cupellation import select_messages
from cupellation.chat import MessageSelection, ordering_problems, select_messages_with_report

from ._conversations import FORMATS, render, weather_conversation
from ._provider_rules import problems

GOLDEN = Path(__file__).parent / "golden"
NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
SYSTEM = "You are a terse weather assistant."
CASES = [(fmt, typed) for fmt in FORMATS for typed in (False, True) if
         not (fmt == "langchain" and not typed)]


def _summary(selection: MessageSelection[Any]) -> dict[str, Any]:
    """What the golden file records: the kept messages and each unit's decision."""

    def entry(item: Any, score: float, reason: str) -> dict[str, Any]:
        return {"first_message": item.metadata.get("chat.message_index", "system"),
                "messages": item.metadata.get("chat.message_count", 0),
                "kind": item.kind.value, "tokens": item.tokens,
                "original_tokens": item.original_tokens, "pinned": item.pinned,
                "reason": reason, "score": round(score, 6),
                "content": item.content[:120]}

    report = selection.report
    return {
        "kept": list(selection.kept), "dropped": list(selection.dropped),
        "trimmed": list(selection.trimmed), "tokens": selection.tokens,
        "token_counter": selection.token_counter,
        "token_estimates": selection.token_estimates,
        "included": [entry(e.item, e.score, e.reason.name) for e in report.included],
        "excluded": [entry(e.item, e.score, e.reason.name) for e in report.excluded],
    }


def _check_golden(name: str, summary: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    text = json.dumps(summary, indent=1, ensure_ascii=False) + "\n"
    if os.environ.get("CUPELLATION_REGENERATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path.name}: run with CUPELLATION_REGENERATE_GOLDEN=1"
    assert json.loads(text) == json.loads(path.read_text(encoding="utf-8"))


def _select(fmt: str, typed: bool, **options: Any) -> tuple[Any, MessageSelection[Any]]:
    rendered = render(fmt, SYSTEM, weather_conversation(), typed=typed)
    given: Any = rendered.messages
    if rendered.system is not None:
        given = {"model": "claude-x", "system": rendered.system, "messages": given}
    return given, select_messages_with_report(given, now=NOW, **options)


@pytest.mark.parametrize(("fmt", "typed"), CASES)
def test_golden_selection_keeps_the_rules_and_the_record(fmt: str, typed: bool) -> None:
    """A budget too small for everything: whole units are dropped (the large parallel
    exchange among them), the rest come back as the very objects given, in order, with
    no orphaned call or result, and the decisions match the golden file."""
    given, selection = _select(fmt, typed, max_tokens=150)
    listed = given["messages"] if isinstance(given, dict) else given
    sent = selection.messages["messages"] if isinstance(given, dict) else selection.messages
    assert selection.dropped, "the budget must force a choice"
    assert [id(m) for m in sent] == [id(listed[k]) for k in selection.kept]
    assert list(selection.kept) == sorted(selection.kept)
    assert problems(fmt, sent, thinking=True) == []
    assert ordering_problems(selection.messages) == []
    if isinstance(given, dict):
        assert {k: v for k, v in selection.messages.items() if k != "messages"} == {
            "model": "claude-x", "system": SYSTEM}
    _check_golden(f"{fmt}-{'sdk' if typed else 'dicts'}", _summary(selection))


@pytest.mark.parametrize(("fmt", "typed"), CASES)
def test_golden_trimmed_selection(fmt: str, typed: bool) -> None:
    """With tool outputs trimmed to 40 tokens the large exchange fits: its result is sent
    as a trimmed copy (the marker inside, the original untouched), its unit records
    originalTokens, and the rules still hold."""
    given, selection = _select(fmt, typed, max_tokens=300, trim={"ToolOutput": 40})
    listed = given["messages"] if isinstance(given, dict) else given
    sent = selection.messages["messages"] if isinstance(given, dict) else selection.messages
    assert selection.trimmed, "the large tool output must be trimmed"
    for index, message in zip(selection.kept, sent, strict=True):
        if index in selection.trimmed:
            assert message is not listed[index]
            assert "characters omitted ...]" in json.dumps(_wire_text(message))
            assert "characters omitted" not in json.dumps(_wire_text(listed[index]))
        else:
            assert message is listed[index]
    assert problems(fmt, sent, thinking=True) == []
    trimmed_units = [(e.item.original_tokens, e.item.tokens) for e in selection.report.included
                     if e.item.original_tokens is not None]
    assert trimmed_units
    assert all(original > tokens for original, tokens in trimmed_units)
    _check_golden(f"{fmt}-{'sdk' if typed else 'dicts'}-trimmed", _summary(selection))


def _wire_text(message: Any) -> Any:
    dump = getattr(message, "model_dump", None)
    return dump(mode="json") if callable(dump) and not isinstance(message, dict) else message


@pytest.mark.parametrize(("fmt", "typed"), CASES)
def test_same_list_same_answer_and_the_report_shows_conversation_order(
        fmt: str, typed: bool) -> None:
    """Asked twice, select_messages gives the same messages; the report lists the
    included units in conversation order, whatever the preset's placer (Rag places
    U-shaped)."""
    given, selection = _select(fmt, typed, max_tokens=150, policy="rag")
    again = select_messages(given, max_tokens=150, now=NOW, policy="rag")
    assert again == selection.messages
    starts = [int(e.item.metadata.get("chat.message_index", -1))
              for e in selection.report.included]
    assert starts == sorted(starts)
