"""``load_policy``: a policy from a TOML or JSON file, or from its text."""

from __future__ import annotations

import os
from pathlib import Path

from .._pipeline import Policy
from .._policytext import PolicyFormat, parse_document
from ..exceptions import DecodeError, InvalidTypeError, InvalidValueError

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


def _names_a_file(text: str) -> bool:
    """Whether a string is a path: one line, not a JSON object or TOML section, and
    ending in ``.toml`` / ``.json``, or else without ``=`` and naming an existing file."""
    stripped = text.strip()
    if not stripped or "\n" in stripped or stripped[0] in "{[":
        return False
    if Path(stripped).suffix.lower() in _SUFFIXES:
        return True
    if "=" in stripped:  # a one-line TOML policy
        return False
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a name too long, or with a NUL, is not a file
        return False


def load_policy(source: str | os.PathLike[str], *,
                format: PolicyFormat | None = None) -> Policy:
    """A policy from a file or from its text, in TOML or JSON.

    ``source`` is a path (a :class:`~pathlib.Path`, or a one-line string that
    ends in ``.toml`` / ``.json``, or has no ``=`` and names an existing file)
    or the policy text itself. The format is ``format`` when given, else the file suffix
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
        if _names_a_file(source):
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
