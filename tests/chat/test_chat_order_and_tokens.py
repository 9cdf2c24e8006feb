"""Conversation order survives the pipeline; token counts say how they were made."""

from __future__ import annotations

import logging
import sys
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cupellation import (
    ChronologicalPlacer,
    ContextBudget,
    GreedySlice,
    Pipeline,
    RecencyScorer,
    ReflexiveScorer,
)
from cupellation.chat import (
    POSITION_KEY,
    TOKENS_KEY,
    TokenEstimateWarning,
    chat_to_items,
    count_tokens,
    estimate_tokens,
)
from cupellation.chat import _tokens as tokens_module

END = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def no_token_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """As on a machine without the tokens extra: no shipped data, nothing in tiktoken's
    cache, nothing loaded yet, the once-per-process notice not yet given."""
    monkeypatch.setattr(tokens_module, "_shipped_file", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tokens_module, "_ENCODINGS", {})
    monkeypatch.setattr(tokens_module, "_RESOLVED", {})
    monkeypatch.setattr(tokens_module, "_fallback_said", False)


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "system prompt"}]
    for turn in range(turns):
        # Long and short turns alternate, so a density-ordered slice is not
        # in conversation order.
        text = f"turn {turn} " + ("padding " * (40 if turn % 2 else 2))
        messages.append({"role": "user" if turn % 2 == 0 else "assistant", "content": text})
    return messages


def test_chronological_placement_restores_conversation_order() -> None:
    """Whatever the slicer's order, the ChronologicalPlacer puts the selected
    items back in conversation order (synthesized timestamps)."""
    items = chat_to_items(_conversation(12), end=END, use_tiktoken=False)
    pipeline = Pipeline(scorer=ReflexiveScorer(), slicer=GreedySlice(),
                        placer=ChronologicalPlacer())
    window = pipeline.run(items, ContextBudget(max_tokens=400, target_tokens=300))
    positions = [item.metadata[POSITION_KEY] for item in window]
    assert len(window) > 3
    assert positions == sorted(positions)
    assert window[0].pinned


def test_synthesized_timestamps_end_now_and_rank_later_turns_higher() -> None:
    """Without message timestamps the last item gets ``end`` and earlier ones are
    1 µs apart, so RecencyScorer ranks later turns strictly higher."""
    items = chat_to_items(_conversation(4), end=END, use_tiktoken=False)
    assert items[-1].timestamp == END
    assert [item.timestamp for item in items] == [
        END - (len(items) - 1 - k) * timedelta(microseconds=1) for k in range(len(items))]
    assert {item.metadata["chat.timestamp"] for item in items} == {"synthesized"}
    scores = RecencyScorer().score_all(items)
    assert scores == sorted(scores)
    assert len(set(scores)) == len(scores)


def test_message_timestamps_are_kept_and_gaps_are_filled_in_order() -> None:
    """A message's own timestamp stays exact on its first item, its later items
    follow by 1 µs, and untimed messages are placed 1 µs after the previous
    timed item (or before the first)."""
    t0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    messages = [
        {"role": "user", "content": "before"},
        {"role": "user", "content": "timed", "timestamp": "2026-01-01T09:00:00Z"},
        {"role": "assistant", "content": "call", "created_at": t0.timestamp() + 60,
         "tool_calls": [{"id": "x", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "result"},
    ]
    items = chat_to_items(messages, use_tiktoken=False)
    micro = timedelta(microseconds=1)
    assert [item.timestamp for item in items] == [
        t0 - micro, t0, t0 + timedelta(minutes=1), t0 + timedelta(minutes=1) + micro,
        t0 + timedelta(minutes=1) + 2 * micro,
    ]
    assert [item.metadata["chat.timestamp"] for item in items] == [
        "synthesized", "message", "message", "message", "synthesized"]


def test_timestamps_need_not_be_synthesized() -> None:
    """synthesize_timestamps=False leaves untimed items without a timestamp."""
    items = chat_to_items([{"role": "user", "content": "a"},
                           {"role": "user", "content": "b", "timestamp": "2026-01-01T00:00:00Z"}],
                          synthesize_timestamps=False, use_tiktoken=False)
    assert items[0].timestamp is None
    assert "chat.timestamp" not in items[0].metadata
    assert items[1].timestamp == datetime(2026, 1, 1, tzinfo=UTC)


def test_a_token_counter_is_used_when_given() -> None:
    """token_counter counts every item; the items say so."""
    items = chat_to_items([{"role": "user", "content": "hello world"}], token_counter=len)
    assert items[0].tokens == 11
    assert items[0].metadata[TOKENS_KEY] == "counter"


def test_without_tiktoken_tokens_are_the_documented_estimate() -> None:
    """use_tiktoken=False gives ceil(characters / 4), marked as an estimate."""
    items = chat_to_items([{"role": "user", "content": "x" * 9}], use_tiktoken=False)
    assert items[0].tokens == 3 == estimate_tokens("x" * 9)
    assert items[0].metadata[TOKENS_KEY] == "estimate"
    assert estimate_tokens("a") == 1


def test_a_missing_tiktoken_falls_back_to_the_estimate(
        no_token_data: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """When tiktoken is not installed the estimate is used, and said."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes the import fail
    with pytest.warns(TokenEstimateWarning, match="tiktoken is not installed"):
        items = chat_to_items([{"role": "user", "content": "x" * 10}])
    assert items[0].metadata[TOKENS_KEY] == "estimate"
    assert items[0].tokens == 3


def test_missing_data_falls_back_with_one_warning_and_no_download(
        no_token_data: None, caplog: pytest.LogCaptureFixture) -> None:
    """Offline without the data, counting falls back to the estimate: one warning
    (warnings and the cupellation logger) for the process, not one per transcript, and
    nothing is fetched (the sockets are blocked)."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(
            logging.WARNING, logger="cupellation.chat"):
        warnings.simplefilter("always")
        first = chat_to_items([{"role": "user", "content": "hello"}])
        second = chat_to_items([{"role": "user", "content": "again"}])
    assert first[0].metadata[TOKENS_KEY] == second[0].metadata[TOKENS_KEY] == "estimate"
    assert len([w for w in caught if issubclass(w.category, TokenEstimateWarning)]) == 1
    assert len([r for r in caplog.records if "exact token counts" in r.getMessage()]) == 1


def test_an_encoding_without_offline_data_is_estimated_and_said(no_token_data: None) -> None:
    """Only cl100k_base and o200k_base are counted offline; another name is estimated,
    with the warning naming it."""
    with pytest.warns(TokenEstimateWarning, match="p50k_base"):
        items = chat_to_items([{"role": "user", "content": "hello"}],
                              tiktoken_encoding="p50k_base")
    assert items[0].metadata[TOKENS_KEY] == "estimate"


def test_the_encoding_counts_exactly_from_the_installed_data() -> None:
    """With the tokens extra installed (the dev extra has it), o200k_base counts
    exactly, special-token text as plain text, and cl100k_base when asked."""
    text = "héllo <|endoftext|>"
    items = chat_to_items([{"role": "user", "content": text}])
    assert items[0].metadata[TOKENS_KEY] == "tiktoken:o200k_base"
    assert items[0].tokens == count_tokens(text, "o200k_base")
    items = chat_to_items([{"role": "user", "content": text}], tiktoken_encoding="cl100k_base")
    assert items[0].metadata[TOKENS_KEY] == "tiktoken:cl100k_base"
    assert items[0].tokens == count_tokens(text, "cl100k_base")
