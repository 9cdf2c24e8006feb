"""The summaries' item lists are chosen by adding up each item's size (issue 26): the
values written are exactly those that measuring the whole document after each item
chose, for the root's indented values and the stage spans' compact ones, at every
content capture, cap and list length (the measure-everything algorithm is kept here
as the oracle)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import cupellation.otel._values as values
from cupellation import ContextItem, TraceDetailLevel
from cupellation.events import ContentCapture, ItemEventBatch, PipelineEvent

from .test_root_values import PIPELINE, _budget

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items


class _Batches:
    """A Full-tier collector that keeps the run's item batches, and nothing else."""

    detail_level = TraceDetailLevel.FULL
    is_enabled = True

    def __init__(self) -> None:
        self.kept: list[ItemEventBatch] = []
        self.dropped: list[ItemEventBatch] = []

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Keep an item batch; ignore anything else."""
        if isinstance(events, ItemEventBatch):
            (self.dropped if events.excluded else self.kept).append(events)

    def flush(self) -> None:
        """Nothing held."""


def _reference_shown_items(document: dict[str, Any], lists: Any, capture: ContentCapture,
                           cap: int, tokens: Any = None, sizes: Any = values._COMPACT
                           ) -> None:
    """The algorithm before issue 26's work: append each item, measure the whole
    document, take the item back if it went past the bound."""
    for key, batches, total, _ in lists:
        held = sum(len(batch) for batch in batches)
        document[key] = {"shown": 0, "of": held if total is None else total, "items": []}
    size = sizes.whole(document)
    room = max(cap - size, 0)
    queues = [(document[key], batches, values._top(batches, by_tokens, tokens))
              for key, batches, _, by_tokens in lists]
    shares = [2 / 3] + [1 / 3 / max(len(lists) - 1, 1)] * (len(lists) - 1)
    if len(lists) == 1:
        shares = [1.0]
    for last in (False, True):
        for (block, batches, top), portion in zip(queues, shares, strict=True):
            limit = cap if last else size + int(room * portion)
            while block["shown"] < len(top):
                _, _, b, k = top[block["shown"]]
                batch = batches[b]
                block["items"].append(values._item(
                    batch.candidate_indices[k], batch.items[k], batch.scores[k],
                    batch.reasons[k], capture))
                block["shown"] += 1
                grown = sizes.whole(document)
                if grown > min(limit, cap):
                    block["items"].pop()
                    block["shown"] -= 1
                    break
                size = grown


def _values(batches: _Batches, capture: ContentCapture, cap: int) -> list[str]:
    """The root's output.value and each stage's output.value over ``batches``."""
    out = [values.output_value(
        outcome="completed", included_count=sum(map(len, batches.kept)),
        included_tokens=1234, excluded_count=sum(map(len, batches.dropped)),
        kept=batches.kept, dropped=batches.dropped, capture=capture, cap=cap,
        trace_id="0af7651916cd43dd8448eb211c80319c")]
    for batch in batches.dropped:
        out.append(values.stage_output_value(
            stage="slice", items_in=9999, items_out=9, duration_ms=1.5, dropped=[batch],
            capture=capture, cap=cap, trace_id=None))
    return out


def _with_unicode(items: list[ContextItem]) -> list[ContextItem]:
    """Every third item's content with multi-byte characters (sizes are in bytes)."""
    return [ContextItem.from_dict({**item.to_dict(),
                                   "content": "é✓ " * (k % 40) + item.content})
            if k % 3 == 0 else item for k, item in enumerate(items)]


@pytest.mark.parametrize("size", [3, 40, 700])
def test_item_lists_are_those_measuring_the_whole_document_chose(
        size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """For runs of 3, 40 and 700 items (a fifth with multi-byte content), at every
    capture and at caps from the smallest allowed to 16 kB, the root's and each stage's
    output.value are byte for byte what the measure-everything algorithm writes."""
    items = _with_unicode(make_items(size, 7 + size, pinned_index=size // 2))
    batches = _Batches()
    PIPELINE.run(items, _budget(items, 0.3), batches)
    assert batches.dropped
    assert batches.kept
    caps = [256, 300, 777, 2048, 5000, 16_384]
    fast = {(capture, cap): _values(batches, capture, cap)
            for capture in ContentCapture for cap in caps}
    monkeypatch.setattr(values, "shown_items", _reference_shown_items)
    for capture in ContentCapture:
        for cap in caps:
            assert fast[capture, cap] == _values(batches, capture, cap), (capture, cap)


@pytest.mark.parametrize("words", [None, "kept 3 of 5, dropped 2: 2 budget ✓"])
def test_each_item_s_growth_is_the_whole_document_s(words: str | None) -> None:
    """Appending 120 items one by one to the second of two list blocks (the count
    crossing 9 -> 10 and 99 -> 100, items with and without multi-byte content and
    extra fields), the size ``grown`` computes is the whole document's every time,
    for the compact and the indented (worded) form."""
    sizes = values._Sizes(words)
    document: dict[str, Any] = {
        "outcome": "completed", "a": {"shown": 1, "of": 9, "items": [{"index": 0}]},
        "b": {"shown": 0, "of": 120, "items": []}, "more": "x"}
    block = document["b"]
    block["items"].append({"index": 0, "kind": "Message"})
    block["shown"] = 1
    size = sizes.whole(document)
    for k in range(1, 120):
        item: dict[str, Any] = {"index": k, "kind": "Document", "tokens": 10 * k,
                                "score": k / 7, "reason": "BudgetExceeded"}
        if k % 3 == 0:
            item["content"] = "é✓ " * k
        if k % 5 == 0:
            item["original_tokens"] = 3
        size = sizes.grown(size, item, block["shown"])
        block["items"].append(item)
        block["shown"] += 1
        assert size == sizes.whole(document), k
