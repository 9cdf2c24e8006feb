"""Two SelectionReports compared: which items one included and the other did not,
and which kept their status under another reason, matched by content."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..exceptions import InvalidTypeError
from ..reasons import reason_to_dict

__all__ = ["ReportDiff", "diff_reports"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportDiff:
    """What changed from report ``a`` to report ``b``, items matched by content
    (the first entry of a content in each report; a content in only one report is
    in ``only_in_a`` / ``only_in_b``).

    ``gained``: included in b, excluded in a (with a's reason); ``lost``: included
    in a, excluded in b (with b's reason); ``reason_changed``: excluded in both,
    for different reasons; ``kept``: how many were included in both. The token
    and count totals are each report's.
    """

    gained: tuple[dict[str, Any], ...]
    lost: tuple[dict[str, Any], ...]
    reason_changed: tuple[dict[str, Any], ...]
    only_in_a: tuple[str, ...]
    only_in_b: tuple[str, ...]
    kept: int
    included_tokens: tuple[int, int]
    included_count: tuple[int, int]
    incomplete: tuple[tuple[str, ...], tuple[str, ...]]

    @property
    def changed(self) -> bool:
        """True when any item's status or reason differs (or one report lacks it)."""
        return bool(self.gained or self.lost or self.reason_changed or self.only_in_a
                    or self.only_in_b)

    def to_dict(self) -> dict[str, Any]:
        """JSON-native values."""
        return {"changed": self.changed, "gained": list(self.gained), "lost": list(self.lost),
                "reason_changed": list(self.reason_changed), "only_in_a": list(self.only_in_a),
                "only_in_b": list(self.only_in_b), "kept": self.kept,
                "included_tokens": {"a": self.included_tokens[0], "b": self.included_tokens[1]},
                "included_count": {"a": self.included_count[0], "b": self.included_count[1]},
                "incomplete": {"a": list(self.incomplete[0]), "b": list(self.incomplete[1])}}


def _entries(report: SelectionReport) -> dict[str, IncludedItem | ExcludedItem]:
    out: dict[str, IncludedItem | ExcludedItem] = {}
    for included in report.included:
        out.setdefault(included.item.content, included)
    for excluded in report.excluded:
        out.setdefault(excluded.item.content, excluded)
    return out


def _row(entry: IncludedItem | ExcludedItem, other: IncludedItem | ExcludedItem
         ) -> dict[str, Any]:
    excluded = entry if isinstance(entry, ExcludedItem) else other
    return {"content": entry.item.content, "kind": entry.item.kind.value,
            "tokens": entry.item.tokens, "reason": reason_to_dict(excluded.reason)}


def diff_reports(a: SelectionReport, b: SelectionReport) -> ReportDiff:
    """Compare report ``a`` with report ``b`` (see :class:`ReportDiff`)."""
    for name, report in (("a", a), ("b", b)):
        if not isinstance(report, SelectionReport):
            raise InvalidTypeError(name, report, "a SelectionReport")
    in_a, in_b = _entries(a), _entries(b)
    gained: list[dict[str, Any]] = []
    lost: list[dict[str, Any]] = []
    changed: list[dict[str, Any]] = []
    kept = 0
    for content, old in in_a.items():
        new = in_b.get(content)
        if new is None:
            continue
        was, now = isinstance(old, IncludedItem), isinstance(new, IncludedItem)
        if was and now:
            kept += 1
        elif now:
            gained.append(_row(new, old))
        elif was:
            lost.append(_row(old, new))
        else:
            before, after = reason_to_dict(old.reason), reason_to_dict(new.reason)
            if before != after:
                changed.append({"content": content, "kind": old.item.kind.value,
                                "tokens": old.item.tokens, "a": before, "b": after})
    return ReportDiff(
        gained=tuple(gained), lost=tuple(lost), reason_changed=tuple(changed),
        only_in_a=tuple(c for c in in_a if c not in in_b),
        only_in_b=tuple(c for c in in_b if c not in in_a), kept=kept,
        included_tokens=(sum(e.item.tokens for e in a.included),
                         sum(e.item.tokens for e in b.included)),
        included_count=(len(a.included), len(b.included)),
        incomplete=(a.incomplete, b.incomplete))
