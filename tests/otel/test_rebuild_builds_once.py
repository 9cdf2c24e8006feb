"""Rebuilding a run from spans at the default content capture (``none``) builds each
decision's item once: the decoder fills the events module's placeholder from the row's
candidate index before decoding, instead of decoding a stand-in and building the
item again under ``none`` capture (a third of the rebuild's time)."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer
from cupellation.events import apply_content_capture
from cupellation.events._capture import placeholder_content
from cupellation.otel import runs_from_spans

from ._support import make_sdk

ITEMS = [ContextItem(f"text {k}", 10 + k, metadata={"m": k}) for k in range(12)]
BUDGET = ContextBudget(max_tokens=200, target_tokens=60)


@pytest.mark.parametrize("layout", ["columns", "events"])
def test_items_are_built_once_and_carry_the_placeholder(
        monkeypatch: pytest.MonkeyPatch, layout: str) -> None:
    """Every rebuilt item (included and excluded) holds its candidate's placeholder and
    no metadata, and the second build (``apply_content_capture``) is never called."""
    sdk = make_sdk()
    Pipeline(RecencyScorer()).run(ITEMS, BUDGET, sdk.collector(content_capture="none",
                                                                layout=layout))
    calls: list[Any] = []
    real = apply_content_capture

    def counting(event: Any, capture: Any) -> Any:
        calls.append(event)
        return real(event, capture)

    monkeypatch.setattr("cupellation.otel._spandecode.apply_content_capture", counting)
    (run,) = runs_from_spans(sdk.spans)
    items = [e.item for e in run.report.included] + [e.item for e in run.report.excluded]
    assert len(items) == len(ITEMS)
    assert sorted(item.content for item in items) == sorted(
        placeholder_content(k) for k in range(len(ITEMS)))
    assert all(not item.metadata for item in items)
    assert calls == []
