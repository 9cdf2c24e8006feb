"""The one shape every supported format's messages are read into (:class:`Message`:
what a message says, the tool calls it makes and answers, and its tokens), what
shows a message's format, and the new objects trimming and stripping make. The
readers, one per format, are in :mod:`._reading`.

The formats: OpenAI Chat Completions (dicts, or the SDK's ``ChatCompletionMessage``),
OpenAI Responses input items (dicts, or the SDK's output items), Anthropic Messages
(dicts whose content blocks may be the SDK's typed blocks, or ``Message`` objects) and
LangChain ``BaseMessage`` objects. Objects are read by attribute, dicts by key; nothing
here imports a provider's package.

Messages are never changed. A trimmed or stripped message is a new object built by
:func:`replaced` (a dict copy, the model's ``model_copy``, a dataclass ``replace`` or
a shallow copy of another object) with the rest shared.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, is_dataclass, replace
from typing import Any, Final, Literal

from .._model import ContextKind
from ..exceptions import InvalidTypeError
from ._tokens import (
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    TextCounter,
)
from ._trim import TrimmedText, trim_text

__all__ = [
    "ASSISTANT",
    "CALLS",
    "FILE_PARTS",
    "FORMATS",
    "IMAGE_PARTS",
    "REASONING",
    "RESPONSES_OUTPUTS",
    "RESPONSES_PAIRS",
    "RESULTS",
    "SYSTEM",
    "TEXT_PARTS",
    "THINKING_BLOCKS",
    "USER",
    "Message",
    "MessageFormat",
    "Piece",
    "field_getter",
    "field_of",
    "format_hint",
    "json_text",
    "replaced",
    "without_thinking",
]

#: The message formats :func:`~cupellation.chat.select_messages` reads.
MessageFormat = Literal["openai", "openai-responses", "anthropic", "langchain"]
FORMATS: Final[tuple[str, ...]] = ("openai", "openai-responses", "anthropic", "langchain")

# What a message is, for grouping (the tool-exchange rules) and for its kind.
SYSTEM: Final = "system"
USER: Final = "user"
ASSISTANT: Final = "assistant"     # model output without tool calls
CALLS: Final = "calls"             # model output with tool calls
RESULTS: Final = "results"         # tool results (answering calls)
REASONING: Final = "reasoning"     # a Responses reasoning item

#: Responses call item types and the output item type that answers each (by call_id).
RESPONSES_PAIRS: Final[Mapping[str, str]] = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
RESPONSES_OUTPUTS: Final = frozenset(RESPONSES_PAIRS.values())
THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
IMAGE_PARTS: Final = frozenset({"image_url", "input_image", "image"})
FILE_PARTS: Final = frozenset({"file", "input_file", "document", "input_audio", "audio"})
_OPENAI_PARTS: Final = frozenset({"image_url", "input_audio", "refusal", "file"})
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_BLOCKS: Final = frozenset({"tool_use", "tool_result", "thinking",
                                      "redacted_thinking", "document", "server_tool_use",
                                      "web_search_tool_result", "search_result"})
#: The ``type`` of a LangChain message given as a dict (``message_to_dict``'s data).
_LANGCHAIN_TYPES: Final = frozenset({"system", "human", "ai", "tool", "function"})
_KIND_OF: Final[Mapping[str, ContextKind]] = {
    SYSTEM: ContextKind.SYSTEM_PROMPT,
    USER: ContextKind.MESSAGE,
    ASSISTANT: ContextKind.MESSAGE,
    RESULTS: ContextKind.TOOL_OUTPUT,
}


def field_of(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` for a mapping, ``value.key`` for an object (SDK models)."""
    if type(value) is dict:
        return value.get(key, default)
    if isinstance(value, Mapping):
        return value.get(key, default)
    return getattr(value, key, default)


def field_getter(value: Any) -> Any:
    """``field_of`` bound to ``value``: a dict's own ``get`` (the common case, in C)."""
    if type(value) is dict:
        return value.get

    def get(key: str, default: Any = None) -> Any:
        return field_of(value, key, default)

    return get


def _jsonable(value: Any) -> Any:
    """Plain JSON data for ``value`` (a dict, or an SDK model), to count it as text."""
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, Mapping):
        try:
            return dump(mode="json", exclude_none=True)
        except Exception:  # a model that cannot dump itself is counted by its repr
            return repr(value)
    return value


def json_text(value: Any) -> str:
    return json.dumps(_jsonable(value), ensure_ascii=False, default=str, sort_keys=True)


@dataclass(slots=True)
class Piece:
    """One text of a message: counted, shown in the report, and perhaps trimmed.

    ``where`` is its path inside the message (``("content",)``,
    ``("content", 2, "text")``); ``kind`` the kind whose trim limit applies, or None
    for text that is never trimmed (tool-call arguments, thinking, a message of
    several text parts)."""

    text: str
    where: tuple[str | int, ...]
    kind: ContextKind | None


@dataclass(slots=True, eq=False)
class Message:
    """One message (or Responses item), read: everything selection needs.

    ``tokens`` is its count (content, calls, overheads and estimates of images and
    files). After :meth:`trim`, ``trimmed`` holds each trimmed text and ``output``
    the object to send (the original, or a copy holding the trimmed texts).
    """

    obj: Any
    category: str
    role: str
    pieces: list[Piece] = field(default_factory=list)
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (id, name, arguments)
    answers: list[str] = field(default_factory=list)
    thinking: bool = False
    genuine_user: bool = False  # a user message with more than tool results (a turn starts)
    results_first: bool = True  # Anthropic: the tool_result blocks come before any other
    name: str = ""  # the message's own ``name`` (OpenAI, LangChain), counted
    estimated_parts: int = 0
    part_tokens: int = 0
    tokens: int = 0
    original_tokens: int = 0
    trimmed: list[tuple[int, TrimmedText]] = field(default_factory=list)
    output: Any = None
    line: str = ""

    def count(self, counter: TextCounter) -> None:
        """Set ``tokens`` (see the module doc of ``_tokens`` for the overheads)."""
        tokens = MESSAGE_OVERHEAD + counter(self.role) + self.part_tokens
        if self.name:  # the cookbook encodes every value, the name's too, + 1 for it
            tokens += counter(self.name) + NAME_OVERHEAD
        for piece in self.pieces:
            tokens += counter(piece.text)
        for _, name, arguments in self.calls:
            tokens += counter(name) + counter(arguments) + TOOL_CALL_OVERHEAD
        self.tokens = self.original_tokens = tokens
        self.output = self.obj
        self.line = self._line()

    def trim(self, limits: Mapping[ContextKind, int], counter: TextCounter) -> None:
        """Trim each text over its kind's limit (after :meth:`count`)."""
        if not limits:
            return
        replacements: dict[tuple[str | int, ...], str] = {}
        for position, piece in enumerate(self.pieces):
            limit = None if piece.kind is None else limits.get(piece.kind)
            if limit is None:
                continue
            cut = trim_text(piece.text, limit, counter)
            if cut is None:
                continue
            self.trimmed.append((position, cut))
            self.tokens -= cut.original_tokens - cut.tokens
            replacements[piece.where] = cut.text
        if replacements:
            self.output = replaced(self.obj, replacements)
            self.line = self._line()

    def _line(self) -> str:
        """How the report shows the message: ``role: text`` (trimmed texts as sent)."""
        texts = [piece.text for piece in self.pieces]
        for position, cut in self.trimmed:
            texts[position] = cut.text
        shown = [text for text in texts if text]
        shown += [f"{name}({arguments}) [{call_id}]" for call_id, name, arguments in self.calls]
        if self.estimated_parts:
            shown.append(f"[{self.estimated_parts} image/file part(s)]")
        if self.answers and self.category == RESULTS and not shown:
            shown.append("[empty tool result]")
        label = self.role if not self.answers else f"{self.role} [{', '.join(self.answers)}]"
        return f"{label}: {' '.join(shown) if shown else '[empty]'}"

    @property
    def kind(self) -> ContextKind:
        """The kind of the message alone (a tool exchange is ``ToolOutput``)."""
        return _KIND_OF.get(self.category, ContextKind.MESSAGE)


# -- detection --------------------------------------------------------------------------


def format_hint(message: Any) -> tuple[str, str] | None:
    """(format, what shows it, as "is ..." or "has ...") when ``message`` alone shows
    its format; None when it reads the same in several (plain user or assistant
    text, a developer message)."""
    if type(message) is not dict:  # a plain dict (the usual message) is no SDK object
        module = type(message).__module__
        if module.startswith("langchain_core."):
            return "langchain", f"is a LangChain {type(message).__name__}"
        if module.startswith("openai.types.responses"):
            return "openai-responses", f"is an OpenAI {type(message).__name__}"
        if module.startswith("openai.types.chat"):
            return "openai", f"is an OpenAI {type(message).__name__}"
        if module.startswith("anthropic.types"):
            return "anthropic", f"is an Anthropic {type(message).__name__}"
        if not isinstance(message, Mapping):
            return None
    kind = message.get("type")
    if isinstance(kind, str) and (kind == "chat" or (kind in _LANGCHAIN_TYPES
                                                     and "role" not in message)):
        return "langchain", f"is a LangChain message of type {kind!r}"
    if isinstance(kind, str) and kind != "message" and (
            kind in RESPONSES_PAIRS or kind in RESPONSES_OUTPUTS or kind == "reasoning"
            or "role" not in message):
        return "openai-responses", f"is an item of type {kind!r}"
    role = message.get("role")
    if role in ("tool", "function"):
        return "openai", f"has role {role!r}"
    for key in ("tool_calls", "tool_call_id", "function_call"):
        if key in message:
            return "openai", f"has {key!r}"
    content = message.get("content")
    if isinstance(content, list):
        for part in content:
            part_type = field_of(part, "type")
            if type(part).__module__.startswith("anthropic.types"):
                return "anthropic", f"has an Anthropic {type(part).__name__} block"
            if not isinstance(part_type, str):
                continue  # shows no format (reading the message names it)
            if part_type in _ANTHROPIC_BLOCKS or (
                    part_type == "image" and field_of(part, "source") is not None):
                return "anthropic", f"has a {part_type!r} block"
            if part_type in _RESPONSES_PARTS:
                return "openai-responses", f"has a {part_type!r} part"
            if part_type in _OPENAI_PARTS:
                return "openai", f"has a {part_type!r} part"
    return None


# -- new objects ------------------------------------------------------------------------


def _with(container: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """``container`` with the value at ``path`` replaced, copied along the path only."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(container, list | tuple):
        assert isinstance(head, int)
        items = list(container)
        items[head] = _with(items[head], rest, value)
        return items if isinstance(container, list) else tuple(items)
    if isinstance(container, Mapping):
        mapping = dict(container)
        mapping[head] = _with(container[head], rest, value)
        return mapping
    assert isinstance(head, str)
    update = _with(getattr(container, head), rest, value)
    model_copy = getattr(container, "model_copy", None)
    if callable(model_copy):  # the SDKs' (pydantic) models
        return model_copy(update={head: update})
    if is_dataclass(container) and not isinstance(container, type):
        return replace(container, **{head: update})
    # Any other object read by its attributes: a shallow copy given the new value.
    try:
        copied = copy.copy(container)
        setattr(copied, head, update)
    except (AttributeError, TypeError, copy.Error) as exc:
        raise InvalidTypeError("message", container,
                               f"a mapping, an SDK model, a dataclass or an object whose "
                               f"copy takes a new {head!r} ({exc}), to send it edited"
                               ) from None
    return copied


def replaced(obj: Any, replacements: Mapping[tuple[str | int, ...], str]) -> Any:
    """A copy of ``obj`` with the text at each path replaced (the original untouched)."""
    result = obj
    for path, text in replacements.items():
        result = _with(result, path, text)
    return result


def without_thinking(obj: Any) -> Any:
    """A copy of an Anthropic assistant message without its thinking blocks."""
    content = field_of(obj, "content")
    kept = [block for block in content if field_of(block, "type") not in THINKING_BLOCKS]
    return _with(obj, ("content",), kept)
