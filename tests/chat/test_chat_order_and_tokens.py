"""Conversation order survives the pipeline; token counts say how they were made."""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import tiktoken  # a dev dependency: the tiktoken test runs, never skips

from cupellation import (
    ChronologicalPlacer,
    ContextBudget,
    GreedySlice,
    Pipeline,
    RecencyScorer,
    ReflexiveScorer,
)
from cupellation import chat as chat_module
from cupellation.chat import POSITION_KEY, TOKENS_KEY, chat_to_items, estimate_tokens

END = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_tiktoken_cache() -> Iterator[None]:
    """Each test looks tiktoken up afresh (the lookup is cached per process)."""
    chat_module._tiktoken_counter.cache_clear()
    yield
    chat_module._tiktoken_counter.cache_clear()


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


def test_a_missing_tiktoken_falls_back_to_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    """When tiktoken is not installed the estimate is used."""
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes the import fail
    items = chat_to_items([{"role": "user", "content": "x" * 10}])
    assert items[0].metadata[TOKENS_KEY] == "estimate"
    assert items[0].tokens == 3


def test_an_unloadable_encoding_falls_back_with_one_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Offline, tiktoken cannot download its encoding: the reader logs one warning
    and estimates, and does not try again for the next transcript."""
    calls: list[str] = []

    def get_encoding(name: str) -> Any:
        calls.append(name)
        raise ConnectionError("no network")

    fake = types.ModuleType("tiktoken")
    fake.get_encoding = get_encoding  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tiktoken", fake)
    with caplog.at_level(logging.WARNING, logger="cupellation.chat"):
        first = chat_to_items([{"role": "user", "content": "hello"}])
        second = chat_to_items([{"role": "user", "content": "again"}])
    assert first[0].metadata[TOKENS_KEY] == second[0].metadata[TOKENS_KEY] == "estimate"
    assert calls == ["o200k_base"]
    assert len([r for r in caplog.records if "tiktoken" in r.getMessage()]) == 1


def test_a_loadable_encoding_counts_with_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the encoding loads, tiktoken counts (special-token text included)."""
    # A byte-level encoding built in memory: tiktoken's real encoder, no download.
    encoding = tiktoken.Encoding(
        name="bytes", pat_str=r"\S+|\s+",
        mergeable_ranks={bytes([b]): b for b in range(256)},
        special_tokens={"<|endoftext|>": 256},
    )
    monkeypatch.setattr(tiktoken, "get_encoding", lambda name: encoding)
    items = chat_to_items([{"role": "user", "content": "héllo <|endoftext|>"}],
                          tiktoken_encoding="bytes")
    assert items[0].metadata[TOKENS_KEY] == "tiktoken:bytes"
    assert items[0].tokens == len("héllo <|endoftext|>".encode())
