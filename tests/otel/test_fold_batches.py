"""A rebuilt run's events are folded in batches (runs of consecutive item events as
one ItemEventBatch); the report is exactly the one folding them one by one gives,
whatever the spans lost, repeated or mixed up."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import msgspec
import pytest

from cupellation import ContextBudget, Pipeline, ReportBuilder
from cupellation.events import ItemExcluded, PipelineEvent
from cupellation.exceptions import InvalidValueError
from cupellation.otel import runs_from_spans
from cupellation.otel._decode import _fold
from cupellation.scoring import PriorityScorer
from cupellation.slicing import GreedySlice

from ._support import make_sdk, run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items


def _run_events() -> list[PipelineEvent]:
    items = make_items(80, 9, pinned_index=3)
    budget = ContextBudget(max_tokens=sum(i.tokens for i in items) // 2,
                           target_tokens=sum(i.tokens for i in items) // 3)
    sdk = make_sdk()
    run_both(Pipeline(scorer=PriorityScorer(), slicer=GreedySlice()), items, budget,
             sdk.collector("Full", "full"))
    (run,) = runs_from_spans(sdk.spans)
    assert run.is_complete
    return list(run.events)


def _one_by_one(run_id: str, events: list[PipelineEvent]) -> ReportBuilder:
    builder = ReportBuilder(run_id)
    for event in events:
        builder.add(event)
    return builder


def test_batched_and_one_by_one_folds_give_the_same_report() -> None:
    """Over 300 random damages of a run's events (events lost, repeated with the same
    or another seq's content, an exclusion's stage given as a plain string, events
    numbered past a gap), then sorted by seq as the span reader sorts them, folding
    runs of item events as batches gives exactly the report (its incomplete notes
    included) that folding every event alone gives."""
    events = _run_events()
    run_id = events[0].run_id
    rng = random.Random(15)
    for _ in range(300):
        damaged = list(events)
        for _ in range(rng.randint(1, 6)):
            k = rng.randrange(len(damaged))
            event = damaged[k]
            action = rng.randrange(5)
            if action == 0:
                del damaged[k]
            elif action == 1:
                damaged.insert(k, damaged[k])
            elif action == 2:
                other = damaged[rng.randrange(len(damaged))]
                damaged.insert(k, msgspec.structs.replace(other, seq=damaged[k].seq))
            elif action == 3 and isinstance(event, ItemExcluded):
                damaged[k] = msgspec.structs.replace(event, stage=str(event.stage))
            else:
                damaged[k] = msgspec.structs.replace(event, seq=event.seq + 3)
        damaged.sort(key=lambda e: e.seq)
        batched = ReportBuilder(run_id)
        _fold(batched, damaged)
        assert batched.result() == _one_by_one(run_id, damaged).result()


def test_an_event_of_another_run_raises_in_a_batch_as_alone() -> None:
    """An item event of another run amid a run of item events is refused by the
    batched fold exactly as by the one-by-one fold."""
    events = _run_events()
    at = next(k for k, e in enumerate(events) if isinstance(e, ItemExcluded)) + 2
    events[at] = msgspec.structs.replace(events[at], run_id="another")
    with pytest.raises(InvalidValueError) as alone:
        _one_by_one(events[0].run_id, events)
    with pytest.raises(InvalidValueError) as batched:
        _fold(ReportBuilder(events[0].run_id), events)
    assert str(batched.value) == str(alone.value)
