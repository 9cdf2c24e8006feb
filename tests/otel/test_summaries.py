"""Every span readable on its own: each stage span's input.value / output.value follows
the tier, every list in a summary says how many it shows of how many and ends with the
command that shows the rest, dropped items come first (the largest first), numbers are
rounded for people while the columns keep every digit, and the trace list's first
characters say the outcome in words."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from cupellation import ContextItem, Pipeline, SelectionReport
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.otel._values import value_document
from cupellation.policy import Policy

from ._support import make_sdk

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items

from .test_root_values import PIPELINE, _budget

_STAGES = ("classify", "score", "deduplicate", "slice", "place")


def _demo() -> tuple[Pipeline, list[ContextItem]]:
    data = files("cupellation") / "_data"
    policy = Policy.from_json((data / "demo_policy.json").read_text(encoding="utf-8"))
    items = [ContextItem.from_dict(entry) for entry in
             json.loads((data / "demo_candidates.json").read_text(encoding="utf-8"))]
    return policy.build_pipeline(clock=lambda: datetime(2026, 11, 21, tzinfo=UTC)), items


def _spans(pipeline: Pipeline, items: list[ContextItem], tier: str = "Full",
           capture: str = "none", **budget: Any) -> tuple[list[ReadableSpan], SelectionReport]:
    sdk = make_sdk(limits=None)
    collector = SpanCollector(tracer_provider=sdk.tracer_provider, tier=tier,
                              content_capture=capture)
    pipeline.run(items, collector=collector, **budget)
    (run,) = runs_from_spans(sdk.spans)
    if tier == "Full":  # (lower tiers say they hold no item decisions)
        assert all("was captured as" in problem for problem in run.report.incomplete)
    return list(sdk.spans), run.report


def _values(span: ReadableSpan) -> tuple[dict[str, Any], dict[str, Any]]:
    """A span's input and output documents, the root's line in words as ``summary``
    (the root's values are text/plain: the line, a blank line, the JSON; a stage
    span's are JSON)."""
    attributes = dict(span.attributes or {})
    mime = "text/plain" if span.parent is None else "application/json"
    assert attributes["input.mime_type"] == attributes["output.mime_type"] == mime
    documents = []
    for key in ("input.value", "output.value"):
        value = str(attributes[key])
        assert len(value.encode("utf-8")) <= 2048
        if span.parent is None:
            words, _, rest = value.partition("\n\n")
            assert value_document(value) == (words, json.loads(rest))
            documents.append({"summary": words, **json.loads(rest)})
        else:
            assert value_document(value) == (None, json.loads(value))
            documents.append(json.loads(value))
    return documents[0], documents[1]


def _check_lists(document: dict[str, Any], trace_id: str) -> None:
    """Each list says shown and of, and the document ends with the command."""
    for key in ("dropped_items", "kept_items"):
        if key in document:
            block = document[key]
            assert block["shown"] == len(block["items"]) <= block["of"]
    if "dropped_items" in document:
        assert list(document)[-1] == "more"
        assert f"cupellation report --from phoenix|mlflow|jaeger|tempo URL --trace {trace_id}" \
            in document["more"]


def _by_name(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans if not span.name.endswith(".part")}


def test_the_demo_reads_in_words_and_every_dropped_reason_is_on_a_pane() -> None:
    """The demo (22 candidates): the root's output.value (text/plain) starts with "kept
    16 of 22, dropped 6: 4 budget, 1 negative tokens, 1 duplicate" then a blank line and
    the JSON (so a trace list shows words, not a JSON key), lists the dropped items before the kept
    ones, each stage span says what it was given and what it dropped and why, and every
    dropped item of the report is shown with its reason on the root or its stage."""
    pipeline, items = _demo()
    spans, report = _spans(pipeline, items)
    named = _by_name(spans)
    root = named["cupel.pipeline"]
    trace_id = format(root.context.trace_id, "032x")
    given, out = _values(root)
    # What a trace list shows first (Phoenix's and MLflow's show the root's values).
    assert str((root.attributes or {})["output.value"]).startswith(
        "kept 16 of 22, dropped 6: 4 budget, 1 negative tokens, 1 duplicate\n\n{\n")
    assert str((root.attributes or {})["input.value"]).startswith("22 candidates, ")
    assert given["summary"].startswith("22 candidates, ")
    assert out["summary"] == ("kept 16 of 22, dropped 6: 4 budget, 1 negative tokens, "
                              "1 duplicate")
    assert list(out).index("dropped_items") < list(out).index("kept_items")
    _check_lists(out, trace_id)
    shown = {(e["index"], e["reason"]) for e in out["dropped_items"]["items"]}
    for stage in _STAGES:
        stage_in, stage_out = _values(named[f"cupel.stage.{stage}"])
        assert stage_in["in"] == stage_out["in"]
        assert stage_out["summary"].startswith(
            f"{stage}: {stage_out['in']} in, {stage_out['out']} out")
        _check_lists(stage_out, trace_id)
        shown |= {(e["index"], e["reason"])
                  for e in stage_out.get("dropped_items", {"items": []})["items"]}
    slice_out = _values(named["cupel.stage.slice"])[1]
    assert slice_out["summary"].endswith("; dropped 4: 4 budget")
    assert [e["tokens"] for e in slice_out["dropped_items"]["items"]] == sorted(
        (e["tokens"] for e in slice_out["dropped_items"]["items"]), reverse=True)
    dropped = sorted((e.item.kind.value, e.item.tokens, e.reason.name) for e in report.excluded)
    assert sorted((items[index].kind.value, items[index].tokens, reason)
                  for index, reason in shown) == dropped


def test_a_5000_item_run_says_how_many_each_pane_leaves_out() -> None:
    """5,000 candidates: every pane stays within 2,048 bytes; each stage's dropped
    count and reasons add up to the report's exclusions; every dropped item is either
    shown with its reason on the root or its stage, or counted in a list whose "of"
    exceeds its "shown" beside the command that reads the whole trace back."""
    items = make_items(5_000, 4, pinned_index=1)
    spans, report = _spans(PIPELINE, items, budget=_budget(items, 0.4))
    named = _by_name(spans)
    trace_id = format(named["cupel.pipeline"].context.trace_id, "032x")
    _, out = _values(named["cupel.pipeline"])
    _check_lists(out, trace_id)
    assert out["dropped_items"]["of"] == len(report.excluded) > out["dropped_items"]["shown"]
    assert out["kept_items"]["shown"] > 0
    total: dict[str, int] = {}
    shown: set[int] = {e["index"] for e in out["dropped_items"]["items"]}
    unshown = 0  # what the stages' lists say they leave out
    for stage in _STAGES:
        _, stage_out = _values(named[f"cupel.stage.{stage}"])
        _check_lists(stage_out, trace_id)
        for reason, count in stage_out.get("dropped", {"reasons": {}})["reasons"].items():
            total[reason] = total.get(reason, 0) + count
        if "dropped_items" in stage_out:
            block = stage_out["dropped_items"]
            shown |= {e["index"] for e in block["items"]}
            assert block["of"] == stage_out["dropped"]["count"]
            unshown += block["of"] - block["shown"]
    expected: dict[str, int] = {}
    for entry in report.excluded:
        expected[entry.reason.name] = expected.get(entry.reason.name, 0) + 1
    assert total == expected == out["dropped"]["reasons"]
    assert len(shown) + unshown >= len(report.excluded)
    assert unshown > 0


def test_stage_only_stage_spans_carry_the_counts_alone() -> None:
    """At StageOnly a stage span's output.value holds the counts in and out (and the
    duration) and no decision: that tier knows no more."""
    spans, _ = _spans(*_demo(), tier="StageOnly")
    named = _by_name(spans)
    for stage in _STAGES:
        _, stage_out = _values(named[f"cupel.stage.{stage}"])
        assert set(stage_out) == {"summary", "stage", "in", "out", "duration_ms"}


@pytest.mark.parametrize("capture", ["none", "full"])
def test_summaries_round_numbers_while_the_columns_keep_every_digit(capture: str) -> None:
    """Scores and durations in the summaries have at most 3 decimals; the report rebuilt
    from the same spans keeps every score's full precision."""
    spans, report = _spans(*_demo(), capture=capture)
    named = _by_name(spans)
    _, out = _values(named["cupel.pipeline"])
    scores = [e["score"] for e in out["dropped_items"]["items"] + out["kept_items"]["items"]]
    assert all(round(score, 3) == score for score in scores)
    assert any(round(e.score, 3) != e.score for e in report.excluded)
    for stage in _STAGES:
        _, stage_out = _values(named[f"cupel.stage.{stage}"])
        assert round(stage_out["duration_ms"], 3) == stage_out["duration_ms"]
