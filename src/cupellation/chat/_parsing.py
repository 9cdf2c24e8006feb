"""Reading a chat transcript's messages: which format it is in (OpenAI or
Anthropic style, told apart by their features) and each message's texts, tool
calls and tool results as segments, the future items, with every field checked
and named in errors. ``_transcripts`` turns the segments into context items (the
formats and the rules are in its module doc)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from .._model import ContextKind, ContextSource, parse_timestamp
from ..exceptions import DecodeError, FormatMismatchError

__all__ = ["ChatFormat", "Reader", "Segment", "check_chat_format", "detect_chat_format",
           "messages_of"]

#: A chat transcript's format.
ChatFormat = Literal["openai", "anthropic"]

_TOOL_CALL_ID_KEY = "chat.tool_call_id"
_TOOL_NAME_KEY = "chat.tool_name"
_NAME_KEY = "chat.name"
_ERROR_KEY = "chat.is_error"
_OMITTED_KEY = "chat.omitted_parts"

_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_ANTHROPIC_ROLES = ("user", "assistant")
_OPENAI_PART_TYPES = frozenset({"image_url", "input_audio", "refusal", "file", "input_image",
                                "input_file", "audio"})
_ANTHROPIC_BLOCK_TYPES = frozenset({"tool_use", "tool_result", "thinking",
                                    "redacted_thinking", "document", "server_tool_use",
                                    "web_search_tool_result", "search_result"})


# -- detection ------------------------------------------------------------------


def messages_of(data: Any) -> tuple[Sequence[Any], Any, bool]:
    """(messages, the top-level system value, whether ``system`` was given)."""
    if isinstance(data, Mapping):
        if "messages" not in data:
            raise DecodeError("messages", None,
                              "is required (an object with a 'messages' list, or a list)")
        messages = data["messages"]
        if not isinstance(messages, list):
            raise DecodeError("messages", messages, "must be a list of messages")
        return messages, data.get("system"), "system" in data
    if isinstance(data, list):
        return data, None, False
    raise DecodeError("messages", data,
                      "must be a list of messages or an object with a 'messages' list")


def _features(messages: Sequence[Any]) -> tuple[str | None, str | None]:
    """(first OpenAI feature, first Anthropic feature), as readable descriptions."""
    openai: str | None = None
    anthropic: str | None = None
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if openai is None:
            if role in ("system", "developer", "tool", "function"):
                openai = f"messages[{position}] has role {role!r}"
            for key in ("tool_calls", "tool_call_id", "function_call"):
                if openai is None and key in message:
                    openai = f"messages[{position}] has {key!r}"
        content = message.get("content")
        if isinstance(content, list):
            for part_index, part in enumerate(content):
                kind = part.get("type") if isinstance(part, Mapping) else None
                if not isinstance(kind, str):
                    continue  # shows no format (reading the part names it)
                where = f"messages[{position}].content[{part_index}] is a {kind!r} part"
                if openai is None and kind in _OPENAI_PART_TYPES:
                    openai = where
                if anthropic is None and (kind in _ANTHROPIC_BLOCK_TYPES or (
                        kind == "image" and isinstance(part, Mapping) and "source" in part)):
                    anthropic = where
    return openai, anthropic


def detect_chat_format(data: Any) -> ChatFormat:
    """``"anthropic"`` or ``"openai"`` for a transcript (the features that tell
    them apart: Anthropic's top-level ``system`` and ``tool_use`` / ``tool_result``
    blocks; OpenAI's ``system`` / ``tool`` roles, ``tool_calls`` and ``tool_call_id``;
    plain user and assistant text reads the same either way).

    Raises :class:`~cupellation.exceptions.DecodeError` for a transcript that
    mixes the two formats' features, naming one of each.
    """
    messages, _, has_system = messages_of(data)
    openai, anthropic = _features(messages)
    if has_system and anthropic is None:
        anthropic = "a top-level 'system'"
    if openai is not None and anthropic is not None:
        raise DecodeError("messages", None,
                          f"mixes OpenAI and Anthropic formats: {openai}, but {anthropic}; "
                          "pass format='openai' or format='anthropic'")
    return "anthropic" if anthropic is not None else "openai"


def check_chat_format(messages: Sequence[Any], fmt: ChatFormat) -> None:
    """Refuse ``messages`` given as ``fmt`` when one shows the other format: read as
    OpenAI, Anthropic ``tool_use`` and ``tool_result`` blocks are unknown parts and
    their calls and results would be left out of the items without a word."""
    openai, anthropic = _features(messages)
    other, shown_by = (("anthropic", anthropic) if fmt == "openai" else ("openai", openai))
    if shown_by is not None:
        raise FormatMismatchError("messages", None, given_format=fmt, detected_format=other,
                                  shown_by=shown_by)


# -- reading --------------------------------------------------------------------


@dataclass(slots=True)
class Segment:
    """One future item: its text and everything known about it."""

    text: str
    role: str
    kind: ContextKind
    source: ContextSource
    message_index: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    pinned: bool = False
    priority: int | None = None
    tags: tuple[str, ...] = ()
    timestamp: datetime | None = None
    offset: int = 0  # the segment's place within its message


class Reader:
    """Turns one transcript into segments, naming fields for errors."""

    def __init__(self, fmt: ChatFormat, kinds: Mapping[str, ContextKind],
                 lines: Sequence[int] | None) -> None:
        self.fmt = fmt
        self.kinds = kinds
        self.lines = lines
        self.segments: list[Segment] = []
        self.tool_names: dict[str, str] = {}

    # -- errors

    def error(self, message_index: int | None, where: str, value: Any,
              problem: str) -> DecodeError:
        line = None
        if self.lines is not None and message_index is not None:
            line = self.lines[message_index]
        return DecodeError(where, value, problem, line=line)

    # -- message-level fields

    def extras(self, message: Mapping[str, Any], index: int, where: str
               ) -> tuple[datetime | None, int | None, tuple[str, ...], bool]:
        moment = None
        for key in ("timestamp", "created_at"):
            if message.get(key) is not None:
                moment = self.moment(message[key], index, f"{where}.{key}")
                break
        priority = message.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise self.error(index, f"{where}.priority", priority, "must be an integer")
        tags = message.get("tags", ())
        if isinstance(tags, str) or not isinstance(tags, Sequence) or not all(
                isinstance(tag, str) for tag in tags):
            raise self.error(index, f"{where}.tags", tags, "must be a list of strings")
        pinned = message.get("pinned", False)
        if not isinstance(pinned, bool):
            raise self.error(index, f"{where}.pinned", pinned, "must be true or false")
        return moment, priority, tuple(tags), pinned

    def moment(self, value: Any, index: int, where: str) -> datetime:
        if isinstance(value, bool):
            raise self.error(index, where, value, "must be an ISO 8601 timestamp or Unix seconds")
        if isinstance(value, int | float):
            try:
                return datetime.fromtimestamp(value, UTC)
            except (OverflowError, OSError, ValueError):
                raise self.error(index, where, value, "is not a usable Unix time") from None
        if isinstance(value, str):
            try:
                return parse_timestamp(value, field_name=where)
            except DecodeError as exc:
                raise self.error(index, where, value, exc.problem) from None
        raise self.error(index, where, value, "must be an ISO 8601 timestamp or Unix seconds")

    def add(self, segment: Segment) -> None:
        self.segments.append(segment)

    # -- content

    def text_of(self, content: Any, index: int | None, where: str,
                part_types: tuple[str, ...]) -> tuple[str, list[str]]:
        """The joined text of a string or a list of text parts, and the omitted part types."""
        if content is None:
            return "", []
        if isinstance(content, str):
            return content, []
        if not isinstance(content, list):
            raise self.error(index, where, content, "must be a string or a list of parts")
        texts: list[str] = []
        omitted: list[str] = []
        for part_index, part in enumerate(content):
            part_where = f"{where}[{part_index}]"
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, Mapping):
                raise self.error(index, part_where, part, "must be an object with a 'type'")
            kind = part.get("type")
            if not isinstance(kind, str):
                raise self.error(index, f"{part_where}.type", kind, "must be a string")
            if kind in part_types:
                key = "refusal" if kind == "refusal" else "text"
                text = part.get(key)
                if not isinstance(text, str):
                    raise self.error(index, f"{part_where}.{key}", text, "must be a string")
                texts.append(text)
            else:
                omitted.append(kind)
        return "\n".join(text for text in texts if text), omitted

    def text_segment(self, text: str, omitted: list[str], role: str, kind_role: str,
                     index: int | None, metadata: dict[str, Any]) -> None:
        if not text and omitted:
            text = " ".join(f"[{kind}]" for kind in omitted)
        if not text:
            return
        extra = dict(metadata)
        if omitted:
            extra[_OMITTED_KEY] = omitted
        source = ContextSource.TOOL if kind_role == "tool_result" else ContextSource.CHAT
        self.add(Segment(text, role, self.kinds[kind_role], source, index, extra))

    def tool_call(self, name: str, arguments: str, call_id: str | None, role: str,
                  index: int) -> None:
        metadata: dict[str, Any] = {_TOOL_NAME_KEY: name}
        if call_id is not None:
            metadata[_TOOL_CALL_ID_KEY] = call_id
            self.tool_names[call_id] = name
        self.add(Segment(f"{name}({arguments})", role, self.kinds["tool_call"],
                          ContextSource.TOOL, index, metadata))

    # -- OpenAI

    def openai(self, messages: Sequence[Any]) -> None:
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if not isinstance(message, Mapping):
                raise self.error(index, where, message, "must be an object")
            role = message.get("role")
            if role not in _OPENAI_ROLES:
                raise self.error(index, f"{where}.role", role,
                                 f"must be one of {', '.join(_OPENAI_ROLES)}")
            start = len(self.segments)
            base: dict[str, Any] = {}
            name = message.get("name")
            if name is not None:
                if not isinstance(name, str):
                    raise self.error(index, f"{where}.name", name, "must be a string")
                base[_NAME_KEY] = name
            text, omitted = self.text_of(message.get("content"), index, f"{where}.content",
                                         ("text", "refusal", "input_text", "output_text"))
            if role in ("tool", "function"):
                call_id = message.get("tool_call_id")
                if role == "tool" and not isinstance(call_id, str):
                    raise self.error(index, f"{where}.tool_call_id", call_id,
                                     "must be a string (the id of the call answered)")
                if isinstance(call_id, str):
                    base[_TOOL_CALL_ID_KEY] = call_id
                    if call_id in self.tool_names:
                        base[_TOOL_NAME_KEY] = self.tool_names[call_id]
                elif isinstance(name, str):
                    base[_TOOL_NAME_KEY] = name
                self.text_segment(text, omitted, role, "tool_result", index, base)
            else:
                kind_role = "system" if role in ("system", "developer") else str(role)
                self.text_segment(text, omitted, role, kind_role, index, base)
            self.openai_calls(message, index, where)
            self.finish(message, index, where, start)

    def openai_calls(self, message: Mapping[str, Any], index: int, where: str) -> None:
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise self.error(index, f"{where}.tool_calls", calls, "must be a list")
            for call_index, call in enumerate(calls):
                call_where = f"{where}.tool_calls[{call_index}]"
                if not isinstance(call, Mapping):
                    raise self.error(index, call_where, call, "must be an object")
                function = call.get("function")
                if not isinstance(function, Mapping):
                    raise self.error(index, f"{call_where}.function", function,
                                     "must be an object with 'name' and 'arguments'")
                name, arguments = self.function(function, index, f"{call_where}.function")
                call_id = call.get("id")
                if call_id is not None and not isinstance(call_id, str):
                    raise self.error(index, f"{call_where}.id", call_id, "must be a string")
                self.tool_call(name, arguments, call_id, "assistant", index)
        legacy = message.get("function_call")
        if legacy is not None:
            if not isinstance(legacy, Mapping):
                raise self.error(index, f"{where}.function_call", legacy, "must be an object")
            name, arguments = self.function(legacy, index, f"{where}.function_call")
            self.tool_call(name, arguments, None, "assistant", index)

    def function(self, function: Mapping[str, Any], index: int, where: str) -> tuple[str, str]:
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise self.error(index, f"{where}.name", name, "must be a non-empty string")
        arguments = function.get("arguments", "")
        if isinstance(arguments, Mapping | list):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise self.error(index, f"{where}.arguments", arguments,
                             "must be a string (JSON text)")
        return name, arguments

    # -- Anthropic

    def anthropic(self, system: Any, has_system: bool, messages: Sequence[Any]) -> None:
        if has_system and system is not None:
            text, omitted = self.text_of(system, None, "system", ("text",))
            self.text_segment(text, omitted, "system", "system", None, {})
        for index, message in enumerate(messages):
            where = f"messages[{index}]"
            if not isinstance(message, Mapping):
                raise self.error(index, where, message, "must be an object")
            role = message.get("role")
            if role not in _ANTHROPIC_ROLES:
                raise self.error(index, f"{where}.role", role,
                                 "must be 'user' or 'assistant' (the system prompt is the "
                                 "top-level 'system')")
            start = len(self.segments)
            content = message.get("content")
            if isinstance(content, str) or content is None:
                self.text_segment(content or "", [], role, role, index, {})
            elif isinstance(content, list):
                self.anthropic_blocks(content, role, index, f"{where}.content")
            else:
                raise self.error(index, f"{where}.content", content,
                                 "must be a string or a list of blocks")
            self.finish(message, index, where, start)

    def anthropic_blocks(self, blocks: list[Any], role: str, index: int, where: str) -> None:
        pending: list[Any] = []

        def flush() -> None:
            if pending:
                text, omitted = self.text_of(list(pending), index, where, ("text",))
                self.text_segment(text, omitted, role, role, index, {})
                pending.clear()

        for block_index, block in enumerate(blocks):
            block_where = f"{where}[{block_index}]"
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_use":
                flush()
                assert isinstance(block, Mapping)
                name = block.get("name")
                if not isinstance(name, str) or not name:
                    raise self.error(index, f"{block_where}.name", name,
                                     "must be a non-empty string")
                call_id = block.get("id")
                if call_id is not None and not isinstance(call_id, str):
                    raise self.error(index, f"{block_where}.id", call_id, "must be a string")
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False)
                self.tool_call(name, arguments, call_id, role, index)
            elif kind == "tool_result":
                flush()
                assert isinstance(block, Mapping)
                self.tool_result(block, role, index, block_where)
            else:
                pending.append(block)
        flush()

    def tool_result(self, block: Mapping[str, Any], role: str, index: int, where: str) -> None:
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            raise self.error(index, f"{where}.tool_use_id", call_id,
                             "must be a string (the id of the tool_use answered)")
        metadata: dict[str, Any] = {_TOOL_CALL_ID_KEY: call_id}
        if call_id in self.tool_names:
            metadata[_TOOL_NAME_KEY] = self.tool_names[call_id]
        is_error = block.get("is_error", False)
        if not isinstance(is_error, bool):
            raise self.error(index, f"{where}.is_error", is_error, "must be true or false")
        if is_error:
            metadata[_ERROR_KEY] = True
        text, omitted = self.text_of(block.get("content"), index, f"{where}.content", ("text",))
        if not text and not omitted:
            text = "[empty tool result]"
        self.text_segment(text, omitted, role, "tool_result", index, metadata)

    # -- shared

    def finish(self, message: Mapping[str, Any], index: int, where: str, start: int) -> None:
        """Apply a message's own timestamp, priority, tags and pin to its segments."""
        moment, priority, tags, pinned = self.extras(message, index, where)
        for offset, segment in enumerate(self.segments[start:]):
            segment.timestamp = moment
            segment.priority = priority
            segment.tags = tags
            segment.pinned = pinned
            segment.offset = offset

