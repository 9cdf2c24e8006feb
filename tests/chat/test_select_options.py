"""select_messages' options and promises beyond the rules: budgets and policies, the
collector, shapes in and out, input that breaks a rule, Anthropic thinking, and the
per-conversation cache of a growing agent loop."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cupellation import (
    ContextBudget,
    DiagnosticTraceCollector,
    KindScorer,
    Pipeline,
    RunInfo,
    TraceDetailLevel,
    UShapedPlacer,
    select_messages,
)
from cupellation.chat import (
    clear_message_cache,
    ordering_problems,
    select_messages_with_report,
)
from cupellation.events import RunStarted
from cupellation.exceptions import (
    ConfigurationError,
    DecodeError,
    InvalidValueError,
    PinnedBudgetError,
)
from cupellation.policy import get_preset

from ._conversations import FORMATS, render, weather_conversation

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def _chat(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn} " + "word " * 20})
        messages.append({"role": "assistant", "content": f"answer {turn} " + "word " * 20})
    return messages


def _exchange(number: int) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"c{number}", "type": "function",
                 "function": {"name": "f", "arguments": f'{{"n": {number}}}'}}]},
            {"role": "tool", "tool_call_id": f"c{number}", "content": f"result {number}"}]


def test_the_budget_comes_from_max_tokens_budget_or_the_policy() -> None:
    """max_tokens (target defaults to it), a ContextBudget, or the policy's own budget;
    giving both, or none, is a ConfigurationError naming the setting."""
    messages = _chat(6)
    small = select_messages_with_report(messages, max_tokens=120, now=NOW)
    assert 0 < small.tokens <= 120
    same = select_messages_with_report(messages, budget=ContextBudget(120, 120), now=NOW)
    assert same.kept == small.kept
    tighter = select_messages_with_report(messages, max_tokens=200, target_tokens=60, now=NOW)
    assert tighter.tokens <= 60
    policy = get_preset("chat").with_budget(ContextBudget(120, 120))
    assert select_messages_with_report(messages, policy=policy, now=NOW).kept == small.kept
    with pytest.raises(ConfigurationError, match="budget"):
        select_messages(messages, max_tokens=10, budget=ContextBudget(10, 10))
    with pytest.raises(ConfigurationError, match="max_tokens"):
        select_messages(messages)


def test_units_are_placed_in_conversation_order_whatever_the_placer() -> None:
    """A pipeline placing U-shaped still returns (and reports) the conversation's
    order; it is not deduplicated either: two equal messages are both kept."""
    messages = [{"role": "user", "content": "yes"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "yes"}]
    pipeline = Pipeline(scorer=KindScorer(), placer=UShapedPlacer())
    selection = select_messages_with_report(messages, policy=pipeline, max_tokens=1000,
                                            now=NOW)
    assert selection.messages == messages
    assert all(a is b for a, b in zip(selection.messages, messages, strict=True))
    assert [e.item.metadata["chat.message_index"] for e in selection.report.included] == [0, 1, 2]


def test_the_collector_receives_the_run() -> None:
    """A collector gets the run's events, like Pipeline.run's; its report names the
    units."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    select_messages(_chat(2), max_tokens=1000, collector=collector, now=NOW)
    report = collector.build_report()
    assert report.total_candidates == 5
    assert report.included[0].item.content == "system: You are terse."


def test_shapes_in_are_shapes_out() -> None:
    """A tuple gives a tuple; a mapping gives a copy of it with its list replaced
    (Responses' 'input' too), every other key kept."""
    messages = tuple(_chat(1))
    assert isinstance(select_messages(messages, max_tokens=1000), tuple)
    body = {"model": "gpt-x", "input": [{"role": "user", "content": "hi"}], "store": False}
    out = select_messages(body, max_tokens=1000)
    assert out == body
    assert out is not body


def test_a_list_that_breaks_a_rule_is_refused_naming_the_message() -> None:
    """Orphaned results, unanswered calls, an Anthropic list starting with the
    assistant: a DecodeError naming the message and field, and the provider's words;
    ordering_problems lists the same without raising."""
    orphan = [{"role": "user", "content": "hi"},
              {"role": "tool", "tool_call_id": "c9", "content": "x"}]
    with pytest.raises(DecodeError, match=r"messages\[1\]\.tool_call_id.*preceeding"):
        select_messages(orphan, max_tokens=100)
    unanswered = [{"role": "user", "content": "hi"}, _exchange(1)[0]]
    with pytest.raises(DecodeError, match=r"messages\[1\]\.tool_calls.*c1"):
        select_messages(unanswered, max_tokens=100)
    first = [{"role": "assistant", "content": "hello"}, {"role": "user", "content": "hi"}]
    with pytest.raises(DecodeError, match="first message must use"):
        select_messages(first, format="anthropic", max_tokens=100)
    assert len(ordering_problems(orphan)) == 1
    assert ordering_problems(_chat(2)) == []


def test_formats_that_mix_or_do_not_fit_are_refused() -> None:
    """A list mixing OpenAI and Anthropic features names both; a system prompt passed
    apart is Anthropic's only; an unknown format name is refused."""
    mixed = [{"role": "tool", "tool_call_id": "c", "content": "x"},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]
    with pytest.raises(DecodeError, match=r"messages\[0\] has role 'tool'.*tool_result"):
        select_messages(mixed, max_tokens=100)
    with pytest.raises(DecodeError, match="only in the Anthropic format"):
        select_messages(_chat(1), system="x", format="openai", max_tokens=100)
    with pytest.raises(InvalidValueError, match="format"):
        select_messages(_chat(1), format="gemini", max_tokens=100)  # type: ignore[call-overload]


def _thinking_loop() -> list[dict[str, Any]]:
    """Two Anthropic turns with thinking; the second still in its tool loop."""
    return [
        {"role": "user", "content": "first task " + "word " * 30},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan one", "signature": "s1"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "big " * 300}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "done", "signature": "s2"},
            {"type": "text", "text": "first done"}]},
        {"role": "user", "content": "second task"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "plan two", "signature": "s3"},
            {"type": "tool_use", "id": "t2", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                      "content": "small"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "again", "signature": "s4"},
            {"type": "tool_use", "id": "t3", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t3",
                                      "content": "small too"}]},
    ]


def test_the_start_of_the_trailing_thinking_turn_is_pinned_and_sent_unchanged() -> None:
    """The last turn of an Anthropic tool loop with thinking starts with one pinned unit
    (its user message, the first assistant message with its thinking block, and that
    message's results), so the turn always starts with its thinking block; its later
    exchanges are units of their own and may be left out; thinking is sent unchanged."""
    messages = _thinking_loop()
    selection = select_messages_with_report(messages, system="terse", max_tokens=200,
                                            now=NOW)
    assert selection.kept == (0, 3, 4, 5, 6, 7, 8)
    units = {(e.item.metadata["chat.message_index"], e.item.metadata["chat.message_count"]):
             e.item.pinned for e in selection.report.included
             if "chat.message_index" in e.item.metadata}
    assert units[(4, 3)] is True
    assert units[(7, 2)] is False
    assert all(a is messages[k] for a, k in zip(selection.messages, selection.kept, strict=True))
    assert selection.thinking_stripped == ()
    tight = select_messages_with_report(messages, system="terse", max_tokens=80, now=NOW)
    assert {0, 4, 5, 6} <= set(tight.kept)  # the start stays ...
    assert {7, 8}.isdisjoint(tight.kept)  # ... and the later exchange is left out


def test_the_last_turns_start_is_pinned_so_the_window_ends_with_the_lists_turn() -> None:
    """Anthropic: the user message that starts the last turn is pinned, so no budget
    ends the window with an earlier tool-use turn (whose assistant message need not
    start with a thinking block, which Anthropic refuses when thinking is on, found by
    the property test); when the list grows by a new turn, the pin moves to it and the
    earlier question is scored again (the cached conversation regroups it)."""
    call = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    messages: list[Any] = [
        {"role": "user", "content": "first question " + "word " * 30},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "result " * 10}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "s"},
            {"type": "text", "text": "an answer " + "word " * 40}]},
        {"role": "user", "content": "and now?"}]
    tight = select_messages_with_report(messages, system="terse", max_tokens=120,
                                        policy="documentqa", now=NOW)
    assert tight.kept[-1] == 4
    assert ordering_problems(tight.messages, system="terse") == []
    pinned = {e.item.metadata.get("chat.message_index"): e.item.pinned
              for e in tight.report.included}
    assert pinned[4] is True
    answered = [*messages, {"role": "assistant", "content": "ok"}]
    select_messages(answered, system="terse", max_tokens=5000, now=NOW)
    grown = [*answered, {"role": "user", "content": "last one"}]
    later = select_messages_with_report(grown, system="terse", max_tokens=5000, now=NOW)
    pins = {e.item.metadata.get("chat.message_index"): e.item.pinned
            for e in later.report.included}
    assert pins[6] is True
    assert pins[4] is False
    clear_message_cache()
    fresh = select_messages_with_report(grown, system="terse", max_tokens=5000, now=NOW)
    assert [e.item.pinned for e in fresh.report.included] == [
        e.item.pinned for e in later.report.included]


def test_strip_after_change_removes_thinking_after_the_first_dropped_message() -> None:
    """anthropic_thinking='strip_after_change': kept assistant messages after the first
    message left out are sent as copies without their thinking blocks (for models whose
    thinking is bound to everything before it); earlier ones, the originals, and the
    current turn's first assistant message (message 5: Anthropic refuses a final turn
    that does not start with a thinking block) are untouched."""
    messages = _thinking_loop()
    selection = select_messages_with_report(messages, system="terse", max_tokens=200,
                                            anthropic_thinking="strip_after_change", now=NOW)
    assert selection.dropped == (1, 2)
    assert selection.thinking_stripped == (3, 7)
    assert selection.messages[selection.kept.index(5)] is messages[5]
    assert ordering_problems(selection.messages, system="terse") == []
    for index, sent in zip(selection.kept, selection.messages, strict=True):
        types = [block["type"] for block in sent["content"]] if isinstance(
            sent["content"], list) else []
        if index in selection.thinking_stripped:
            assert "thinking" not in types
            assert messages[index]["content"][0]["type"] == "thinking"
        else:
            assert sent is messages[index]
    with pytest.raises(InvalidValueError, match="anthropic_thinking"):
        select_messages(messages, system="x", max_tokens=10,  # type: ignore[call-overload]
                        anthropic_thinking="drop")


def test_a_growing_list_reuses_what_was_read() -> None:
    """Calling again with messages appended reuses the earlier units' items (the same
    objects, the regrouped last unit too, being unchanged), stamps new units after
    them, and answers as a fresh read would."""
    messages = _chat(3)
    first = select_messages_with_report(messages, max_tokens=5000, now=NOW)
    grown = [*messages, *_exchange(1), {"role": "user", "content": "more"}]
    later = NOW + timedelta(minutes=5)
    second = select_messages_with_report(grown, max_tokens=5000, now=later)
    old = {id(e.item) for e in first.report.included}
    reused = [e.item for e in second.report.included if id(e.item) in old]
    # All but the unit of the former last user message, pinned then and not now
    # (remade with its stamp).
    assert len(reused) == len(first.report.included) - 1
    stamps = [e.item.timestamp for e in second.report.included if e.item.timestamp]
    assert len(stamps) == len(second.report.included)
    assert stamps == sorted(stamps)
    assert stamps[-1] == later
    clear_message_cache()
    fresh = select_messages_with_report(grown, max_tokens=5000, now=later)
    assert fresh.kept == second.kept
    assert [e.item.content for e in fresh.report.included] == [
        e.item.content for e in second.report.included]


def test_a_list_that_diverges_is_read_from_where_it_differs() -> None:
    """A list sharing only a prefix with a remembered one (an edited history) is read
    correctly: the new messages count, the old ones are not sent."""
    messages = _chat(3)
    select_messages(messages, max_tokens=5000, now=NOW)
    edited = [*messages[:3], {"role": "user", "content": "something else"}]
    out = select_messages(edited, max_tokens=5000, now=NOW)
    assert out == edited
    assert out[3] is edited[3]


def test_the_run_records_its_token_counter_and_the_applications_run_info() -> None:
    """A traced select_messages run names its token counter in ``run_started`` (so logs
    and spans say how tokens were counted, estimates included), and keeps the
    session, user and conversation the application passes in ``run_info``."""
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    select_messages(_chat(3), max_tokens=10_000, collector=collector,
                    token_counter="estimate", now=NOW,
                    run_info=RunInfo(session_id="s-1", user_id="u-2"))
    started = next(event for event in collector.events if isinstance(event, RunStarted))
    assert (started.session_id, started.user_id) == ("s-1", "u-2")
    assert started.token_counter is not None
    assert started.token_counter.startswith("estimate")
    assert started.token_estimates is True

    exact = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    selection = select_messages_with_report(_chat(3), max_tokens=10_000, collector=exact,
                                            token_counter="o200k_base", now=NOW)
    started = next(event for event in exact.events if isinstance(event, RunStarted))
    assert started.token_counter == selection.token_counter
    assert started.token_estimates is False


#: CUPELLATION_LOOP_EXAMPLES raises the examples for a long local run (800 pass).
@settings(max_examples=int(os.environ.get("CUPELLATION_LOOP_EXAMPLES", "60")), deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["exchange", "user", "assistant", "edit"]),
                                st.sampled_from([1, 3, 8, 300])), min_size=20, max_size=60),
       max_tokens=st.integers(150, 3000), preset=st.sampled_from(["chat", "tooluse", "rag"]))
def test_a_growing_loop_sends_exactly_the_kept_units_messages(
        steps: list[tuple[str, int]], max_tokens: int, preset: str) -> None:
    """An agent loop (exchanges and messages of any size appended turn by turn, now and
    then an edited history), with budgets that leave out none, the oldest, or units
    here and there: every call sends the given objects of exactly the units the report
    keeps, in order — whether they are copied in runs of consecutive units or looked
    up one by one (more than a few runs)."""
    clear_message_cache()
    messages: list[Any] = [{"role": "system", "content": "You are terse."}]
    for number, (step, size) in enumerate(steps):
        if step == "exchange":
            messages = [*messages, *_exchange(number)]
            messages[-1] = {**messages[-1], "content": "r " * size}
        elif step == "edit":  # the last message replaced by a copy: read from there
            messages = [*messages[:-1], dict(messages[-1])]
        else:
            messages = [*messages, {"role": "user" if step != "assistant" else "assistant",
                                    "content": "w " * size}]
        try:
            sent = select_messages(messages, max_tokens=max_tokens, policy=preset, now=NOW)
        except PinnedBudgetError:  # the latest user message (pinned) alone is too long
            with pytest.raises(PinnedBudgetError, match="pinned messages are"):
                select_messages_with_report(messages, max_tokens=max_tokens, policy=preset,
                                            now=NOW)
            continue
        selection = select_messages_with_report(messages, max_tokens=max_tokens,
                                                policy=preset, now=NOW)
        assert [id(m) for m in sent] == [id(messages[k]) for k in selection.kept]
        assert len(selection.kept) + len(selection.dropped) == len(messages)


def test_many_units_with_a_few_left_out_here_and_there_send_exactly_the_rest() -> None:
    """80 short messages with five long ones among them, a budget that fits only the
    short ones: the five are left out and every other message is sent, in order —
    the kept messages come in six runs, past the runs copied as slices, so the rest
    are looked up one by one (both paths of the mapping back to messages)."""
    clear_message_cache()
    messages: list[Any] = [{"role": "system", "content": "You are terse."}]
    long_at = {10, 25, 40, 55, 70}
    for index in range(1, 81):
        text = "long " * 400 if index in long_at else f"short {index}"
        messages.append({"role": "user" if index % 2 else "assistant", "content": text})
    selection = select_messages_with_report(messages, max_tokens=700, policy="chat",
                                            now=NOW)
    assert set(selection.dropped) == long_at
    sent = select_messages(messages, max_tokens=700, policy="chat", now=NOW)
    assert [id(m) for m in sent] == [id(m) for k, m in enumerate(messages)
                                     if k not in long_at]


@pytest.mark.parametrize("typed", [False, True], ids=["dicts", "sdk"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_growing_list_is_answered_as_a_first_call_on_it_would_be(fmt: str,
                                                                   typed: bool) -> None:
    """Step by step through a conversation in every format (Anthropic without a system
    prompt, so its first message shows no format), a call on the grown list keeps the
    same messages, with the same report, as a first call on that list: the outcome
    never depends on what was remembered. (Remembered as OpenAI, the default for
    plain text, an Anthropic list refused its first ``tool_use`` block as mixing
    formats.)"""
    rendered = render(fmt, "Be brief.", weather_conversation(), typed=typed)
    messages = rendered.messages
    for step in rendered.steps:
        prefix = messages[:step[-1] + 1]
        if fmt == "anthropic" and prefix[-1]["role"] == "assistant":
            continue  # a list must not end with an assistant's tool_use unanswered
        grown = select_messages_with_report(prefix, max_tokens=1100, now=NOW)
        clear_message_cache()
        first = select_messages_with_report(prefix, max_tokens=1100, now=NOW)
        assert (grown.kept, grown.trimmed) == (first.kept, first.trimmed)
        assert [id(m) for m in grown.messages] == [id(m) for m in first.messages]
        assert [(e.item.content, e.reason) for e in grown.report.excluded] == [
            (e.item.content, e.reason) for e in first.report.excluded]
        select_messages(prefix, max_tokens=1100, now=NOW)  # remembered for the next step


def test_threads_growing_branches_of_one_conversation_get_what_a_first_call_gets() -> None:
    """Four threads grow four branches of one conversation at once (each appends its
    own exchanges to the shared start, so their remembered conversations share what
    they read), calling select_messages on every turn: every answer sends exactly the
    messages a first call on that list sends, read afterwards alone."""
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    start = _chat(4)
    calls: list[tuple[list[Any], list[int]]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(4)

    def grow(branch: int) -> None:
        messages = list(start)
        barrier.wait()
        for turn in range(25):
            exchange = _exchange(branch * 100 + turn)
            exchange[-1] = {**exchange[-1], "content": f"r{branch} " * (5 + 37 * turn % 90)}
            messages = [*messages, *exchange]
            sent = select_messages(messages, max_tokens=900, now=NOW)
            with lock:
                calls.append((messages, [id(m) for m in sent]))

    threads = [threading.Thread(target=grow, args=(branch,)) for branch in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert len(calls) == 100
    assert any(len(sent) < len(messages) for messages, sent in calls)
    for messages, sent in calls:
        clear_message_cache()
        assert [id(m) for m in select_messages(messages, max_tokens=900, now=NOW)] == sent
