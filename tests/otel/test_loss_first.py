"""Loss stated first: a report rebuilt from spans that lost decisions says so in its
first line of text, in an HTML banner above everything else and as the first entry of
``incomplete`` in JSON, naming the cause and the fix; ``report`` exits 3 unless
--allow-incomplete."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cupellation.cli import main

from ._support import make_sdk, otlp_document, run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import budget_for, make_items, reference_pipeline


def _events_layout_trace(tmp_path: Path) -> Path:
    """5,000 candidates in the events layout under the SDK's default limits (128
    events per span), saved as OTLP/JSON."""
    items = make_items(5_000, 3, pinned_index=2)
    sdk = make_sdk(limits=None)
    run_both(reference_pipeline(), items, budget_for(items),
             sdk.collector("Full", "full", layout="events"))
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(otlp_document(sdk.spans)), encoding="utf-8")
    return path


def test_an_incomplete_rebuild_says_so_first_with_cause_and_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Text: line 1 says INCOMPLETE and names the event limit and
    OTEL_SPAN_EVENT_COUNT_LIMIT, exit 3; JSON: incomplete[0] is that cause and fix;
    HTML: the banner comes before the header; --allow-incomplete exits 0."""
    path = _events_layout_trace(tmp_path)
    capsys.readouterr()
    assert main(["report", str(path)]) == 3
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert first.startswith("INCOMPLETE")
    assert "span event limit" in first
    assert "OTEL_SPAN_EVENT_COUNT_LIMIT" in first
    assert "columns layout" in first
    assert main(["report", str(path), "--format", "json", "--allow-incomplete"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "OTEL_SPAN_EVENT_COUNT_LIMIT" in data["incomplete"][0]
    html = tmp_path / "report.html"
    assert main(["report", str(path), "--html", str(html), "--allow-incomplete"]) == 0
    page = html.read_text(encoding="utf-8")
    assert page.index('id="incomplete"') < page.index("<header>")
    assert "OTEL_SPAN_EVENT_COUNT_LIMIT" in page[:page.index("<header>")]
