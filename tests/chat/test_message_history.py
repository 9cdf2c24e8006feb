"""MessageHistory: an agent loop appends messages as they arrive, and each selection
answers as select_messages on the same list would; bad messages are refused on
append, naming the message, and leave the history as it was."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import DiagnosticTraceCollector, MessageHistory, TraceDetailLevel
from cupellation.chat import (
    MessageFormat,
    MessageSelection,
    SelectOptions,
    clear_message_cache,
    select_messages_with_report,
)
from cupellation.chat._select import read_messages
from cupellation.chat._units import last_turn_start
from cupellation.events import RunStarted
from cupellation.exceptions import CupelError, DecodeError, InvalidValueError

from ._conversations import (
    FORMATS,
    Call,
    Step,
    conversations,
    render,
    weather_conversation,
)

NOW = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
EXAMPLES = int(os.environ.get("CUPELLATION_CHAT_EXAMPLES", "160")) // 2


def _outcome(selection: MessageSelection[list[Any]], given: list[Any]) -> tuple[Any, ...]:
    """What a selection decided, comparable between two reads of the same list: the
    messages kept (the given objects, or equal copies where edited), trimmed,
    stripped, the tokens, and every unit's content and reason."""
    edited = set(selection.trimmed) | set(selection.thinking_stripped)
    sent = [("edited", repr(message)) if index in edited else ("given", id(given[index]))
            for index, message in zip(selection.kept, selection.messages, strict=True)]
    report = selection.report
    return (selection.kept, selection.dropped, selection.trimmed,
            selection.thinking_stripped, selection.tokens, sent,
            [(e.item.content, e.item.tokens, e.item.pinned, e.reason) for e in report.included],
            [(e.item.content, e.item.tokens, e.item.pinned, e.reason) for e in report.excluded])


def _either(action: Any, given: list[Any]) -> tuple[Any, ...]:
    try:
        return ("selected", *_outcome(action(), given))
    except CupelError as exc:
        return ("refused", type(exc).__name__, str(exc))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fmt=st.sampled_from(FORMATS), typed=st.booleans(), steps=conversations(),
       max_tokens=st.integers(0, 1500), preset=st.sampled_from(["chat", "tooluse", "rag"]),
       trim=st.none() | st.integers(20, 120),
       thinking=st.sampled_from(["keep", "strip_after_change"]),
       format_given=st.booleans())
def test_each_append_then_select_answers_as_select_messages_on_the_list(
        fmt: str, typed: bool, steps: Any, max_tokens: int, preset: str,
        trim: int | None, thinking: Any, format_given: bool) -> None:
    """Generated transcripts in every format, appended one message at a time (so
    tool exchanges are open between the call and its results): after every append,
    the history's selection equals a first select_messages call on the same list —
    the same messages kept, trimmed and stripped, the same units with the same
    reasons — or both refuse it with the same error (an exchange still open, a
    budget the pinned units pass)."""
    rendered = render(fmt, "You are terse.", steps, typed=typed)
    form = cast(MessageFormat, fmt) if format_given or rendered.system is None else None
    limits = None if trim is None else {"ToolOutput": trim, "Message": trim + 10}
    history: MessageHistory[Any] = MessageHistory(system=rendered.system, format=form,
                                                  trim=limits, now=NOW)
    choice: dict[str, Any] = {"max_tokens": max_tokens, "policy": preset,
                              "anthropic_thinking": thinking}
    for count, message in enumerate(rendered.messages, start=1):
        history.append(message, now=NOW)
        prefix = rendered.messages[:count]
        clear_message_cache()
        expected = _either(lambda: select_messages_with_report(
            prefix, system=rendered.system, format=form, trim=limits, now=NOW,  # noqa: B023
            **choice), prefix)
        assert _either(lambda: history.select_with_report(**choice), prefix) == expected
        assert history.messages == prefix
    assert expected[0] == "selected" or expected[1] != "DecodeError"
    if expected[0] == "selected":  # select sends what select_with_report reports
        reported = history.select_with_report(**choice)
        stripped = {reported.kept.index(k) for k in reported.thinking_stripped}
        assert [id(m) if k not in stripped else repr(m)
                for k, m in enumerate(history.select(**choice))] == [
            id(m) if k not in stripped else repr(m) for k, m in enumerate(reported.messages)]


@pytest.mark.parametrize("typed", [False, True], ids=["dicts", "sdk"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_history_made_whole_and_one_grown_message_by_message_agree(fmt: str,
                                                                      typed: bool) -> None:
    """The golden conversation in every format, given whole to a history and appended
    message by message to another: the same window at every budget, with the same
    report; an OpenAI-shaped first message read as OpenAI is read again as a whole
    when a later message shows another format (Anthropic without a system prompt)."""
    rendered = render(fmt, "Be brief.", weather_conversation(), typed=typed)
    whole = MessageHistory(rendered.messages, now=NOW) if rendered.system is None else (
        MessageHistory(rendered.messages, system=rendered.system, now=NOW))
    grown: MessageHistory[Any] = MessageHistory(system=rendered.system, now=NOW)
    for message in rendered.messages:
        grown.append(message, now=NOW)
    assert grown.format == whole.format == fmt
    for max_tokens in (1100, 1500, 5000):
        assert _outcome(grown.select_with_report(max_tokens=max_tokens), rendered.messages) == (
            _outcome(whole.select_with_report(max_tokens=max_tokens), rendered.messages))
    assert len(grown.select(max_tokens=1100)) < len(rendered.messages)


def test_an_open_exchange_is_refused_by_select_until_its_results_arrive() -> None:
    """An assistant message calling two tools is appended at once (the loop has not
    run them yet): ``pending`` says what is missing and select refuses the list as
    OpenAI would; after one result it still does; after both it sends all."""
    history: MessageHistory[Any] = MessageHistory(
        [{"role": "user", "content": "weather in Paris and Oslo?"}])
    history.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{k}", "type": "function",
         "function": {"name": "weather", "arguments": f'{{"k": {k}}}'}} for k in (1, 2)]})
    assert len(history.pending) == 1
    assert "c1, c2" in history.pending[0]
    with pytest.raises(DecodeError, match=r"messages\[1\]\.tool_calls: .*c1, c2"):
        history.select(max_tokens=1000)
    history.append({"role": "tool", "tool_call_id": "c1", "content": "18C"})
    with pytest.raises(DecodeError, match=r"did not have response messages: c2"):
        history.select(max_tokens=1000)
    history.append({"role": "tool", "tool_call_id": "c2", "content": "4C"})
    assert not history.pending
    assert len(history.select(max_tokens=1000)) == 4


def test_a_message_that_cannot_be_read_is_refused_naming_it_and_changes_nothing() -> None:
    """A message of a wrong shape, a result answering no call, a batch with one bad
    message: each raises DecodeError naming the message by its index in the whole
    history, and the history (messages, window) is what it was."""
    history: MessageHistory[Any] = MessageHistory([{"role": "system", "content": "terse"},
                              {"role": "user", "content": "hi"}], now=NOW)
    before = history.select_with_report(max_tokens=1000)
    with pytest.raises(DecodeError, match=r"messages\[2\]"):
        history.append({"role": "tool", "tool_call_id": "nope", "content": "x"})
    with pytest.raises(DecodeError, match=r"messages\[3\]"):
        history.extend([{"role": "assistant", "content": "fine"}, {"role": 7}])
    with pytest.raises(DecodeError, match=r"messages\[2\]"):
        history.append("just text")
    assert len(history) == 2
    after = history.select_with_report(max_tokens=1000)
    assert _outcome(after, history.messages) == _outcome(before, history.messages)


def test_options_are_checked_where_they_are_given() -> None:
    """A format that does not exist, a naive ``now``, a string where messages go, a
    system prompt outside the Anthropic format: each refused with the option named."""
    with pytest.raises(InvalidValueError, match="format"):
        MessageHistory(format=cast(Any, "gemini"))
    history: MessageHistory[Any] = MessageHistory()
    with pytest.raises(InvalidValueError, match="now"):
        history.append({"role": "user", "content": "hi"}, now=datetime(2026, 1, 1))
    with pytest.raises(InvalidValueError, match="messages"):
        history.extend(cast(Any, "hello"))
    with pytest.raises(DecodeError, match="system"):
        MessageHistory(system="be brief", format="openai")
    assert len(history) == 0
    assert history.select(max_tokens=100) == []


def test_a_traced_selection_records_the_counter_and_the_anthropic_system_is_kept_apart(
        ) -> None:
    """An Anthropic history with its system prompt apart: the prompt is counted and
    pinned but never sent in the list, ``system`` gives it back for the API call, and
    the run's ``run_started`` names the counter and says its counts are estimates."""
    rendered = render("anthropic", "Be brief.", weather_conversation(), typed=True)
    history = MessageHistory(rendered.messages, system=rendered.system, now=NOW)
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    selection = history.select_with_report(max_tokens=5000, collector=collector)
    assert history.system == "Be brief."
    assert selection.messages == rendered.messages
    assert any(e.item.content.startswith("system") for e in selection.report.included)
    started = next(event for event in collector.events if isinstance(event, RunStarted))
    assert started.token_counter == history.token_counter
    assert started.token_estimates is history.token_estimates is True


def test_a_copy_branches_and_a_pickled_history_reads_its_messages_again() -> None:
    """``copy()`` shares what was read: appending different exchanges to the original
    and the copy gives each the window select_messages gives its own list, and neither
    sees the other's. A pickled (or deep-copied) history, trimmed, reads its messages
    again: the same window, the same trimming, the same units' order and reasons."""
    import copy  # noqa: PLC0415
    import pickle  # noqa: PLC0415

    base: list[Any] = [{"role": "system", "content": "terse"}, {"role": "user", "content": "go"}]
    history = MessageHistory(base, trim={"ToolOutput": 40}, now=NOW)
    twin = copy.copy(history)
    branches = {}
    for name, target in (("left", history), ("right", twin)):
        exchange = [{"role": "assistant", "content": None, "tool_calls": [
                        {"id": f"c-{name}", "type": "function",
                         "function": {"name": name, "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": f"c-{name}", "content": name * 200}]
        target.extend(exchange, now=NOW)
        branches[name] = [*base, *exchange]
    for name, target in (("left", history), ("right", twin)):
        assert target.messages == branches[name]
        clear_message_cache()
        expected = select_messages_with_report(branches[name], trim={"ToolOutput": 40},
                                               max_tokens=300, now=NOW)
        assert _outcome(target.select_with_report(max_tokens=300), branches[name]) == (
            _outcome(expected, branches[name]))
    for restored in (pickle.loads(pickle.dumps(history)), copy.deepcopy(history)):
        assert len(restored) == len(history)
        got = restored.select_with_report(max_tokens=300)
        want = history.select_with_report(max_tokens=300)
        assert (got.kept, got.trimmed, got.tokens) == (want.kept, want.trimmed, want.tokens)
        assert [(e.item.content, e.reason) for e in got.report.included] == [
            (e.item.content, e.reason) for e in want.report.included]
        assert got.trimmed == (3,)


def test_appends_from_two_threads_at_once_are_refused_never_lost() -> None:
    """Two threads append 200 messages each to one history at once, as fast as they
    can: every append either took (its message is in the history, once, in the order
    that thread appended) or raised RuntimeError (it is not there); selections made
    meanwhile from a third thread send the given objects only."""
    import sys  # noqa: PLC0415
    import threading  # noqa: PLC0415

    history: MessageHistory[Any] = MessageHistory([{"role": "system", "content": "terse"}], now=NOW)
    taken: dict[int, list[int]] = {0: [], 1: []}
    refused = [0, 0]
    done = threading.Event()
    seen: list[int] = []

    def append(thread: int) -> None:
        for k in range(200):
            message = {"role": "user", "content": f"t{thread} m{k} " + "w " * (k % 13)}
            try:
                history.append(message, now=NOW)
            except RuntimeError:
                refused[thread] += 1
                continue
            taken[thread].append(id(message))
            keep.append(message)  # alive: ids stay unique

    def select() -> None:
        while not done.is_set():
            seen.append(len(history.select(max_tokens=10**6)))

    keep: list[Any] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=append, args=(n,)) for n in (0, 1)]
        reader = threading.Thread(target=select)
        reader.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        reader.join()
    finally:
        sys.setswitchinterval(interval)
    ids = [id(m) for m in history.messages[1:]]
    assert len(ids) == len(taken[0]) + len(taken[1]) == 400 - sum(refused)
    for number in (0, 1):
        assert [i for i in ids if i in set(taken[number])] == taken[number]
    assert seen == sorted(seen)
    assert history.select(max_tokens=10**6) == history.messages


def _tool_exchange(k: int) -> list[dict[str, Any]]:
    call = {"id": f"call_{k}", "type": "function",
            "function": {"name": "search", "arguments": f'{{"q": "step {k}"}}'}}
    return [{"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"result {k} " * 20}]


@pytest.mark.parametrize("typed", [False, True], ids=["openai", "langchain"])
def test_an_agent_loop_regroups_only_its_last_unit_and_moves_the_turn_pin(
        typed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Chat Completions (or LangChain) loop, one user turn then tool exchanges: each
    append groups its new message only (a tool result from the open call it answers),
    never again from the turn's start or a closed unit (so a turn costs what it
    adds); when a new user turn starts, the old turn's unit is unpinned and the new
    one pinned, and every selection still equals a first select_messages call on the
    same list."""
    import cupellation.chat._conversation as conversation_module  # noqa: PLC0415
    from cupellation.chat._units import group as real_group  # noqa: PLC0415

    starts: list[int] = []

    def recorded(messages: Any, fmt: str, start: int, **options: Any) -> Any:
        starts.append(start)
        return real_group(messages, fmt, start, **options)

    monkeypatch.setattr(conversation_module, "group", recorded)
    messages: list[Any] = [{"role": "system", "content": "Be brief."},
                           {"role": "user", "content": "Plan the trip."}]
    for k in range(6):
        messages += _tool_exchange(k)
    messages.append({"role": "user", "content": "Now book it."})
    for k in range(6, 9):
        messages += _tool_exchange(k)
    raw = list(messages)
    if typed:
        from langchain_core.messages import convert_to_messages  # noqa: PLC0415
        messages = list(convert_to_messages(messages))
    history: MessageHistory[Any] = MessageHistory(messages[:4], now=NOW)
    for count in range(5, len(messages) + 1):
        del starts[:]
        history.append(messages[count - 1], now=NOW)
        # The new message alone; a tool result with the call it answers.
        assert starts == [count - 2 if "tool_call_id" in raw[count - 1] else count - 1]
        if "tool_calls" in raw[count - 1]:
            continue  # an assistant's calls, not answered yet: select refuses the list
        chosen = history.select_with_report(max_tokens=400)
        clear_message_cache()
        expected = select_messages_with_report(messages[:count], max_tokens=400, now=NOW)
        assert _outcome(chosen, messages[:count]) == _outcome(expected, messages[:count])
    pinned = [e.item.content for e in chosen.report.included if e.item.pinned]
    assert any("Now book it." in text for text in pinned)
    assert not any("Plan the trip." in text for text in pinned)


def test_a_list_that_replaces_the_cached_turn_start_pins_the_earlier_turn() -> None:
    """select_messages on a list sharing only a prefix with a cached one, whose last
    user turn lay past that prefix: the earlier user message becomes the last turn's
    start again, pinned as a first read pins it (the cached conversation is reused
    for the prefix, the pin moved back)."""
    shared: list[Any] = [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Plan the trip."}, *_tool_exchange(0)]
    first = [*shared, {"role": "user", "content": "Now book it."}, *_tool_exchange(1)]
    second = [*shared, *_tool_exchange(2)]
    clear_message_cache()
    select_messages_with_report(first, max_tokens=400, now=NOW)
    reused = select_messages_with_report(second, max_tokens=400, now=NOW)
    clear_message_cache()
    fresh = select_messages_with_report(second, max_tokens=400, now=NOW)
    assert _outcome(reused, second) == _outcome(fresh, second)
    pinned = [e.item.content for e in reused.report.included if e.item.pinned]
    assert any("Plan the trip." in text for text in pinned)


def _turn_steps() -> list[Step]:
    call = Call("c1", "search", {"q": "trains"}, "two trains a day")
    return [Step("user", "Plan the trip."), Step("exchange", calls=(call,)),
            Step("assistant", "Found two."),
            Step("exchange", calls=(replace(call, call_id="c2"),), text_after_results="And?"),
            Step("user", "Now book it."), Step("exchange", calls=(replace(call, call_id="c3"),)),
            Step("exchange", calls=(replace(call, call_id="c4"),))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_kept_turn_start_is_the_last_one_after_every_append_and_replaced_list(
        fmt: str) -> None:
    """The last turn's start a conversation keeps (so that an append scans only the
    new messages for it) is the one a scan of the whole list finds, and pins what a
    first read pins, in every format: after each append to a history (user turns,
    tool results, which start none, an Anthropic user message of tool results and
    text, which does), and for select_messages lists that replace the message holding
    it with messages that start no turn (the earlier turn is the last again) or one
    that does."""
    rendered = render(fmt, "Be brief.", _turn_steps(), typed=False)
    history: MessageHistory[Any] = MessageHistory(system=rendered.system, now=NOW)
    turns = []
    for message in rendered.messages:
        history.append(message, now=NOW)
        conversation = history._state[0]
        assert conversation.turn == last_turn_start(conversation.messages)
        turns.append(conversation.turn)
    assert len(set(turns)) >= 3  # the turn start moved, as the scenario means it to
    cut = rendered.messages.index(next(m for m in reversed(rendered.messages)
                                       if "Now book it." in repr(m)))
    more = render(fmt, "Be brief.", [
        Step("exchange", calls=(Call("c9", "search", {"q": "buses"}, "no buses"),)),
        Step("user", "Book the later one.")], typed=False)
    tail, user = ([more.messages[k] for k in step] for step in more.steps)
    options = SelectOptions(max_tokens=10**6)
    for replaced in (tail, user + tail):
        clear_message_cache()
        read_messages(rendered.messages, options, system=rendered.system, now=NOW)
        given = [*rendered.messages[:cut], *replaced]
        conversation = read_messages(given, options, system=rendered.system, now=NOW)
        assert conversation.turn == last_turn_start(conversation.messages)
        reused = select_messages_with_report(given, max_tokens=10**6,
                                             system=rendered.system, now=NOW)
        clear_message_cache()
        fresh = select_messages_with_report(given, max_tokens=10**6,
                                            system=rendered.system, now=NOW)
        assert _outcome(reused, given) == _outcome(fresh, given)


def test_a_selection_uses_its_own_keywords_whatever_the_last_one_used() -> None:
    """select() takes the options of its last call again only for the very same
    keyword values: another budget (the same key), another collector, a keyword
    added or left out, each selects with what it is given, as a fresh history would;
    a copy starts from its own."""
    rendered = render("openai", "Be brief.", weather_conversation(), typed=False)
    history: MessageHistory[Any] = MessageHistory(rendered.messages, now=NOW)
    tight, loose = int("1100"), int("5000")
    small = history.select(max_tokens=tight)
    assert len(small) < len(rendered.messages)
    assert history.select(max_tokens=loose) == rendered.messages
    assert history.select(max_tokens=tight) == small
    assert history.copy().select(max_tokens=loose) == rendered.messages
    collectors = [DiagnosticTraceCollector(TraceDetailLevel.STAGE_ONLY) for _ in range(2)]
    for collector in collectors:
        assert history.select(max_tokens=tight, collector=collector) == small
    assert [len(collector.events) > 0 for collector in collectors] == [True, True]
    assert history.select(max_tokens=tight, policy="chat") == small
    assert history.select(max_tokens=loose) == rendered.messages
