"""Helpers for testing code that uses cupellation: capture a run's events and
assert on its SelectionReport.

    from cupellation.testing import capture_events, assert_excluded

    events = capture_events()
    pipeline.run(candidates, budget, events)
    report = events.build_report()
    assert_excluded(report, "old tool output", reason="BudgetExceeded")
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from ._collectors import DiagnosticTraceCollector, TraceDetailLevel
from ._report import ExcludedItem, IncludedItem, SelectionReport
from .reasons import reason_to_dict

__all__ = [
    "assert_excluded",
    "assert_included",
    "assert_report_consistent",
    "capture_events",
]


def capture_events(detail_level: TraceDetailLevel = TraceDetailLevel.ITEM
                   ) -> DiagnosticTraceCollector:
    """A collector that records every event of one run (Item level by default)."""
    return DiagnosticTraceCollector(detail_level)


def _contents(entries: tuple[IncludedItem, ...] | tuple[ExcludedItem, ...]) -> list[str]:
    return [entry.item.content for entry in entries]


def assert_included(report: SelectionReport, content: str, *, reason: str | None = None,
                    position: int | None = None) -> IncludedItem:
    """Assert the item with ``content`` was included (optionally with ``reason``
    and at ``position`` in placed order); returns its entry."""
    for at, entry in enumerate(report.included):
        if entry.item.content == content:
            if reason is not None and entry.reason.name != reason:
                raise AssertionError(
                    f"{content!r} was included as {entry.reason.name}, not {reason}"
                )
            if position is not None and at != position:
                raise AssertionError(f"{content!r} was placed at {at}, not {position}")
            return entry
    raise AssertionError(f"{content!r} was not included; included: {_contents(report.included)}")


def assert_excluded(report: SelectionReport, content: str, *, reason: str | None = None,
                    **fields: Any) -> ExcludedItem:
    """Assert the item with ``content`` was excluded, optionally for ``reason``
    with the given reason fields (``item_tokens=400``); returns its entry."""
    for entry in report.excluded:
        if entry.item.content == content:
            wire = reason_to_dict(entry.reason)
            if reason is not None and wire["reason"] != reason:
                raise AssertionError(f"{content!r} was excluded as {wire['reason']}, not {reason}")
            for key, value in fields.items():
                if wire.get(key) != value:
                    raise AssertionError(
                        f"{content!r}: reason field {key} is {wire.get(key)!r}, not {value!r}"
                    )
            return entry
    raise AssertionError(f"{content!r} was not excluded; excluded: {_contents(report.excluded)}")


def assert_report_consistent(report: SelectionReport) -> None:
    """Assert the SelectionReport invariants of the specification and the seeds:
    the totals add up, ``excluded`` is sorted by score descending, and every
    score is finite."""
    if report.total_candidates != len(report.included) + len(report.excluded):
        raise AssertionError(
            f"total_candidates {report.total_candidates} != "
            f"{len(report.included)} included + {len(report.excluded)} excluded"
        )
    tokens = (sum(e.item.tokens for e in report.included)
              + sum(e.item.tokens for e in report.excluded))
    if report.total_tokens_considered != tokens:
        raise AssertionError(
            f"total_tokens_considered {report.total_tokens_considered} != {tokens}"
        )
    scores = [e.score for e in report.excluded]
    if any(a < b for a, b in itertools.pairwise(scores)):
        raise AssertionError(f"excluded is not sorted by score descending: {scores}")
    for content, score in [(e.item.content, e.score) for e in report.included] + [
            (e.item.content, e.score) for e in report.excluded]:
        if not math.isfinite(score):
            raise AssertionError(f"{content!r} has a non-finite score {score}")
