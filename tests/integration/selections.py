"""Real pipeline runs for the export tests: random candidates (duplicates, negative
tokens, pinned items, metadata, tags, timestamps, text with line separators and
markup), random pipelines (greedy, knapsack, count quotas, placers, overflow
strategies) and budgets; every seventh run fails in its scorer, and others may fail
too (pinned items over budget). Each run is recorded in process at every tier."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import msgspec

from cupellation import (
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    FunctionScorer,
    GreedySlice,
    Pipeline,
    SelectionReport,
    TraceCollector,
)
from cupellation.events import PipelineEvent, RunStarted
from logs._workload import random_budget, random_items, random_pipeline

TIERS = ("StageOnly", "StageAndExclusions", "Full")


@dataclass(frozen=True)
class Selection:
    """One run: its window (None if it failed), and its events and report as a
    DiagnosticTraceCollector recorded them at each tier."""

    window: list[ContextItem] | None
    error: BaseException | None
    events: dict[str, tuple[PipelineEvent, ...]]
    reports: dict[str, SelectionReport]

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.events["Full"][0].run_id

    @property
    def started(self) -> RunStarted:
        """The run's run_started (Full tier)."""
        first = self.events["Full"][0]
        assert isinstance(first, RunStarted)
        return first


def _fail(item: ContextItem, items: Sequence[ContextItem]) -> float:
    raise ValueError("this scorer fails on purpose")


FAILING = Pipeline(FunctionScorer(_fail, "failing"), GreedySlice())
"""A pipeline whose every run fails in Score."""


def run_selections(count: int, seed: int | str, *, sizes: tuple[int, int] = (0, 16),
                   also: Sequence[TraceCollector] = ()) -> list[Selection]:
    """``count`` random runs, each recorded at every tier and also sent to ``also``;
    the fourth of every seven fails in its scorer."""
    rng = random.Random(seed)
    out = []
    for k in range(count):
        recorders = {tier: DiagnosticTraceCollector(tier) for tier in TIERS}
        failing = k % 7 == 3
        items = random_items(rng, max(rng.randint(*sizes), 1 if failing else 0))
        pipeline = FAILING if failing else random_pipeline(rng)
        window: list[ContextItem] | None = None
        error: BaseException | None = None
        try:
            window = pipeline.run(items, random_budget(rng),
                                  FanOutCollector(*recorders.values(), *also))
        except Exception as exc:
            error = exc
        out.append(Selection(window, error,
                             {tier: recorder.events for tier, recorder in recorders.items()},
                             {tier: recorder.build_report()
                              for tier, recorder in recorders.items()}))
    return out


def shifted(events: Sequence[PipelineEvent], delta: timedelta) -> tuple[PipelineEvent, ...]:
    """The events with run_started.started_at moved by ``delta`` (a run of the past)."""
    return tuple(msgspec.structs.replace(event, started_at=event.started_at + delta)
                 if isinstance(event, RunStarted) else event for event in events)
