"""The spec's analytics on a message list (issue 24, item 4): the unit is what
``select_messages`` selects, the answers name messages, and every answer agrees with
``select_messages`` itself at the budget or under the policy it speaks of."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    DiagnosticTraceCollector,
    GreedySlice,
    Pipeline,
    PriorityScorer,
    QuotaSlice,
    SelectOptions,
    TraceDetailLevel,
    select_messages_with_report,
)
from cupellation.analytics import (
    FIND_MIN_BUDGET_GUARD_MESSAGE,
    MARGINAL_GUARD_MESSAGE,
    MIN_VARIANTS_MESSAGE,
    ItemStatus,
    find_min_budget_for_message,
    get_marginal_messages,
    message_budget_sweep,
    message_policy_sensitivity,
    message_units,
    scaled_budget,
)
from cupellation.exceptions import (
    ConfigurationError,
    NonMonotonicSlicerError,
    PinnedBudgetError,
    SpecArgumentError,
)
from cupellation.slicing import QuotaEntry


def _call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "' + call_id + '"}'}}


#: Older messages are longer, so that the chat preset (recency first) includes units
#: in an order that grows with the budget: inclusion is monotonic, as the chapter's
#: search assumes (the brute-force test checks that premise too).
TRANSCRIPT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a terse weather assistant."},
    {"role": "user", "content": "What is the weather in Paris and in Rome today? " * 20},
    {"role": "assistant", "content": None, "tool_calls": [_call("paris"), _call("rome")]},
    {"role": "tool", "tool_call_id": "paris", "content": "Paris: sunny, 20C, light wind. " * 8},
    {"role": "tool", "tool_call_id": "rome", "content": "Rome: rain, 15C, humid air. " * 8},
    {"role": "assistant", "content": "Paris is sunny; Rome is rainy. " * 4},
    {"role": "user", "content": "Thanks. " * 3},
    {"role": "assistant", "content": "Welcome."},
    {"role": "user", "content": "And Berlin?"},
]
EXCHANGE = (2, 3, 4)
OPTIONS = SelectOptions(token_counter="estimate", max_tokens=400)


def _kept_at(size: int, options: SelectOptions = OPTIONS) -> tuple[int, ...] | None:
    """What select_messages keeps at ``size`` (the budget scaled as the search scales
    it), or None when the pinned messages alone do not fit."""
    budget = scaled_budget(ContextBudget(max_tokens=400, target_tokens=400), size)
    try:
        return select_messages_with_report(TRANSCRIPT, options.replace(
            budget=budget, max_tokens=None)).kept
    except PinnedBudgetError:
        return None


def test_units_are_select_messages_units_with_the_exchange_whole() -> None:
    """The parallel tool calls and both results are one unit; the system message and
    the last user message are pinned, as select_messages pins them."""
    units = message_units(TRANSCRIPT, OPTIONS)
    assert [unit.indices for unit in units] == [(0,), (1,), EXCHANGE, (5,), (6,), (7,), (8,)]
    assert [unit.pinned for unit in units] == [True, False, False, False, False, False, True]
    assert units[2].messages == tuple(TRANSCRIPT[2:5])
    assert units[2].kind == "ToolOutput"


def test_a_dropped_exchange_is_dropped_whole_at_every_budget() -> None:
    """Over a sweep of 0..400 tokens, each point keeps what select_messages keeps there,
    and the exchange's three messages are kept or dropped together at every budget
    (both ways seen)."""
    sizes = list(range(0, 401, 10))
    points = message_budget_sweep(TRANSCRIPT, sizes, OPTIONS)
    seen = set()
    for size, point in zip(sizes, points, strict=True):
        expected = _kept_at(size)
        if expected is None:
            assert point.selection is None
            assert point.failure is not None
            continue
        assert point.selection is not None
        assert point.selection.kept == expected, size
        inside = {k in point.selection.kept for k in EXCHANGE}
        assert len(inside) == 1, size
        seen |= inside
    assert seen == {True, False}


def test_min_budget_for_each_message_is_the_smallest_budget_that_keeps_it() -> None:
    """For every message, find_min_budget_for_message equals the smallest budget at
    which select_messages keeps it, found by trying every budget from 0 to the
    ceiling (inclusion is monotonic here: checked too). A tool result's answer is
    its whole exchange's."""
    ceiling = 520
    kept = [_kept_at(size) for size in range(ceiling + 1)]
    answers = []
    for index in range(len(TRANSCRIPT)):
        holds = [k is not None and index in k for k in kept]
        first = holds.index(True) if True in holds else None
        assert first is None or all(holds[first:]), f"not monotonic for {index}"
        answer = find_min_budget_for_message(TRANSCRIPT, index, ceiling, OPTIONS)
        assert answer == first, index
        answers.append(answer)
    assert answers[2] == answers[3] == answers[4]
    assert find_min_budget_for_message(TRANSCRIPT, TRANSCRIPT[3], ceiling, OPTIONS) == answers[3]
    assert len(set(answers)) > 3
    assert answers[1] is not None


def test_trim_is_honoured_by_the_min_budget() -> None:
    """With trim= cutting the tool results, the exchange is smaller and its minimal
    budget is lower, and it equals the brute-force answer under that trim."""
    trimmed = OPTIONS.replace(trim={"ToolOutput": 20})
    plain = find_min_budget_for_message(TRANSCRIPT, 3, 400, OPTIONS)
    cut = find_min_budget_for_message(TRANSCRIPT, 3, 400, trimmed)
    assert plain is not None
    assert cut is not None
    assert cut < plain
    brute = next(size for size in range(401)
                 if (k := _kept_at(size, trimmed)) is not None and 3 in k)
    assert cut == brute


def test_the_budget_search_keeps_the_specs_guards_and_messages() -> None:
    """A quota slicer raises the chapter's guard messages; a message not in the list,
    or an index outside it, raises "targetItem must be an element of items"; a
    ceiling below the unit's tokens raises the chapter's ceiling message."""
    quota = SelectOptions(token_counter="estimate", max_tokens=400, policy=Pipeline(
        PriorityScorer(), QuotaSlice(GreedySlice(), [QuotaEntry("Message")])))
    with pytest.raises(NonMonotonicSlicerError) as caught:
        find_min_budget_for_message(TRANSCRIPT, 1, 400, quota)
    assert str(caught.value) == FIND_MIN_BUDGET_GUARD_MESSAGE
    with pytest.raises(NonMonotonicSlicerError) as marginal:
        get_marginal_messages(TRANSCRIPT, 10, quota)
    assert str(marginal.value) == MARGINAL_GUARD_MESSAGE
    for stranger in ({"role": "user", "content": "And Berlin?"}, 9, -1):
        with pytest.raises(SpecArgumentError) as missing:
            find_min_budget_for_message(TRANSCRIPT, stranger, 400, OPTIONS)
        assert str(missing.value) == "targetItem must be an element of items"
    with pytest.raises(SpecArgumentError) as low:
        find_min_budget_for_message(TRANSCRIPT, 3, 5, OPTIONS)
    assert str(low.value) == "searchCeiling must be >= targetItem.Tokens"


def test_marginal_messages_are_kept_at_the_budget_and_dropped_with_less() -> None:
    """get_marginal_messages names the units select_messages keeps at the budget and
    drops at the budget less the slack, the exchange whole."""
    slack = 200
    full, reduced = _kept_at(400), _kept_at(200)
    assert full is not None
    assert reduced is not None
    marginal = get_marginal_messages(TRANSCRIPT, slack, OPTIONS)
    named = [k for unit in marginal for k in unit.indices]
    assert named == [k for k in full if k not in reduced]
    assert EXCHANGE in [unit.indices for unit in marginal]


def test_policy_sensitivity_on_messages_names_the_units_that_swing() -> None:
    """Each variant's selection is select_messages' under that policy at the one
    budget; the swings are exactly the units kept by some and dropped by others."""
    variants: list[tuple[str, Any]] = [("chat", "chat"), ("doc", "documentqa"),
                                       ("tools", "tooluse")]
    found = message_policy_sensitivity(TRANSCRIPT, variants, OPTIONS.replace(max_tokens=150))
    kept = {label: select_messages_with_report(TRANSCRIPT, OPTIONS.replace(
        max_tokens=150, policy=policy)).kept for label, policy in variants}
    assert {label: chosen.kept for label, chosen in found.variants} == kept
    expected = [unit.indices for unit in message_units(TRANSCRIPT, OPTIONS)
                if len({unit.indices[0] in k for k in kept.values()}) == 2]
    assert [swing.unit.indices for swing in found.diffs] == expected
    assert expected
    for swing in found.diffs:
        assert [status for _, status in swing.statuses] == [
            ItemStatus.INCLUDED if swing.unit.indices[0] in kept[label] else ItemStatus.EXCLUDED
            for label, _ in variants]


def test_policy_sensitivity_on_messages_refuses_what_the_chapter_refuses() -> None:
    """One variant raises the chapter's message; no budget in the options is named."""
    with pytest.raises(SpecArgumentError) as one:
        message_policy_sensitivity(TRANSCRIPT, [("chat", "chat")], OPTIONS)
    assert str(one.value) == MIN_VARIANTS_MESSAGE
    with pytest.raises(ConfigurationError) as none:
        message_policy_sensitivity(TRANSCRIPT, [("a", "chat"), ("b", "rag")],
                                   token_counter="estimate")
    assert none.value.field == "budget"


def test_the_analytics_are_dry_runs_and_send_the_collector_nothing() -> None:
    """A collector in the options receives no event from a sweep, a search, the
    marginal units or a sensitivity comparison (select_messages itself does send)."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    recording = OPTIONS.replace(collector=collector)
    message_budget_sweep(TRANSCRIPT, [100, 400], recording)
    find_min_budget_for_message(TRANSCRIPT, 3, 400, recording)
    get_marginal_messages(TRANSCRIPT, 50, recording)
    message_policy_sensitivity(TRANSCRIPT, [("a", "chat"), ("b", "rag")], recording)
    assert collector.events == ()
    select_messages_with_report(TRANSCRIPT, recording)
    assert collector.events != ()
