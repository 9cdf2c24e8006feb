"""Reading candidates: a JSON array or JSON Lines of ContextItem objects, or a chat
transcript (OpenAI or Anthropic messages), with errors that name the file, the
line or the JSON path, and the field."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import chat
from .._model import ContextItem
from ..exceptions import CupelError
from ._common import CliError, describe, safe, value_text

__all__ = ["InputKind", "Loaded", "parse_candidates"]

#: What the input holds.
InputKind = Literal["items", "chat"]

#: A JSON ``\\uD800``-``\\uDFFF`` escape: the only way a surrogate gets into strict UTF-8 text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_MESSAGE_INDEX = re.compile(r"^messages\[(\d+)\]")
#: What JSON calls whitespace (str.strip() would also take U+2028, U+0085, ...).
_JSON_WHITESPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Loaded:
    """The candidates read, and what they were read from."""

    items: list[ContextItem]
    kind: InputKind
    chat_format: str | None = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (JSON has no NaN or infinity)")


def _loads(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _lone_surrogate(value: Any, path: str) -> tuple[str, str] | None:
    """The path and text of the first string (or key) holding a lone surrogate."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        current, where = stack.pop()
        if isinstance(current, str):
            if any(0xD800 <= ord(char) <= 0xDFFF for char in current):
                return where, current
        elif isinstance(current, Mapping):
            for key, nested in reversed(list(current.items())):
                if isinstance(key, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key):
                    return f"{where}[{key!r}]" if where else repr(key), key
                child = (f"{where}.{key}" if where else key) if key.isidentifier() \
                    else f"{where}[{key!r}]"
                stack.append((nested, child))
        elif isinstance(current, list):
            stack.extend((nested, f"{where}[{k}]")
                         for k, nested in reversed(list(enumerate(current))))
    return None


def _check_surrogates(text: str, data: Any, source: str, path: str,
                      line: int | None) -> None:
    if not _SURROGATE_ESCAPE.search(text):
        return
    found = _lone_surrogate(data, path)
    if found is not None:
        where, value = found
        at = f"{source}:{line}" if line is not None else source
        raise CliError(f"{safe(at)}: {safe(where) or 'value'}: contains a lone surrogate "
                       f"escape, which is not Unicode text (got {value_text(value)})")


def _json_error(source: str, text: str, exc: json.JSONDecodeError | ValueError,
                line: int | None = None) -> CliError:
    if isinstance(exc, json.JSONDecodeError):
        return CliError(f"{safe(source)}:{line or exc.lineno}: not valid JSON: {exc.msg} "
                        f"(column {exc.colno})")
    where = f"{safe(source)}:{line}" if line is not None else safe(source)
    return CliError(f"{where}: not valid JSON: {safe(str(exc))}")


def _too_deep(source: str, line: int | None = None) -> CliError:
    where = f"{safe(source)}:{line}" if line is not None else safe(source)
    return CliError(f"{where}: JSON nested too deeply to read (Python's limit is about "
                    "1,000 levels)")


def _looks_like_chat(rows: Sequence[Any]) -> bool:
    first = rows[0] if rows else None
    return isinstance(first, Mapping) and "role" in first and "tokens" not in first


def _items(rows: Sequence[Any], source: str, lines: Sequence[int] | None) -> list[ContextItem]:
    items: list[ContextItem] = []
    for position, row in enumerate(rows):
        try:
            items.append(ContextItem.from_dict(row))
        except RecursionError:
            where = (f"{safe(source)}:{lines[position]}" if lines is not None
                     else f"{safe(source)}: items[{position}]")
            raise CliError(f"{where}: nested too deeply to read (Python's limit is about "
                           "1,000 levels)") from None
        except (CupelError, ValueError, TypeError) as exc:
            if lines is not None:
                if getattr(exc, "field", None) == "item":
                    raise CliError(f"{safe(source)}:{lines[position]}: must be a JSON object "
                                   f"(a ContextItem), not {type(row).__name__}") from None
                raise CliError(describe(exc, source=source, line=lines[position])) from None
            if getattr(exc, "field", None) == "item":
                raise CliError(f"{safe(source)}: items[{position}]: must be a JSON object "
                               f"(a ContextItem), not {type(row).__name__}") from None
            raise CliError(describe(exc, source=source,
                                    prefix=f"items[{position}]")) from None
    return items


def _chat(data: Any, source: str, lines: Sequence[int] | None,
          options: Mapping[str, Any]) -> Loaded:
    try:
        fmt = options.get("format") or chat.detect_chat_format(data)
        # Each tool exchange one item, kept or left out whole, as select_messages does.
        items = chat.group_exchanges(chat.chat_to_items(data, **options))
    except RecursionError:
        raise _too_deep(source) from None
    except (CupelError, ValueError, TypeError) as exc:
        line = None
        field = getattr(exc, "field", "")
        found = _MESSAGE_INDEX.match(field) if isinstance(field, str) else None
        if lines is not None and found is not None and int(found.group(1)) < len(lines):
            line = lines[int(found.group(1))]
        raise CliError(describe(exc, source=source, line=line)) from None
    return Loaded(items, "chat", fmt)


def _json_lines(text: str, source: str) -> tuple[list[Any], list[int]]:
    """The records of JSON Lines ``text`` and their line numbers (blank lines skipped)."""
    rows: list[Any] = []
    lines: list[int] = []
    # Records end at \n only: a raw U+2028, U+2029 or U+0085 is valid inside a
    # JSON string, and str.splitlines() would cut the record there.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip(_JSON_WHITESPACE):
            continue
        try:
            row = _loads(raw)
        except json.JSONDecodeError as exc:
            raise _json_error(source, raw, exc, number) from None
        except RecursionError:
            raise _too_deep(source, number) from None
        except ValueError as exc:
            raise _json_error(source, raw, exc, number) from None
        _check_surrogates(raw, row, source, "", number)
        rows.append(row)
        lines.append(number)
    return rows, lines


def parse_candidates(text: str, source: str, *, mode: Literal["auto", "items", "chat"] = "auto",
                     chat_options: Mapping[str, Any] | None = None) -> Loaded:
    """The candidates in ``text`` (read from ``source``).

    A JSON array (of ContextItem objects, or of chat messages), a JSON object
    (a transcript with ``messages``, or one item), or JSON Lines (one item or one
    message per line). ``mode`` forces items or chat; ``auto`` reads a
    transcript when the document has ``messages`` or its first entry has a
    ``role`` and no ``tokens``. Raises :class:`CliError` naming the file, the
    line (JSON Lines) or the JSON path (``items[3].tokens``), and the field.
    """
    options = dict(chat_options or {})
    stripped = text.lstrip(" \t\r\n")
    document: Any = None
    whole = False
    if stripped[:1] in ("[", "{"):
        try:
            document = _loads(text)
            whole = True
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data" or stripped[0] == "[":
                raise _json_error(source, text, exc) from None
        except RecursionError:
            raise _too_deep(source) from None
        except ValueError as exc:
            raise _json_error(source, text, exc) from None
    elif stripped:
        first = stripped.split("\n", 1)[0]
        raise CliError(f"{safe(source)}:1: not JSON: expected a JSON array, JSON Lines or a "
                       f"chat transcript (got {value_text(first[:40])})")
    if whole:
        if isinstance(document, Mapping) and ("messages" in document or "system" in document):
            _check_surrogates(text, document, source, "", None)
            if mode == "items":
                raise CliError(f"{safe(source)}: a chat transcript (it has 'messages'), "
                               "not ContextItems: leave out --items")
            return _chat(document, source, None, options)
        if isinstance(document, list):
            chat_like = mode == "chat" or (mode == "auto" and _looks_like_chat(document))
            _check_surrogates(text, document, source, "messages" if chat_like else "items",
                              None)
            if chat_like:
                return _chat(document, source, None, options)
            return Loaded(_items(document, source, None), "items")
        if not isinstance(document, Mapping):
            raise CliError(f"{safe(source)}: expected a JSON array of items, JSON Lines or a "
                           f"chat transcript, not a JSON {type(document).__name__}")
        rows: list[Any] = [document]
        lines: list[int] = [text[: len(text) - len(stripped)].count("\n") + 1]
        _check_surrogates(text, document, source, "", lines[0])
    else:
        rows, lines = _json_lines(text, source)
    if mode == "chat" or (mode == "auto" and _looks_like_chat(rows)):
        return _chat(rows, source, lines, options)
    return Loaded(_items(rows, source, lines), "items")
