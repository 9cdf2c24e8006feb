"""SelectionReport: why every candidate was or was not selected, as the wire format writes it.

JSON is the wire format's shape to the letter: ``events``, ``included``, ``excluded``,
``total_candidates``, ``total_tokens_considered``. Three optional members are
cupellation's own and appear only when they carry something:
``count_requirement_shortfalls``, ``overflow`` and ``incomplete``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from .._model import ContextBudget, ContextItem, ContextKind, CountRequirementShortfall, fits_int64
from ..events import PipelineStage, StageName
from ..exceptions import DecodeError
from ..reasons import exclusion_reason_from_dict, inclusion_reason_from_dict
from .entries import ExcludedItem, IncludedItem, OverflowReport, TraceEvent, shortfall_to_dict
from .writer import encode_report

__all__ = ["SelectionReport"]


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
        """The wire format's JSON shape (plus the optional members, only when non-empty)."""
        out: dict[str, Any] = {
            "events": [e.to_dict() for e in self.events],
            "included": [i.to_dict() for i in self.included],
            "excluded": [e.to_dict() for e in self.excluded],
            "total_candidates": self.total_candidates,
            "total_tokens_considered": self.total_tokens_considered,
        }
        if self.count_requirement_shortfalls:
            out["count_requirement_shortfalls"] = [
                shortfall_to_dict(s) for s in self.count_requirement_shortfalls
            ]
        if self.overflow is not None:
            out["overflow"] = self.overflow.to_dict()
        if self.incomplete:
            out["incomplete"] = list(self.incomplete)
        return out

    def to_json(self, *, indent: int | None = None) -> str:
        """The report as JSON text (:meth:`to_dict`'s shape, member for member)."""
        data = encode_report(self)
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

        The wire format's MUST rules are checked: ``total_candidates`` equals
        ``len(included) + len(excluded)``, ``total_tokens_considered`` equals the
        sum of both lists' item tokens, and ``excluded`` is sorted by score
        descending. A report that breaks one still reads, with each broken rule
        named in ``incomplete`` (so ``is_complete`` is False): the lists may be
        an abridged copy of a larger run, as the wire format's own example is. With
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
        events = _members(data, "events", _trace_event_from_dict)
        included = _members(data, "included", _included_from_dict)
        excluded = _members(data, "excluded", _excluded_from_dict)
        shortfalls = _members(data, "count_requirement_shortfalls", _shortfall_from_dict)
        overflow = _member(data, "overflow", _overflow_from_dict)
        broken = _broken_rules(totals["total_candidates"], totals["total_tokens_considered"],
                               included, excluded)
        if broken and strict:
            field, value, rule, found = broken[0]
            raise DecodeError(field, value, f"breaks the report format's rule {rule}: {found}")
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


_T = TypeVar("_T")


def _member(data: Mapping[str, Any], where: str, decode: Callable[[Mapping[str, Any]], _T]
            ) -> _T | None:
    """The member ``where`` of ``data`` decoded by ``decode`` (None when absent or
    null), with any error naming where it is."""
    value = data.get(where)
    if value is None:
        return None
    try:
        return decode(_mapping(value))
    except DecodeError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise DecodeError(field, exc.value, exc.problem) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DecodeError(where, str(exc), "has a missing or mistyped member") from exc


def _members(data: Mapping[str, Any], key: str, decode: Callable[[Mapping[str, Any]], _T]
             ) -> list[_T]:
    """The members of the array ``key`` (absent is empty), errors naming ``key[k]``."""
    values = data.get(key, [])
    if not isinstance(values, list):
        raise DecodeError(key, values, "must be a JSON array")
    out = []
    for k, value in enumerate(values):
        where = f"{key}[{k}]"
        if value is None:
            raise DecodeError(where, None, "must be a JSON object")
        decoded = _member({where: value}, where, decode)
        assert decoded is not None
        out.append(decoded)
    return out


def _included_from_dict(entry: Mapping[str, Any]) -> IncludedItem:
    return IncludedItem(ContextItem.from_dict(entry["item"]), _number(entry["score"]),
                        inclusion_reason_from_dict(entry["reason"]))


def _excluded_from_dict(entry: Mapping[str, Any]) -> ExcludedItem:
    return ExcludedItem(ContextItem.from_dict(entry["item"]), _number(entry["score"]),
                        exclusion_reason_from_dict(entry["reason"]))


def _shortfall_from_dict(data: Mapping[str, Any]) -> CountRequirementShortfall:
    return CountRequirementShortfall(
        ContextKind(data["kind"]), _integer(data["required_count"], "required_count"),
        _integer(data["satisfied_count"], "satisfied_count"))


def _overflow_from_dict(data: Mapping[str, Any]) -> OverflowReport:
    overflowing = data["overflowing_items"]
    if not isinstance(overflowing, list):
        raise DecodeError("overflowing_items", overflowing, "must be a JSON array")
    return OverflowReport(_integer(data["tokens_over_budget"], "tokens_over_budget"),
                          tuple(ContextItem.from_dict(i) for i in overflowing),
                          ContextBudget.from_dict(data["budget"]))


def _broken_rules(total_candidates: int, total_tokens: int, included: Sequence[IncludedItem],
                  excluded: Sequence[ExcludedItem]) -> list[tuple[str, Any, str, str]]:
    """The wire format's MUST rules a decoded report breaks, as (field, value, rule, what the
    lists hold) quadruples, in the wire format's order."""
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
    return f"{field} is {value!r} but {found} (the report format's rule: {rule})"


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
