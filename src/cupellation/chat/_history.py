"""``MessageHistory``: a conversation an agent loop appends each message to as it
arrives, so that choosing a window costs the pipeline and little more.

:func:`~cupellation.select_messages` takes the whole list on every call and finds
what it read before by the identity of the list's messages; the new messages are
read in the call. A history reads each message when it is appended (its texts
checked, counted and grouped into units then), so :meth:`MessageHistory.select` only
runs the pipeline on the units and maps the kept ones back to messages: in an agent
loop the reading moves out of the call, to the moment each message arrives
(benchmarks/bench_chat.py measures both).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Generic, TypeVar, Unpack

from ..exceptions import ConfigurationError, DecodeError, InvalidTypeError, InvalidValueError
from ._conversation import Conversation, Request, extend_conversation, fresh_conversation
from ._options import SelectKeywords, SelectOptions, merged_options
from ._select import MessageSelection, choice, choose, selection
from ._trim import check_limits
from ._units import OpenEnd

__all__ = ["MessageHistory"]

#: The type of the messages a history holds (its selections are lists of them).
_M = TypeVar("_M")
#: The options fixed when a history is made (a selection may not change them).
_READING_FIELDS = frozenset({"format", "token_counter", "trim"})


class MessageHistory(Generic[_M]):
    """A provider's message list, read message by message as an agent loop appends it,
    and the window that fits a budget chosen from it on demand.

    ::

        history = MessageHistory([system_message, user_message], trim={"ToolOutput": 800})
        while True:
            window = history.select(max_tokens=8000)
            reply = client.chat.completions.create(model="gpt-4o", messages=window)
            history.append(reply.choices[0].message)
            for call in reply.choices[0].message.tool_calls or ():
                history.append({"role": "tool", "tool_call_id": call.id,
                                "content": run_tool(call)})

    The messages, formats, options and results are those of
    :func:`~cupellation.select_messages` (read its docstring); what differs is when
    the work is done. :meth:`append` and :meth:`extend` read the new messages at
    once (checked, counted, trimmed, grouped into units, stamped ``now``), and raise
    :class:`~cupellation.exceptions.DecodeError` naming the message, leaving the
    history as it was, when one cannot be read or breaks a provider's rule that no
    later message can mend. A tool call whose results are still to come is not such
    a break: the history groups its exchange when they arrive, and :meth:`select`
    refuses the list (as the provider would) until they have.

    The history is made with a :class:`~cupellation.chat.SelectOptions` (or its
    fields as keywords): its ``format``, ``token_counter`` and ``trim``, and
    Anthropic's ``system`` prompt, are fixed then; the rest (budget, policy,
    collector...) is what :meth:`select` uses unless it is given others, so
    ``MessageHistory(messages, max_tokens=8000).select()`` is whole. A message
    appended that shows another format than the one given raises
    :class:`~cupellation.exceptions.FormatMismatchError`. Appending and
    selecting may come from different threads, but appends must not run at once (a
    lock refuses the second with :class:`RuntimeError` rather than lose a message); a
    selection sees the messages appended before it started. :meth:`copy` branches a
    history without reading anything again; a pickled or deep-copied history reads its
    messages again (its options are pickled with it, a collector in them too).

    .. versionadded:: 0.3
    """

    __slots__ = ("_append_lock", "_last_selecting", "_limits", "_options", "_reading",
                 "_request_options", "_state")

    def __init__(self, messages: Iterable[_M] = (), options: SelectOptions | None = None, *,
                 system: object = None, now: datetime | None = None,
                 **keywords: Unpack[SelectKeywords]) -> None:
        chosen = merged_options(options, keywords)
        self._options = chosen
        self._limits = check_limits(chosen.trim)
        self._reading = (system, system is not None, chosen.format, chosen.token_counter)
        self._request_options = _request_options(self._reading, self._limits)
        self._last_selecting: tuple[Mapping[str, Any], SelectOptions] | None = None
        self._append_lock = threading.Lock()
        # The conversation read so far and the problems of its open end, replaced
        # together (one attribute: a selection reads a consistent pair).
        self._state: tuple[Conversation, list[OpenEnd]] = (
            fresh_conversation(self._request([], None, [], [])), [])
        self.extend(messages, now=now)

    def _request(self, given: list[Any], now: datetime | None, open_end: list[OpenEnd],
                 was_open: list[OpenEnd]) -> Request:
        system, has_system, fmt, counter_spec = self._reading
        # The options are made once, and the open end's start looked for only when
        # there is one: making them on each append took a request from 2.1 to 3.3 us.
        return Request(given=given, system=system, has_system=has_system, fmt=fmt,
                       counter_spec=counter_spec, limits=self._limits, now=now,
                       name="messages", open_end=open_end,
                       regroup_from=min(problem.at for problem in was_open) if was_open
                       else None, options=self._request_options)

    def append(self, message: _M, *, now: datetime | None = None) -> None:
        """Read ``message`` and add it to the end (``now``: its time, by default the
        current time; see :func:`~cupellation.select_messages`)."""
        self.extend((message,), now=now)

    def extend(self, messages: Iterable[_M], *, now: datetime | None = None) -> None:
        """Read ``messages`` and add them to the end, in order; all or none."""
        if now is not None and (not isinstance(now, datetime) or now.utcoffset() is None):
            raise InvalidValueError("now", now, "must be a timezone-aware datetime or None")
        if isinstance(messages, str | bytes | Mapping):
            raise InvalidValueError("messages", messages,
                                    "must be an iterable of messages (append() takes one)")
        try:
            listed = iter(messages)
        except TypeError:
            raise InvalidTypeError("messages", messages,
                                   "an iterable of messages (append() takes one)") from None
        new = list(listed)
        if not new:
            return
        if not self._append_lock.acquire(blocking=False):
            raise RuntimeError("MessageHistory: two appends at once (appends must come "
                               "one after the other)")
        try:
            known, was_open = self._state
            open_end: list[OpenEnd] = []
            grown = extend_conversation(
                self._request(known.objects + new, now, open_end, was_open), known)
            self._state = (grown, open_end)
        finally:
            self._append_lock.release()

    def select(self, options: SelectOptions | None = None,
               **keywords: Unpack[SelectKeywords]) -> list[_M]:
        """The messages that fit the budget, in conversation order: a list of the
        objects appended (trimmed or thinking-stripped ones as new objects).

        The options are the history's own (:attr:`options`, given when it was made),
        or ``options``, with the fields given as keywords replaced (see
        :class:`~cupellation.chat.SelectOptions`). ``format``, ``token_counter`` and
        ``trim`` are fixed when the history is made: a selection that asks for others
        raises :class:`~cupellation.exceptions.ConfigurationError`. Anthropic's system
        prompt, given to the history, is counted, always kept and never returned: pass
        :attr:`system` to the API beside the list."""
        how = choice(self._selecting(options, keywords), want_report=False)
        return choose(self._complete(), how).kept

    def select_with_report(self, options: SelectOptions | None = None,
                           **keywords: Unpack[SelectKeywords]
                           ) -> MessageSelection[list[_M]]:
        """:meth:`select`, with its report and what it did to each message (a
        :class:`~cupellation.chat.MessageSelection`; indices into :attr:`messages`)."""
        how = choice(self._selecting(options, keywords), want_report=True)
        conversation = self._complete()
        chosen = choose(conversation, how)
        return selection(conversation, chosen.kept, chosen)

    def _selecting(self, options: SelectOptions | None, keywords: Mapping[str, Any]
                   ) -> SelectOptions:
        """The options of one selection, checked against the history's reading ones."""
        if options is None and _READING_FIELDS.isdisjoint(keywords):
            # The reading fields are the history's own: nothing to check. An agent
            # loop's select(max_tokens=...) is this case; the checks (the trim
            # mapping checked and copied twice) took it from 4.2 to 5.5 us. The
            # same keywords (the very objects) as the last such call give the same
            # frozen options, taken again instead of made and checked again (a
            # loop's select(budget=BUDGET): 9.4 -> 3.4 us, interleaved, under load).
            last = self._last_selecting
            if last is not None and last[0].keys() == keywords.keys() and all(
                    value is keywords[name] for name, value in last[0].items()):
                return last[1]
            chosen = merged_options(self._options, keywords)
            self._last_selecting = (keywords, chosen)
            return chosen
        chosen = merged_options(self._options if options is None else options, keywords)
        _, _, fmt, counter_spec = self._reading
        for field, value, fixed in (("format", chosen.format, fmt),
                                    ("token_counter", chosen.token_counter, counter_spec),
                                    ("trim", dict(check_limits(chosen.trim)),
                                     dict(self._limits))):
            if value != fixed:
                raise ConfigurationError(field, value, f"is fixed when the history is made "
                                                       f"(it was {fixed!r})")
        return chosen

    @property
    def options(self) -> SelectOptions:
        """The options given when the history was made (its selections' default)."""
        return self._options

    def _complete(self) -> Conversation:
        """The conversation, refused while the list breaks a rule at its end."""
        conversation, open_end = self._state
        if open_end:
            problem = open_end[0]
            raise DecodeError(problem.field, problem.value, problem.problem)
        return conversation

    @property
    def messages(self) -> list[_M]:
        """The messages appended, in order (a new list of the objects appended)."""
        return list(self._state[0].objects)

    @property
    def system(self) -> object:
        """Anthropic's system prompt, as given (None when there is none)."""
        return self._reading[0]

    @property
    def format(self) -> str:
        """The messages' format: the one given, or the one they show (``"openai"``
        while they show none)."""
        return self._state[0].fmt

    @property
    def token_counter(self) -> str:
        """The name of the token counter the messages are counted with."""
        return self._state[0].counter.name

    @property
    def token_estimates(self) -> bool:
        """Whether any count is an estimate."""
        return self._state[0].estimates

    @property
    def pending(self) -> tuple[str, ...]:
        """What the list waits for before :meth:`select` can send it (a tool call's
        results, a reasoning item's output), one line each; empty when nothing."""
        return tuple(f"{problem.field}: {problem.problem}" for problem in self._state[1])

    def copy(self) -> MessageHistory[_M]:
        """A history with the same messages, read once for both: appends to either
        leave the other as it was (an agent exploring two branches)."""
        twin: MessageHistory[_M] = MessageHistory.__new__(MessageHistory)
        twin._limits, twin._reading, twin._state = self._limits, self._reading, self._state
        twin._options, twin._request_options = self._options, self._request_options
        twin._last_selecting = None
        twin._append_lock = threading.Lock()
        return twin

    __copy__ = copy

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) as its messages and options: the copy reads them
        again, so each unit is stamped anew (the last at the moment the original's
        last unit was stamped, earlier ones a microsecond apart before it)."""
        conversation = self._state[0]
        last = conversation.units[-1].item.timestamp if conversation.units else None
        return (_restored, (conversation.objects, self._reading[0], self._options, last))

    def __len__(self) -> int:
        return len(self._state[0].objects)

    def __repr__(self) -> str:
        return (f"MessageHistory({len(self)} messages, format={self.format!r}, "
                f"token_counter={self.token_counter!r})")


def _request_options(reading: tuple[Any, Any, Any, Any], limits: Mapping[Any, int]
                     ) -> tuple[Any, ...]:
    """The options of a history's requests (``Request.options``: what its
    conversations are made with)."""
    system, has_system, fmt, counter_spec = reading
    return Request(given=(), system=system, has_system=has_system, fmt=fmt,
                   counter_spec=counter_spec, limits=limits, now=None,
                   name="messages").options


def _restored(messages: list[_M], system: object, options: SelectOptions,
              now: datetime | None) -> MessageHistory[_M]:
    """A pickled history read again (see MessageHistory.__reduce__)."""
    return MessageHistory(messages, options, system=system, now=now)
