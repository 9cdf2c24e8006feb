"""Reading policy text: TOML or JSON into a table, syntax errors with their line."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any, Literal

from .exceptions import DecodeError, InvalidTypeError, InvalidValueError

__all__ = ["PolicyFormat", "parse_document", "sniff"]

#: A policy file's format.
PolicyFormat = Literal["toml", "json"]

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def sniff(text: str) -> PolicyFormat:
    """JSON when the first significant character opens an object, else TOML.

    A policy is a table: in JSON that is an object (``{``); TOML starts with a
    key, a comment or a ``[section]``.
    """
    return "json" if text.lstrip("\ufeff \t\r\n").startswith("{") else "toml"


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise DecodeError(key, value, "appears twice in the same JSON object")
        seen[key] = value
    return seen


def _line_text(text: str, line: int) -> str:
    lines = text.split("\n")  # the parsers count lines at \n only
    return lines[line - 1][:80] if 0 < line <= len(lines) else ""


def parse_document(text: str, fmt: PolicyFormat | None, source: str) -> dict[str, Any]:
    """The table in ``text`` (``fmt`` guessed from the text when ``None``).

    Raises :class:`~cupellation.exceptions.DecodeError` with the line for text
    that does not parse, and for a document whose top level is not a table.
    """
    if not isinstance(text, str):
        raise InvalidTypeError("text", text, "a string")
    chosen = sniff(text) if fmt is None else fmt
    data: Any
    if chosen == "json":
        try:
            data = json.loads(text, object_pairs_hook=_reject_duplicates)
        except json.JSONDecodeError as exc:
            raise DecodeError(source, _line_text(text, exc.lineno),
                              f"is not valid JSON: {exc.msg} (column {exc.colno})",
                              line=exc.lineno) from None
        except DecodeError as exc:
            raise DecodeError(f"{source}: {exc.field}", exc.value, exc.problem) from None
    elif chosen == "toml":
        try:
            data = tomllib.loads(text.removeprefix("\ufeff"))
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            found = _TOML_POSITION.search(message)
            line = int(found.group(1)) if found else None
            problem = _TOML_POSITION.sub("", message).strip()
            raise DecodeError(source, _line_text(text, line or 0),
                              f"is not valid TOML: {problem}", line=line) from None
    else:
        raise InvalidValueError("format", fmt, "must be 'toml' or 'json'")
    if not isinstance(data, dict):
        raise DecodeError(source, data, "must hold a table (a JSON object) at the top")
    return data
