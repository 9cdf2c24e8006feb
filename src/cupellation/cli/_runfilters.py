"""The run filters of ``audit``, ``why``, ``replay`` and ``report``: ``--session``,
``--user``, ``--conversation``, ``--reason``, ``--kind`` and ``--policy``.

With ``--store`` they run in SQL (:class:`~cupellation.store.RunQuery`); with files the
same test runs in Python on each run read, with exactly the SQL's meaning, so both give
one answer: the session, user and conversation are the ``run_started`` event's (exact);
``--reason`` keeps a run that excluded an item for that reason (its name, exact);
``--kind`` a run that decided an item of that kind (the kind as written, exact);
``--policy`` (``--strategy``) a run whose pipeline description (a ``pipeline.*`` value: the scorer,
slicer and placer as JSON, the overflow strategy) holds the text, ignoring case."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any, Final

from ..logs import LoggedRun, LogReader, ReadStats

__all__ = ["FILTERS", "FilteredReader", "add_run_filters", "filters_given", "keeps",
           "narrowed_by"]

#: The option's destination and the :class:`~cupellation.store.RunQuery` field it fills.
FILTERS: Final = (("session", "session_id"), ("user", "user_id"),
                  ("conversation", "conversation_id"), ("reason", "reason"),
                  ("kind", "kind"), ("strategy", "strategy"))


def add_run_filters(parser: argparse.ArgumentParser, *, policy: bool = True) -> None:
    """The six run filters, for files and ``--store`` alike. The policy filter is
    ``--policy TEXT`` (also spelt ``--strategy``), or only ``--strategy`` where the
    command's ``--policy`` names another thing (``replay``: the policy to replay under)."""
    parser.add_argument("--session", metavar="ID",
                        help="only runs of this session (run_started's session_id)")
    parser.add_argument("--user", metavar="ID", help="only runs of this user")
    parser.add_argument("--conversation", metavar="ID",
                        help="only runs of this conversation")
    parser.add_argument("--reason", metavar="NAME",
                        help="only runs that excluded an item for this reason "
                             "(BudgetExceeded, Deduplicated, ...)")
    parser.add_argument("--kind", metavar="KIND",
                        help="only runs that decided an item of this kind (as written: "
                             "Message, ToolOutput, ...)")
    names = ("--policy", "--strategy") if policy else ("--strategy",)
    parser.add_argument(*names, dest="strategy", metavar="TEXT",
                        help="only runs whose pipeline description (the policy: scorer, "
                             "slicer, placer, overflow) holds TEXT, ignoring case (greedy, "
                             "knapsack, recency, Truncate, ...)")


def filters_given(args: argparse.Namespace) -> dict[str, str]:
    """The filters given on the command line, by :class:`RunQuery` field name."""
    given = {field: getattr(args, dest, None) for dest, field in FILTERS}
    return {field: value for field, value in given.items() if value is not None}


def narrowed_by(args: argparse.Namespace) -> str:
    """What narrowed the read, for the line that says nothing was found: ``" in that
    time window"``, ``" matching --session, --kind"``, both, or nothing."""
    parts = []
    if getattr(args, "since", None) or getattr(args, "until", None):
        parts.append(" in that time window")
    given = [dest for dest, field in FILTERS if getattr(args, dest, None) is not None]
    if given:
        parts.append(" matching " + ", ".join(
            "the policy text" if dest == "strategy" else f"--{dest}" for dest in given))
    return "".join(parts)


def keeps(run: LoggedRun, filters: dict[str, str]) -> bool:
    """True when ``run`` passes every filter, as the store's SQL decides it (one
    definition: :func:`cupellation.store.keeps_run`, which trace runs in a store pass
    too)."""
    from ..store import RunQuery, keeps_run  # noqa: PLC0415 - only when filters are given

    return keeps_run(run, RunQuery(**filters))  # type: ignore[arg-type]


class FilteredReader:
    """The runs of ``reader`` that pass ``filters``; a run left out is counted in
    ``stats.runs_filtered_out``, not in ``stats.runs`` (as the time window's are)."""

    def __init__(self, reader: LogReader | Any, filters: dict[str, str]) -> None:
        self._reader = reader
        self._filters = filters
        self.stats: ReadStats = reader.stats

    def __iter__(self) -> Iterator[LoggedRun]:
        for run in self._reader:
            if keeps(run, self._filters):
                yield run
            else:
                self.stats.runs -= 1
                self.stats.runs_filtered_out += 1
