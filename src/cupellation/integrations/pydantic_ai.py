"""PydanticAI: a history processor that sends each model request the messages that
fit the budget.

    from pydantic_ai import Agent
    from pydantic_ai.capabilities import ProcessHistory
    from cupellation.integrations.pydantic_ai import history_processor

    agent = Agent("openai:gpt-4o", capabilities=[ProcessHistory(
        history_processor(max_tokens=8000, trim={"ToolOutput": 800}))])

PydanticAI calls the processor with the run's messages (``ModelRequest`` and
``ModelResponse``) before each model request. Each message is read as its parts say
(a system prompt, a user prompt, a tool call, a tool return or retry answering a call,
text, thinking) and selected as :func:`~cupellation.select_messages` selects OpenAI
messages: a response with tool calls and the returns answering them are kept or
dropped together; the system prompt parts and the latest request's ``instructions``
are counted against the budget and always kept; the latest user prompt is pinned. A
request is sent with the parts kept (a user prompt can go while the tool returns
beside it stay, and the other way round); a part that ``trim=`` cut is sent as a copy
holding the cut text (an assistant message's texts as one text part).

**What it drops is gone for the run.** PydanticAI's ``ProcessHistory`` replaces the
run's message list with what the processor returns (``ctx.messages[:] = ...``), so a
message left out is not in ``result.all_messages()`` and never comes back in a later
request of the run. With ``keep_full_history=True`` the processor keeps every message
it was given in :attr:`HistoryProcessor.history` and selects from that list on each
request, so a message left out once can be sent again when it fits; pass
``message_history=processor.full_history(result.all_messages())`` to the next run
(the history and the run's final answer, which no request of the run saw) instead
of ``result.all_messages()``. Such a processor holds one conversation: make one per
conversation.

Each request is recorded: ``collector=`` receives its events, with the run's
``conversation_id`` and ``run_id`` (as ``session_id``) in the
:class:`~cupellation.RunInfo` where the application gave none;
:attr:`HistoryProcessor.last` holds the last selection. Token counts are those of
the OpenAI messages the parts read as (``token_counter=``: exact with the ``tokens``
extra); tool definitions and the reply are not counted: keep room for them in
``output_reserve`` (a ``budget=``).

Needs ``pip install 'cupellation[pydantic-ai]'``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Unpack

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart

from ..chat import MessageSelection, SelectKeywords, SelectOptions, select_messages_with_report
from ..exceptions import InvalidTypeError, InvalidValueError
from ._window import Window

__all__ = ["HistoryProcessor", "history_processor"]

_SYSTEM_KINDS = frozenset({"system-prompt"})
_TEXT_KINDS = frozenset({"text", "thinking"})


class _Origin(NamedTuple):
    """Which message (-1: the system head) and which of its parts an OpenAI message
    read stands for."""

    message: int
    parts: tuple[int, ...]


def _text(part: Any) -> str:
    """The text a part sends the model."""
    for method in ("model_response_str", "model_response"):
        render = getattr(part, method, None)
        if callable(render):
            text = render()
            if isinstance(text, str):
                return text
    content = getattr(part, "content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(item if isinstance(item, str) else f"[{type(item).__name__}]"
                         for item in content)
    return str(content)


def _answers(part: Any) -> str | None:
    """The tool call a request part answers, or None."""
    call_id = getattr(part, "tool_call_id", None)
    kind = getattr(part, "part_kind", "")
    if not isinstance(call_id, str) or not call_id or kind.startswith("builtin"):
        return None
    if kind == "retry-prompt" and getattr(part, "tool_name", None) is None:
        return None
    return call_id if kind != "retry-feedback" else None


def _calls(part: Any) -> bool:
    kind = getattr(part, "part_kind", "")
    return (not kind.startswith("builtin") and hasattr(part, "args")
            and isinstance(getattr(part, "tool_call_id", None), str))


def _call(part: Any) -> dict[str, Any]:
    """A tool call part as an OpenAI tool call."""
    return {"id": part.tool_call_id, "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()}}


def _read(messages: Sequence[ModelMessage]) -> tuple[list[dict[str, Any]], list[_Origin]]:
    """The messages as OpenAI messages (the system head first) and what each stands
    for."""
    system: list[str] = []
    read: list[dict[str, Any]] = []
    origins: list[_Origin] = []
    last_instructions = None
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest):
            last_instructions = message.instructions or last_instructions
            results: list[tuple[int, dict[str, Any]]] = []
            users: list[tuple[int, dict[str, Any]]] = []
            for position, part in enumerate(message.parts):
                kind = getattr(part, "part_kind", "")
                call_id = _answers(part)
                if kind in _SYSTEM_KINDS:
                    system.append(_text(part))
                elif call_id is not None:
                    results.append((position, {"role": "tool", "tool_call_id": call_id,
                                               "content": _text(part)}))
                else:
                    users.append((position, {"role": "user", "content": _text(part)}))
            # Tool messages come first, right after the call: the order OpenAI needs.
            for position, converted in results + users:
                read.append(converted)
                origins.append(_Origin(index, (position,)))
        elif isinstance(message, ModelResponse):
            texts = [_text(part) for part in message.parts
                     if getattr(part, "part_kind", "") in _TEXT_KINDS]
            calls = [_call(part) for part in message.parts if _calls(part)]
            others = [_text(part) for part in message.parts
                      if getattr(part, "part_kind", "") not in _TEXT_KINDS and not _calls(part)]
            converted = {"role": "assistant", "content": "\n".join(texts + others) or None}
            if calls:
                converted["tool_calls"] = calls
            read.append(converted)
            origins.append(_Origin(index, tuple(range(len(message.parts)))))
        else:
            raise InvalidTypeError(f"messages[{index}]", message,
                                   "a ModelRequest or a ModelResponse")
    if last_instructions:
        system.append(last_instructions)
    head = {"role": "system", "content": "\n\n".join(system)}
    return [head, *read], [_Origin(-1, ()), *origins]


class HistoryProcessor(Window):
    """A PydanticAI history processor: each request's messages, selected (see the
    module doc). Made by :func:`history_processor`."""

    __slots__ = ("_full", "_given", "_history_lock", "_keep_full")

    def __init__(self, options: SelectOptions | None = None, *,
                 keep_full_history: bool = False,
                 on_select: Callable[[MessageSelection[Sequence[object]]], None] | None = None,
                 **keywords: Unpack[SelectKeywords]) -> None:
        if not isinstance(keep_full_history, bool):
            raise InvalidTypeError("keep_full_history", keep_full_history, "a bool")
        super().__init__(options, on_select, {**keywords, "format": "openai"})
        self._keep_full = keep_full_history
        self._full: list[ModelMessage] = []
        self._given: list[ModelMessage] = []  # what the last call returned
        self._history_lock = threading.Lock()

    @property
    def history(self) -> list[ModelMessage]:
        """Every message given to the processor, in order (with
        ``keep_full_history=True``; empty otherwise): the conversation whole."""
        return list(self._full)

    def full_history(self, messages: Sequence[ModelMessage]) -> list[ModelMessage]:
        """The whole conversation after a run: :attr:`history` and the messages the
        run added after its last request (its final answer). Pass the run's
        ``result.all_messages()``; give the result as ``message_history`` to the next
        run. Raises :class:`~cupellation.exceptions.InvalidValueError` when
        ``messages`` do not continue what the processor last sent."""
        with self._history_lock:
            given = self._given
            if not self._keep_full:
                raise InvalidValueError("keep_full_history", False,
                                        "must be True for the processor to keep a history")
            if not given or len(messages) < len(given) or not all(
                    a is b for a, b in zip(given, messages, strict=False)):
                raise InvalidValueError("messages", f"{len(messages)} messages",
                                        "do not continue what the processor last sent (pass "
                                        "result.all_messages() of the run it served)")
            return [*self._full, *messages[len(given):]]

    def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]
                 ) -> list[ModelMessage]:
        """The messages of this request that fit the budget."""
        source = self._grown(messages) if self._keep_full else messages
        read, origins = _read(source)
        options = self.options_for(session_id=ctx.run_id, conversation_id=ctx.conversation_id)
        selection = select_messages_with_report(read, options)
        chosen = _rebuilt(source, read, origins, selection)
        with self._history_lock:
            self._given = list(chosen)
        self.record(selection)
        return chosen

    def _grown(self, messages: list[ModelMessage]) -> list[ModelMessage]:
        """The full history with the messages new since the last call appended (a
        list that does not continue the last call's starts the history anew)."""
        with self._history_lock:
            given = self._given
            if len(messages) >= len(given) and all(
                    a is b for a, b in zip(given, messages, strict=False)) and given:
                self._full.extend(messages[len(given):])
            else:
                self._full = list(messages)
            return list(self._full)


def _rebuilt(source: Sequence[ModelMessage], read: list[dict[str, Any]],
             origins: list[_Origin], selection: MessageSelection[list[dict[str, Any]]]
             ) -> list[ModelMessage]:
    """The messages to send: each message with its kept parts, a cut part as a copy
    holding the cut text, a message with no part kept left out."""
    kept_parts: dict[int, dict[int, str | None]] = {}
    for index, sent in zip(selection.kept, selection.messages, strict=True):
        origin = origins[index]
        if origin.message < 0:
            continue
        cut = None if sent is read[index] else sent.get("content")
        parts = kept_parts.setdefault(origin.message, {})
        for position in origin.parts:
            parts[position] = cut
    out: list[ModelMessage] = []
    for index, message in enumerate(source):
        system = [p for p, part in enumerate(message.parts)
                  if getattr(part, "part_kind", "") in _SYSTEM_KINDS]
        parts = kept_parts.get(index, {})
        if not parts and not system:
            continue
        if isinstance(message, ModelResponse):
            out.append(_response(message, parts))
            continue
        keep = [p for p in range(len(message.parts)) if p in parts or p in system]
        new_parts = [_with_content(part, parts.get(p)) for p, part in enumerate(message.parts)
                     if p in keep]
        changed = len(keep) != len(message.parts) or any(parts.get(p) for p in keep)
        out.append(dataclasses.replace(message, parts=new_parts) if changed else message)
    return out


def _response(message: ModelResponse, parts: dict[int, str | None]) -> ModelResponse:
    """A response kept whole, or, when ``trim=`` cut its texts (read as one), with
    the cut text as one text part where its first text or thinking part was."""
    cut = next((text for text in parts.values() if text is not None), None)
    if cut is None:
        return message
    new_parts: list[Any] = []
    placed = False
    for part in message.parts:
        if getattr(part, "part_kind", "") in _TEXT_KINDS:
            if not placed:
                new_parts.append(TextPart(content=cut))
                placed = True
            continue
        new_parts.append(part)
    return dataclasses.replace(message, parts=new_parts)


def _with_content(part: Any, text: str | None) -> Any:
    """``part`` holding ``text`` (a cut text) as its content; ``part`` itself for
    None (not cut)."""
    return part if text is None else dataclasses.replace(part, content=text)


def history_processor(options: SelectOptions | None = None, *,
                      keep_full_history: bool = False,
                      on_select: Callable[[MessageSelection[Sequence[object]]], None] | None = None,
                      **keywords: Unpack[SelectKeywords]) -> HistoryProcessor:
    """A history processor for ``ProcessHistory`` that sends each model request the
    messages that fit the budget (see the module doc). ``options`` and the keywords
    are :class:`~cupellation.chat.SelectOptions`' (the messages are read as OpenAI
    messages); ``keep_full_history`` keeps every message and selects from all of
    them; ``on_select`` is called with each request's selection."""
    return HistoryProcessor(options, keep_full_history=keep_full_history,
                            on_select=on_select, **keywords)
