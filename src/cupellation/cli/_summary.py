"""A selection as rich tables: what went in (in placed order), what stayed out and
why, and the stages. Every value from the items is shown escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._model import ContextBudget
from .._report import SelectionReport
from ..events import StageCompleted
from ..events._digest import UNCHECKED_NOTE, UNSIGNED_NOTE
from ..reasons import reason_to_dict
from ._common import safe
from ._logread import reason_text

__all__ = ["entry_tables", "incomplete_headline", "print_selection"]

#: One table style for the CLI's tables and the HTML page's: numbered from 1, these
#: columns in this order, scores to 3 decimals.
_COLUMNS = ("#", "score", "reason", "kind", "tokens", "content")


def incomplete_headline(report: SelectionReport) -> str | None:
    """The first line of an incomplete report's text: that it is incomplete, how many
    problems, and the first (what was lost, its cause and the fix; or that the run's
    signature is missing or was not checked, which the readers list first); None when
    whole."""
    if report.is_complete:
        return None
    count = len(report.incomplete)
    first = report.incomplete[0]
    more = f" (and {count - 1} more problem{'s' if count > 2 else ''}, listed at the end)"
    lead = ("UNVERIFIED: this report may not be the run that was written"
            if first.startswith((UNCHECKED_NOTE, UNSIGNED_NOTE))
            else "INCOMPLETE: this report does not hold the whole run")
    return f"{lead}: {safe(first, 400)}{more if count > 1 else ''}"


def _tokens_cell(item: Any) -> str:
    """The tokens, and the original size of an item trimmed before selection."""
    if item.original_tokens is None or item.original_tokens == item.tokens:
        return str(item.tokens)
    return f"{item.tokens} (trimmed from {item.original_tokens:,})"


def entry_tables(report: SelectionReport, *, content_width: int) -> tuple[Any, Any]:
    """The included (placed order) and excluded (highest score first) tables, in the
    HTML page's style: rows numbered from 1, # score reason kind tokens content."""
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    tables = []
    lists: tuple[tuple[str, Sequence[Any], bool], ...] = (
        ("Included, in placed order", report.included, False),
        ("Excluded, highest score first", report.excluded, True))
    for title, entries, excluded in lists:
        table = Table(title=title, title_justify="left")
        for column in _COLUMNS:
            table.add_column(column, overflow="fold", justify="right" if column in (
                "#", "score", "tokens") else "left")
        for number, entry in enumerate(entries, start=1):
            reason = (reason_text(reason_to_dict(entry.reason), 40) if excluded
                      else safe(entry.reason.name))
            table.add_row(str(number), f"{entry.score:.3f}", reason,
                          safe(entry.item.kind.value, 20), _tokens_cell(entry.item),
                          safe(entry.item.content, content_width))
        tables.append(table)
    return tables[0], tables[1]


def _stage_line(report: SelectionReport, stages: Sequence[StageCompleted]) -> str:
    """Each stage's time, and the items that went in and came out of it (from the
    run's stage events; the report alone knows only the items in)."""
    if stages:
        shown = ", ".join(f"{event.stage} {event.duration_ms:.3f} ms ({event.items_in} in, "
                          f"{event.items_out} out)" for event in stages)
        return f"Stages: {shown}"
    shown = ", ".join(f"{event.stage} {event.duration_ms:.3f} ms ({event.item_count} in)"
                      for event in report.events)
    return f"Stages: {shown or '-'}"


def print_selection(console: Any, report: SelectionReport, budget: ContextBudget, *,
                    title: str, content_width: int = 70,
                    stages: Sequence[StageCompleted] = ()) -> None:
    """Print ``report`` on a rich ``console``; ``stages`` (the run's stage events)
    give the stage line its items in and out."""
    headline = incomplete_headline(report)
    if headline is not None:
        console.print(headline)
    used = sum(entry.item.tokens for entry in report.included)
    console.print(f"{safe(title)}: selected {len(report.included)} of "
                  f"{report.total_candidates} candidates, {used} tokens (target "
                  f"{budget.target_tokens}, max {budget.max_tokens}, output reserve "
                  f"{budget.output_reserve})")
    included, excluded = entry_tables(report, content_width=content_width)
    console.print(included)
    if not report.excluded:
        console.print("Excluded: none")
    if report.excluded:
        console.print(excluded)
    console.print(_stage_line(report, stages))
    if report.overflow is not None:
        console.print(f"Overflow: {report.overflow.tokens_over_budget} tokens over the target")
    for shortfall in report.count_requirement_shortfalls:
        console.print(f"Count shortfall: {safe(shortfall.kind.value)} required "
                      f"{shortfall.required_count}, got {shortfall.satisfied_count}")
    for problem in report.incomplete:
        console.print(f"Incomplete: {safe(problem, 300)}")
