"""The SelectionReport and the one fold that makes it: :class:`ReportBuilder`.

The report and its JSON live in ``report`` and ``writer``, its entries in
``entries``, the fold and its checks in ``fold`` and ``checks``; this package's
namespace gathers the names the rest of the package imports.
"""

from __future__ import annotations

from .entries import ExcludedItem, IncludedItem, OverflowReport, TraceEvent
from .fold import ReportBuilder, build_report
from .report import SelectionReport

__all__ = [
    "ExcludedItem",
    "IncludedItem",
    "OverflowReport",
    "ReportBuilder",
    "SelectionReport",
    "TraceEvent",
    "build_report",
]
