"""The SelectionReport and the one fold that makes it: :class:`ReportBuilder`.

The report is a pure fold of a run's events (``spec/src/diagnostics/selection-report.md``
and the seeds): it is never assembled from side data, so a report rebuilt from
a log file or from spans is the same value as the one folded in process.
:func:`build_report` is a loop over a :class:`ReportBuilder`; a log reader keeps
one builder per run id and so folds interleaved runs with bounded memory.

**Never silently wrong.** The fold checks what it is given — sequence gaps,
duplicates and reordering; stage and run counts against the item events; a
candidate decided twice, or never, or out of range; repeated start or end
events; unknown event types; content that was hashed or dropped — and lists
every problem in ``incomplete``. A report with an empty ``incomplete`` is the
whole truth of a finished run.

JSON is the seeds' shape to the letter: ``events``, ``included``, ``excluded``,
``total_candidates``, ``total_tokens_considered``. Three optional members are
cupellation's own and appear only when they carry something:
``count_requirement_shortfalls``, ``overflow`` and ``incomplete``.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from operator import attrgetter, le
from typing import Any

import msgspec

from ._model import ContextBudget, ContextItem, ContextKind, fits_int64
from .events import (
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
from .exceptions import DecodeError, InvalidValueError
from .reasons import (
    BudgetExceeded,
    CountCapExceeded,
    CountRequireCandidatesExhausted,
    Deduplicated,
    ExclusionReason,
    Filtered,
    InclusionReason,
    NegativeTokens,
    PinnedOverride,
    QuotaCapExceeded,
    QuotaRequireDisplaced,
    ScoredTooLow,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
    reason_to_dict,
)
from .slicing import CountRequirementShortfall

__all__ = [
    "ExcludedItem",
    "IncludedItem",
    "OverflowReport",
    "ReportBuilder",
    "SelectionReport",
    "TraceEvent",
    "build_report",
]


class TraceEvent(msgspec.Struct, frozen=True, gc=False):
    """The specification's TraceEvent: one per stage in a report's ``events``."""

    stage: StageName
    duration_ms: float
    item_count: int
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The seeds' JSON object (``message`` only when set)."""
        stage = self.stage.value if isinstance(self.stage, PipelineStage) else self.stage
        out: dict[str, Any] = {"stage": stage, "duration_ms": self.duration_ms,
                               "item_count": self.item_count}
        if self.message is not None:
            out["message"] = self.message
        return out


class IncludedItem(msgspec.Struct, frozen=True, gc=False):
    """A selected item with its score at inclusion and why it was included."""

    item: ContextItem
    score: float
    reason: InclusionReason

    def to_dict(self) -> dict[str, Any]:
        """The seeds' JSON object."""
        return {"item": self.item.to_dict(), "score": self.score,
                "reason": reason_to_dict(self.reason)}


class ExcludedItem(msgspec.Struct, frozen=True, gc=False):
    """A candidate left out, with its score when excluded and the reason.

    A reason that points at another candidate holds that candidate's content
    here (the seeds' wire form), not its index.
    """

    item: ContextItem
    score: float
    reason: ExclusionReason

    def to_dict(self) -> dict[str, Any]:
        """The seeds' JSON object."""
        return {"item": self.item.to_dict(), "score": self.score,
                "reason": reason_to_dict(self.reason)}


class OverflowReport(msgspec.Struct, frozen=True, gc=False):
    """The specification's OverflowEvent, as a report carries it (Proceed only)."""

    tokens_over_budget: int
    overflowing_items: tuple[ContextItem, ...]
    budget: ContextBudget

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the report's ``overflow`` member."""
        return {"tokens_over_budget": self.tokens_over_budget,
                "overflowing_items": [i.to_dict() for i in self.overflowing_items],
                "budget": self.budget.to_dict()}


def _shortfall_to_dict(shortfall: CountRequirementShortfall) -> dict[str, Any]:
    return {"kind": shortfall.kind.value, "required_count": shortfall.required_count,
            "satisfied_count": shortfall.satisfied_count}


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectionReport:
    """Why every candidate was or was not selected in one run.

    ``included`` is in final placed order; ``excluded`` is sorted by score
    descending, ties in exclusion order. ``incomplete`` lists what the events
    lacked or got wrong (empty for a report folded from a whole Full-level run).
    """

    events: tuple[TraceEvent, ...]
    included: tuple[IncludedItem, ...]
    excluded: tuple[ExcludedItem, ...]
    total_candidates: int
    total_tokens_considered: int
    count_requirement_shortfalls: tuple[CountRequirementShortfall, ...] = ()
    overflow: OverflowReport | None = None
    incomplete: tuple[str, ...] = ()

    @property
    def is_complete(self) -> bool:
        """True when the events accounted for every candidate of a finished run."""
        return not self.incomplete

    def to_dict(self) -> dict[str, Any]:
        """The seeds' JSON shape (plus the optional members, only when non-empty)."""
        out: dict[str, Any] = {
            "events": [e.to_dict() for e in self.events],
            "included": [i.to_dict() for i in self.included],
            "excluded": [e.to_dict() for e in self.excluded],
            "total_candidates": self.total_candidates,
            "total_tokens_considered": self.total_tokens_considered,
        }
        if self.count_requirement_shortfalls:
            out["count_requirement_shortfalls"] = [
                _shortfall_to_dict(s) for s in self.count_requirement_shortfalls
            ]
        if self.overflow is not None:
            out["overflow"] = self.overflow.to_dict()
        if self.incomplete:
            out["incomplete"] = list(self.incomplete)
        return out

    def to_json(self, *, indent: int | None = None) -> str:
        """The report as JSON text (:meth:`to_dict`'s shape, member for member)."""
        data = _encode_report(self)
        if indent is not None:
            data = msgspec.json.format(data, indent=indent)
        return data.decode("utf-8")

    @classmethod
    def from_json(cls, text: str | bytes, *, strict: bool = False) -> SelectionReport:
        """Decode JSON text written by :meth:`to_json` (see :meth:`from_dict`).

        Raises :class:`~cupellation.exceptions.DecodeError` for text that is not
        JSON (or not UTF-8, or nested past the recursion limit) or not a report.
        """
        if not isinstance(text, str | bytes | bytearray | memoryview):
            raise DecodeError("report", type(text).__name__, "must be JSON text (str or bytes)")
        try:
            data = msgspec.json.decode(text)
        except RecursionError:
            raise DecodeError("report", _short(text), "nests arrays or objects too deeply"
                              ) from None
        except ValueError as exc:  # msgspec.DecodeError, or text that is not UTF-8
            raise DecodeError("report", str(exc), "is not valid JSON") from None
        return cls.from_dict(data, strict=strict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, strict: bool = False) -> SelectionReport:
        """Decode the JSON shape; unknown reason variants and stages are kept.

        The seeds' MUST rules are checked: ``total_candidates`` equals
        ``len(included) + len(excluded)``, ``total_tokens_considered`` equals the
        sum of both lists' item tokens, and ``excluded`` is sorted by score
        descending. A report that breaks one still reads, with each broken rule
        named in ``incomplete`` (so ``is_complete`` is False): the lists may be
        an abridged copy of a larger run, as the seeds' own example is. With
        ``strict=True`` a broken rule raises
        :class:`~cupellation.exceptions.DecodeError` naming it instead.

        Raises :class:`~cupellation.exceptions.DecodeError` naming the member for
        anything missing, mistyped or out of range (integers are int64, numbers
        finite).
        """
        if not isinstance(data, Mapping):
            raise DecodeError("report", data, "must be a JSON object")
        for key in ("events", "included", "excluded"):
            if not isinstance(data.get(key), list):
                raise DecodeError(key, data.get(key), "is required and must be a JSON array")
        totals = {key: _integer(data.get(key), key, required=True)
                  for key in ("total_candidates", "total_tokens_considered")}
        incomplete = data.get("incomplete", [])
        if not isinstance(incomplete, list) or not all(isinstance(r, str) for r in incomplete):
            raise DecodeError("incomplete", incomplete, "must be a JSON array of strings")
        where = "report"
        try:
            events = []
            for k, raw in enumerate(data["events"]):
                where = f"events[{k}]"
                events.append(_trace_event_from_dict(_mapping(raw)))
            included = []
            for k, raw in enumerate(data["included"]):
                where = f"included[{k}]"
                entry = _mapping(raw)
                included.append(IncludedItem(ContextItem.from_dict(entry["item"]),
                                             _number(entry["score"]),
                                             inclusion_reason_from_dict(entry["reason"])))
            excluded = []
            for k, raw in enumerate(data["excluded"]):
                where = f"excluded[{k}]"
                entry = _mapping(raw)
                excluded.append(ExcludedItem(ContextItem.from_dict(entry["item"]),
                                             _number(entry["score"]),
                                             exclusion_reason_from_dict(entry["reason"])))
            where = "count_requirement_shortfalls"
            shortfalls = []
            raw_shortfalls = data.get("count_requirement_shortfalls", [])
            if not isinstance(raw_shortfalls, list):
                raise DecodeError("", raw_shortfalls, "must be a JSON array")
            for k, raw in enumerate(raw_shortfalls):
                where = f"count_requirement_shortfalls[{k}]"
                shortfall = _mapping(raw)
                shortfalls.append(CountRequirementShortfall(
                    ContextKind(shortfall["kind"]),
                    _integer(shortfall["required_count"], "required_count"),
                    _integer(shortfall["satisfied_count"], "satisfied_count")))
            where = "overflow"
            overflow_data = data.get("overflow")
            overflow = None
            if overflow_data is not None:
                overflow_data = _mapping(overflow_data)
                overflowing = overflow_data["overflowing_items"]
                if not isinstance(overflowing, list):
                    raise DecodeError("overflowing_items", overflowing, "must be a JSON array")
                overflow = OverflowReport(
                    _integer(overflow_data["tokens_over_budget"], "tokens_over_budget"),
                    tuple(ContextItem.from_dict(i) for i in overflowing),
                    ContextBudget.from_dict(overflow_data["budget"]),
                )
        except DecodeError as exc:
            field = f"{where}.{exc.field}" if exc.field else where
            raise DecodeError(field, exc.value, exc.problem) from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise DecodeError(where, str(exc), "has a missing or mistyped member") from exc
        broken = _broken_rules(totals["total_candidates"], totals["total_tokens_considered"],
                               included, excluded)
        if broken and strict:
            field, value, rule, found = broken[0]
            raise DecodeError(field, value, f"breaks the seeds' rule {rule}: {found}")
        notes = list(incomplete)
        for field, value, rule, found in broken:
            note = _broken_rule_note(field, value, rule, found)
            if note not in notes:  # a report read, written and read again says it once
                notes.append(note)
        return cls(
            events=tuple(events), included=tuple(included), excluded=tuple(excluded),
            total_candidates=totals["total_candidates"],
            total_tokens_considered=totals["total_tokens_considered"],
            count_requirement_shortfalls=tuple(shortfalls), overflow=overflow,
            incomplete=tuple(notes),
        )


def _broken_rules(total_candidates: int, total_tokens: int, included: Sequence[IncludedItem],
                  excluded: Sequence[ExcludedItem]) -> list[tuple[str, Any, str, str]]:
    """The seeds' MUST rules a decoded report breaks, as (field, value, rule, what the
    lists hold) quadruples, in the seeds' order."""
    broken: list[tuple[str, Any, str, str]] = []
    listed = len(included) + len(excluded)
    if total_candidates != listed:
        broken.append(("total_candidates", total_candidates,
                       "total_candidates = len(included) + len(excluded)",
                       f"included and excluded list {listed} items"))
    tokens = sum(entry.item.tokens for entry in included) + sum(
        entry.item.tokens for entry in excluded)
    if total_tokens != tokens:
        broken.append(("total_tokens_considered", total_tokens,
                       "total_tokens_considered = the sum of tokens over included and excluded",
                       f"the listed items hold {tokens} tokens"))
    scores = [entry.score for entry in excluded]
    out_of_order = next((k for k in range(1, len(scores)) if scores[k] > scores[k - 1]), None)
    if out_of_order is not None:
        broken.append((f"excluded[{out_of_order}].score", scores[out_of_order],
                       "excluded is sorted by score descending",
                       f"excluded[{out_of_order}] scores {scores[out_of_order]!r}, above "
                       f"excluded[{out_of_order - 1}]'s {scores[out_of_order - 1]!r}"))
    return broken


def _broken_rule_note(field: str, value: Any, rule: str, found: str) -> str:
    """A broken rule as a line of ``incomplete``."""
    return f"{field} is {value!r} but {found} (the seeds' rule: {rule})"


def _short(text: str | bytes | bytearray | memoryview) -> str:
    shown = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _mapping(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DecodeError("", value, "must be a JSON object")
    return value


def _integer(value: Any, field: str, *, required: bool = False) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise DecodeError(field, value, ("is required and " if required else "")
                          + "must be an integer")
    if not fits_int64(value):
        raise DecodeError(field, value, "must fit in a signed 64-bit integer")
    return value


# -- the JSON writer ---------------------------------------------------------------
#
# ``to_json`` does not go through ``to_dict``: building a dict per item and per
# entry costs several microseconds each, which made a report's JSON text cost
# more than the run it describes. Each entry becomes a small struct that msgspec
# encodes in C, with the item's fields in the seeds' names and defaults omitted,
# and reasons that encode as their own envelope (``{"reason": name, ...}``). A
# test checks that the text decodes to exactly ``to_dict()``.


#: The default source, passed as this very object: msgspec's omit_defaults tests a
#: string default by identity, and a decoded "Chat" is another string object.
_CHAT = "Chat"


class _WireItem(msgspec.Struct, omit_defaults=True, gc=False,
                rename={"future_relevance_hint": "futureRelevanceHint",
                        "original_tokens": "originalTokens"}):
    content: str
    tokens: int
    kind: str
    source: str = _CHAT
    priority: int | None = None
    tags: tuple[str, ...] = ()
    metadata: Any = None
    timestamp: datetime | None = None
    future_relevance_hint: float | str | None = None
    pinned: bool = False
    original_tokens: int | None = None


class _WireEntry(msgspec.Struct, gc=False):
    item: _WireItem
    score: float
    reason: Any


def _wire_item(item: ContextItem) -> _WireItem:
    hint = item.future_relevance_hint
    if hint is not None and not math.isfinite(hint):
        hint = item.to_dict()["futureRelevanceHint"]  # the seeds' spelling of NaN/infinity
    metadata = item.metadata
    # A plain dict of the top level here is cheaper than a call into the encoder's
    # hook for it; deeper read-only mappings (rare) still go through the hook.
    source = item.source.value
    return _WireItem(item.content, item.tokens, item.kind.value,
                     _CHAT if source == _CHAT else source,
                     item.priority, item.tags, dict(metadata) if metadata else None,
                     item.timestamp, hint, item.pinned, item.original_tokens)


def _wire_reason(reason: ExclusionReason | InclusionReason,
                 cache: dict[int, msgspec.Raw]) -> Any:
    """A known exclusion reason as itself (it encodes as its envelope); others as raw
    JSON of their envelope, made once per reason object."""
    if type(reason) in _TAGGED_REASONS:
        return reason
    raw = cache.get(id(reason))
    if raw is None:
        raw = cache[id(reason)] = msgspec.Raw(msgspec.json.encode(reason_to_dict(reason)))
    return raw


def _thaw(value: Any) -> Any:
    """Read-only metadata mappings nested in metadata, as dicts, for the encoder."""
    if isinstance(value, Mapping):
        return dict(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


_ENCODER = msgspec.json.Encoder(enc_hook=_thaw)


def _wire_entries(entries: Sequence[IncludedItem | ExcludedItem],
                  cache: dict[int, msgspec.Raw]) -> list[_WireEntry]:
    items = [entry.item for entry in entries]
    hints = [item.future_relevance_hint for item in items]
    present: Iterable[float] = filter(None, hints)  # 0.0 is finite: skipping it is fine
    if not all(map(math.isfinite, present)):
        # A NaN or infinite hint (the seeds spell it as text): the careful path.
        return [_WireEntry(_wire_item(e.item), e.score, _wire_reason(e.reason, cache))
                for e in entries]
    tagged = _TAGGED_REASONS
    # The per-item work inlined (no call per item): this loop is most of what
    # writing a large report costs. The fields are _wire_item's, in order.
    return [
        _WireEntry(
            _WireItem(i.content, i.tokens, i.kind.value,
                      _CHAT if i.source.value == _CHAT else i.source.value, i.priority, i.tags,
                      dict(i.metadata) if i.metadata else None, i.timestamp, hint, i.pinned,
                      i.original_tokens),
            e.score, e.reason if type(e.reason) in tagged else _wire_reason(e.reason, cache))
        for e, i, hint in zip(entries, items, hints, strict=True)
    ]


def _encode_report(report: SelectionReport) -> bytes:
    cache: dict[int, msgspec.Raw] = {}
    out: dict[str, Any] = {
        "events": [e.to_dict() for e in report.events],
        "included": _wire_entries(report.included, cache),
        "excluded": _wire_entries(report.excluded, cache),
        "total_candidates": report.total_candidates,
        "total_tokens_considered": report.total_tokens_considered,
    }
    if report.count_requirement_shortfalls:
        out["count_requirement_shortfalls"] = [
            _shortfall_to_dict(s) for s in report.count_requirement_shortfalls]
    if report.overflow is not None:
        out["overflow"] = report.overflow.to_dict()
    if report.incomplete:
        out["incomplete"] = list(report.incomplete)
    return _ENCODER.encode(out)


def _number(value: Any, field: str = "score") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(field, value, "must be a number")
    try:
        number = float(value)
    except OverflowError:
        raise DecodeError(field, value, "is too large for a float64") from None
    if not math.isfinite(number):
        raise DecodeError(field, value, "must be a finite number")
    return number


def _trace_event_from_dict(data: Mapping[str, Any]) -> TraceEvent:
    stage_name = data["stage"]
    if not isinstance(stage_name, str):
        raise DecodeError("stage", stage_name, "must be a stage name")
    stage: StageName = next((s for s in PipelineStage if s.value == stage_name), stage_name)
    item_count = _integer(data["item_count"], "item_count")
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise DecodeError("message", message, "must be a string")
    return TraceEvent(stage, _number(data["duration_ms"], "duration_ms"), item_count, message)


_REFERENCE_REASONS = (Deduplicated, PinnedOverride)
#: The reasons msgspec encodes as their own wire envelope (tagged structs).
_TAGGED_REASONS: frozenset[type] = frozenset((
    BudgetExceeded, ScoredTooLow, Deduplicated, QuotaCapExceeded, QuotaRequireDisplaced,
    NegativeTokens, PinnedOverride, Filtered, CountCapExceeded,
    CountRequireCandidatesExhausted))
_SCORE = attrgetter("score")
_TOKENS = attrgetter("tokens")
_MAX_SEQ = 2**63
#: How many seq numbers or indices a problem line lists before it says "...".
_LISTED = 10


def _listed(values: Iterable[int]) -> str:
    ordered = sorted(values)
    shown = ", ".join(map(str, ordered[:_LISTED]))
    return shown + (f", ... ({len(ordered)} in all)" if len(ordered) > _LISTED else "")


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
    """

    __slots__ = (
        "_completed", "_duplicates", "_ends", "_ex_indices", "_ex_items", "_ex_reasons",
        "_ex_refs", "_ex_scores", "_excluded_at", "_failed", "_in_indices", "_in_items",
        "_in_positions", "_in_reasons", "_in_scores", "_late", "_missing", "_next_seq",
        "_overflow", "_run_id", "_shortfalls", "_stage_done", "_stage_started", "_started",
        "_starts", "_unknown",
    )

    def __init__(self, run_id: str | None = None) -> None:
        self._run_id = run_id
        self._started: RunStarted | None = None
        self._starts = 0
        self._completed: RunCompleted | None = None
        self._ends = 0
        self._failed: RunFailed | None = None
        self._overflow: Overflow | None = None
        self._shortfalls: list[CountShortfall] = []
        self._stage_started: dict[StageName, int] = {}
        self._stage_done: list[StageCompleted] = []
        self._unknown: Counter[str] = Counter()
        # Sequence bookkeeping: the next expected seq, the seqs skipped so far
        # (a gap, unless they arrive late), and what arrived late or twice.
        self._next_seq = 0
        # Skipped seqs as sorted, disjoint [start, stop) ranges: a damaged seq far
        # ahead must cost one range, not one entry per skipped number.
        self._missing: list[tuple[int, int]] = []
        self._late: list[int] = []
        self._duplicates: list[int] = []
        # The decisions, column by column, in the order they were made.
        self._ex_indices: list[int] = []
        self._ex_items: list[ContextItem] = []
        self._ex_scores: list[float] = []
        self._ex_reasons: list[ExclusionReason] = []
        self._ex_refs: list[int] = []  # positions in the _ex_ columns of reasons by index
        self._excluded_at: Counter[StageName] = Counter()
        self._in_indices: list[int] = []
        self._in_items: list[ContextItem] = []
        self._in_scores: list[float] = []
        self._in_reasons: list[InclusionReason] = []
        self._in_positions: list[int] = []

    @property
    def run_id(self) -> str | None:
        """The run this builder folds (None until the first event names it)."""
        return self._run_id

    @property
    def finished(self) -> bool:
        """True once the run's ``run_completed`` or ``run_failed`` was added."""
        return self._ends > 0

    def _accept(self, first: int, count: int) -> bool:
        """Record seqs ``first .. first+count-1``; False for a repeat (to be ignored)."""
        if first == self._next_seq:
            self._next_seq += count
            return True
        if first > self._next_seq:
            self._missing.append((self._next_seq, first))
            self._next_seq = first + count
            return True
        # Arriving late: every seq below the next expected one must fill a gap.
        stop = min(first + count, self._next_seq)
        at = bisect_right(self._missing, (first, _MAX_SEQ)) - 1
        if at < 0 or not self._missing[at][0] <= first < stop <= self._missing[at][1]:
            self._duplicates.append(first)
            return False
        low, high = self._missing[at]
        self._missing[at:at + 1] = [r for r in ((low, first), (stop, high)) if r[0] < r[1]]
        self._late.append(first)
        self._next_seq = max(self._next_seq, first + count)
        return True

    def add(self, event: PipelineEvent | ItemEventBatch) -> None:
        """Fold one event (or one batch of item events) into the report."""
        if self._run_id is None:
            self._run_id = event.run_id
        elif event.run_id != self._run_id:
            raise InvalidValueError("run_id", event.run_id,
                                    f"belongs to another run than this builder's "
                                    f"({self._run_id})")
        kind = type(event)
        if kind is ItemEventBatch:
            assert isinstance(event, ItemEventBatch)
            if not event.items or not self._accept(event.first_seq, len(event.items)):
                return
            if event.stage is not None:
                self._add_exclusions(event.stage, event.candidate_indices, event.items,
                                     event.scores, event.reasons)  # type: ignore[arg-type]
            else:
                assert event.positions is not None
                self._in_indices.extend(event.candidate_indices)
                self._in_items.extend(event.items)
                self._in_scores.extend(event.scores)
                self._in_reasons.extend(event.reasons)  # type: ignore[arg-type]
                self._in_positions.extend(event.positions)
            return
        assert not isinstance(event, ItemEventBatch)
        if not self._accept(event.seq, 1):
            return
        if kind is ItemExcluded:
            assert isinstance(event, ItemExcluded)
            self._add_exclusions(event.stage, (event.candidate_index,), (event.item,),
                                 (event.score,), (event.reason,))
        elif kind is ItemIncluded:
            assert isinstance(event, ItemIncluded)
            self._in_indices.append(event.candidate_index)
            self._in_items.append(event.item)
            self._in_scores.append(event.score)
            self._in_reasons.append(event.reason)
            self._in_positions.append(event.position)
        elif kind is StageStarted:
            assert isinstance(event, StageStarted)
            self._stage_started[event.stage] = self._stage_started.get(event.stage, 0) + 1
        elif kind is StageCompleted:
            assert isinstance(event, StageCompleted)
            self._stage_done.append(event)
        elif kind is RunStarted:
            assert isinstance(event, RunStarted)
            self._starts += 1
            if self._started is None:
                self._started = event
        elif kind is RunCompleted:
            assert isinstance(event, RunCompleted)
            self._ends += 1
            self._completed = event
        elif kind is RunFailed:
            assert isinstance(event, RunFailed)
            self._ends += 1
            self._failed = event
        elif kind is Overflow:
            assert isinstance(event, Overflow)
            self._overflow = event
        elif kind is CountShortfall:
            assert isinstance(event, CountShortfall)
            self._shortfalls.append(event)
        else:
            assert isinstance(event, UnknownEvent)
            self._unknown[event.event_type] += 1

    def _add_exclusions(self, stage: StageName, indices: Iterable[int],
                        items: Iterable[ContextItem], scores: Iterable[float],
                        reasons: tuple[ExclusionReason, ...]) -> None:
        at = len(self._ex_reasons)
        self._ex_indices.extend(indices)
        self._ex_items.extend(items)
        self._ex_scores.extend(scores)
        self._ex_reasons.extend(reasons)
        self._excluded_at[stage] += len(reasons)
        # Most batches hold no reason that points at another candidate: one
        # C-level pass over the reason types settles that.
        if not set(map(type, reasons)).isdisjoint(_REFERENCE_REASONS):
            self._ex_refs.extend(at + k for k, reason in enumerate(reasons)
                                 if isinstance(reason, _REFERENCE_REASONS))

    # -- the result ---------------------------------------------------------------

    def result(self) -> SelectionReport:
        """The report of everything added so far, with ``incomplete`` saying what is
        missing or wrong. Calling it again after more events gives the newer report."""
        problems: list[str] = []
        started = self._started
        level = started.detail_level if started is not None else None
        self._check_run(problems, started)
        self._check_stages(problems, level)
        self._check_sequence(problems)

        excluded_reasons = list(self._ex_reasons)
        if self._ex_refs or self._overflow is not None:
            by_index = dict(zip(self._ex_indices, self._ex_items, strict=True))
            by_index.update(zip(self._in_indices, self._in_items, strict=True))
            self._resolve_references(problems, excluded_reasons, by_index)
        excluded = list(map(ExcludedItem, self._ex_items, self._ex_scores, excluded_reasons))
        # Python's sort stays stable with reverse=True: ties keep exclusion order.
        excluded.sort(key=_SCORE, reverse=True)
        included = list(map(IncludedItem, self._in_items, self._in_scores, self._in_reasons))
        positions = self._in_positions
        # Placed order is almost always the order of the events: a C-level check
        # of that first (a generator here cost more than the rest of the fold).
        if not all(map(le, positions, islice(positions, 1, None))):
            order = sorted(range(len(included)), key=positions.__getitem__)
            included = [included[k] for k in order]
        self._check_decisions(problems, started, level)

        overflow_report = None
        if self._overflow is not None:
            overflow = self._overflow
            overflowing = tuple(by_index[i] for i in overflow.item_indices if i in by_index)
            if len(overflowing) != len(overflow.item_indices):
                problems.append("some overflowing items have no item event")
            overflow_report = OverflowReport(overflow.tokens_over_budget, overflowing,
                                             overflow.budget)
        # Summed from the entries themselves, never taken from run_started: a
        # damaged start event must not make the totals disagree with the lists.
        tokens = sum(map(_TOKENS, self._in_items)) + sum(map(_TOKENS, self._ex_items))
        return SelectionReport(
            events=tuple(TraceEvent(e.stage, e.duration_ms, e.items_in)
                         for e in self._stage_done if e.stage is not PipelineStage.SORT),
            included=tuple(included),
            excluded=tuple(excluded),
            total_candidates=len(included) + len(excluded),
            total_tokens_considered=tokens,
            count_requirement_shortfalls=tuple(
                CountRequirementShortfall(ContextKind(e.kind), e.required_count,
                                          e.satisfied_count) for e in self._shortfalls),
            overflow=overflow_report,
            incomplete=tuple(problems),
        )

    def _check_run(self, problems: list[str], started: RunStarted | None) -> None:
        if started is None:
            problems.append("no run_started event: the candidate count is unknown")
        elif self._starts > 1:
            problems.append(f"run_started appears {self._starts} times")
        if self._failed is not None:
            problems.append(f"the run failed: {self._failed.error_type}: "
                            f"{self._failed.error_text}")
        elif self._completed is None:
            problems.append("no run_completed event: the run's end was not recorded")
        if self._ends > 1:
            problems.append(f"the run's end (run_completed/run_failed) appears "
                            f"{self._ends} times")
        if started is not None and started.content_capture != "full":
            problems.append(f"item content was captured as {started.content_capture!r}: "
                            "contents and metadata are not the originals")
        for name, count in sorted(self._unknown.items()):
            problems.append(f"{count} event(s) of unknown type {name!r} were not understood")

    def _check_sequence(self, problems: list[str]) -> None:
        if self._missing:
            shown = [seq for low, high in self._missing[:_LISTED]
                     for seq in range(low, min(high, low + _LISTED))][:_LISTED]
            total = sum(high - low for low, high in self._missing)
            more = f", ... ({total} in all)" if total > len(shown) else ""
            problems.append("events missing from the sequence: seq "
                            + ", ".join(map(str, shown)) + more)
        if self._late:
            problems.append(f"events arrived out of order: seq {_listed(self._late)}")
        if self._duplicates:
            problems.append(f"events repeated (ignored): seq {_listed(self._duplicates)}")

    def _check_stages(self, problems: list[str], level: str | None) -> None:
        completed = Counter(e.stage for e in self._stage_done)
        # The usual case, each stage started and completed once, settled in one test.
        stages = completed.keys() | self._stage_started.keys()
        if (self._stage_started == completed
                and all(count == 1 for count in completed.values())):
            stages = set()
        for stage in sorted(stages, key=str):
            begun, done = self._stage_started.get(stage, 0), completed.get(stage, 0)
            if done > 1 or begun > 1:
                problems.append(f"stage {stage} was recorded more than once")
            elif begun and not done and self._failed is None:
                problems.append(f"stage {stage} started but its completion is missing")
            elif done and not begun:
                problems.append(f"stage {stage} completed but its start is missing")
        if level not in ("StageAndExclusions", "Full"):
            return
        for event in self._stage_done:
            expected = event.items_in - event.items_out
            found = self._excluded_at.get(event.stage, 0)
            if found != expected:
                problems.append(f"stage {event.stage} removed {expected} items but "
                                f"{found} exclusion events were recorded")
            if (level == "Full" and event.stage is PipelineStage.PLACE
                    and event.items_out != len(self._in_items)):
                problems.append(f"stage Place kept {event.items_out} items but "
                                f"{len(self._in_items)} inclusion events were recorded")
        completed_run = self._completed
        if completed_run is not None:
            if completed_run.excluded_count != len(self._ex_items):
                problems.append(f"run_completed counts {completed_run.excluded_count} "
                                f"exclusions but {len(self._ex_items)} were recorded")
            if level == "Full" and (
                    completed_run.included_count != len(self._in_items)
                    or completed_run.included_tokens != sum(map(_TOKENS, self._in_items))):
                problems.append(
                    f"run_completed counts {completed_run.included_count} included items "
                    f"({completed_run.included_tokens} tokens) but the inclusion events "
                    f"hold {len(self._in_items)} ({sum(map(_TOKENS, self._in_items))} tokens)")

    def _check_decisions(self, problems: list[str], started: RunStarted | None,
                         level: str | None) -> None:
        excluded, included = set(self._ex_indices), set(self._in_indices)
        decided = excluded | included
        if len(excluded) != len(self._ex_indices) or len(included) != len(self._in_indices):
            repeated = [i for i, n in Counter(self._ex_indices + self._in_indices).items()
                        if n > 1 and not (i in excluded and i in included)]
            if repeated:
                problems.append(f"candidates decided more than once: {_listed(repeated)}")
        both = excluded & included
        if both:
            problems.append(f"candidates both included and excluded: {_listed(both)}")
        if started is None:
            return
        count = started.candidate_count
        out_of_range = [i for i in decided if not 0 <= i < count] if decided and (
            min(decided) < 0 or max(decided) >= count) else []
        if out_of_range:
            problems.append(f"candidate indices out of range (0..{count - 1}): "
                            f"{_listed(out_of_range)}")
        undecided = count - (len(decided) - len(out_of_range))
        if undecided > 0:
            why = {"StageOnly": " (detail level StageOnly records no item decisions)",
                   "StageAndExclusions": " (detail level StageAndExclusions records no "
                                         "inclusions)"}.get(level or "", "")
            problems.append(f"{undecided} of {count} candidates have no decision{why}")

    def _resolve_references(self, problems: list[str], reasons: list[ExclusionReason],
                            by_index: dict[int, ContextItem]) -> None:
        """Turn the candidate indices in Deduplicated/PinnedOverride into content."""
        for at in self._ex_refs:
            reason = reasons[at]
            if isinstance(reason, Deduplicated):
                target = reason.deduplicated_against
            else:
                assert isinstance(reason, PinnedOverride)
                target = reason.displaced_by
            if isinstance(target, str):
                continue  # already content (an event built by hand)
            item = by_index.get(target)
            if item is None:
                problems.append(f"a {reason.name} reason refers to candidate {target}, "
                                "which has no item event")
                content = f"<candidate {target}>"
            else:
                content = item.content
            reasons[at] = (Deduplicated(deduplicated_against=content)
                           if isinstance(reason, Deduplicated)
                           else PinnedOverride(displaced_by=content))


def build_report(events: Iterable[PipelineEvent | ItemEventBatch], *,
                 run_id: str | None = None) -> SelectionReport:
    """Fold one run's events into its SelectionReport (a loop over :class:`ReportBuilder`).

    ``events`` may hold several runs only if ``run_id`` picks one; otherwise
    events of a second run raise :class:`~cupellation.exceptions.InvalidValueError`.
    """
    builder = ReportBuilder(run_id)
    add = builder.add
    if run_id is None:
        for event in events:
            add(event)
    else:
        for event in events:
            if event.run_id == run_id:
                add(event)
    return builder.result()
