"""What the log commands share beyond ``_logread``'s reading: the loop over every
run of the logs, the one-line failure, the terminal console and the formats the
commands print alike. Each command has its own module: ``audit`` in ``_auditcmd``,
``report`` in ``_reportcmd``, ``why`` in ``_whycmd``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any

from .._report import SelectionReport
from ..events import RunStarted
from ..exceptions import CupelError
from ..logs import LoggedRun, LogReader, ReadStats
from ._common import console_class, describe
from ._logread import (
    READ_ERRORS,
    USAGE,
    UsageError,
    open_reader,
    read_failure,
    safe,
    unreadable_sources,
)

__all__ = ["STOP", "estimated_counter", "fail", "new_console", "read_each",
           "when_text"]


def fail(command: str, message: str) -> int:
    print(f"cupellation {command}: error: {safe(message)}", file=sys.stderr)
    return USAGE


def new_console() -> Any:
    return console_class()(file=sys.stdout, highlight=False, markup=False, emoji=False,
                           soft_wrap=not sys.stdout.isatty())


def when_text(value: datetime | None) -> str:
    return "-" if value is None else value.isoformat().replace("+00:00", "Z")


#: What ``consume`` returns to stop :func:`read_each` early (a page is full).
STOP = object()


def read_each(command: str, args: argparse.Namespace,
          consume: Callable[[LoggedRun], object], **options: Any) -> ReadStats | int:
    """Feed every run in ``args.logs`` or ``--store`` (within --since/--until) to
    ``consume`` (which returns :data:`STOP` to end the read early); the read's stats,
    or exit status 2 (one line said) when a source could not be read whole: a missing
    file, a corrupt or truncated gzip stream, a closed stdin, a store that cannot be
    opened."""
    reader: LogReader | None = None
    try:
        with open_reader(args, since=args.since, until=args.until, **options) as reader:
            for run in reader:
                if consume(run) is STOP:
                    break
            stats = reader.stats
    except UsageError as exc:
        return fail(command, str(exc))
    except CupelError as exc:
        return fail(command, describe(exc))
    except READ_ERRORS as exc:
        return fail(command, read_failure(exc, reader.stats if reader else None))
    broken = unreadable_sources(stats)
    if broken is not None:
        return fail(command, broken)
    return stats


def estimated_counter(report: SelectionReport, started: RunStarted | None = None
                      ) -> str | None:
    """The estimating counter of a run, or None when its counts are not known to be
    estimates: what its ``run_started`` records (``token_counter`` with
    ``token_estimates``), else what its items name (metadata ``chat.tokens``, such as
    ``estimate:chars/4``, for runs logged before ``run_started`` carried it)."""
    if started is not None and started.token_estimates:
        return started.token_counter or "estimate"
    items = [entry.item for entry in report.included] + [entry.item for entry in report.excluded]
    for item in items:
        counter = item.metadata.get("chat.tokens")
        if isinstance(counter, str) and counter.startswith("estimate"):
            return counter
    return None
