"""Reading one message of each supported format into a :class:`~._messages.Message`:
its texts, images and files, the tool calls it makes and the calls it answers, each
field checked, then counted and trimmed (:func:`read_message`).

Objects are read by attribute, dicts by key; nothing here imports a provider's package.
A message that breaks its format raises
:class:`~cupellation.exceptions.DecodeError` naming the message and the field
(``messages[3].tool_calls[0].id``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._model import ContextKind, check_text
from ..exceptions import DecodeError, InvalidTextError, InvalidTypeError
from ._messages import (
    ASSISTANT,
    CALLS,
    FILE_PARTS,
    IMAGE_PARTS,
    REASONING,
    RESPONSES_OUTPUTS,
    RESPONSES_PAIRS,
    RESULTS,
    SYSTEM,
    TEXT_PARTS,
    THINKING_BLOCKS,
    USER,
    Message,
    Piece,
    field_getter,
    field_of,
    json_text,
)
from ._tokens import (
    FILE_TOKENS,
    TextCounter,
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
)

__all__ = ["read_message", "read_system"]


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

    def listed(self, value: Any, path: str) -> Sequence[Any]:
        """``value`` as the list it must be (None: an empty one)."""
        if value is None:
            return ()
        if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
            raise self.error(path, value, "must be a list")
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
        kind = field_of(part, "type")
        if not isinstance(kind, str):
            raise self.error(f"{where}.type", kind, "must be a string")
        if kind in TEXT_PARTS:
            text = self.text(field_of(part, "text"), f"{where}.text")
            if not text:
                return None
            piece = Piece(text, (*path, "text"), ContextKind.MESSAGE)
            message.pieces.append(piece)
            return piece
        if kind == "refusal":
            message.pieces.append(Piece(self.text(field_of(part, "refusal"), f"{where}.refusal"),
                                        (*path, "refusal"), None))
        elif kind in THINKING_BLOCKS:
            message.thinking = True
            thought = field_of(part, "thinking")
            if isinstance(thought, str) and thought:
                message.pieces.append(Piece(thought, (*path, "thinking"), None))
        elif kind in IMAGE_PARTS:
            self.image(part, kind)
        elif kind in FILE_PARTS:
            self.file(part, kind, path)
        elif kind == "tool_use" and calls_in_blocks:
            call_id = field_of(part, "id")
            name = field_of(part, "name")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(f"{where}.id", call_id, "must be a non-empty string")
            if not isinstance(name, str) or not name:
                raise self.error(f"{where}.name", name, "must be a non-empty string")
            message.calls.append((call_id, name, json_text(field_of(part, "input", {}))))
        elif kind in ("tool_use", "tool_call") and not calls_in_blocks:
            pass  # LangChain repeats its tool_calls as blocks: counted once, from tool_calls
        elif kind == "tool_result" and calls_in_blocks:
            self.tool_result(part, path)
        else:  # server tools, search results and blocks this version does not know
            message.pieces.append(Piece(json_text(part), path, None))
        return None

    def tool_result(self, block: Any, path: tuple[str | int, ...]) -> None:
        message = self.message
        where = "." + ".".join(map(str, path))
        call_id = field_of(block, "tool_use_id")
        if not isinstance(call_id, str) or not call_id:
            raise self.error(f"{where}.tool_use_id", call_id,
                             "must be a string (the id of the tool_use answered)")
        message.answers.append(call_id)
        inner = field_of(block, "content")
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
            source = field_of(part, "source")
            data = field_of(source, "data") if source is not None else None
            size = image_size(data) if isinstance(data, str) else None
            message.part_tokens += anthropic_image_tokens(size)
            return
        url = field_of(part, "image_url") if kind != "image" else None
        detail = field_of(part, "detail")
        if url is not None and not isinstance(url, str):  # chat: {"url", "detail"}
            detail = field_of(url, "detail", detail)
            url = field_of(url, "url")
        if url is None:  # LangChain's standard blocks: base64 / data / url
            url = field_of(part, "base64") or field_of(part, "data") or field_of(part, "url")
        size = image_size(url) if isinstance(url, str) and not url.startswith("http") else None
        message.part_tokens += openai_image_tokens(detail, size)

    def file(self, part: Any, kind: str, path: tuple[str | int, ...]) -> None:
        message = self.message
        source = field_of(part, "source")
        if kind == "document" and field_of(source, "type") == "text":
            text = field_of(source, "data")
            if isinstance(text, str) and text:
                message.pieces.append(Piece(text, (*path, "source", "data"), None))
                return
        message.estimated_parts += 1
        message.part_tokens += FILE_TOKENS

    # -- per format

    def openai(self, obj: Any) -> None:
        get = field_getter(obj)
        role = get("role")
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            raise self.error(".role", role,
                             "must be one of system, developer, user, assistant, tool, "
                             "function")
        message = self.message = Message(obj, _CATEGORY_OF_ROLE[role], role)
        kind = _TEXT_KIND_OF_ROLE[role]
        name = get("name")
        # Every role's name is sent, and counted (a tool or function message's too).
        message.name = name if isinstance(name, str) else ""
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
        for index, call in enumerate(self.listed(get("tool_calls"), ".tool_calls")):
            self.openai_call(call, index)
        legacy = get("function_call")
        if legacy is not None:
            fn_name, arguments = self.function(legacy, ".function_call")
            message.calls.append((f"function:{fn_name}", fn_name, arguments))
        if message.calls:
            message.category = CALLS

    def openai_call(self, call: Any, index: int) -> None:
        get = field_getter(call)
        call_id = get("id")
        if not isinstance(call_id, str) or not call_id:
            raise self.error(f".tool_calls[{index}].id", call_id, "must be a non-empty string")
        path = f".tool_calls[{index}]"
        custom = get("custom")
        if custom is not None and get("function") is None:
            name = self.text(field_of(custom, "name"), f"{path}.custom.name")
            arguments = field_of(custom, "input", "")
            self.message.calls.append((call_id, name, arguments if isinstance(arguments, str)
                                       else json_text(arguments)))
            return
        function = get("function")
        if function is None:
            raise self.error(f"{path}.function", function,
                             "must be an object with 'name' and 'arguments'")
        name, arguments = self.function(function, f"{path}.function")
        self.message.calls.append((call_id, name, arguments))

    def function(self, function: Any, path: str) -> tuple[str, str]:
        name = field_of(function, "name")
        if not isinstance(name, str) or not name:
            raise self.error(f"{path}.name", name, "must be a non-empty string")
        arguments = field_of(function, "arguments", "")
        if not isinstance(arguments, str):
            arguments = json_text(arguments)
        return name, arguments

    def responses(self, obj: Any) -> None:
        kind = field_of(obj, "type")
        role = field_of(obj, "role")
        if kind in (None, "message"):
            if role not in ("system", "developer", "user", "assistant"):
                raise self.error(".role", role,
                                 "must be one of system, developer, user, assistant")
            category = {"system": SYSTEM, "developer": SYSTEM, "user": USER}.get(role, ASSISTANT)
            message = self.message = Message(obj, category, role)
            text_kind = (ContextKind.SYSTEM_PROMPT if category == SYSTEM
                         else ContextKind.MESSAGE)
            self.content(field_of(obj, "content"), ("content",), text_kind, calls_in_blocks=False)
            return
        if not isinstance(kind, str):
            raise self.error(".type", kind, "must be a string")
        message = self.message = Message(obj, ASSISTANT, kind)
        if kind == "reasoning":
            message.category = REASONING
            for index, summary in enumerate(self.listed(field_of(obj, "summary"), ".summary")):
                text = field_of(summary, "text")
                if isinstance(text, str) and text:
                    message.pieces.append(Piece(text, ("summary", index, "text"), None))
            return
        if kind in RESPONSES_PAIRS:
            call_id = field_of(obj, "call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".call_id", call_id, "must be a non-empty string")
            name = field_of(obj, "name") or kind
            if not isinstance(name, str):
                raise self.error(".name", name, "must be a string")
            arguments = field_of(obj, "arguments")
            if arguments is None:
                arguments = field_of(obj, "input")
            if arguments is None:
                arguments = field_of(obj, "action")
            message.calls.append((call_id, name, arguments if isinstance(arguments, str)
                                  else json_text(arguments if arguments is not None else {})))
            message.category = CALLS
            return
        if kind in RESPONSES_OUTPUTS:
            call_id = field_of(obj, "call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".call_id", call_id, "must be a non-empty string")
            message.category = RESULTS
            message.answers.append(call_id)
            output = field_of(obj, "output")
            if isinstance(output, str):
                if output:
                    message.pieces.append(Piece(output, ("output",), ContextKind.TOOL_OUTPUT))
            elif output is not None:
                self.content(output, ("output",), ContextKind.TOOL_OUTPUT,
                             calls_in_blocks=False)
            return
        # Server-side tool calls (web search, ...), references and items this version
        # does not know: model output, counted as their JSON.
        message.pieces.append(Piece(json_text(obj), (), None))

    def anthropic(self, obj: Any) -> None:
        role = field_of(obj, "role")
        if role not in ("user", "assistant", "system"):
            raise self.error(".role", role,
                             "must be 'user' or 'assistant' (the system prompt is passed "
                             "apart)")
        category = {"user": USER, "assistant": ASSISTANT}.get(role, SYSTEM)
        message = self.message = Message(obj, category, role)
        kind = ContextKind.SYSTEM_PROMPT if category == SYSTEM else ContextKind.MESSAGE
        self.content(field_of(obj, "content"), ("content",), kind,
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
            types_in_order = [field_of(block, "type") for block in field_of(obj, "content") or ()]
            message.genuine_user = any(kind != "tool_result" for kind in types_in_order)
            first_other = next((k for k, kind in enumerate(types_in_order)
                                if kind != "tool_result"), len(types_in_order))
            message.results_first = "tool_result" not in types_in_order[first_other:]
        elif category == USER:
            message.genuine_user = True

    def langchain(self, obj: Any) -> None:
        kind = field_of(obj, "type")
        role = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool",
                "function": "function"}.get(kind) if isinstance(kind, str) else None
        if kind == "chat":
            role = field_of(obj, "role")
            if role not in ("system", "user", "assistant"):
                raise self.error(".role", role, "must be system, user or assistant")
        if role is None:
            raise self.error(".type", kind,
                             "must be a system, human, ai, tool or function message")
        message = self.message = Message(obj, _CATEGORY_OF_ROLE[role], role)
        text_kind = _TEXT_KIND_OF_ROLE[role]
        # langchain-openai sends a message's name (a ToolNode's tool messages always
        # have one) as the OpenAI message's ``name``: counted as OpenAI counts it.
        own_name = field_of(obj, "name")
        message.name = own_name if isinstance(own_name, str) else ""
        self.content(field_of(obj, "content"), ("content",), text_kind, calls_in_blocks=False)
        if role == "tool":
            call_id = field_of(obj, "tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(".tool_call_id", call_id, "must be a non-empty string")
            message.answers.append(call_id)
        elif role == "function":
            name = field_of(obj, "name")
            if not isinstance(name, str) or not name:
                raise self.error(".name", name, "must name the function answered")
            message.answers.append(f"function:{name}")
        for index, call in enumerate(self.listed(field_of(obj, "tool_calls"), ".tool_calls")):
            call_id = field_of(call, "id")
            name = field_of(call, "name")
            if not isinstance(call_id, str) or not call_id:
                raise self.error(f".tool_calls[{index}].id", call_id,
                                 "must be a non-empty string")
            if not isinstance(name, str) or not name:
                raise self.error(f".tool_calls[{index}].name", name,
                                 "must be a non-empty string")
            message.calls.append((call_id, name, json_text(field_of(call, "args", {}))))
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
    if message.category == USER:  # every format: a user message starts a turn
        message.genuine_user = True
    message.count(counter)
    try:
        message.trim(limits, counter)
    except InvalidTypeError as exc:  # an object a trimmed copy cannot be made of
        raise DecodeError(where, obj, exc.problem) from None
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
    try:
        check_text(where, message.line)
    except InvalidTextError:
        raise DecodeError(where, message.line, "holds text that is not Unicode (a lone "
                                               "surrogate)") from None
    return message
