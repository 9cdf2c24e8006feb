"""Helpers the generated-input tests share: the places of a JSON-like value, that
value with one place replaced, and text damaged character by character."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` (dicts and lists walked), the whole value first."""
    found = [path]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += json_paths(inner, (*path, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += json_paths(inner, (*path, index))
    return found


def replaced_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with the place ``path`` holding ``new``, copied along the path only."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = replaced_at(value[path[0]], path[1:], new)
    return copy


def damaged_text(data: st.DataObject, text: str, alphabet: str) -> str:
    """``text`` with 1 to 4 characters deleted, doubled or replaced by one of
    ``alphabet``."""
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, max(len(text) - 1, 0)))
        action = data.draw(st.sampled_from(["delete", "double", "replace"]))
        char = data.draw(st.sampled_from(list(alphabet)))
        text = (text[:at] + text[at + 1:] if action == "delete"
                else text[:at] + text[at] * 2 + text[at + 1:] if action == "double"
                else text[:at] + char + text[at + 1:])
    return text
