"""A selection as rich tables: what went in (in placed order), what stayed out and
why, and the stages. Every value from the items is shown escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._events.digest import UNCHECKED_NOTE, UNSIGNED_NOTE
from .._model import ContextBudget
from .._report import SelectionReport
from ..events import StageCompleted
from ..reasons import reason_to_dict
from ._common import safe

__all__ = ["incomplete_headline", "print_selection"]


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


def _reason_text(wire: dict[str, Any]) -> str:
    data = ", ".join(f"{k}={safe(str(v), 40)}" for k, v in wire.items() if k != "reason")
    return f"{wire['reason']}({data})" if data else str(wire["reason"])


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
    from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

    headline = incomplete_headline(report)
    if headline is not None:
        console.print(headline)
    used = sum(entry.item.tokens for entry in report.included)
    console.print(f"{safe(title)}: selected {len(report.included)} of "
                  f"{report.total_candidates} candidates, {used} tokens (target "
                  f"{budget.target_tokens}, max {budget.max_tokens}, output reserve "
                  f"{budget.output_reserve})")
    included = Table(title="Included, in placed order", title_justify="left")
    for column in ("#", "reason", "score", "tokens", "kind", "content"):
        included.add_column(column, overflow="fold",
                            justify="right" if column in ("#", "score", "tokens") else "left")
    for position, entry in enumerate(report.included):
        included.add_row(str(position), safe(entry.reason.name), f"{entry.score:.3f}",
                         str(entry.item.tokens), safe(entry.item.kind.value, 20),
                         safe(entry.item.content, content_width))
    console.print(included)
    if not report.excluded:
        console.print("Excluded: none")
    excluded = Table(title="Excluded, highest score first", title_justify="left")
    for column in ("reason", "score", "tokens", "kind", "content"):
        excluded.add_column(column, overflow="fold",
                            justify="right" if column in ("score", "tokens") else "left")
    for left_out in report.excluded:
        excluded.add_row(_reason_text(reason_to_dict(left_out.reason)),
                         f"{left_out.score:.3f}", str(left_out.item.tokens),
                         safe(left_out.item.kind.value, 20),
                         safe(left_out.item.content, content_width))
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
