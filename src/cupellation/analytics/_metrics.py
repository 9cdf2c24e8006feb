"""Report analytics: the figures the specification's changelog names on a
SelectionReport (budget utilization, kind diversity, timestamp coverage), the
target utilization the spans and ``audit`` report, and quota utilization per kind.

Two utilizations, never one name for both (see docs/decisions.md):

- :func:`budget_utilization` — included tokens over ``max_tokens``: the
  specification's ``BudgetUtilization`` (testing vocabulary, PD-2);
- :func:`target_utilization` — included tokens over ``target_tokens``: the span
  attribute and metric ``cupel.budget.utilization`` and ``cupellation audit``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._model import ContextBudget, ContextKind
from .._report import SelectionReport
from ..exceptions import InvalidTypeError, InvalidValueError
from ..slicing import CountConstrainedKnapsackSlice, CountQuotaSlice, QuotaSlice, Slicer

__all__ = [
    "KindQuotaUtilization",
    "add_exact",
    "budget_utilization",
    "kind_diversity",
    "quota_utilization",
    "target_utilization",
    "timestamp_coverage",
]


def _report(report: object) -> SelectionReport:
    if not isinstance(report, SelectionReport):
        raise InvalidTypeError("report", report, "a SelectionReport")
    return report


def _budget(budget: object) -> ContextBudget:
    if not isinstance(budget, ContextBudget):
        raise InvalidTypeError("budget", budget, "a ContextBudget")
    return budget


def _included_tokens(report: SelectionReport) -> int:
    return sum(entry.item.tokens for entry in report.included)


def budget_utilization(report: SelectionReport, budget: ContextBudget) -> float:
    """The spec's ``BudgetUtilization(budget)``: ``sum(included tokens) /
    budget.max_tokens`` (0.0 when nothing is included).

    Raises ``InvalidValueError`` naming ``budget.max_tokens`` when it is 0 (the
    ratio has no value; the specification's budgets cannot be built so).
    """
    used = _included_tokens(_report(report))
    resolved = _budget(budget)
    if resolved.max_tokens == 0:
        raise InvalidValueError("budget.max_tokens", 0, "must be > 0 for a utilization")
    return used / resolved.max_tokens


def target_utilization(report: SelectionReport, budget: ContextBudget) -> float | None:
    """Included tokens over ``budget.target_tokens``: what the span attribute
    ``cupel.budget.utilization`` and ``cupellation audit`` call utilisation (None
    when the target is 0). Not the specification's :func:`budget_utilization`."""
    used = _included_tokens(_report(report))
    resolved = _budget(budget)
    return None if resolved.target_tokens == 0 else used / resolved.target_tokens


def kind_diversity(report: SelectionReport) -> int:
    """The spec's ``KindDiversity()``: how many distinct kinds the included items
    have (kinds compare case-insensitively, as ContextKind does)."""
    return len({entry.item.kind for entry in _report(report).included})


def timestamp_coverage(report: SelectionReport) -> float:
    """The spec's ``TimestampCoverage()``: the share of included items that carry a
    timestamp, in [0.0, 1.0] (0.0 when nothing is included)."""
    included = _report(report).included
    if not included:
        return 0.0
    return sum(entry.item.timestamp is not None for entry in included) / len(included)


@dataclass(frozen=True, slots=True, kw_only=True)
class KindQuotaUtilization:
    """How much of one kind's quota a run used.

    ``unit`` is ``"tokens"`` (QuotaSlice: percentages of the slicer's effective
    target, floored as the slicer floors them) or ``"items"`` (the count quota
    slicers). ``used`` counts the kind's included items that the slicer chose
    (pinned ones are outside every quota); ``require`` and ``cap`` are the
    quota's in that unit; ``utilization`` is ``used / cap`` (None when the cap
    is 0).
    """

    kind: ContextKind
    unit: str
    used: int
    require: int
    cap: int
    utilization: float | None

    def to_dict(self) -> dict[str, object]:
        """JSON-native values (the kind by name)."""
        return {"kind": self.kind.value, "unit": self.unit, "used": self.used,
                "require": self.require, "cap": self.cap, "utilization": self.utilization}


def quota_utilization(report: SelectionReport, slicer: Slicer, budget: ContextBudget
                      ) -> tuple[KindQuotaUtilization, ...]:
    """Quota utilization per kind, one entry per quota entry of ``slicer`` (the
    run's QuotaSlice, CountQuotaSlice or CountConstrainedKnapsackSlice), in the
    slicer's order; ``budget`` is the run's.

    Raises ``InvalidTypeError`` naming ``slicer`` for a slicer without quotas.
    """
    resolved_report = _report(report)
    resolved = _budget(budget)
    chosen = [entry.item for entry in resolved_report.included
              if entry.reason.name != "Pinned"]
    if isinstance(slicer, QuotaSlice):
        pinned = sum(entry.item.tokens for entry in resolved_report.included
                     if entry.reason.name == "Pinned")
        target = resolved.effective(pinned).target_tokens
        out = []
        for quota in slicer.quotas:
            used = sum(item.tokens for item in chosen if item.kind == quota.kind)
            cap = math.floor(quota.cap / 100.0 * target)
            out.append(KindQuotaUtilization(
                kind=quota.kind, unit="tokens", used=used,
                require=math.floor(quota.require / 100.0 * target), cap=cap,
                utilization=None if cap == 0 else used / cap))
        return tuple(out)
    if isinstance(slicer, CountQuotaSlice | CountConstrainedKnapsackSlice):
        out = []
        for entry in slicer.entries:
            used = sum(1 for item in chosen if item.kind == entry.kind)
            out.append(KindQuotaUtilization(
                kind=entry.kind, unit="items", used=used, require=entry.require_count,
                cap=entry.cap_count,
                utilization=None if entry.cap_count == 0 else used / entry.cap_count))
        return tuple(out)
    raise InvalidTypeError("slicer", slicer,
                           "a QuotaSlice, CountQuotaSlice or CountConstrainedKnapsackSlice")


def add_exact(partials: list[float], value: float) -> None:
    """Add ``value`` to the non-overlapping partial sums ``partials`` without rounding
    (Shewchuk's, as :func:`math.fsum` keeps them): ``math.fsum(partials)`` is then the
    correctly rounded total whatever order the values came in, so a mean over runs
    read from files equals the mean over the same runs read from a store, newest
    first."""
    kept = 0
    for partial in partials:
        big, small = (partial, value) if abs(value) < abs(partial) else (value, partial)
        high = big + small
        low = small - (high - big)
        if low:
            partials[kept] = low
            kept += 1
        value = high
    partials[kept:] = [value]
