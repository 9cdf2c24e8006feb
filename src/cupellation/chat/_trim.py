"""Trim instead of drop: items over a per-kind token limit keep their head and tail,
with a visible marker between them, before selection.

    from cupellation.chat import trim_items

    items = trim_items(items, {"ToolOutput": 800})

An item whose ``kind`` has a limit and whose ``tokens`` exceed it gets the longest
head and tail of its content (half each, by characters) that, with the marker
``[... 5,210 characters omitted ...]`` on its own line between them, count at most the
limit with the same token counter. The trimmed item keeps every other field, sets the
specification's ``originalTokens`` (``original_tokens``) to the tokens it had, and
records its identity in metadata ``trimmed``: one entry with ``original_tokens``,
``tokens``, ``original_chars`` and ``original_digest`` (``sha256:<hex>`` of the
original content, the digest ``content_capture="hash"`` writes), so the report, the
spans and ``cupellation why`` say "trimmed from 1,450 to 800 tokens" and find the item
by its original content. Items under their limit, and kinds without one, are passed
through as they are (the same objects).

:func:`~cupellation.chat.select_messages` applies the same trimming to single
messages and tool results before tool exchanges are grouped (``trim=``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .._model import ContextItem, ContextKind
from ..exceptions import InvalidTypeError, InvalidValueError
from ._tokens import CounterSpec, TextCounter, resolve_counter

__all__ = ["MIN_TRIM_LIMIT", "TRIMMED_KEY", "TrimmedText", "check_limits", "digest",
           "trim_items", "trim_text"]

#: Metadata key of a trimmed item's record (a list of entries, one per trimmed text).
TRIMMED_KEY = "trimmed"
#: The smallest limit accepted: room for the marker and some text on each side.
MIN_TRIM_LIMIT = 20


def digest(text: str) -> str:
    """``sha256:<hex>`` of ``text`` in UTF-8 (the form content capture ``hash`` writes)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _marker(omitted: int) -> str:
    return f"\n[... {omitted:,} characters omitted ...]\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrimmedText:
    """A text cut to a token limit: the new text and both counts."""

    text: str
    tokens: int
    original_tokens: int
    original_chars: int
    original_digest: str

    def record(self) -> dict[str, Any]:
        """The metadata entry that keeps the original's identity."""
        return {"original_tokens": self.original_tokens, "tokens": self.tokens,
                "original_chars": self.original_chars,
                "original_digest": self.original_digest}


def trim_text(text: str, limit: int, counter: TextCounter,
              tokens: int | None = None) -> TrimmedText | None:
    """``text`` cut to at most ``limit`` tokens (head and tail, marker between), or
    None when it already fits. ``tokens`` is its count when already known.

    The kept length is found by bisection on characters, counting each draft with
    ``counter`` (uncached: drafts are never seen again); counts grow with length
    for any sensible counter, and the result is checked, never assumed.
    """
    original = counter(text) if tokens is None else tokens
    if original <= limit:
        return None
    size = len(text)
    low, high = 0, size - 1  # ``low`` always fits (or is 0), ``high`` may not
    best = _draft(text, 0)
    best_tokens = counter.raw(best)
    while low < high:
        middle = (low + high + 1) // 2
        draft = _draft(text, middle)
        count = counter.raw(draft)
        if count <= limit:
            low, best, best_tokens = middle, draft, count
        else:
            high = middle - 1
    return TrimmedText(text=best, tokens=best_tokens, original_tokens=original,
                       original_chars=size, original_digest=digest(text))


def _draft(text: str, kept: int) -> str:
    """``kept`` characters of ``text``: the first half (rounded up) and the last half,
    the marker between them."""
    head = (kept + 1) // 2
    tail = kept - head
    return text[:head] + _marker(len(text) - kept) + (text[len(text) - tail:] if tail else "")


def check_limits(limits: Mapping[Any, Any] | None, field: str = "trim"
                 ) -> Mapping[ContextKind, int]:
    """``limits`` as a read-only mapping of kind to token limit, checked: kinds are
    kind names, limits integers of at least :data:`MIN_TRIM_LIMIT`."""
    if limits is None:
        return MappingProxyType({})
    if not isinstance(limits, Mapping):
        raise InvalidTypeError(field, limits, "a mapping of kind to token limit, such as "
                                              "{'ToolOutput': 800}")
    checked: dict[ContextKind, int] = {}
    for key, limit in limits.items():
        if not isinstance(key, str | ContextKind):
            raise InvalidTypeError(f"{field} key", key, "a kind name")
        kind = ContextKind(key)
        if kind in checked:
            raise InvalidValueError(f"{field} key", key,
                                    f"repeats kind {kind.value!r} (kinds ignore case)")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise InvalidTypeError(f"{field}[{kind.value!r}]", limit, "an integer")
        if limit < MIN_TRIM_LIMIT:
            raise InvalidValueError(f"{field}[{kind.value!r}]", limit,
                                    f"must be at least {MIN_TRIM_LIMIT} tokens (room for "
                                    "the marker and text on both sides)")
        checked[kind] = limit
    return MappingProxyType(checked)


def trim_items(items: Iterable[ContextItem], limits: Mapping[Any, int], *,
               token_counter: CounterSpec | TextCounter = "auto") -> list[ContextItem]:
    """``items`` with each one over its kind's limit trimmed (see the module doc).

    ``limits`` maps kinds to token limits (``{"ToolOutput": 800}``, at least
    :data:`MIN_TRIM_LIMIT` each); ``token_counter`` counts the content (see
    :mod:`cupellation.chat`: ``"auto"``, an encoding name, ``"estimate"`` or a
    callable). An item is trimmed when its ``tokens`` exceed the limit and the counter
    finds its content over it too; its new ``tokens`` is the count of the trimmed
    content, and ``original_tokens`` its ``tokens`` before (or the ``original_tokens``
    it already had).
    """
    checked = check_limits(limits, "limits")
    counter = resolve_counter(token_counter)
    if isinstance(items, str | bytes | Mapping) or not isinstance(items, Iterable):
        raise InvalidTypeError("items", items, "an iterable of ContextItem")
    out: list[ContextItem] = []
    for index, item in enumerate(items):
        if not isinstance(item, ContextItem):
            raise InvalidTypeError(f"items[{index}]", item, "a ContextItem")
        limit = checked.get(item.kind)
        if limit is None or item.tokens <= limit:
            out.append(item)
            continue
        cut = trim_text(item.content, limit, counter)
        if cut is None:  # the counter finds it within the limit after all
            out.append(item)
            continue
        metadata = dict(item.metadata)
        metadata[TRIMMED_KEY] = [{**cut.record(), "original_tokens": item.tokens,
                                  "limit": limit}]
        out.append(ContextItem(
            content=cut.text, tokens=cut.tokens, kind=item.kind, source=item.source,
            priority=item.priority, tags=item.tags, metadata=metadata,
            timestamp=item.timestamp, future_relevance_hint=item.future_relevance_hint,
            pinned=item.pinned,
            original_tokens=(item.original_tokens if item.original_tokens is not None
                             else item.tokens)))
    return out
