"""Names compared the specification's way: ASCII case folding, Unicode text only,
and the extensible kind and source names (``spec/src/data-model``)."""

from __future__ import annotations

from typing import Any, ClassVar, Self

from ..exceptions import InvalidTextError, InvalidTypeError, InvalidValueError

__all__ = ["ContextKind", "ContextSource", "FoldedName", "ascii_fold", "check_text", "listed",
           "tupled"]

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(text: str) -> str:
    """Lower-case ASCII letters only, as the specification's comparisons require.

    ``str.lower`` would also fold non-ASCII letters ("É" to "é"), which the
    specification does not do.
    """
    return text.translate(_ASCII_LOWER)


def listed(field_name: str, value: Any, expected: str) -> list[Any]:
    """``list(value)``; :class:`InvalidTypeError` naming ``field_name`` and the value
    when it is not iterable at all (``None``, a number), where ``list()`` raises a bare
    TypeError (one raised while iterating, by a generator, is let through)."""
    try:
        return list(value)
    except TypeError:
        _check_iterable(field_name, value, expected)
        raise


def tupled(field_name: str, value: Any, expected: str) -> tuple[Any, ...]:
    """``tuple(value)``, refusing what is not iterable as :func:`listed` does."""
    try:
        return tuple(value)
    except TypeError:
        _check_iterable(field_name, value, expected)
        raise


def _check_iterable(field_name: str, value: Any, expected: str) -> None:
    try:
        iter(value)
    except TypeError:
        raise InvalidTypeError(field_name, value, expected) from None


def check_text(field_name: str, value: str) -> str:
    """``value``, after checking it is Unicode text: no lone surrogate (U+D800..U+DFFF).

    Raises :class:`~cupellation.exceptions.InvalidTextError` naming ``field_name``
    and the position. ASCII text is settled without a scan; other text by one
    UTF-8 encoding, which fails exactly on a lone surrogate.
    """
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTextError(field_name, value, exc.start) from None
    return value


class FoldedName:
    """An extensible string enumeration compared with ASCII case folding."""

    __slots__ = ("_folded", "value")
    _field: ClassVar[str] = "name"
    value: str
    _folded: str

    def __init__(self, value: str | FoldedName) -> None:
        if isinstance(value, FoldedName):
            value = value.value
        if not isinstance(value, str):
            raise InvalidTypeError(self._field, value, "a string")
        if not value.strip():
            raise InvalidValueError(self._field, value, "must not be empty or whitespace-only")
        check_text(self._field, value)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "_folded", ascii_fold(value))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, type(self)):
            return self._folded == other._folded
        if isinstance(other, str):
            return self._folded == ascii_fold(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._folded)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __reduce__(self) -> tuple[type[Self], tuple[str]]:
        return (type(self), (self.value,))

    @property
    def folded(self) -> str:
        """The ASCII-folded form used for comparison and hashing."""
        return self._folded


class ContextKind(FoldedName):
    """The kind of a context item; extensible, compared case-insensitively.

    Well-known values are class attributes: ``ContextKind.MESSAGE`` and so on.
    ``ContextKind("message") == ContextKind.MESSAGE == "MESSAGE"``.
    """

    __slots__ = ()
    _field = "kind"
    MESSAGE: ClassVar[ContextKind]
    DOCUMENT: ClassVar[ContextKind]
    TOOL_OUTPUT: ClassVar[ContextKind]
    MEMORY: ClassVar[ContextKind]
    SYSTEM_PROMPT: ClassVar[ContextKind]


ContextKind.MESSAGE = ContextKind("Message")
ContextKind.DOCUMENT = ContextKind("Document")
ContextKind.TOOL_OUTPUT = ContextKind("ToolOutput")
ContextKind.MEMORY = ContextKind("Memory")
ContextKind.SYSTEM_PROMPT = ContextKind("SystemPrompt")


class ContextSource(FoldedName):
    """The origin of a context item; extensible, compared case-insensitively."""

    __slots__ = ()
    _field = "source"
    CHAT: ClassVar[ContextSource]
    TOOL: ClassVar[ContextSource]
    RAG: ClassVar[ContextSource]


ContextSource.CHAT = ContextSource("Chat")
ContextSource.TOOL = ContextSource("Tool")
ContextSource.RAG = ContextSource("Rag")

