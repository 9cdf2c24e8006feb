"""``load_policy``: a policy from a TOML or JSON file, or from its text."""

from __future__ import annotations

import os
from pathlib import Path

from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError
from ._policy import Policy
from ._text import PolicyFormat, parse_document

__all__ = ["PolicyFormat", "load_policy", "parse_policy_text"]

#: File suffixes that name a format.
_SUFFIXES: dict[str, PolicyFormat] = {".toml": "toml", ".json": "json"}


def parse_policy_text(text: str, fmt: PolicyFormat | None = None, *,
                      source: str = "<policy>") -> Policy:
    """A policy from TOML or JSON text (``fmt`` guessed from the text when ``None``).

    Syntax errors raise :class:`~cupellation.exceptions.DecodeError` with the
    line; content errors raise ``InvalidValueError`` / ``InvalidTypeError``
    naming the path inside the document (``scorer.children[1].weight``), with
    a note naming ``source``.
    """
    data = parse_document(text, fmt, source)
    try:
        return Policy.from_dict(data)
    except (InvalidValueError, InvalidTypeError) as exc:
        exc.add_note(f"in the policy {source}")
        raise


def load_policy(source: str | os.PathLike[str], *,
                format: PolicyFormat | None = None) -> Policy:
    """A policy from a file or from its text, in TOML or JSON.

    ``source`` is a path (a :class:`~pathlib.Path`, or a one-line string naming
    an existing file or ending in ``.toml`` / ``.json``) or the policy text
    itself. The format is ``format`` when given, else the file suffix
    (``.toml`` / ``.json``), else the content (JSON when it starts with ``{``).

    Raises :class:`~cupellation.exceptions.DecodeError` (with the line) for a
    file that does not parse, and ``InvalidValueError`` / ``InvalidTypeError``
    naming the path inside the document (``scorer.children[1].weight``) and
    the value for one that does not describe a valid policy; an unknown key is
    refused with a "did you mean" suggestion.
    """
    if format is not None and format not in ("toml", "json"):
        raise InvalidValueError("format", format, "must be 'toml', 'json' or None")
    path: Path | None = None
    if isinstance(source, os.PathLike):
        path = Path(source)
    elif isinstance(source, str):
        one_line = "\n" not in source and len(source) < 4096
        if one_line and (Path(source).suffix.lower() in _SUFFIXES or Path(source).is_file()):
            path = Path(source)
    else:
        raise InvalidTypeError("source", source, "a path or the policy text")
    if path is None:
        assert isinstance(source, str)
        return parse_policy_text(source, format)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidValueError("source", str(path),
                                f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise DecodeError(str(path), exc.object[exc.start:exc.end],
                          "is not UTF-8 text") from None
    chosen = format or _SUFFIXES.get(path.suffix.lower())
    return parse_policy_text(text, chosen, source=str(path))
