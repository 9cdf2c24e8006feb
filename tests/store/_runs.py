"""Runs for the store tests: random pipeline runs into an audit log (the log tests'
workload), and runs whose values sit at the edges of the Collector's string forms."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path
from typing import Any

import structlog

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    Pipeline,
    PriorityScorer,
    RunInfo,
    TraceDetailLevel,
)
from cupellation.events import PipelineEvent
from cupellation.logs import AuditLog, StructlogSink
from logs._workload import random_budget, random_items, random_pipeline, run_once

__all__ = ["edge_run", "write_people_log", "write_random_log"]


def write_random_log(path: Path, seed: int, runs: int) -> None:
    """``runs`` random runs (every decision kind, failed runs too) appended to an audit
    log at ``path``."""
    rng = random.Random(seed)
    with AuditLog(str(path)) as audit:
        for _ in range(runs):
            run_once(rng, audit)


def write_people_log(path: Path, seed: int, runs: int) -> None:
    """``runs`` random runs, each with a :class:`RunInfo` drawn from two sessions,
    two users and three conversations (one run in four with none), appended to an
    audit log at ``path``."""
    rng = random.Random(seed)
    with AuditLog(str(path)) as audit:
        for _ in range(runs):
            info = None if rng.random() < 0.25 else RunInfo(
                session_id=rng.choice(["s-1", "s-2"]), user_id=rng.choice(["u-1", "u-2"]),
                conversation_id=rng.choice(["c-1", "c-2", "c-3"]))
            with contextlib.suppress(Exception):  # a failed run is recorded too
                random_pipeline(rng).run(random_items(rng, rng.randint(0, 14)),
                                         random_budget(rng), audit, run_info=info)


def edge_run(contents: list[str], hints: list[float], tokens: list[int]
             ) -> tuple[list[PipelineEvent], list[dict[str, Any]]]:
    """One Full-detail run of items with the given contents, relevance hints (floats at
    ES6's boundaries) and token counts (up to int64): its events, and the log records
    a StructlogSink wrote for it (flat mappings with the digest; structlog's own
    ``event`` and ``log_level`` keys removed, as an OTLP bridge moves them out of the
    attributes)."""
    items = [ContextItem(content=text, tokens=count, future_relevance_hint=hint,
                         priority=2**63 - 1 - count, metadata={"f": hint, "n": [count, text]})
             for text, hint, count in zip(contents, hints, tokens, strict=False)]
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    budget = ContextBudget(max_tokens=2**62, target_tokens=2**61)
    with structlog.testing.capture_logs() as records:
        sink = StructlogSink(logger=structlog.get_logger("edge"))
        Pipeline(scorer=PriorityScorer(), slicer=GreedySlice()).run(
            items, budget, FanOutCollector(collector, sink))
    flat = [{k: v for k, v in record.items() if k not in ("event", "log_level")}
            for record in records]
    return list(collector.events), flat
