"""What the report fold keeps of a run, and the checks it makes on it.

**Never silently wrong.** The fold checks what it is given — sequence gaps,
duplicates and reordering; stage and run counts against the item events; a
candidate decided twice, or never, or out of range; repeated start or end
events; unknown event types and stage names; the tokens of the decided items
against ``run_started``'s ``candidate_tokens``; a reason's token count against
its item's; placed positions that are not 0..n-1; content that was hashed or
dropped — and lists every problem in ``incomplete``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable
from operator import attrgetter
from typing import Any, Final

from ..events import (
    CountShortfall,
    Overflow,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageName,
)

__all__ = ["TOKENS", "FoldState", "check_decisions", "check_run", "check_sequence",
           "check_stages", "check_tokens", "listed"]

TOKENS: Final = attrgetter("tokens")
_MAX_SEQ: Final = 2**63
#: How many seq numbers or indices a problem line lists before it says "...".
_LISTED: Final = 10


def listed(values: Iterable[int]) -> str:
    """Numbers as a problem line lists them (sorted, the first ten, and how many)."""
    ordered = sorted(values)
    shown = ", ".join(map(str, ordered[:_LISTED]))
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > _LISTED else "")


class FoldState:
    """One run's fold: the decisions column by column in the order they were made
    (an item column holds ContextItems, or log records the items are built from),
    the run and stage events, and the sequence bookkeeping."""

    __slots__ = (
        "completed", "duplicates", "ends", "ex_indices", "ex_items", "ex_reasons", "ex_refs",
        "ex_scores", "ex_tokens", "excluded_at", "failed", "from_records", "in_indices",
        "in_items", "in_positions", "in_reasons", "in_scores", "in_tokens", "items_in_events",
        "late", "missing", "next_seq", "overflow",
        "shortfalls", "stage_done", "stage_started", "started", "starts", "unknown",
        "unknown_stages",
    )

    def __init__(self) -> None:
        self.started: RunStarted | None = None
        self.starts = 0
        self.completed: RunCompleted | None = None
        self.ends = 0
        self.failed: RunFailed | None = None
        self.overflow: Overflow | None = None
        self.shortfalls: list[CountShortfall] = []
        self.stage_started: dict[StageName, int] = {}
        self.stage_done: list[StageCompleted] = []
        self.unknown: Counter[str] = Counter()
        self.unknown_stages: set[str] = set()
        # The next expected seq; skipped seqs as sorted, disjoint [start, stop)
        # ranges (a damaged seq far ahead must cost one range, not one entry per
        # skipped number); and what arrived late or twice.
        self.next_seq = 0
        self.missing: list[tuple[int, int]] = []
        self.late: list[int] = []
        self.duplicates: list[int] = []
        self.ex_indices: list[int] = []
        self.ex_items: list[Any] = []
        self.ex_scores: list[float] = []
        # A log record in place of a reason: the record's own, built when read.
        self.ex_reasons: list[Any] = []
        self.ex_refs: list[int] = []  # positions of reasons that point at a candidate
        self.excluded_at: Counter[StageName] = Counter()
        self.in_indices: list[int] = []
        self.in_items: list[Any] = []
        self.in_scores: list[float] = []
        self.in_reasons: list[Any] = []
        self.in_positions: list[int] = []
        #: True once log records (not events) were folded: entries may be deferred.
        self.from_records = False
        #: How many decisions came as events (with their ContextItem), not records.
        self.items_in_events = 0
        #: The tokens of the excluded and of the included items, summed as they come.
        self.ex_tokens = 0
        self.in_tokens = 0

    def accept(self, first: int, count: int) -> bool:
        """Record seqs ``first .. first+count-1``; False for a repeat (to be ignored)."""
        if first == self.next_seq:
            self.next_seq += count
            return True
        if first > self.next_seq:
            self.missing.append((self.next_seq, first))
            self.next_seq = first + count
            return True
        # Arriving late: every seq below the next expected one must fill a gap.
        stop = min(first + count, self.next_seq)
        at = bisect_right(self.missing, (first, _MAX_SEQ)) - 1
        if at < 0 or not self.missing[at][0] <= first < stop <= self.missing[at][1]:
            self.duplicates.append(first)
            return False
        low, high = self.missing[at]
        self.missing[at:at + 1] = [r for r in ((low, first), (stop, high)) if r[0] < r[1]]
        self.late.append(first)
        self.next_seq = max(self.next_seq, first + count)
        return True

    def note_stage(self, stage: StageName) -> None:
        """Remember a stage name this version does not know."""
        if not isinstance(stage, PipelineStage):
            self.unknown_stages.add(stage)


def check_run(state: FoldState, problems: list[str]) -> None:
    """The run's start and end, content capture, and unknown event types."""
    started = state.started
    if started is None:
        problems.append("no run_started event: the candidate count is unknown")
    elif state.starts > 1:
        problems.append(f"run_started appears {state.starts} times")
    if state.failed is not None:
        problems.append(f"the run failed: {state.failed.error_type}: "
                        f"{state.failed.error_text}")
    elif state.completed is None:
        problems.append("no run_completed event: the run's end was not recorded")
    if state.ends > 1:
        problems.append(f"the run's end (run_completed/run_failed) appears "
                        f"{state.ends} times")
    if started is not None and started.content_capture != "full":
        problems.append(f"item content was captured as {started.content_capture!r}: "
                        "contents and metadata are not the originals")
    for name, count in sorted(state.unknown.items()):
        problems.append(f"{count} event(s) of unknown type {name!r} were not understood")
    for stage in sorted(state.unknown_stages):
        problems.append(f"stage {stage!r} is not a stage of the pipeline: its events are "
                        "kept as they are")


def check_sequence(state: FoldState, problems: list[str]) -> None:
    """Gaps, late and repeated seqs."""
    if state.missing:
        shown = [seq for low, high in state.missing[:_LISTED]
                 for seq in range(low, min(high, low + _LISTED))][:_LISTED]
        total = sum(high - low for low, high in state.missing)
        more = f", ... ({total} in all)" if total > len(shown) else ""
        problems.append("events missing from the sequence: seq "
                        + ", ".join(map(str, shown)) + more)
    if state.late:
        problems.append(f"events arrived out of order: seq {listed(state.late)}")
    if state.duplicates:
        problems.append(f"events repeated (ignored): seq {listed(state.duplicates)}")


def _check_stage_pairs(state: FoldState, problems: list[str]) -> None:
    completed = Counter(e.stage for e in state.stage_done)
    # The usual case, each stage started and completed once, settled in one test.
    if state.stage_started == completed and all(n == 1 for n in completed.values()):
        return
    for stage in sorted(completed.keys() | state.stage_started.keys(), key=str):
        begun, done = state.stage_started.get(stage, 0), completed.get(stage, 0)
        if done > 1 or begun > 1:
            problems.append(f"stage {stage} was recorded more than once")
        elif begun and not done and state.failed is None:
            problems.append(f"stage {stage} started but its completion is missing")
        elif done and not begun:
            problems.append(f"stage {stage} completed but its start is missing")


def check_stages(state: FoldState, problems: list[str], level: str | None) -> None:
    """Each stage started and completed once; its counts against the item events and
    the run's end (what the detail level records)."""
    _check_stage_pairs(state, problems)
    if level not in ("StageAndExclusions", "Full"):
        return
    for event in state.stage_done:
        expected = event.items_in - event.items_out
        found = state.excluded_at.get(event.stage, 0)
        if found != expected:
            problems.append(f"stage {event.stage} removed {expected} items but "
                            f"{found} exclusion events were recorded")
        if (level == "Full" and event.stage is PipelineStage.PLACE
                and event.items_out != len(state.in_items)):
            problems.append(f"stage Place kept {event.items_out} items but "
                            f"{len(state.in_items)} inclusion events were recorded")
    completed = state.completed
    if completed is None:
        return
    if completed.excluded_count != len(state.ex_items):
        problems.append(f"run_completed counts {completed.excluded_count} "
                        f"exclusions but {len(state.ex_items)} were recorded")
    included_tokens = state.in_tokens
    if level == "Full" and (completed.included_count != len(state.in_items)
                            or completed.included_tokens != included_tokens):
        problems.append(
            f"run_completed counts {completed.included_count} included items "
            f"({completed.included_tokens} tokens) but the inclusion events "
            f"hold {len(state.in_items)} ({included_tokens} tokens)")


def check_decisions(state: FoldState, problems: list[str], level: str | None) -> bool:
    """Every candidate decided once, within range; the placed positions 0..n-1. True
    when every candidate of the run was decided exactly once."""
    excluded, included = set(state.ex_indices), set(state.in_indices)
    decided = excluded | included
    once = (len(excluded) == len(state.ex_indices) and len(included) == len(state.in_indices))
    if not once:
        repeated = [i for i, n in Counter(state.ex_indices + state.in_indices).items()
                    if n > 1 and not (i in excluded and i in included)]
        if repeated:
            problems.append(f"candidates decided more than once: {listed(repeated)}")
    both = excluded & included
    if both:
        problems.append(f"candidates both included and excluded: {listed(both)}")
    _check_positions(state.in_positions, problems)
    started = state.started
    if started is None:
        return False
    count = started.candidate_count
    out_of_range = [i for i in decided if not 0 <= i < count] if decided and (
        min(decided) < 0 or max(decided) >= count) else []
    if out_of_range:
        problems.append(f"candidate indices out of range (0..{count - 1}): "
                        f"{listed(out_of_range)}")
    undecided = count - (len(decided) - len(out_of_range))
    if undecided > 0:
        why = {"StageOnly": " (detail level StageOnly records no item decisions)",
               "StageAndExclusions": " (detail level StageAndExclusions records no "
                                     "inclusions)"}.get(level or "", "")
        problems.append(f"{undecided} of {count} candidates have no decision{why}")
    return once and not both and not out_of_range and undecided == 0


def _check_positions(positions: list[int], problems: list[str]) -> None:
    """The placed positions must be 0, 1, ..., n-1, each once."""
    if positions == list(range(len(positions))):
        return
    ordered = sorted(positions)
    if ordered != list(range(len(positions))):
        wrong = sorted(set(positions) ^ set(range(len(positions)))) or [
            p for p, n in Counter(positions).items() if n > 1]
        problems.append(f"included positions are not 0..{len(positions) - 1} each once: "
                        f"{listed(wrong)}")


def check_tokens(state: FoldState, problems: list[str], all_decided: bool) -> None:
    """Token counts that must agree: a reason's against its item's, and (when every
    candidate was decided) the decided items' sum against ``candidate_tokens``."""
    started = state.started
    if all_decided and started is not None:
        decided = state.in_tokens + state.ex_tokens
        if decided != started.candidate_tokens:
            problems.append(f"run_started counts {started.candidate_tokens} candidate tokens "
                            f"but the decided items hold {decided}")
    reasons = state.ex_reasons
    # Each reason declares the field that counts its item's tokens (``tokens_field``).
    fields: dict[type, str] = {kind: field for kind in set(map(type, reasons))
                               if (field := getattr(kind, "tokens_field", None)) is not None}
    if not fields:
        return
    disagree = []
    for index, item, reason in zip(state.ex_indices, state.ex_items, reasons, strict=True):
        field = fields.get(type(reason))
        if field is not None and getattr(reason, field) != item.tokens:
            disagree.append(index)
    if disagree:
        problems.append(f"exclusion reasons count other tokens than their items "
                        f"(candidates {listed(disagree)})")
