"""ReportBuilder: the one fold that makes a SelectionReport from a run's events.

The report is a pure fold of a run's events (``spec/src/diagnostics/selection-report.md``
and the wire format): it is never assembled from side data, so a report rebuilt from a
log file or from spans is the same value as the one folded in process.
:func:`build_report` is a loop over a :class:`ReportBuilder`; a log reader keeps
one builder per run id and so folds interleaved runs with bounded memory.

The checks the fold makes are in :mod:`.checks`; every problem is listed in
``incomplete``, so a report with an empty ``incomplete`` is the whole truth of a
finished run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from operator import attrgetter, le
from typing import Any, Final

import msgspec

from .._model import ContextItem, ContextKind, CountRequirementShortfall
from ..events import (
    CountShortfall,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageName,
    StageStarted,
    UnknownEvent,
)
from ..events._digest import DigestCheck, digest_verdict
from ..events._lines import verify_events
from ..exceptions import InvalidValueError
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, references_of
from ..settings import resolve_digest_key
from .checks import (
    TOKENS,
    FoldState,
    check_decisions,
    check_run,
    check_sequence,
    check_stages,
    check_tokens,
)
from .entries import (
    DeferredExcluded,
    DeferredIncluded,
    ExcludedItem,
    IncludedItem,
    OverflowReport,
    TraceEvent,
    deferred_excluded,
    deferred_included,
)
from .report import SelectionReport

__all__ = ["ItemRecord", "ReportBuilder", "build_report"]

#: The reasons known when this module was read that point at another candidate (a
#: log record stands only for one of those; a reason registered later is an event).
_REFERENCE_NAMES: Final = frozenset(name for name, cls in KNOWN_EXCLUSION_REASONS.items()
                                    if references_of(cls))
_SCORE: Final = attrgetter("score")
_INDEX: Final = attrgetter("candidate_index")
_POSITION: Final = attrgetter("position")
_REASON_NAME: Final = attrgetter("reason")
_ITEM_TOKENS: Final = attrgetter("item_tokens")

#: What :meth:`ReportBuilder.add_records` reads of a log record: ``seq``,
#: ``candidate_index``, ``score``, ``tokens``, ``reason`` (the name), ``position``
#: (inclusions), ``stage`` (exclusions), ``build_item()`` and ``build_reason()``.
ItemRecord = Any


class ReportBuilder:
    """The incremental fold of one run's events into its SelectionReport.

    Feed it the run's events in order with :meth:`add` — single events or
    whole :class:`~cupellation.events.ItemEventBatch` objects — then call
    :meth:`result`. It holds one entry per decided candidate and a few
    counters, nothing else, so a reader can keep one builder per run id and
    drop it once the report is out::

        builder = ReportBuilder()
        for event in events:
            builder.add(event)
        report = builder.result()

    ``run_id`` pins the builder to one run (the first event's run otherwise);
    an event of another run raises :class:`~cupellation.exceptions.InvalidValueError`.
    A decoder that checked the run's digest passes what it found to
    :meth:`set_digest_check`; a mismatch is then listed in ``incomplete``.
    """

    __slots__ = ("_digest_check", "_run_id", "_state")

    def __init__(self, run_id: str | None = None) -> None:
        self._run_id = run_id
        self._state = FoldState()
        self._digest_check: DigestCheck | None = None

    @property
    def run_id(self) -> str | None:
        """The run this builder folds (None until the first event names it)."""
        return self._run_id

    @property
    def finished(self) -> bool:
        """True once the run's ``run_completed`` or ``run_failed`` was added."""
        return self._state.ends > 0

    @property
    def end_event(self) -> RunCompleted | RunFailed | None:
        """The run's end event, once added (the failure, if the run failed)."""
        state = self._state
        return state.failed if state.failed is not None else state.completed

    def set_digest_check(self, check: DigestCheck) -> None:
        """What a decoder found comparing the run's digest with what it read."""
        self._digest_check = check

    def _own(self, run_id: str) -> None:
        if self._run_id is None:
            self._run_id = run_id
        elif run_id != self._run_id:
            raise InvalidValueError("run_id", run_id,
                                    f"belongs to another run than this builder's "
                                    f"({self._run_id})")

    def add(self, event: PipelineEvent | ItemEventBatch) -> None:
        """Fold one event (or one batch of item events) into the report."""
        self._own(event.run_id)
        state = self._state
        kind = type(event)
        if kind is ItemEventBatch:
            assert isinstance(event, ItemEventBatch)
            if not event.items or not state.accept(event.first_seq, len(event.items)):
                return
            if event.stage is not None:
                self._exclusions(event.stage, event.candidate_indices, event.items,
                                 event.scores, event.reasons)  # type: ignore[arg-type]
            else:
                assert event.positions is not None
                self._inclusions(event.candidate_indices, event.items, event.scores,
                                 event.reasons, event.positions)
            return
        assert not isinstance(event, ItemEventBatch)
        if not state.accept(event.seq, 1):
            return
        if kind is ItemExcluded:
            assert isinstance(event, ItemExcluded)
            self._exclusions(event.stage, (event.candidate_index,), (event.item,),
                             (event.score,), (event.reason,))
        elif kind is ItemIncluded:
            assert isinstance(event, ItemIncluded)
            self._inclusions((event.candidate_index,), (event.item,), (event.score,),
                             (event.reason,), (event.position,))
        else:
            self._add_other(event)

    def _add_other(self, event: PipelineEvent) -> None:
        """Fold a run-, stage- or other event."""
        state = self._state
        if isinstance(event, StageStarted):
            state.note_stage(event.stage)
            state.stage_started[event.stage] = state.stage_started.get(event.stage, 0) + 1
        elif isinstance(event, StageCompleted):
            state.note_stage(event.stage)
            state.stage_done.append(event)
        elif isinstance(event, RunStarted):
            state.starts += 1
            if state.started is None:
                state.started = event
        elif isinstance(event, RunCompleted):
            state.ends += 1
            state.completed = event
        elif isinstance(event, RunFailed):
            state.ends += 1
            state.failed = event
        elif isinstance(event, Overflow):
            state.overflow = event
        elif isinstance(event, CountShortfall):
            state.shortfalls.append(event)
        else:
            assert isinstance(event, UnknownEvent)
            state.unknown[event.event_type] += 1

    def add_records(self, records: Sequence[ItemRecord]) -> None:
        """Fold log records of consecutive item events of one kind (and, for
        exclusions, one stage), in seq order: the log reader's way, which builds no
        event object; each entry's item and reason are built when the report's entry
        is read. ``records`` belong to this builder's run."""
        if not records:
            return
        first = records[0]
        self._own(first.run_id)
        if not self._state.accept(first.seq, len(records)):
            return
        state = self._state
        state.from_records = True
        if first.excluded:
            start = len(state.ex_items)
            state.ex_indices.extend(map(_INDEX, records))
            state.ex_items.extend(records)
            state.ex_scores.extend(map(_SCORE, records))
            state.ex_reasons.extend(records)  # each record stands for its reason
            state.ex_tokens += sum(map(_ITEM_TOKENS, records))
            stage = first.stage_name
            state.note_stage(stage)
            state.excluded_at[stage] += len(records)
            names = set(map(_REASON_NAME, records))
            if not names.isdisjoint(_REFERENCE_NAMES):
                for k, record in enumerate(records, start):
                    if record.reason in _REFERENCE_NAMES:
                        state.ex_reasons[k] = record.build_reason()
                        state.ex_refs.append(k)
        else:
            state.in_indices.extend(map(_INDEX, records))
            state.in_items.extend(records)
            state.in_scores.extend(map(_SCORE, records))
            state.in_reasons.extend(records)  # each record stands for its reason
            state.in_positions.extend(map(_POSITION, records))
            state.in_tokens += sum(map(_ITEM_TOKENS, records))

    def _exclusions(self, stage: StageName, indices: Iterable[int],
                    items: Iterable[ContextItem], scores: Iterable[float],
                    reasons: tuple[ExclusionReason, ...]) -> None:
        state = self._state
        at = len(state.ex_reasons)
        state.ex_indices.extend(indices)
        state.ex_items.extend(items)
        state.ex_scores.extend(scores)
        state.ex_reasons.extend(reasons)
        state.note_stage(stage)
        state.excluded_at[stage] += len(reasons)
        state.items_in_events += len(reasons)
        state.ex_tokens += sum(map(TOKENS, state.ex_items[at:]))
        # Most batches hold no reason that points at another candidate: one
        # C-level pass over the reason types settles that (each type says).
        pointing = {kind for kind in set(map(type, reasons)) if references_of(kind)}
        if pointing:
            state.ex_refs.extend(at + k for k, reason in enumerate(reasons)
                                 if type(reason) in pointing)

    def _inclusions(self, indices: Iterable[int], items: Iterable[ContextItem],
                    scores: Iterable[float], reasons: Iterable[Any],
                    positions: Iterable[int]) -> None:
        state = self._state
        at = len(state.in_items)
        state.in_indices.extend(indices)
        state.in_items.extend(items)
        state.in_scores.extend(scores)
        state.in_reasons.extend(reasons)
        state.in_positions.extend(positions)
        state.items_in_events += 1  # (any number: only whether there were any matters)
        state.in_tokens += sum(map(TOKENS, state.in_items[at:]))

    def candidates(self) -> list[tuple[int, ContextItem, str]]:
        """Every decided candidate as ``(candidate_index, item, outcome)``, inclusions
        first, in the order added: ``outcome`` is ``"Included"`` or the exclusion
        reason's name. What a re-run of a logged run needs (with ``run_started``)."""
        state = self._state
        out = [(index, _item_of(item), "Included")
               for index, item in zip(state.in_indices, state.in_items, strict=True)]
        out.extend((index, _item_of(item), _reason_name(reason))
                   for index, item, reason in zip(state.ex_indices, state.ex_items,
                                                  state.ex_reasons, strict=True))
        return out

    # -- the result ---------------------------------------------------------------

    def result(self) -> SelectionReport:
        """The report of everything added so far, with ``incomplete`` saying what is
        missing or wrong. Calling it again after more events gives the newer report."""
        state = self._state
        problems: list[str] = []
        level = state.started.detail_level if state.started is not None else None
        check_run(state, problems)
        check_stages(state, problems, level)
        check_sequence(state, problems)
        by_index = self._items_by_index() if state.ex_refs or state.overflow else {}
        excluded = self._excluded(problems, by_index)
        included = self._included()
        all_decided = check_decisions(state, problems, level)
        check_tokens(state, problems, all_decided)
        overflow = self._overflow(problems, by_index)
        check = self._digest_check
        if check is not None and check.note is not None:
            # A signature missing or not checked concerns every other line: first.
            problems.insert(0 if check.leading else len(problems), check.note)
        # Summed from the entries themselves, never taken from run_started: a
        # damaged start event must not make the totals disagree with the lists.
        tokens = state.in_tokens + state.ex_tokens
        return SelectionReport(
            events=tuple(TraceEvent(e.stage, e.duration_ms, e.items_in)
                         for e in state.stage_done if e.stage is not PipelineStage.SORT),
            included=tuple(included), excluded=tuple(excluded),
            total_candidates=len(included) + len(excluded), total_tokens_considered=tokens,
            count_requirement_shortfalls=tuple(
                CountRequirementShortfall(ContextKind(e.kind), e.required_count,
                                          e.satisfied_count) for e in state.shortfalls),
            overflow=overflow, incomplete=tuple(problems),
        )

    def _items_by_index(self) -> dict[int, Any]:
        state = self._state
        by_index = dict(zip(state.ex_indices, state.ex_items, strict=True))
        by_index.update(zip(state.in_indices, state.in_items, strict=True))
        return by_index

    def _excluded(self, problems: list[str], by_index: dict[int, Any]) -> list[ExcludedItem]:
        state = self._state
        reasons = list(state.ex_reasons)
        if state.ex_refs:
            _resolve_references(problems, reasons, state.ex_refs, by_index)
        excluded: list[ExcludedItem]
        if state.from_records and not state.items_in_events:  # a log read the fast way
            excluded = list(map(DeferredExcluded, state.ex_items, state.ex_scores, reasons))
        elif state.from_records:  # some records, some events: entry by entry
            excluded = [ExcludedItem(item, score, reason)
                        if type(item) is ContextItem else deferred_excluded(item, reason)
                        for item, score, reason in zip(state.ex_items, state.ex_scores,
                                                       reasons, strict=True)]
        else:
            excluded = list(map(ExcludedItem, state.ex_items,
                                state.ex_scores, reasons))
        # Python's sort stays stable with reverse=True: ties keep exclusion order.
        excluded.sort(key=_SCORE, reverse=True)
        return excluded

    def _included(self) -> list[IncludedItem]:
        state = self._state
        included: list[IncludedItem]
        if state.from_records and not state.items_in_events:  # a log read the fast way
            included = list(map(DeferredIncluded, state.in_items, state.in_scores,
                                state.in_reasons))
        elif state.from_records:
            included = [IncludedItem(item, score, reason) if type(item) is ContextItem
                        else deferred_included(item)
                        for item, score, reason in zip(state.in_items, state.in_scores,
                                                       state.in_reasons, strict=True)]
        else:
            included = list(map(IncludedItem, state.in_items,
                                state.in_scores, state.in_reasons))
        positions = state.in_positions
        # Placed order is almost always the order of the events: a C-level check
        # of that first (a generator here cost more than the rest of the fold).
        if not all(map(le, positions, islice(positions, 1, None))):
            order = sorted(range(len(included)), key=positions.__getitem__)
            included = [included[k] for k in order]
        return included

    def _overflow(self, problems: list[str], by_index: dict[int, Any]) -> OverflowReport | None:
        overflow = self._state.overflow
        if overflow is None:
            return None
        overflowing = tuple(_item_of(by_index[i]) for i in overflow.item_indices
                            if i in by_index)
        if len(overflowing) != len(overflow.item_indices):
            problems.append("some overflowing items have no item event")
        return OverflowReport(overflow.tokens_over_budget, overflowing, overflow.budget)


def _reason_name(reason: Any) -> str:
    """The name of an exclusion column's entry (a reason, or the record standing for it,
    whose ``reason`` is the name)."""
    name = getattr(reason, "reason", None)
    return name if isinstance(name, str) else str(reason.name)


def _item_of(value: Any) -> ContextItem:
    """An item column's entry as a ContextItem (a record builds its item)."""
    return value if type(value) is ContextItem else value.build_item()


def _resolve_references(problems: list[str], reasons: list[ExclusionReason | None],
                        refs: Sequence[int], by_index: dict[int, Any]) -> None:
    """Turn the candidate indices in the reasons' reference fields (Deduplicated's,
    PinnedOverride's, any a reason declares ``int | str``) into content."""
    for at in refs:
        reason = reasons[at]
        changes: dict[str, str] = {}
        for field in references_of(type(reason)):
            target = getattr(reason, field)
            if isinstance(target, str):
                continue  # already content (an event built by hand)
            item = by_index.get(target)
            if item is None:
                problems.append(f"a {type(reason).__name__} reason refers to candidate "
                                f"{target}, which has no item event")
                changes[field] = f"<candidate {target}>"
            else:
                changes[field] = _item_of(item).content
        if changes and reason is not None:
            reasons[at] = msgspec.structs.replace(reason, **changes)


def build_report(events: Iterable[PipelineEvent | ItemEventBatch], *,
                 run_id: str | None = None, digest_key: bytes | str | None = None
                 ) -> SelectionReport:
    """Fold one run's events into its SelectionReport (a loop over :class:`ReportBuilder`).

    ``events`` may hold several runs only if ``run_id`` picks one; otherwise
    events of a second run raise :class:`~cupellation.exceptions.InvalidValueError`.
    When the run's end event carries a digest (events decoded from a file or
    spans), it is checked against the events (with ``digest_key``, or the
    ``CUPELLATION_DIGEST_KEY`` environment variable, for a keyed digest) and
    judged as every reader judges it (``digest_verdict`` (the one digest rule)):
    a mismatch, a plain digest read with a key, or a keyed one read without it is
    listed in ``incomplete``. Passing ``digest_key`` says the events are a stored run
    that must be signed with it, so a missing digest is listed too. Without the
    parameter, events with no digest at all are folded unjudged: they may come
    straight from a pipeline in this process (whatever ``CUPELLATION_DIGEST_KEY``
    says), which nothing tells apart from events whose digest was stripped.
    """
    builder = ReportBuilder(run_id)
    kept: list[PipelineEvent | ItemEventBatch] = []
    add, keep = builder.add, kept.append
    for event in events:
        if run_id is None or event.run_id == run_id:
            add(event)
            keep(event)
    end = builder.end_event
    recorded = None if end is None else end.digest
    if recorded is not None or digest_key is not None:
        key = resolve_digest_key(digest_key)
        builder.set_digest_check(digest_verdict(verify_events(kept, key), recorded,
                                                key_present=key is not None))
    return builder.result()
