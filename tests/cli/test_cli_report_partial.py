"""``report`` of a run that lost most of its spans on the way (as a plain-SDK gRPC
export over 4 MiB does): the first line says most of the run is missing, the totals
are the specification's over what the report holds, and the count the run announced
is on a line of its own, labelled."""

from __future__ import annotations

import sys
from pathlib import Path

from _cli_support import cli

from cupellation import ContextItem
from cupellation_exporters import otlp_json_line
from otel._support import make_sdk
from otel.test_root_values import PIPELINE, _budget

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items


def _trace_file(tmp_path: Path, keep: set[str]) -> Path:
    """A 3,000-candidate run (one item with -1,145 tokens) of which only the spans
    named in ``keep`` reach the file."""
    items = make_items(3_000, 4, pinned_index=1)
    items[5] = ContextItem(content="corrupt", tokens=-1145)
    sdk = make_sdk(limits=None)
    PIPELINE.run(items, _budget(items[6:], 0.4), sdk.collector(content_capture="none"))
    path = tmp_path / "trace.jsonl"
    path.write_text(otlp_json_line([s for s in sdk.spans if s.name in keep]))
    return path


def test_a_run_missing_most_spans_says_so_first_and_labels_the_announced_count(
        tmp_path: Path) -> None:
    """Only the root span arrived: the first line says most of the run is missing (0 of
    the 3,000 candidates announced), no line reads "Selected 0 of 0", the totals over
    what the report holds are labelled as such, the announced count has its own line;
    exit 3."""
    result = cli("report", _trace_file(tmp_path, {"cupel.pipeline"}))
    assert result.code == 3
    lines = result.out.splitlines()
    assert lines[0].startswith("INCOMPLETE: most of this run is missing (the report holds "
                               "0 of the 3,000 candidates the run announced): span "
                               "cupel.pipeline ")
    assert "Cause: " in lines[0]
    assert "Selected " not in result.out
    assert ("In this report (incomplete): 0 selected and 0 left out of the 0 candidates "
            "it holds; tokens over those items: 0 selected, 0 in all") in lines
    assert any(line.startswith("Announced by the run: 3,000 candidates, ")
               for line in lines)


def test_without_the_root_the_negative_total_is_labelled_as_what_the_report_holds(
        tmp_path: Path) -> None:
    """Only the Classify span arrived (its NegativeTokens exclusion): the tokens total is
    the specification's sum over the held item (-1,145) and says so, never
    "0 of -1145 tokens considered"."""
    result = cli("report", _trace_file(tmp_path, {"cupel.stage.classify"}))
    assert result.code == 3
    assert "tokens considered" not in result.out
    assert ("In this report (incomplete): 0 selected and 1 left out of the 1 candidates "
            "it holds; tokens over those items: 0 selected, -1,145 in all") in result.out
