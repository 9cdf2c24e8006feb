"""ItemEventBatch: one stage's item decisions, delivered to collectors in one call."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from .._model import ContextItem, tupled
from ..exceptions import InvalidValueError
from ..reasons import ExclusionReason, InclusionReason
from ._types import ItemExcluded, ItemIncluded, StageName

__all__ = ["ItemEventBatch"]


class ItemEventBatch(Sequence[ItemExcluded | ItemIncluded]):
    """One stage's item decisions, delivered to collectors in one call.

    A read-only sequence of :class:`ItemExcluded` events (a batch of
    exclusions, with ``stage`` set) or :class:`ItemIncluded` events (a batch of
    inclusions, with ``positions`` set), numbered ``first_seq``,
    ``first_seq + 1``, ... Each event is built only when it is read, so a run
    recorded only for its report builds no per-item event object: the report
    fold reads the columns (all tuples) by name.
    """

    __slots__ = ("candidate_indices", "first_seq", "items", "positions", "reasons", "run_id",
                 "scores", "stage")

    run_id: str
    first_seq: int
    stage: StageName | None
    candidate_indices: tuple[int, ...]
    items: tuple[ContextItem, ...]
    scores: tuple[float, ...]
    reasons: tuple[ExclusionReason, ...] | tuple[InclusionReason, ...]
    positions: tuple[int, ...] | None

    def __init__(self, *, run_id: str, first_seq: int, stage: StageName | None,
                 candidate_indices: Iterable[int], items: Iterable[ContextItem],
                 scores: Iterable[float],
                 reasons: Iterable[ExclusionReason] | Iterable[InclusionReason],
                 positions: Iterable[int] | None = None) -> None:
        if (stage is None) == (positions is None):
            raise InvalidValueError("positions", positions, "an ItemEventBatch has a stage "
                                    "(exclusions) or positions (inclusions), not both")
        set_ = object.__setattr__
        set_(self, "run_id", run_id)
        set_(self, "first_seq", first_seq)
        set_(self, "stage", stage)
        set_(self, "candidate_indices", tupled("candidate_indices", candidate_indices,
                                               "an iterable of candidate indices"))
        set_(self, "items", tupled("items", items, "an iterable of ContextItem"))
        set_(self, "scores", tupled("scores", scores, "an iterable of scores"))
        set_(self, "reasons", tupled("reasons", reasons, "an iterable of reasons"))
        set_(self, "positions", None if positions is None else tupled(
            "positions", positions, "an iterable of positions or None"))
        if not (len(self.candidate_indices) == len(self.items) == len(self.scores)
                == len(self.reasons)) or (self.positions is not None
                                          and len(self.positions) != len(self.items)):
            raise InvalidValueError("items", len(self.items),
                                    "an ItemEventBatch's columns must have equal lengths")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ItemEventBatch is immutable")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Slots set once through object.__setattr__: rebuild through __init__.
        return (_rebuild_batch, ((self.run_id, self.first_seq, self.stage,
                                  self.candidate_indices, self.items, self.scores,
                                  self.reasons, self.positions),))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ItemEventBatch):
            return NotImplemented
        return (self.run_id, self.first_seq, self.stage, self.candidate_indices, self.items,
                self.scores, self.reasons, self.positions) == (
            other.run_id, other.first_seq, other.stage, other.candidate_indices, other.items,
            other.scores, other.reasons, other.positions)

    def __hash__(self) -> int:  # equal batches share their run, first seq and length
        return hash((self.run_id, self.first_seq, len(self.items)))

    @property
    def excluded(self) -> bool:
        """True for a batch of exclusions, False for a batch of inclusions."""
        return self.positions is None

    @property
    def last_seq(self) -> int:
        """The ``seq`` of the batch's last event (``first_seq - 1`` when empty)."""
        return self.first_seq + len(self.items) - 1

    def __len__(self) -> int:
        return len(self.items)

    def _event(self, k: int) -> ItemExcluded | ItemIncluded:
        if self.positions is None:
            assert self.stage is not None
            return ItemExcluded(run_id=self.run_id, seq=self.first_seq + k, stage=self.stage,
                                candidate_index=self.candidate_indices[k],
                                score=self.scores[k], item=self.items[k],
                                reason=self.reasons[k])  # type: ignore[arg-type]
        return ItemIncluded(run_id=self.run_id, seq=self.first_seq + k,
                            candidate_index=self.candidate_indices[k],
                            position=self.positions[k], score=self.scores[k],
                            item=self.items[k], reason=self.reasons[k])  # type: ignore[arg-type]

    @overload
    def __getitem__(self, index: int) -> ItemExcluded | ItemIncluded: ...

    @overload
    def __getitem__(self, index: slice) -> list[ItemExcluded | ItemIncluded]: ...

    def __getitem__(self, index: int | slice
                    ) -> ItemExcluded | ItemIncluded | list[ItemExcluded | ItemIncluded]:
        if isinstance(index, slice):
            return [self._event(k) for k in range(len(self))[index]]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._event(index)

    def __iter__(self) -> Iterator[ItemExcluded | ItemIncluded]:
        return map(self._event, range(len(self)))

    def __repr__(self) -> str:
        what = f"{len(self)} exclusions at {self.stage}" if self.excluded else (
            f"{len(self)} inclusions")
        return f"ItemEventBatch({what}, seq {self.first_seq}..{self.last_seq})"


def _rebuild_batch(columns: tuple[Any, ...]) -> ItemEventBatch:
    """An ItemEventBatch rebuilt by pickle or deepcopy from its columns, in
    ``__init__``'s order."""
    run_id, first_seq, stage, indices, items, scores, reasons, positions = columns
    return ItemEventBatch(run_id=run_id, first_seq=first_seq, stage=stage,
                          candidate_indices=indices, items=items, scores=scores,
                          reasons=reasons, positions=positions)
