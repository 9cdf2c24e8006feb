"""Content capture: the one place where item content is kept, hashed or dropped.

Every projection (logs, audit files, spans, replays) calls
:func:`apply_content_capture` with its sink's policy, and ``run_started`` records
the policy, so whatever is rebuilt from a projection knows whether its content
is the original.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import msgspec

from .._model import EMPTY_METADATA, ContextItem
from ._levels import ContentCapture
from ._types import ItemExcluded, ItemIncluded, PipelineEvent, RunStarted

__all__ = ["apply_content_capture", "captured_item", "content_digest", "placeholder_content",
           "stamp_service"]


def content_digest(content: str) -> str:
    """The stable digest that replaces content under ``hash`` capture."""
    return "sha256:" + hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def placeholder_content(index: int) -> str:
    """The text that stands for a candidate's content under ``none`` capture."""
    return f"<candidate {index}: content not captured>"


def captured_item(item: ContextItem, capture: ContentCapture, index: int) -> ContextItem:
    """``item`` as ``capture`` shows it (candidate ``index``): the item itself under
    ``full``; its content hashed or replaced, and its metadata dropped, otherwise."""
    if capture is ContentCapture.FULL:
        return item
    content = (content_digest(item.content) if capture is ContentCapture.HASH
               else placeholder_content(index))
    return ContextItem.trusted(
        content=content, tokens=item.tokens, kind=item.kind, source=item.source,
        priority=item.priority, tags=item.tags, metadata=EMPTY_METADATA,
        timestamp=item.timestamp, future_relevance_hint=item.future_relevance_hint,
        pinned=item.pinned, original_tokens=item.original_tokens,
    )


def apply_content_capture(event: PipelineEvent, capture: ContentCapture | str) -> PipelineEvent:
    """``event`` as a projection under ``capture`` may show it.

    ``full`` returns the event unchanged. ``hash`` replaces an item's content
    with :func:`content_digest` and ``none`` with a placeholder naming the
    candidate index; both drop the item's metadata (it may hold anything).
    Reasons refer to other candidates by index, so they need no change.
    ``run_started`` records the policy, so whatever is rebuilt from the
    projection knows its content is not the original.
    """
    capture = ContentCapture.parse(capture)
    if capture is ContentCapture.FULL:
        return event
    if isinstance(event, ItemExcluded | ItemIncluded):
        return msgspec.structs.replace(
            event, item=captured_item(event.item, capture, event.candidate_index))
    if isinstance(event, RunStarted):
        return msgspec.structs.replace(event, content_capture=capture.value)
    return event


def stamp_service(events: Sequence[PipelineEvent], service: Callable[[], str | None]
                  ) -> Sequence[PipelineEvent]:
    """``events`` with a ``run_started`` that names no service given ``service()``'s
    (called only then; None leaves it unnamed). A sink calls it on every delivery,
    before it encodes or hashes anything, so the service it records is covered by
    the run's digest. What ``service()`` returns is the sink's to resolve (see
    :func:`cupellation.settings.resolve_service`); this function resolves nothing."""
    if not isinstance(events, tuple | list) or not any(
            type(event) is RunStarted and event.service is None for event in events):
        return events  # item batches and every later delivery of a run: as they are
    name = service()
    if name is None:
        return events
    return [msgspec.structs.replace(event, service=name)
            if type(event) is RunStarted and event.service is None else event
            for event in events]
