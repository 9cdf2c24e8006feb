"""The HTML page of ``cupellation stats --html``: one self-contained file (inline CSS and
SVG charts, no script, nothing fetched) with the fleet statistics."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import TYPE_CHECKING, Final

from ._statscmd import headline, stats_cells

if TYPE_CHECKING:
    from ..store import FleetStats

__all__ = ["stats_page"]

#: Bar colours, one per exclusion reason in order of total count (then repeated).
_COLOURS: Final = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
                   "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
_CHART_WIDTH: Final = 720
_CHART_HEIGHT: Final = 240
_STYLE: Final = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
.headline { background: #fff4e5; border-left: 4px solid #f28e2b; padding: .5rem 1rem; }
table { border-collapse: collapse; margin-top: .5rem; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; margin-right: 1rem; }
.legend i { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; }
"""


def _bucket_format(stats: FleetStats) -> str:
    """How the page writes a bucket's start: the hour only for hourly buckets."""
    return "%Y-%m-%d %H:%M" if stats.bucket == "hour" else "%Y-%m-%d"


def _bucket_label(stats: FleetStats, index: int) -> str:
    bucket = stats.exclusions[index].bucket
    return "all" if bucket is None else bucket.strftime(_bucket_format(stats))


def _exclusion_chart(stats: FleetStats) -> str:
    """Stacked bars: one per time bucket, one segment per reason."""
    per_bucket: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    totals: dict[str, int] = defaultdict(int)
    for index, row in enumerate(stats.exclusions):
        label = _bucket_label(stats, index)
        per_bucket[label][row.reason] += row.count
        totals[row.reason] += row.count
    if not per_bucket:
        return "<p>No exclusions.</p>"
    reasons = sorted(totals, key=lambda name: (-totals[name], name))
    colour = {name: _COLOURS[k % len(_COLOURS)] for k, name in enumerate(reasons)}
    highest = max(sum(counts.values()) for counts in per_bucket.values())
    width = _CHART_WIDTH / len(per_bucket)
    bars: list[str] = []
    for slot, (label, counts) in enumerate(sorted(per_bucket.items())):
        y = float(_CHART_HEIGHT)
        for name in reasons:
            count = counts.get(name, 0)
            if not count:
                continue
            height = _CHART_HEIGHT * count / highest
            y -= height
            bars.append(f'<rect x="{slot * width + 2:.1f}" y="{y:.1f}" '
                        f'width="{max(width - 4, 1):.1f}" height="{height:.1f}" '
                        f'fill="{colour[name]}"><title>{escape(label)}: {escape(name)} '
                        f'{count}</title></rect>')
        bars.append(f'<text x="{slot * width + width / 2:.1f}" y="{_CHART_HEIGHT + 14}" '
                    f'font-size="10" text-anchor="middle">{escape(label)}</text>')
    legend = "".join(f'<span><i style="background:{colour[n]}"></i>{escape(n)} '
                     f'({totals[n]})</span>' for n in reasons)
    return (f'<svg role="img" aria-label="exclusions by reason per bucket" '
            f'width="{_CHART_WIDTH}" height="{_CHART_HEIGHT + 20}">{"".join(bars)}</svg>'
            f'<div class="legend">{legend}</div>')


def _table(columns: list[str], rows: list[list[str]], numeric: set[int]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=n" if k in numeric else ""}>{escape(cell)}</td>'
                         for k, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def stats_page(stats: FleetStats) -> str:
    """The statistics as one self-contained HTML page."""
    cells = stats_cells(stats, _bucket_format(stats))
    utilization = _table(*cells["utilization"], {1, 2, 3, 4, 5, 6})
    failures = _table(*cells["failures"], {2})
    sources = _table(*cells["sources"], {1})
    exclusions = _table(*cells["exclusions"], {4})
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>cupellation fleet statistics</title><style>{_STYLE}</style></head><body>"
        "<h1>Fleet statistics</h1>"
        f'<p class="headline">{escape(headline(stats))}</p>'
        f"<p>Overflow events (Truncate strategy): {stats.overflow_events}</p>"
        f"<h2>Exclusions by reason per {escape(stats.bucket)}</h2>{_exclusion_chart(stats)}"
        f"<h2>Budget utilisation (included / max tokens)</h2>{utilization}"
        f"<h2>Failed runs</h2>{failures}"
        f"<h2>Sources most often left out</h2>{sources}"
        f"<h2>Exclusions by service, reason and kind</h2>{exclusions}"
        "</body></html>")
