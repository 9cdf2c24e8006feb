"""Benchmark select_messages: conversion, token counting and the pipeline, apart, for a
200-message agent transcript; then an agent loop whose list grows by one exchange per
turn.

    python benchmarks/bench_chat.py [--repeats 7] [--quick] [--json PATH]

Part 1, one call on 200 OpenAI messages (a system prompt, a user request, 99 tool
exchanges with tool outputs of 200 to 2,000 characters), each part timed alone:

- ``count (o200k_base)``: counting every text exactly, uncached (what the first call
  pays once per message);
- ``conversion``: reading, grouping and making the units' items, counts cached;
- ``200 ContextItems``: building 200 items of the same texts, for scale;
- ``pipeline``: the pipeline alone, untraced, on the units;
- ``select_messages (first call)``: all of it from nothing (message and count caches
  empty).

Part 2, the agent loop: turn after turn the list gains one exchange, up to 200
messages, and select_messages is called on it (its caches warm from the turn before).
For each turn, in the same process: the one-time count of the new exchange's texts
(a message's text is counted once, on the turn it arrives, whatever the caller does),
the call, the same call again (nothing new: every unit remembered), and the pipeline
alone on the same units, first run and warm (see part_two for why the first run is
the baseline). The overhead of a later call is ``(call - count - pipeline) /
pipeline``. Beside it, the same loop with a ``MessageHistory``: the exchange appended
(timed: the history reads it then, counts cached) and ``history.select`` (timed), whose
overhead is ``(select - pipeline) / pipeline``. The target: later calls add at most 20%
to the pipeline. Medians over the
last 50 turns, over ``--repeats`` loops (each with fresh texts, so nothing is counted
from an earlier loop's cache). ``--turns 99 250 500`` runs loops of other sizes too.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import cupellation
from cupellation import ContextBudget, ContextItem, MessageHistory, select_messages
from cupellation.chat import clear_message_cache, resolve_counter
from cupellation.chat._conversation import Conversation, Request, read_conversation
from cupellation.chat._select import _pipeline
from cupellation.chat._trim import check_limits

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
BUDGET = ContextBudget(max_tokens=30000, target_tokens=20000)
TARGET = 0.20
_WORDS = ("alpha", "beta", "gamma", "delta", "sigma", "omega", "error", "ok", "value",
          "result", "row", "column", "é", "数据", "42", "{", "}", ":", "\n")


def _text(seed: int, chars: int) -> str:
    """Deterministic varied text of about ``chars`` characters (distinct per seed)."""
    words: list[str] = [f"#{seed}"]
    state = seed * 2654435761 % 2**32
    size = 0
    while size < chars:
        state = (state * 1103515245 + 12345) % 2**31
        word = _WORDS[state % len(_WORDS)]
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def exchange(seed: int, turn: int) -> list[dict[str, Any]]:
    """One tool exchange: an assistant tool call and its tool result."""
    call_id = f"call_{seed}_{turn}"
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": "search", "arguments": json.dumps({"q": f"q{seed}-{turn}"})}}]},
        {"role": "tool", "tool_call_id": call_id,
         "content": _text(seed * 1000 + turn, 200 + (turn * 367) % 1800)},
    ]


def transcript(seed: int, exchanges: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful research agent."},
        {"role": "user", "content": _text(seed, 300)},
    ]
    for turn in range(exchanges):
        messages += exchange(seed, turn)
    return messages


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for message in messages:
        out.append(message["role"])
        if isinstance(message.get("content"), str):
            out.append(message["content"])
        for call in message.get("tool_calls") or ():
            out += [call["function"]["name"], call["function"]["arguments"]]
    return out


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _request(messages: list[dict[str, Any]]) -> Request:
    return Request(given=messages, system=None, has_system=False, fmt=None,
                    counter_spec="auto", limits=check_limits(None), now=NOW,
                    name="messages")


def part_one(repeats: int) -> dict[str, float]:
    """Median milliseconds of each part, for 200 messages (interleaved rounds)."""
    exact = resolve_counter("o200k_base")
    counter = resolve_counter("auto")  # what select_messages counts with
    samples: dict[str, list[float]] = {name: [] for name in (
        "count (o200k_base)", "conversion", "200 ContextItems", "pipeline",
        "select_messages (first call)")}
    pipeline, _ = _pipeline(None)
    for round_ in range(repeats):
        messages = transcript(round_ + 1, 99)
        texts = _texts(messages)
        samples["count (o200k_base)"].append(_timed(
            lambda: [exact.raw(t) for t in texts]))  # noqa: B023
        for text in texts:  # cached, so conversion is timed alone
            counter(text)
        clear_message_cache()
        conversation: list[Conversation] = []
        samples["conversion"].append(_timed(
            lambda: conversation.append(read_conversation(_request(messages)))))  # noqa: B023
        units = conversation[0].candidates
        samples["200 ContextItems"].append(_timed(lambda: [
            ContextItem(content=text, tokens=7, kind="ToolOutput", timestamp=NOW,
                        metadata={"chat.message_index": k})
            for k, text in enumerate(texts[:200])]))  # noqa: B023
        samples["pipeline"].append(statistics.median(
            _timed(lambda: pipeline.run(units, BUDGET)) for _ in range(9)))  # noqa: B023
        fresh = transcript(1000 + round_, 99)
        clear_message_cache()
        samples["select_messages (first call)"].append(_timed(
            lambda: select_messages(fresh, budget=BUDGET, now=NOW)))  # noqa: B023
    return {name: statistics.median(values) * 1000 for name, values in samples.items()}


def part_two(repeats: int, turns: int = 99, last: int = 50) -> dict[str, float]:
    """The agent loop: medians over the last ``last`` turns of ``repeats`` loops.

    Each turn, in this order: the new exchange's texts counted on a private counter
    (not the cache: the one-time count, timed); the call (timed); the same call again
    (timed: nothing new); the texts counted privately again (untimed: it leaves the
    CPU caches as the call's own count left them); the pipeline alone on the call's
    units, once (timed: "pipeline, first run") and three times more (timed, median:
    "pipeline, warm").

    The first run is the baseline the target is measured against: in the call the
    pipeline runs on units just made, right after counting new texts with tiktoken,
    whose tables evict what the CPU caches held; measured warm instead, the pipeline
    looks 10-15% faster than it ever runs in the loop, and the difference is charged
    to the call. Both ratios are reported."""
    pipeline, _ = _pipeline(None)
    counter = resolve_counter("auto")
    samples: dict[str, list[float]] = {name: [] for name in (
        "call", "repeat", "first", "warm", "count", "append", "history")}
    units = 0
    for loop in range(repeats):
        clear_message_cache()
        seed = 5000 + loop
        messages = transcript(seed, 0)
        select_messages(messages, budget=BUDGET, now=NOW)
        history = MessageHistory(messages, now=NOW)
        for turn in range(turns):
            new = exchange(seed, turn)
            messages = [*messages, *new]
            texts = _texts(new)
            # The one-time count of the new texts, on a private counter (not the cache).
            count = _timed(lambda: [counter.raw(t) for t in texts])  # noqa: B023
            call = _timed(lambda: select_messages(messages, budget=BUDGET,  # noqa: B023
                                                  now=NOW))
            repeat = _timed(lambda: select_messages(messages, budget=BUDGET,  # noqa: B023
                                                    now=NOW))
            for text in texts:  # the caches as the one-time count leaves them
                counter.raw(text)
            # The history reads the exchange when it is appended (its counts cached
            # by the call above: the append is timed without them), then selects.
            append = _timed(lambda: history.extend(new, now=NOW))  # noqa: B023
            selected = _timed(lambda: history.select(budget=BUDGET))  # noqa: B023
            conversation = read_conversation(_request(messages))  # a cache hit: the same units
            for text in texts:
                counter.raw(text)
            first = _timed(lambda: pipeline.run(conversation.candidates, BUDGET))  # noqa: B023
            warm = statistics.median(_timed(
                lambda: pipeline.run(conversation.candidates, BUDGET))  # noqa: B023
                for _ in range(3))
            if turn >= turns - last:
                for name, value in (("call", call), ("repeat", repeat), ("first", first),
                                    ("warm", warm), ("count", count), ("append", append),
                                    ("history", selected)):
                    samples[name].append(value)
                units = len(conversation.candidates)
    call, first, warm, count, repeat, append, selected = (
        statistics.median(samples[name]) * 1000 for name in (
            "call", "first", "warm", "count", "repeat", "append", "history"))

    def overhead(against: str, *, less_count: bool = True, of: str = "call") -> float:
        return statistics.median(
            (c - (n if less_count else 0.0) - p) / p for c, n, p in zip(
                samples[of], samples["count"], samples[against], strict=True))

    return {"units": units, "later call ms": call, "pipeline, first run ms": first,
            "pipeline, warm ms": warm, "new exchange's one-time count ms": count,
            "repeated call ms": repeat,
            "overhead": overhead("first"),
            "overhead, against the warm pipeline": overhead("warm"),
            "overhead with the new exchange's count": overhead("first", less_count=False),
            "overhead of a repeated call (nothing new)": overhead("warm", less_count=False,
                                                                   of="repeat"),
            "MessageHistory.extend ms": append, "MessageHistory.select ms": selected,
            "overhead of MessageHistory.select": overhead("first", less_count=False,
                                                          of="history"),
            "MessageHistory.select, against the warm pipeline": overhead(
                "warm", less_count=False, of="history")}


def _verdict(overhead: float) -> str:
    return "met" if overhead <= TARGET else "NOT met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats, a 40-turn loop")
    parser.add_argument("--turns", type=int, nargs="+", default=[99],
                        help="agent loops of these many turns (default: 99, 200 messages)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    print(f"cupellation {cupellation.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}")
    one = part_one(repeats)
    pipeline_ms = one["pipeline"]
    print("\n200 messages (99 tool exchanges), median ms, and as a multiple of the pipeline:")
    for name, value in one.items():
        print(f"  {name:<32} {value:8.3f} ms  {value / pipeline_ms:6.2f}x")
    loops: dict[int, dict[str, float]] = {}
    for turns in ([40] if args.quick else args.turns):
        two = loops[turns] = part_two(repeats, turns=turns, last=min(50, (turns + 1) // 2))
        print(f"\nAgent loop, one exchange per turn, {turns} turns (medians of the last "
              f"{min(50, (turns + 1) // 2)}; at the end {two['units']} units):")
        for name in ("later call ms", "pipeline, first run ms", "pipeline, warm ms",
                     "new exchange's one-time count ms", "repeated call ms",
                     "MessageHistory.extend ms", "MessageHistory.select ms"):
            print(f"  {name:<48} {two[name]:8.3f}")
        for name in ("overhead", "overhead, against the warm pipeline",
                     "overhead with the new exchange's count",
                     "overhead of a repeated call (nothing new)",
                     "overhead of MessageHistory.select",
                     "MessageHistory.select, against the warm pipeline"):
            print(f"  {name:<48} {two[name] * 100:7.1f}%")
        print(f"  target: later calls add <= {TARGET:.0%} to the pipeline's untraced time "
              f"(its first run on the turn's units; the new exchange's one-time count "
              f"apart): select_messages {_verdict(two['overhead'])}, MessageHistory.select "
              f"{_verdict(two['overhead of MessageHistory.select'])} (its reading done "
              f"on append: {two['MessageHistory.extend ms']:.3f} ms per exchange)")
    first = next(iter(loops.values()))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "part_one_ms": one, "agent_loop": first,
            "agent_loops": {str(turns): two for turns, two in loops.items()},
            "target": TARGET, "met": first["overhead"] <= TARGET,
            "met by MessageHistory": first["overhead of MessageHistory.select"] <= TARGET},
            indent=2) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
