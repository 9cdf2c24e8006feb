"""A selection report as one self-contained HTML page, readable offline.

    import json
    from cupellation.html import render_html

    page = render_html(json.load(open("out/report.json")),
                       budget={"maxTokens": 1024, "targetTokens": 400, "outputReserve": 256})
    open("out/report.html", "w", encoding="utf-8").write(page)

The page has no script and loads nothing (no external CSS, JS or fonts); all
item content is HTML-escaped, so content such as ``<script>`` is shown, never
run. See :func:`render_html` for what it shows and the element ids tests and
tools can read.
"""

from __future__ import annotations

from ._html import DEFAULT_TITLE, render_html

__all__ = ["DEFAULT_TITLE", "render_html"]
