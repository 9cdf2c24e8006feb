"""A transcript's items grouped as ``select_messages`` groups messages: each tool
exchange (the assistant message that calls tools, every item of it, and the results
answering its calls) becomes one item, so a selection keeps or drops it whole.

:func:`~cupellation.chat.chat_to_items` gives one item per text, tool call and tool
result, which lets a selection keep a call and drop its result (a list no provider
accepts); ``cupellation select`` on a chat transcript selects
:func:`group_exchanges` of them, as the library selects units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model import ContextItem, ContextKind, ContextSource
from ._transcripts import MESSAGE_INDEX_KEY

__all__ = ["EXCHANGE_KEY", "group_exchanges"]

#: Metadata key of a grouped exchange: how many items it was made of.
EXCHANGE_KEY = "chat.exchange_items"
# The transcript items' own metadata keys (see chat_to_items).
_ROLE = "chat.role"
_CALL_ID = "chat.tool_call_id"


def _calls_of(items: Sequence[ContextItem], start: int) -> tuple[int, set[str]]:
    """The end of the run of items of ``items[start]``'s message, and the call ids
    its tool calls carry (none: not an exchange)."""
    index = items[start].metadata.get(MESSAGE_INDEX_KEY)
    end = start
    calls: set[str] = set()
    while end < len(items) and items[end].metadata.get(MESSAGE_INDEX_KEY) == index:
        call_id = items[end].metadata.get(_CALL_ID)
        if isinstance(call_id, str) and items[end].source is ContextSource.TOOL \
                and items[end].kind is not ContextKind.TOOL_OUTPUT:
            calls.add(call_id)
        end += 1
    return end, calls


def _answers(item: ContextItem, calls: set[str]) -> bool:
    return item.metadata.get(_ROLE) != "assistant" and item.metadata.get(_CALL_ID) in calls


def group_exchanges(items: Sequence[ContextItem]) -> list[ContextItem]:
    """``items`` (a transcript's, in conversation order) with each tool exchange made
    one item: the assistant message's items and the results answering its calls (with
    the other items of their messages), content joined by newlines, tokens summed,
    kind ``ToolOutput``, source ``Tool``; pinned when any part is, its timestamp the
    first part's. Other items are returned as they are."""
    out: list[ContextItem] = []
    start = 0
    while start < len(items):
        item = items[start]
        if item.metadata.get(_ROLE) != "assistant" or MESSAGE_INDEX_KEY not in item.metadata:
            out.append(item)
            start += 1
            continue
        end, calls = _calls_of(items, start)
        if not calls:
            out.extend(items[start:end])
            start = end
            continue
        while end < len(items) and _answers(items[end], calls):
            end, _ = _calls_of(items, end)  # the whole answering message
        out.append(_merged(items[start:end], calls))
        start = end
    return out


def _merged(parts: Sequence[ContextItem], calls: set[str]) -> ContextItem:
    first = parts[0]
    metadata: dict[str, Any] = dict(first.metadata)
    metadata.pop(_CALL_ID, None)
    metadata[EXCHANGE_KEY] = len(parts)
    metadata["chat.tool_call_ids"] = sorted(calls)
    priorities = [part.priority for part in parts if part.priority is not None]
    tags = tuple(dict.fromkeys(tag for part in parts for tag in part.tags))
    return ContextItem(
        content="\n".join(part.content for part in parts),
        tokens=sum(part.tokens for part in parts), kind=ContextKind.TOOL_OUTPUT,
        source=ContextSource.TOOL, priority=max(priorities) if priorities else None,
        tags=tags, metadata=metadata, timestamp=first.timestamp,
        pinned=any(part.pinned for part in parts))
