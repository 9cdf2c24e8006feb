"""Reading the messages of every supported format into one shape (:class:`Message`):
what each message says, the tool calls it makes and answers, and its tokens.

The formats: OpenAI Chat Completions (dicts, or the SDK's ``ChatCompletionMessage``),
OpenAI Responses input items (dicts, or the SDK's output items), Anthropic Messages
(dicts whose content blocks may be the SDK's typed blocks, or ``Message`` objects) and
LangChain ``BaseMessage`` objects. Objects are read by attribute, dicts by key; nothing
here imports a provider's package.

Messages are never changed. A trimmed or stripped message is a new object built by
:func:`replaced` (a dict copy, or the model's ``model_copy``) with the rest shared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from .._model import ContextKind
from ..exceptions import DecodeError
from ._tokens import (
    FILE_TOKENS,
    MESSAGE_OVERHEAD,
    NAME_OVERHEAD,
    TOOL_CALL_OVERHEAD,
    TextCounter,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
)
from ._trim import TrimmedText, trim_text

__all__ = [
    "ASSISTANT",
    "CALLS",
    "FORMATS",
    "REASONING",
    "RESPONSES_PAIRS",
    "RESULTS",
    "SYSTEM",
    "USER",
    "Message",
    "MessageFormat",
    "Piece",
    "format_hint",
    "read_message",
    "read_system",
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
_RESPONSES_OUTPUTS: Final = frozenset(RESPONSES_PAIRS.values())
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})
_TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
_IMAGE_PARTS: Final = frozenset({"image_url", "input_image", "image"})
_FILE_PARTS: Final = frozenset({"file", "input_file", "document", "input_audio", "audio"})
_OPENAI_PARTS: Final = frozenset({"image_url", "input_audio", "refusal", "file"})
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_BLOCKS: Final = frozenset({"tool_use", "tool_result", "thinking",
                                      "redacted_thinking", "document", "server_tool_use",
                                      "web_search_tool_result", "search_result"})
_KIND_OF: Final[Mapping[str, ContextKind]] = {
    SYSTEM: ContextKind.SYSTEM_PROMPT,
    USER: ContextKind.MESSAGE,
    ASSISTANT: ContextKind.MESSAGE,
    RESULTS: ContextKind.TOOL_OUTPUT,
}


def _get(value: Any, key: str, default: Any = None) -> Any:
    """``value[key]`` for a mapping, ``value.key`` for an object (SDK models)."""
    if type(value) is dict:
        return value.get(key, default)
    if isinstance(value, Mapping):
        return value.get(key, default)
    return getattr(value, key, default)


def _getter(value: Any) -> Any:
    """``_get`` bound to ``value``: a dict's own ``get`` (the common case, in C)."""
    if type(value) is dict:
        return value.get

    def get(key: str, default: Any = None) -> Any:
        return _get(value, key, default)

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


def _json_text(value: Any) -> str:
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
    has_name: bool = False
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
        if self.has_name:
            tokens += NAME_OVERHEAD
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
    if isinstance(kind, str) and kind != "message" and (
            kind in RESPONSES_PAIRS or kind in _RESPONSES_OUTPUTS or kind == "reasoning"
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
            part_type = _get(part, "type")
            if type(part).__module__.startswith("anthropic.types"):
                return "anthropic", f"has an Anthropic {type(part).__name__} block"
            if part_type in _ANTHROPIC_BLOCKS or (
                    part_type == "image" and _get(part, "source") is not None):
                return "anthropic", f"has a {part_type!r} block"
            if part_type in _RESPONSES_PARTS:
                return "openai-responses", f"has a {part_type!r} part"
            if part_type in _OPENAI_PARTS:
                return "openai", f"has a {part_type!r} part"
    return None


# -- reading ----------------------------------------------------------------------------


class _Reader:
    """Reads one message; ``where`` names it in errors (``messages[3]``)."""

    __slots__ = ("fmt", "message", "where")

    def __init__(self, fmt: str, where: str) -> None:
        self.fmt = fmt
        self.where = where
        self.message: Message

    def error(self, path: str, value: Any, problem: str) -> DecodeError:
        return DecodeError(f"{self.where}{path}", value, problem)

    def text(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise self.error(path, value, "must be a string")
        return value

    # -- content

    def content(self, content: Any, path: tuple[str | int, ...], kind: ContextKind | None,
                *, calls_in_blocks: bool) -> None:
        """The pieces, calls, answers and parts of a content value (a string, a list of
        parts or blocks, or None)."""
        message = self.message
        if content is None:
            return
        if isinstance(content, str):
            if content:
                message.pieces.append(Piece(content, path, kind))
            return
        if not isinstance(content, Sequence) or isinstance(content, bytes | bytearray):
            raise self.error("." + ".".join(map(str, path)), content,
                             "must be a string or a list of parts")
        direct: list[Piece] = []
        for index, part in enumerate(content):
            piece = self.part(part, (*path, index), calls_in_blocks=calls_in_blocks)
            if piece is not None:
                direct.append(piece)
        # A message's text is trimmed only when it is in one place: a message of
        # several text parts is left whole.
        if len(direct) == 1 and kind is not None:
            direct[0].kind = kind
        else:
            for piece in direct:
                piece.kind = None

    def part(self, part: Any, path: tuple[str | int, ...], *,
             calls_in_blocks: bool) -> Piece | None:
        """Read one part or block; the piece made when it is a text part."""
        message = self.message
        where = "." + ".".join(map(str, path))
        if isinstance(part, str):  # LangChain allows plain strings in a content list
            if not part:
                return None
            piece = Piece(part, path, ContextKind.MESSAGE)
            message.pieces.append(piece)
            return piece
        kind = _get(part, "type")
        if not isinstance(kind, str):
            raise self.error(f"{where}.type", kind, "must be a string")
        if kind in _TEXT_PARTS:
            text = self.text(_get(part, "text"), f"{where}.text")
            if not text:
                return None
            piece = Piece(text, (*path, "text"), ContextKind.MESSAGE)
            message.pieces.append(piece)
            return piece
        if kind == "refusal":
            message.pieces.append(Piece(self.text(_get(part, "refusal"), f"{where}.refusal"),
                                        (*path, "refusal"), None))
        elif kind in _THINKING:
            message.thinking = True
            thought = _get(part, "thinking")
            if isinstance(thought, str) and thought:
                message.pieces.append(Piece(thought, (*path, "thinking"), None))
        elif kind in _IMAGE_PARTS:
            self.image(part, kind)
        elif kind in _FILE_PARTS:
            self.file(part, kind, path)
        elif kind == "tool_use" and calls_in_blocks:
            call_id = _get(part, "id")
            name = _get(part, "name")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(f"{where}.id", call_id, "must be a non-empty string")
            if not isinstance(name, str) or not name:
                raise self.error(f"{where}.name", name, "must be a non-empty string")
            message.calls.append((call_id, name, _json_text(_get(part, "input", {}))))
        elif kind in ("tool_use", "tool_call") and not calls_in_blocks:
            pass  # LangChain repeats its tool_calls as blocks: counted once, from tool_calls
        elif kind == "tool_result" and calls_in_blocks:
            self.tool_result(part, path)
        else:  # server tools, search results and blocks this version does not know
            message.pieces.append(Piece(_json_text(part), path, None))
        return None

    def tool_result(self, block: Any, path: tuple[str | int, ...]) -> None:
        message = self.message
        where = "." + ".".join(map(str, path))
        call_id = _get(block, "tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise self.error(f"{where}.tool_use_id", call_id,
                             "must be a string (the id of the tool_use answered)")
        message.answers.append(call_id)
        inner = _get(block, "content")
        if isinstance(inner, str):
            if inner:
                message.pieces.append(Piece(inner, (*path, "content"), ContextKind.TOOL_OUTPUT))
        elif inner is not None:
            self.content(inner, (*path, "content"), ContextKind.TOOL_OUTPUT,
                         calls_in_blocks=False)

    def image(self, part: Any, kind: str) -> None:
        message = self.message
        message.estimated_parts += 1
        if self.fmt == "anthropic":
            source = _get(part, "source")
            data = _get(source, "data") if source is not None else None
            size = image_size(data) if isinstance(data, str) else None
            message.part_tokens += anthropic_image_tokens(size)
            return
        url = _get(part, "image_url") if kind != "image" else None
        detail = _get(part, "detail")
        if url is not None and not isinstance(url, str):  # chat: {"url", "detail"}
            detail = _get(url, "detail", detail)
            url = _get(url, "url")
        if url is None:  # LangChain's standard blocks: base64 / data / url
            url = _get(part, "base64") or _get(part, "data") or _get(part, "url")
        size = image_size(url) if isinstance(url, str) and not url.startswith("http") else None
        message.part_tokens += openai_image_tokens(detail, size)

    def file(self, part: Any, kind: str, path: tuple[str | int, ...]) -> None:
        message = self.message
        source = _get(part, "source")
        if kind == "document" and _get(source, "type") == "text":
            text = _get(source, "data")
            if isinstance(text, str) and text:
                message.pieces.append(Piece(text, (*path, "source", "data"), None))
                return
        message.estimated_parts += 1
        message.part_tokens += FILE_TOKENS

    # -- per format

    def openai(self, obj: Any) -> None:
        get = _getter(obj)
        role = get("role")
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            raise self.error(".role", role,
                             "must be one of system, developer, user, assistant, tool, "
                             "function")
        message = self.message = Message(obj, _CATEGORY_OF_ROLE[role], role)
        kind = _TEXT_KIND_OF_ROLE[role]
        name = get("name")
        message.has_name = isinstance(name, str) and role not in ("tool", "function")
        self.content(get("content"), ("content",), kind, calls_in_blocks=False)
        if role == "tool":
            call_id = get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".tool_call_id", call_id,
                                 "must be a string (the id of the call answered)")
            message.answers.append(call_id)
        elif role == "function":
            if not isinstance(name, str) or not name:
                raise self.error(".name", name, "must name the function answered")
            message.answers.append(f"function:{name}")
        for index, call in enumerate(get("tool_calls") or ()):
            self.openai_call(call, index)
        legacy = get("function_call")
        if legacy is not None:
            fn_name, arguments = self.function(legacy, ".function_call")
            message.calls.append((f"function:{fn_name}", fn_name, arguments))
        if message.calls:
            message.category = CALLS

    def openai_call(self, call: Any, index: int) -> None:
        get = _getter(call)
        call_id = get("id")
        if not isinstance(call_id, str) or not call_id:
            raise self.error(f".tool_calls[{index}].id", call_id, "must be a non-empty string")
        path = f".tool_calls[{index}]"
        custom = get("custom")
        if custom is not None and get("function") is None:
            name = self.text(_get(custom, "name"), f"{path}.custom.name")
            arguments = _get(custom, "input", "")
            self.message.calls.append((call_id, name, arguments if isinstance(arguments, str)
                                       else _json_text(arguments)))
            return
        function = get("function")
        if function is None:
            raise self.error(f"{path}.function", function,
                             "must be an object with 'name' and 'arguments'")
        name, arguments = self.function(function, f"{path}.function")
        self.message.calls.append((call_id, name, arguments))

    def function(self, function: Any, path: str) -> tuple[str, str]:
        name = _get(function, "name")
        if not isinstance(name, str) or not name:
            raise self.error(f"{path}.name", name, "must be a non-empty string")
        arguments = _get(function, "arguments", "")
        if not isinstance(arguments, str):
            arguments = _json_text(arguments)
        return name, arguments

    def responses(self, obj: Any) -> None:
        kind = _get(obj, "type")
        role = _get(obj, "role")
        if kind in (None, "message"):
            if role not in ("system", "developer", "user", "assistant"):
                raise self.error(".role", role,
                                 "must be one of system, developer, user, assistant")
            category = {"system": SYSTEM, "developer": SYSTEM, "user": USER}.get(role, ASSISTANT)
            message = self.message = Message(obj, category, role)
            text_kind = (ContextKind.SYSTEM_PROMPT if category == SYSTEM
                         else ContextKind.MESSAGE)
            self.content(_get(obj, "content"), ("content",), text_kind, calls_in_blocks=False)
            return
        if not isinstance(kind, str):
            raise self.error(".type", kind, "must be a string")
        message = self.message = Message(obj, ASSISTANT, kind)
        if kind == "reasoning":
            message.category = REASONING
            for index, summary in enumerate(_get(obj, "summary") or ()):
                text = _get(summary, "text")
                if isinstance(text, str) and text:
                    message.pieces.append(Piece(text, ("summary", index, "text"), None))
            return
        if kind in RESPONSES_PAIRS:
            call_id = _get(obj, "call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".call_id", call_id, "must be a non-empty string")
            name = _get(obj, "name") or kind
            arguments = _get(obj, "arguments")
            if arguments is None:
                arguments = _get(obj, "input")
            if arguments is None:
                arguments = _get(obj, "action")
            message.calls.append((call_id, str(name), arguments if isinstance(arguments, str)
                                  else _json_text(arguments if arguments is not None else {})))
            message.category = CALLS
            return
        if kind in _RESPONSES_OUTPUTS:
            call_id = _get(obj, "call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".call_id", call_id, "must be a non-empty string")
            message.category = RESULTS
            message.answers.append(call_id)
            output = _get(obj, "output")
            if isinstance(output, str):
                if output:
                    message.pieces.append(Piece(output, ("output",), ContextKind.TOOL_OUTPUT))
            elif output is not None:
                self.content(output, ("output",), ContextKind.TOOL_OUTPUT,
                             calls_in_blocks=False)
            return
        # Server-side tool calls (web search, ...), references and items this version
        # does not know: model output, counted as their JSON.
        message.pieces.append(Piece(_json_text(obj), (), None))

    def anthropic(self, obj: Any) -> None:
        role = _get(obj, "role")
        if role not in ("user", "assistant", "system"):
            raise self.error(".role", role,
                             "must be 'user' or 'assistant' (the system prompt is passed "
                             "apart)")
        category = {"user": USER, "assistant": ASSISTANT}.get(role, SYSTEM)
        message = self.message = Message(obj, category, role)
        kind = ContextKind.SYSTEM_PROMPT if category == SYSTEM else ContextKind.MESSAGE
        self.content(_get(obj, "content"), ("content",), kind,
                     calls_in_blocks=category != SYSTEM)
        if message.calls:
            if role != "assistant":
                raise self.error(".content", "tool_use", "holds tool_use blocks, which only an "
                                 "assistant message may hold")
            message.category = CALLS
        if message.answers:
            if role != "user":
                raise self.error(".content", "tool_result", "holds tool_result blocks, which "
                                 "only a user message may hold")
            message.category = RESULTS
            types_in_order = [_get(block, "type") for block in _get(obj, "content") or ()]
            message.genuine_user = any(kind != "tool_result" for kind in types_in_order)
            first_other = next((k for k, kind in enumerate(types_in_order)
                                if kind != "tool_result"), len(types_in_order))
            message.results_first = "tool_result" not in types_in_order[first_other:]
        elif category == USER:
            message.genuine_user = True

    def langchain(self, obj: Any) -> None:
        kind = _get(obj, "type")
        role = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool",
                "function": "function"}.get(kind) if isinstance(kind, str) else None
        if kind == "chat":
            role = _get(obj, "role")
            if role not in ("system", "user", "assistant"):
                raise self.error(".role", role, "must be system, user or assistant")
        if role is None:
            raise self.error(".type", kind,
                             "must be a system, human, ai, tool or function message")
        message = self.message = Message(obj, _CATEGORY_OF_ROLE[role], role)
        text_kind = _TEXT_KIND_OF_ROLE[role]
        self.content(_get(obj, "content"), ("content",), text_kind, calls_in_blocks=False)
        if role == "tool":
            call_id = _get(obj, "tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".tool_call_id", call_id, "must be a non-empty string")
            message.answers.append(call_id)
        elif role == "function":
            name = _get(obj, "name")
            if not isinstance(name, str) or not name:
                raise self.error(".name", name, "must name the function answered")
            message.answers.append(f"function:{name}")
        for index, call in enumerate(_get(obj, "tool_calls") or ()):
            call_id = _get(call, "id")
            name = _get(call, "name")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(f".tool_calls[{index}].id", call_id,
                                 "must be a non-empty string")
            if not isinstance(name, str) or not name:
                raise self.error(f".tool_calls[{index}].name", name,
                                 "must be a non-empty string")
            message.calls.append((call_id, name, _json_text(_get(call, "args", {}))))
        if message.calls:
            message.category = CALLS


_CATEGORY_OF_ROLE: Final[Mapping[str, str]] = {
    "system": SYSTEM, "developer": SYSTEM, "user": USER, "assistant": ASSISTANT,
    "tool": RESULTS, "function": RESULTS}
_TEXT_KIND_OF_ROLE: Final[Mapping[str, ContextKind]] = {
    "system": ContextKind.SYSTEM_PROMPT, "developer": ContextKind.SYSTEM_PROMPT,
    "user": ContextKind.MESSAGE, "assistant": ContextKind.MESSAGE,
    "tool": ContextKind.TOOL_OUTPUT, "function": ContextKind.TOOL_OUTPUT}


def read_message(obj: Any, fmt: str, where: str, counter: TextCounter,
                 limits: Mapping[ContextKind, int]) -> Message:
    """``obj`` read as a message of ``fmt``, counted, and trimmed to ``limits``.

    Raises :class:`~cupellation.exceptions.DecodeError` naming ``where`` and the field
    for a message the format does not allow.
    """
    reader = _Reader(fmt, where)
    if obj is None or isinstance(obj, str | bytes | int | float):
        raise DecodeError(where, obj, "must be a message (an object or a mapping)")
    if fmt == "openai":
        reader.openai(obj)
    elif fmt == "openai-responses":
        reader.responses(obj)
    elif fmt == "anthropic":
        reader.anthropic(obj)
    else:
        reader.langchain(obj)
    message = reader.message
    message.count(counter)
    message.trim(limits, counter)
    return _checked_text(message, where)


def read_system(system: Any, counter: TextCounter) -> Message:
    """Anthropic's top-level ``system`` (a string or a list of text blocks), read as a
    pinned system message; never trimmed (it is not returned)."""
    reader = _Reader("anthropic", "system")
    message = reader.message = Message(system, SYSTEM, "system")
    reader.content(system, (), None, calls_in_blocks=False)
    message.count(counter)
    return _checked_text(message, "system")


def _checked_text(message: Message, where: str) -> Message:
    """``message``, after checking its texts are Unicode (no lone surrogate, which no
    UTF-8 output can hold). Its ``line`` holds every text it has (role, contents, call
    ids, names and arguments, answered ids), so one check settles them all, once per
    message: its unit's item is then built without checking them again."""
    line = message.line
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:
            raise DecodeError(where, line, "holds text that is not Unicode (a lone "
                                           "surrogate)") from None
    return message


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
        copy = dict(container)
        copy[head] = _with(container[head], rest, value)
        return copy
    assert isinstance(head, str)
    return container.model_copy(update={head: _with(getattr(container, head), rest, value)})


def replaced(obj: Any, replacements: Mapping[tuple[str | int, ...], str]) -> Any:
    """A copy of ``obj`` with the text at each path replaced (the original untouched)."""
    result = obj
    for path, text in replacements.items():
        result = _with(result, path, text)
    return result


def without_thinking(obj: Any) -> Any:
    """A copy of an Anthropic assistant message without its thinking blocks."""
    content = _get(obj, "content")
    kept = [block for block in content if _get(block, "type") not in _THINKING]
    return _with(obj, ("content",), kept)
