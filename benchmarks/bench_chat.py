"""Benchmark select_messages: conversion, token counting and the pipeline, apart, for a
200-message agent transcript; then an agent loop whose list grows by one exchange per
turn.

    python benchmarks/bench_chat.py [--repeats 7] [--quick] [--turns 99 250 500]
                                    [--json PATH]

Every figure is thread CPU time (``_harness.time_calls``); ``--mode harness``
collects garbage before each timed call (labelled in the output).

Part 1, one call on 200 OpenAI messages (a system prompt, a user request, 99 tool
exchanges with tool outputs of 200 to 2,000 characters), each part timed alone:

- ``count (o200k_base)``: counting every text exactly, uncached (what the first call
  pays once per message);
- ``conversion``: reading, grouping and making the units' items, counts cached;
- ``200 ContextItems``: building 200 items of the same texts, for scale;
- ``pipeline``: the pipeline alone, untraced, on the units;
- ``select_messages (first call)``: all of it from nothing (message and count caches
  empty).

Part 2, the agent loop: turn after turn the conversation gains one exchange, up to 200
messages. Each turn, in this order:

1. ``count``: the new exchange's texts counted through the shared counter (timed
   apart and set aside: a message's text is counted once, on the turn it arrives,
   whatever the caller does; this also caches the counts the calls below use);
2. ``history turn``: ``MessageHistory.extend(new)`` then ``history.select()``, timed
   as one (the whole turn: the new messages are read, validated and grouped on
   extend);
3. ``list turn``: ``select_messages(messages)`` on the whole list;
4. ``warm pipeline``: the pipeline alone on the same units, once untimed, then the
   median of three timed runs.

Each turn's ratios are its turns over its warm pipeline; a loop's figure is the median
of its last 50 turns (or last half); ``--repeats`` loops (fresh texts each, so no
count comes from an earlier loop's cache) give the median and min-max. The target: a
turn adds at most 20% to the warm pipeline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:  # imported by path (a smoke test) rather than run
    sys.path.insert(0, str(_HERE))

from _harness import (  # noqa: E402
    Mode,
    Spread,
    add_common_options,
    environment,
    header,
    measure,
    payload,
    time_calls,
    write_json,
)
from cupellation import ContextBudget, ContextItem, MessageHistory, select_messages  # noqa: E402
from cupellation.chat import clear_message_cache, resolve_counter  # noqa: E402
from cupellation.chat._conversation import Conversation, Request, read_conversation  # noqa: E402
from cupellation.chat._select import _pipeline  # noqa: E402
from cupellation.chat._trim import check_limits  # noqa: E402

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


#: How single calls are timed: loop mode (the default) or, with ``--mode harness``, a
#: collection before each (set once by main).
TIMING = {"mode": Mode.LOOP}


def _timed(action: Callable[[], object]) -> float:
    """Thread CPU seconds of one call of ``action`` (the harness's clock and mode)."""
    return time_calls(action, 1, mode=TIMING["mode"])[0]


def _timed_wall(action: Callable[[], object]) -> tuple[float, float]:
    """Thread CPU and wall-clock seconds of one call of ``action``."""
    cpu, _, wall = time_calls(action, 1, mode=TIMING["mode"])
    return cpu, wall


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


TURN_SAMPLES = ("count", "history", "list", "warm", "history wall", "list wall")


def _turn(state: dict[str, Any], seed: int, turn: int, counter: Any, pipeline: Any
          ) -> dict[str, float]:
    """One turn of the loop: the CPU seconds of its four parts (see the module doc)."""
    history: MessageHistory[Any] = state["history"]
    new = exchange(seed, turn)
    messages = state["messages"] = [*state["messages"], *new]
    texts = _texts(new)
    count = _timed(lambda: [counter(t) for t in texts])

    def history_turn() -> None:
        history.extend(new, now=NOW)
        history.select(budget=BUDGET)

    taken, taken_wall = _timed_wall(history_turn)
    listed, listed_wall = _timed_wall(lambda: select_messages(messages, budget=BUDGET, now=NOW))
    units = read_conversation(_request(messages)).candidates  # a cache hit: the same units
    state["units"] = len(units)
    pipeline.run(units, BUDGET)
    warm = statistics.median(_timed(lambda: pipeline.run(units, BUDGET)) for _ in range(3))
    return {"count": count, "history": taken, "list": listed, "warm": warm,
            "history wall": taken_wall, "list wall": listed_wall}


def part_two(repeats: int, turns: int = 99, last: int = 50) -> dict[str, Any]:
    """The agent loop: per loop the median over its last ``last`` turns of each turn's
    ratios to its warm pipeline; over loops, median and min-max (see the module doc)."""
    pipeline, _ = _pipeline(None)
    counter = resolve_counter("auto")
    per_loop: dict[str, list[float]] = {name: [] for name in (
        "history_turn/warm_pipeline", "list_turn/warm_pipeline", "count/warm_pipeline")}
    ms: dict[str, list[float]] = {name: [] for name in TURN_SAMPLES}
    units = 0
    for loop in range(repeats):
        clear_message_cache()
        seed = 5000 + loop
        messages = transcript(seed, 0)
        select_messages(messages, budget=BUDGET, now=NOW)
        state: dict[str, Any] = {"messages": messages,
                                 "history": MessageHistory(messages, now=NOW)}
        samples = [_turn(state, seed, turn, counter, pipeline) for turn in range(turns)]
        kept = samples[-last:]
        for name, part in (("history_turn", "history"), ("list_turn", "list"),
                           ("count", "count")):
            per_loop[f"{name}/warm_pipeline"].append(
                statistics.median(s[part] / s["warm"] for s in kept))
        for name in TURN_SAMPLES:
            ms[name].append(statistics.median(s[name] for s in kept) * 1000.0)
        units = state["units"]
    return {"units": units, "turns": turns, "last": last,
            "ratios": {name: Spread.of(values) for name, values in per_loop.items()},
            "cpu_ms": {name: Spread.of(values) for name, values in ms.items()}}


def main(argv: list[str] | None = None) -> int:
    """Run both parts; print them; optionally write JSON."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--turns", type=int, nargs="+", default=[99],
                        help="agent loops of these many turns (default: 99, 200 messages)")
    add_common_options(parser, quick_help="3 repeats, a 40-turn loop")
    args = parser.parse_args(argv)
    TIMING["mode"] = args.mode
    repeats = 3 if args.quick else args.repeats
    env = environment()
    print(header("bench_chat: select_messages and MessageHistory", args.mode, env))
    one = part_one(repeats)
    pipeline_ms = one["pipeline"]
    print("\n200 messages (99 tool exchanges), median CPU ms, and as a multiple of the "
          "pipeline:")
    for name, value in one.items():
        print(f"  {name:<32} {value:8.3f} ms  {value / pipeline_ms:6.2f}x")
    ratios: dict[str, Any] = {}
    figures: dict[str, Any] = {name: measure(Spread.of([value]), "ms")
                               for name, value in one.items()}
    loops: dict[str, Any] = {}
    for k, turns in enumerate([40] if args.quick else args.turns):
        two = part_two(repeats, turns=turns, last=min(50, (turns + 1) // 2))
        suffix = "" if k == 0 else f"@{turns}_turns"
        for name, spread in two["ratios"].items():
            ratios[name + suffix] = measure(spread, "x")
        loops[str(turns)] = {"units": two["units"], **{
            name: spread.to_dict() for name, spread in (*two["ratios"].items(),
                                                        *two["cpu_ms"].items())}}
        print(f"\nAgent loop, one exchange per turn, {turns} turns (per loop the median of "
              f"the last {two['last']}; median (min-max) over {repeats} loops; at the end "
              f"{two['units']} units); thread CPU ms, wall ms on the \"wall\" lines:")
        for name, spread in two["cpu_ms"].items():
            print(f"  {name:<40} {spread.text(3)}")
        for name, spread in two["ratios"].items():
            verdict = " (set aside, not judged)" if name.startswith("count") else (
                f"  {'met' if spread.median <= 1 + TARGET else 'MISSED'} (target <= "
                f"{1 + TARGET}x)")
            print(f"  {name:<40} {spread.text(2, 'x')}{verdict}")
    print("\ntargets: python benchmarks/check.py judges them (benchmarks/targets.toml)")
    if args.json_path is not None:
        write_json(args.json_path, payload(
            "chat", mode=args.mode, quick=args.quick, env=env, ratios=ratios,
            figures=figures, repeats=repeats, agent_loops=loops, target=1 + TARGET))
    return 0


if __name__ == "__main__":
    sys.exit(main())
