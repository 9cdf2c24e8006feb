"""The SelectionReport and the one fold that makes it: :class:`ReportBuilder`.

The definitions live in :mod:`cupellation._reporting` (the report and its JSON,
its entries, the fold and its checks); this module gathers their names.
"""

from __future__ import annotations

from ._reporting.entries import ExcludedItem, IncludedItem, OverflowReport, TraceEvent
from ._reporting.fold import ReportBuilder, build_report
from ._reporting.report import SelectionReport

__all__ = [
    "ExcludedItem",
    "IncludedItem",
    "OverflowReport",
    "ReportBuilder",
    "SelectionReport",
    "TraceEvent",
    "build_report",
]
