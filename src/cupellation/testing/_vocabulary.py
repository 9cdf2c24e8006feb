"""The Cupel.Testing vocabulary (``spec/src/testing/vocabulary.md``): the 13 named
assertion patterns over a SelectionReport, as one fluent chain.

::

    from cupellation.testing import expect

    (expect(report)
        .include_item_with_kind("SystemPrompt")
        .exclude_item_with_reason("BudgetExceeded")
        .have_budget_utilization_above(0.5, budget))

Each method is the chapter's method in snake_case (``IncludeItemWithKind`` is
:meth:`~SelectionReportAssertionChain.include_item_with_kind`), returns the chain
when it passes, and raises :class:`SelectionReportAssertionError` with the
chapter's failure message, word for word, when it does not. The messages name
the chapter's methods (``IncludeItemWithKind(Message) failed: ...``), so a
failure reads the same as in the other Cupel implementations.

Snapshot assertions are not part of the vocabulary (the chapter defers them:
ties in ``excluded`` are not ordered observably), and so not here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TypeAlias

from .._model import ContextBudget, ContextItem, ContextKind
from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..exceptions import InvalidTypeError, InvalidValueError
from ..reasons import KNOWN_EXCLUSION_REASONS, ExclusionReason, UnknownExclusionReason

__all__ = [
    "ReasonLike",
    "SelectionReportAssertionChain",
    "SelectionReportAssertionError",
    "expect",
    "should",
]

#: An exclusion reason variant: its wire name (``"BudgetExceeded"``), its class
#: (:class:`~cupellation.reasons.BudgetExceeded`) or a reason value (only its
#: variant counts; an :class:`~cupellation.reasons.UnknownExclusionReason` value
#: names a variant this version does not know).
ReasonLike: TypeAlias = str | type | ExclusionReason


class SelectionReportAssertionError(AssertionError):
    """A vocabulary assertion failed (the chapter's ``SelectionReportAssertionException``).

    ``str(err)`` is the chapter's message for the assertion; ``assertion`` is the
    chapter's method name (``"IncludeItemWithKind"``). It is an ``AssertionError``,
    so every test runner reports it as a failed assertion, and a dedicated type,
    so test utilities can catch it alone.
    """

    def __init__(self, assertion: str, message: str) -> None:
        super().__init__(message)
        self.assertion = assertion
        self.message = message


def _kind(field: str, kind: ContextKind | str) -> ContextKind:
    if isinstance(kind, ContextKind):
        return kind
    if not isinstance(kind, str):
        raise InvalidTypeError(field, kind, "a ContextKind or a string")
    return ContextKind(kind)


def _count(field: str, n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int):
        raise InvalidTypeError(field, n, "an int")
    if n < 0:
        raise InvalidValueError(field, n, "must be >= 0")
    return n


def _callable(field: str, predicate: object) -> None:
    if not callable(predicate):
        raise InvalidTypeError(field, predicate, "a callable (a predicate)")


def _reason_name(field: str, reason: ReasonLike) -> str:
    """The variant name of ``reason``: a known name, a known reason class, or a value."""
    if isinstance(reason, str):
        name = reason
    elif isinstance(reason, type):
        name = reason.__name__
    elif isinstance(reason, (*KNOWN_EXCLUSION_REASONS.values(), UnknownExclusionReason)):
        # A value: its variant, a variant this version does not know included (a
        # report decoded from a newer implementation).
        return str(reason.name)
    else:
        raise InvalidTypeError(field, reason, "an exclusion reason name, class or value")
    if name not in KNOWN_EXCLUSION_REASONS:
        raise InvalidValueError(field, reason, "is not an exclusion reason variant (one of "
                                + ", ".join(KNOWN_EXCLUSION_REASONS) + ")")
    return name


def _distinct(values: Iterable[str]) -> list[str]:
    """``values`` without repeats, in first-seen order."""
    return list(dict.fromkeys(values))


def _kinds(entries: Iterable[IncludedItem] | Iterable[ExcludedItem]) -> str:
    """The distinct kinds of ``entries``, comma-separated, in first-seen order.

    Kinds compare case-insensitively, so two spellings of one kind count once (the
    first spelling is shown)."""
    seen: dict[ContextKind, str] = {}
    for entry in entries:
        seen.setdefault(entry.item.kind, entry.item.kind.value)
    return ", ".join(seen.values())


def _score(score: float) -> str:
    return repr(score)


class SelectionReportAssertionChain:
    """The chapter's ``SelectionReportAssertionChain``: the 13 assertions over one report.

    Build it with :func:`expect` (or :func:`should`, the chapter's name). Every
    method returns the chain itself when its assertion holds and changes nothing;
    otherwise it raises :class:`SelectionReportAssertionError`. An argument of the
    wrong type or out of range (a negative count, a NaN threshold, an unknown
    reason name) raises :class:`~cupellation.exceptions.InvalidTypeError` or
    :class:`~cupellation.exceptions.InvalidValueError` naming it, since it is a
    mistake in the test rather than a failed assertion.
    """

    __slots__ = ("_report",)

    def __init__(self, report: SelectionReport) -> None:
        if not isinstance(report, SelectionReport):
            raise InvalidTypeError("report", report, "a SelectionReport")
        self._report = report

    @property
    def report(self) -> SelectionReport:
        """The report the assertions read."""
        return self._report

    # -- Inclusion ----------------------------------------------------------------------

    def include_item_with_kind(self, kind: ContextKind | str) -> SelectionReportAssertionChain:
        """At least one included item has kind ``kind`` (pattern 1)."""
        wanted = _kind("kind", kind)
        included = self._report.included
        if any(entry.item.kind == wanted for entry in included):
            return self
        raise SelectionReportAssertionError(
            "IncludeItemWithKind",
            f"IncludeItemWithKind({wanted}) failed: Included contained 0 items with "
            f"Kind={wanted}. Included had {len(included)} items with kinds: "
            f"[{_kinds(included)}].")

    def include_item_matching(self, predicate: Callable[[IncludedItem], bool]
                              ) -> SelectionReportAssertionChain:
        """At least one included entry (item, score and reason) satisfies ``predicate``
        (pattern 2).

        On failure the chapter's message is followed by the kind, score and reason
        of up to 5 included entries (the appendix the chapter recommends)."""
        _callable("predicate", predicate)
        included = self._report.included
        if any(predicate(entry) for entry in included):
            return self
        message = (f"IncludeItemMatching failed: no item in Included matched the predicate. "
                   f"Included had {len(included)} items.")
        if included:
            shown = ", ".join(f"(kind={e.item.kind}, score={_score(e.score)}, "
                              f"reason={e.reason.name})" for e in included[:5])
            message += f" First {min(5, len(included))}: [{shown}]."
        raise SelectionReportAssertionError("IncludeItemMatching", message)

    def include_exactly_n_items_with_kind(self, kind: ContextKind | str, n: int
                                          ) -> SelectionReportAssertionChain:
        """Exactly ``n`` included items have kind ``kind``; ``n`` may be 0 (pattern 3)."""
        wanted = _kind("kind", kind)
        _count("n", n)
        included = self._report.included
        actual = sum(1 for entry in included if entry.item.kind == wanted)
        if actual == n:
            return self
        raise SelectionReportAssertionError(
            "IncludeExactlyNItemsWithKind",
            f"IncludeExactlyNItemsWithKind({wanted}, {n}) failed: expected {n} items with "
            f"Kind={wanted} in Included, but found {actual}. Included had {len(included)} "
            f"items total.")

    # -- Exclusion ----------------------------------------------------------------------

    def exclude_item_with_reason(self, reason: ReasonLike) -> SelectionReportAssertionChain:
        """At least one excluded item carries the reason variant ``reason`` (pattern 4).

        ``reason`` is a variant: its name, its class or a value of it; only the
        variant is compared, never the fields."""
        name = _reason_name("reason", reason)
        excluded = self._report.excluded
        if any(entry.reason.name == name for entry in excluded):
            return self
        reasons = ", ".join(_distinct(entry.reason.name for entry in excluded))
        raise SelectionReportAssertionError(
            "ExcludeItemWithReason",
            f"ExcludeItemWithReason({name}) failed: no excluded item had reason {name}. "
            f"Excluded had {len(excluded)} items with reasons: [{reasons}].")

    def exclude_item_matching_with_reason(self, predicate: Callable[[ContextItem], bool],
                                          reason: ReasonLike) -> SelectionReportAssertionChain:
        """At least one excluded item satisfies ``predicate`` (over its ContextItem)
        and carries the reason variant ``reason`` (pattern 5)."""
        _callable("predicate", predicate)
        name = _reason_name("reason", reason)
        matched = [entry for entry in self._report.excluded if predicate(entry.item)]
        if any(entry.reason.name == name for entry in matched):
            return self
        reasons = ", ".join(_distinct(entry.reason.name for entry in matched))
        raise SelectionReportAssertionError(
            "ExcludeItemMatchingWithReason",
            f"ExcludeItemMatchingWithReason(reason={name}) failed: predicate matched "
            f"{len(matched)} excluded item(s) but none had reason {name}. Matched items "
            f"had reasons: [{reasons}].")

    def exclude_item_with_budget_details(self, predicate: Callable[[ContextItem], bool],
                                         expected_item_tokens: int,
                                         expected_available_tokens: int
                                         ) -> SelectionReportAssertionChain:
        """An excluded item satisfying ``predicate`` has reason BudgetExceeded with
        exactly these ``item_tokens`` and ``available_tokens`` (pattern 6).

        When no predicate-matching item has reason BudgetExceeded, the chapter's
        ``but no matching item had reason BudgetExceeded`` form is followed by how
        many excluded items the predicate matched and their reasons."""
        _callable("predicate", predicate)
        for field, value in (("expected_item_tokens", expected_item_tokens),
                             ("expected_available_tokens", expected_available_tokens)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(field, value, "an int")
        matched = [entry for entry in self._report.excluded if predicate(entry.item)]
        budget = [entry.reason for entry in matched if entry.reason.name == "BudgetExceeded"]
        expected = (expected_item_tokens, expected_available_tokens)
        if any((getattr(r, "item_tokens", None), getattr(r, "available_tokens", None))
               == expected for r in budget):
            return self
        head = (f"ExcludeItemWithBudgetDetails failed: expected BudgetExceeded with "
                f"item_tokens={expected_item_tokens}, "
                f"available_tokens={expected_available_tokens}, ")
        if budget:
            first = budget[0]
            message = (head + f"but found item_tokens={getattr(first, 'item_tokens', None)}, "
                       f"available_tokens={getattr(first, 'available_tokens', None)}.")
        else:
            reasons = ", ".join(_distinct(entry.reason.name for entry in matched))
            message = (head + "but no matching item had reason BudgetExceeded. The predicate "
                       f"matched {len(matched)} excluded item(s), with reasons: [{reasons}].")
        raise SelectionReportAssertionError("ExcludeItemWithBudgetDetails", message)

    def have_no_exclusions_for_kind(self, kind: ContextKind | str
                                    ) -> SelectionReportAssertionChain:
        """No excluded item has kind ``kind`` (pattern 7)."""
        wanted = _kind("kind", kind)
        found = [entry for entry in self._report.excluded if entry.item.kind == wanted]
        if not found:
            return self
        first = found[0]
        raise SelectionReportAssertionError(
            "HaveNoExclusionsForKind",
            f"HaveNoExclusionsForKind({wanted}) failed: found {len(found)} excluded item(s) "
            f"with Kind={wanted}. First: score={_score(first.score)}, "
            f"reason={first.reason.name}.")

    # -- Aggregate counts ---------------------------------------------------------------

    def have_at_least_n_exclusions(self, n: int) -> SelectionReportAssertionChain:
        """``excluded`` holds at least ``n`` items (pattern 8)."""
        _count("n", n)
        actual = len(self._report.excluded)
        if actual >= n:
            return self
        raise SelectionReportAssertionError(
            "HaveAtLeastNExclusions",
            f"HaveAtLeastNExclusions({n}) failed: expected at least {n} excluded items, but "
            f"Excluded had {actual}.")

    def excluded_items_are_sorted_by_score_descending(self) -> SelectionReportAssertionChain:
        """``excluded`` is in non-increasing score order (pattern 9, the conformance
        assertion); it fails at the first pair out of order."""
        excluded = self._report.excluded
        for i in range(len(excluded) - 1):
            here, after = excluded[i].score, excluded[i + 1].score
            if after > here:
                raise SelectionReportAssertionError(
                    "ExcludedItemsAreSortedByScoreDescending",
                    f"ExcludedItemsAreSortedByScoreDescending failed: item at index {i + 1} "
                    f"(score={_score(after)}) is higher than item at index {i} "
                    f"(score={_score(here)}). Expected non-increasing scores.")
        return self

    # -- Budget -------------------------------------------------------------------------

    def have_budget_utilization_above(self, threshold: float, budget: ContextBudget
                                      ) -> SelectionReportAssertionChain:
        """The included tokens over ``budget.max_tokens`` are at least ``threshold``,
        compared with an exact ``>=`` (pattern 10).

        This is the vocabulary's *budget utilization*, over the hard ceiling
        ``max_tokens``; the root span's ``cupel.budget.utilization`` attribute is
        over the target instead (see docs/decisions.md)."""
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise InvalidTypeError("threshold", threshold, "a float")
        if math.isnan(threshold):
            raise InvalidValueError("threshold", threshold, "must be a number, not NaN")
        if not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget")
        if budget.max_tokens <= 0:
            raise InvalidValueError("budget.max_tokens", budget.max_tokens,
                                    "must be > 0 to divide by")
        included_tokens = sum(entry.item.tokens for entry in self._report.included)
        actual = included_tokens / budget.max_tokens
        if actual >= threshold:
            return self
        raise SelectionReportAssertionError(
            "HaveBudgetUtilizationAbove",
            f"HaveBudgetUtilizationAbove({threshold}) failed: computed utilization was "
            f"{actual:.6f} (includedTokens={included_tokens}, "
            f"budget.MaxTokens={budget.max_tokens}).")

    # -- Kind coverage ------------------------------------------------------------------

    def have_kind_coverage_count(self, n: int) -> SelectionReportAssertionChain:
        """At least ``n`` distinct kinds appear among the included items (pattern 11)."""
        _count("n", n)
        included = self._report.included
        actual = len({entry.item.kind for entry in included})
        if actual >= n:
            return self
        raise SelectionReportAssertionError(
            "HaveKindCoverageCount",
            f"HaveKindCoverageCount({n}) failed: expected at least {n} distinct ContextKind "
            f"values in Included, but found {actual}: [{_kinds(included)}].")

    # -- Ordering -----------------------------------------------------------------------

    def place_item_at_edge(self, predicate: Callable[[IncludedItem], bool]
                           ) -> SelectionReportAssertionChain:
        """The first or the last included entry satisfies ``predicate`` (pattern 12).

        Positions are the placer's: meaningful when the test knows its placer."""
        _callable("predicate", predicate)
        included = self._report.included
        first = next((i for i, entry in enumerate(included) if predicate(entry)), None)
        if first is None:
            raise SelectionReportAssertionError(
                "PlaceItemAtEdge",
                "PlaceItemAtEdge failed: no item in Included matched the predicate.")
        last = len(included) - 1
        if first in (0, last) or predicate(included[last]):
            return self
        raise SelectionReportAssertionError(
            "PlaceItemAtEdge",
            f"PlaceItemAtEdge failed: item matching predicate was at index {first} (not at "
            f"edge). Edge positions: 0 and {last}. Included had {len(included)} items.")

    def place_top_n_scored_at_edges(self, n: int) -> SelectionReportAssertionChain:
        """The ``n`` highest-scored included entries occupy the ``n`` outermost
        positions, 0, count-1, 1, count-2, ... in any order (pattern 13).

        Where entries tie with the n-th highest score, any of them may fill the
        remaining edge positions."""
        _count("n", n)
        included = self._report.included
        count = len(included)
        if n > count:
            raise SelectionReportAssertionError(
                "PlaceTopNScoredAtEdges",
                f"PlaceTopNScoredAtEdges({n}) failed: Included had {count} items, fewer than "
                f"the {n} edge positions to fill.")
        edges = _edge_positions(n, count)
        at_edge = set(edges)
        # The top n by score; among entries tied with the n-th score, those at an edge
        # first, so that a tie resolved either way is not counted as a failure.
        order = sorted(range(count),
                       key=lambda i: (-included[i].score, i not in at_edge, i))[:n]
        missing = [i for i in order if i not in at_edge]
        if not missing:
            return self
        top = ", ".join(f"(kind={included[i].item.kind}, score={_score(included[i].score)}, "
                        f"idx={i})" for i in order)
        raise SelectionReportAssertionError(
            "PlaceTopNScoredAtEdges",
            f"PlaceTopNScoredAtEdges({n}) failed: {len(missing)} of the top-{n} scored items "
            f"were not at expected edge positions. Top-{n} items (by score): [{top}]. "
            f"Expected edge positions: [{', '.join(map(str, edges))}].")


def _edge_positions(n: int, count: int) -> Sequence[int]:
    """The first ``n`` edge positions of a list of ``count``: 0, count-1, 1, count-2, ..."""
    return [i // 2 if i % 2 == 0 else count - 1 - i // 2 for i in range(n)]


def expect(report: SelectionReport) -> SelectionReportAssertionChain:
    """The assertion chain over ``report``: ``expect(report).include_item_with_kind(...)``.

    .. versionadded:: 0.3
    """
    return SelectionReportAssertionChain(report)


def should(report: SelectionReport) -> SelectionReportAssertionChain:
    """The chapter's name for :func:`expect` (``SelectionReport.Should()``).

    .. versionadded:: 0.3
    """
    return SelectionReportAssertionChain(report)
