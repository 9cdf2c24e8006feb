"""Policy sensitivity (``spec/src/analytics/policy-sensitivity.md``): several policies
(or pipelines) over the same items and budget, and the items whose inclusion swings."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .._model import ContextBudget, ContextItem
from .._pipeline import Pipeline
from .._report import SelectionReport
from ..exceptions import InvalidTypeError, InvalidValueError, SpecArgumentError
from ..policy import Policy

__all__ = [
    "MIN_VARIANTS_MESSAGE",
    "ItemStatus",
    "PolicySensitivityDiffEntry",
    "PolicySensitivityReport",
    "checked_variants",
    "dry_run_with_policy",
    "policy_sensitivity",
    "policy_sensitivity_from_pipelines",
]

#: The chapter's .NET message for fewer than two variants, word for word (see
#: docs/decisions.md for why this one of the two it quotes).
MIN_VARIANTS_MESSAGE = "At least two variants are required for a sensitivity comparison."


class ItemStatus(enum.Enum):
    """Whether a variant included an item."""

    INCLUDED = "Included"
    EXCLUDED = "Excluded"


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySensitivityDiffEntry:
    """An item (by content) on which at least two variants disagree: one status
    per variant, in the variants' order."""

    content: str
    statuses: tuple[tuple[str, ItemStatus], ...]

    def to_dict(self) -> dict[str, object]:
        """JSON-native: ``{"content", "statuses": [{"label", "status"}]}``."""
        return {"content": self.content,
                "statuses": [{"label": label, "status": status.value}
                             for label, status in self.statuses]}


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySensitivityReport:
    """Each variant's SelectionReport (input order) and the swinging items."""

    variants: tuple[tuple[str, SelectionReport], ...]
    diffs: tuple[PolicySensitivityDiffEntry, ...]


def _budget(budget: object) -> ContextBudget:
    if not isinstance(budget, ContextBudget):
        raise InvalidTypeError("budget", budget, "a ContextBudget")
    return budget


def dry_run_with_policy(items: Sequence[ContextItem], budget: ContextBudget,
                        policy: Policy) -> SelectionReport:
    """The spec's ``DryRunWithPolicy``: ``policy``'s pipeline run over ``items`` at
    the explicit ``budget`` (a policy's own budget is not used), as a report."""
    if not isinstance(policy, Policy):
        raise InvalidTypeError("policy", policy, "a Policy")
    resolved = _budget(budget)
    return policy.build_pipeline(resolved).dry_run(items, resolved)


def checked_variants(variants: object, kind: type | tuple[type, ...],
                     described: str | None = None) -> list[tuple[str, object]]:
    """``variants`` as checked ``(label, variant)`` pairs: each variant a ``kind``
    (``described`` names it in the error), labels unique, at least two (the chapter's
    :data:`MIN_VARIANTS_MESSAGE`)."""
    if isinstance(variants, str | bytes) or not isinstance(variants, Sequence):
        raise InvalidTypeError("variants", variants, "a sequence of (label, variant) pairs")
    checked: list[tuple[str, object]] = []
    labels: set[str] = set()
    for k, pair in enumerate(variants):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise InvalidTypeError(f"variants[{k}]", pair, "a (label, variant) pair")
        label, variant = pair
        if not isinstance(label, str):
            raise InvalidTypeError(f"variants[{k}][0]", label, "a str label")
        if label in labels:
            raise InvalidValueError(f"variants[{k}][0]", label, "repeats an earlier label")
        if not isinstance(variant, kind):
            raise InvalidTypeError(f"variants[{k}][1]", variant, described or (
                f"a {kind.__name__}" if isinstance(kind, type) else "a variant"))
        labels.add(label)
        checked.append((label, variant))
    if len(checked) < 2:
        raise SpecArgumentError(MIN_VARIANTS_MESSAGE, field="variants", value=len(checked))
    return checked


def _diff(items: Sequence[ContextItem],
          reports: list[tuple[str, SelectionReport]]) -> tuple[PolicySensitivityDiffEntry, ...]:
    """Content-keyed: an item is Included by a variant when any item of that content
    is in its ``included``; only contents on which variants disagree, in the order
    of their first candidate."""
    included = [{entry.item.content for entry in report.included} for _, report in reports]
    diffs: list[PolicySensitivityDiffEntry] = []
    seen: set[str] = set()
    for item in items:
        content = item.content
        if content in seen:
            continue
        seen.add(content)
        flags = [content in chosen for chosen in included]
        if any(flags) and not all(flags):
            diffs.append(PolicySensitivityDiffEntry(content=content, statuses=tuple(
                (label, ItemStatus.INCLUDED if flag else ItemStatus.EXCLUDED)
                for (label, _), flag in zip(reports, flags, strict=True))))
    return tuple(diffs)


def policy_sensitivity(items: Sequence[ContextItem], budget: ContextBudget,
                       variants: Sequence[tuple[str, Policy]]) -> PolicySensitivityReport:
    """The spec's ``PolicySensitivity`` (policy overload): each ``(label, policy)``
    dry-run over ``items`` at ``budget`` (:func:`dry_run_with_policy`), and the
    items on which they disagree, matched by content (ordinal equality).

    Raises :class:`~cupellation.exceptions.SpecArgumentError` with the chapter's
    message for fewer than two variants, and ``InvalidValueError`` for a label
    given twice.
    """
    pairs = checked_variants(variants, Policy)
    resolved = _budget(budget)
    candidates = list(items)
    reports = [(label, dry_run_with_policy(candidates, resolved, policy))  # type: ignore[arg-type]
               for label, policy in pairs]
    return PolicySensitivityReport(variants=tuple(reports), diffs=_diff(candidates, reports))


def policy_sensitivity_from_pipelines(items: Sequence[ContextItem], budget: ContextBudget,
                                      variants: Sequence[tuple[str, Pipeline]]
                                      ) -> PolicySensitivityReport:
    """:func:`policy_sensitivity` over pipelines (any strategies, custom ones too),
    each dry-run at the explicit ``budget``."""
    pairs = checked_variants(variants, Pipeline)
    resolved = _budget(budget)
    candidates = list(items)
    reports = [(label, pipeline.dry_run(candidates, resolved))  # type: ignore[attr-defined]
               for label, pipeline in pairs]
    return PolicySensitivityReport(variants=tuple(reports), diffs=_diff(candidates, reports))
