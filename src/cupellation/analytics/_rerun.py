"""Logged runs run again: the candidates, budget, policy and clock a log recorded,
and whether they suffice to repeat the run (or run it under another policy)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._model import ContextBudget, ContextItem
from .._pipeline import Pipeline
from ..events import ItemEventBatch, ItemExcluded, ItemIncluded, PipelineEvent
from ..exceptions import CustomStrategyError, RunNotReplayableError
from ..logs import LoggedRun
from ..policy import Policy
from ..scoring import FixedClock

__all__ = ["ReplayableRun", "replayable"]

#: How the fold notes hash capture (the one incompleteness a re-run tolerates).
_CAPTURE_NOTE = "item content was captured as "
#: Scorers that read ``metadata``, which hash and none capture drop.
_METADATA_SCORERS = frozenset({"metadata_trust", "metadata_key"})


def _types(table: Any) -> Iterable[str]:
    """Every ``type`` named in a strategy table, nested ones too."""
    if isinstance(table, Mapping):
        kind = table.get("type")
        if isinstance(kind, str):
            yield kind
        for value in table.values():
            yield from _types(value)
    elif isinstance(table, list | tuple):
        for value in table:
            yield from _types(value)


def _scorer_table(policy: Mapping[str, Any]) -> Any:
    scorer = policy.get("scorer")
    if isinstance(scorer, str):
        try:
            return json.loads(scorer)
        except json.JSONDecodeError:
            return None
    return scorer


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayableRun:
    """What a logged run needs to run again: its candidates in candidate order,
    budget, logged policy (``run_started.pipeline``), start time (the clock of
    decay scorers without a ``reference_time``) and content capture; and, per
    candidate, the logged outcome: ``logged_reasons[k]`` is ``"Included"`` or the
    exclusion reason's name."""

    run_id: str
    started_at: datetime
    budget: ContextBudget
    policy: Mapping[str, Any]
    content_capture: str
    candidates: tuple[ContextItem, ...]
    logged_reasons: tuple[str, ...]

    @property
    def logged_included(self) -> frozenset[int]:
        """The candidate indices the logged run included."""
        return frozenset(k for k, reason in enumerate(self.logged_reasons)
                         if reason == "Included")

    def _check_metadata(self, scorer: Any, who: str) -> None:
        if self.content_capture != "full" and not _METADATA_SCORERS.isdisjoint(_types(scorer)):
            raise RunNotReplayableError(
                self.run_id, "metadata_dropped",
                f"{who} reads item metadata, which {self.content_capture} content capture "
                "dropped from the log")

    def logged_pipeline(self) -> Pipeline:
        """The run's own pipeline, rebuilt from the logged policy with the run's
        ``started_at`` as the clock of decay scorers that read the clock.

        Raises :class:`~cupellation.exceptions.RunNotReplayableError` for a custom
        strategy (recorded by its repr only) or a metadata scorer over content
        logged without metadata."""
        self._check_metadata(_scorer_table(self.policy), "its scorer")
        try:
            return Pipeline.from_policy(self.policy, budget=self.budget,
                                        clock=FixedClock(self.started_at))
        except CustomStrategyError as exc:
            raise RunNotReplayableError(
                self.run_id, "custom_strategy",
                f"it used a custom strategy ({exc.field}: {exc.value}), recorded by its "
                "repr only") from exc

    def pipeline_for(self, policy: Policy) -> Pipeline:
        """``policy``'s pipeline at this run's budget and clock (a policy's own budget
        is not used: the comparison is at the run's budget)."""
        self._check_metadata(policy.to_dict().get("scorer"), "the policy's scorer")
        return policy.build_pipeline(self.budget, clock=FixedClock(self.started_at))


def _item_events(events: Iterable[PipelineEvent | ItemEventBatch]
                 ) -> Iterable[tuple[int, ContextItem, str]]:
    for event in events:
        kind = type(event)
        if kind is ItemIncluded:
            assert isinstance(event, ItemIncluded)
            yield event.candidate_index, event.item, "Included"
        elif kind is ItemExcluded:
            assert isinstance(event, ItemExcluded)
            yield event.candidate_index, event.item, event.reason.name
        elif kind is ItemEventBatch:
            assert isinstance(event, ItemEventBatch)
            names = (["Included"] * len(event.items) if event.stage is None
                     else [reason.name for reason in event.reasons])
            yield from zip(event.candidate_indices, event.items, names, strict=True)


def replayable(run: LoggedRun) -> ReplayableRun:
    """The logged run's candidates and settings, from ``run.candidates`` (read the log
    with ``keep_candidates=True``) or else its events (``keep_events=True``).

    Raises :class:`~cupellation.exceptions.RunNotReplayableError` when the log
    cannot repeat the run: no ``run_started``; logged below Full detail (included
    items have no events there); ``none`` content capture (content dropped;
    ``hash`` capture re-runs, since deduplication only compares contents for
    equality); a record the fold found incomplete (a gap, a digest mismatch, no
    ``run_completed``: anything but the hash capture note); or an item event
    missing or repeated for some candidate.
    """
    started = run.started
    if started is None:
        raise RunNotReplayableError(run.run_id, "no_start",
                                    "its run_started record is missing from the log")
    if started.detail_level != "Full":
        raise RunNotReplayableError(
            run.run_id, "not_full_detail",
            f"it was logged at {started.detail_level} detail, below Full: the included "
            "items have no events")
    if started.content_capture == "none":
        raise RunNotReplayableError(
            run.run_id, "content_dropped",
            "its item content was dropped (content capture none)")
    problems = [note for note in run.report.incomplete if not note.startswith(_CAPTURE_NOTE)]
    if problems:
        more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        raise RunNotReplayableError(run.run_id, "incomplete",
                                    f"its record is incomplete: {problems[0]}{more}")
    count = started.candidate_count
    found: dict[int, tuple[ContextItem, str]] = {}
    repeated = 0
    decided = run.candidates if run.candidates else _item_events(run.events)
    for index, item, reason in decided:
        if not 0 <= index < count or index in found:
            repeated += 1
            continue
        found[index] = (item, reason)
    missing = count - len(found)
    if missing or repeated:
        raise RunNotReplayableError(
            run.run_id, "missing_events",
            f"its log lacks item events for {missing} of {count} candidates"
            + (f" and has {repeated} repeated or out-of-range one(s)" if repeated else ""))
    ordered = [found[k] for k in range(count)]
    return ReplayableRun(
        run_id=run.run_id, started_at=started.started_at, budget=started.budget,
        policy=dict(started.pipeline), content_capture=started.content_capture,
        candidates=tuple(item for item, _ in ordered),
        logged_reasons=tuple(reason for _, reason in ordered))
