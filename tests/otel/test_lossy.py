"""When spans lost data, the rebuilt report says it is incomplete and what is
missing; what it does hold is right. Spans that are not cupellation's, interleaved
runs and damaged traces give a clear DecodeError or an incomplete report."""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import SpanLimits

from cupellation import (
    ContextBudget,
    ContextItem,
    GreedySlice,
    Pipeline,
    SelectionReport,
    TraceDetailLevel,
)
from cupellation.exceptions import DecodeError
from cupellation.otel import SpanData, runs_from_spans
from cupellation.otel._spans import span_data
from cupellation.scoring import CompositeScorer, PriorityScorer, RecencyScorer

from ._support import attrs, make_sdk, run_both

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items

PIPELINE = Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                    GreedySlice())


def _budget(items: list[ContextItem], fraction: float) -> ContextBudget:
    target = int(sum(item.tokens for item in items) * fraction)
    return ContextBudget(max_tokens=2 * target, target_tokens=target)


def _assert_holds_only_truth(rebuilt: SelectionReport, truth: SelectionReport) -> None:
    """Every decision the rebuilt report holds is one the in-process report made."""
    excluded = {(e.item, e.score, e.reason) for e in truth.excluded}
    included = {(e.item, e.score, e.reason) for e in truth.included}
    assert rebuilt.excluded or rebuilt.included
    for entry in rebuilt.excluded:
        assert (entry.item, entry.score, entry.reason) in excluded
    for kept in rebuilt.included:
        assert (kept.item, kept.score, kept.reason) in included
    assert [(e.stage, e.duration_ms) for e in rebuilt.events] == [
        (e.stage, e.duration_ms) for e in truth.events][:len(rebuilt.events)]


def test_the_sdk_drops_the_oldest_events_past_128_and_the_report_says_so() -> None:
    """Under the SDK's default limits a slice span with 200+ exclusions keeps the
    newest 128: the rebuilt report is incomplete, names the span and the lost count
    and the missing seqs, and every decision it holds is right."""
    items = make_items(400, 7, pinned_index=3)
    sdk = make_sdk(limits=None)
    traced = run_both(PIPELINE, items, _budget(items, 0.3),
                      sdk.collector("StageAndExclusions", layout="events"),
                      TraceDetailLevel.STAGE_AND_EXCLUSIONS)
    (slice_span,) = sdk.by_name("cupel.stage.slice")
    assert slice_span.dropped_events > 0
    assert len(slice_span.events) == 128
    exclusions = [e.seq for e in traced.events if type(e).__name__ == "ItemExcluded"]
    kept = [attrs(e)["cupel.exclusion.seq"] for e in slice_span.events]
    assert kept == exclusions[-128:]  # the oldest were dropped
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert not rebuilt.is_complete
    text = "\n".join(rebuilt.report.incomplete)
    assert f"lost {slice_span.dropped_events} events" in text
    assert "OTEL_SPAN_EVENT_COUNT_LIMIT" in text
    assert "columns layout" in text
    assert "cupel.stage.slice" in text
    assert "events missing from the sequence" in text
    _assert_holds_only_truth(rebuilt.report, traced.report)


@pytest.mark.parametrize("tier", ["StageAndExclusions", "Full"])
def test_a_thousand_item_run_under_default_limits_is_incomplete_not_wrong(tier: str) -> None:
    """1,000 candidates traced in the events layout under the SDK's default span
    limits: the report rebuilt from the spans says it is incomplete, and holds nothing
    the run did not decide."""
    items = make_items(1_000, 11, pinned_index=500)
    sdk = make_sdk(limits=None)
    level = TraceDetailLevel.parse(tier)
    traced = run_both(PIPELINE, items, _budget(items, 0.4),
                      sdk.collector(tier, layout="events"), level)
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert not rebuilt.report.is_complete
    assert any("lost" in p and "events" in p for p in rebuilt.report.incomplete)
    assert rebuilt.report.total_candidates < 1_000
    _assert_holds_only_truth(rebuilt.report, traced.report)


def test_truncated_values_make_the_report_incomplete() -> None:
    """An attribute value length limit cuts item contents: the checks written on each
    span tell, and the report says values were truncated."""
    items = [ContextItem("a fairly long piece of content " * 3, 10),
             ContextItem("another long piece of content " * 3, 50)]
    sdk = make_sdk(limits=SpanLimits(max_events=1000, max_attribute_length=12))
    run_both(PIPELINE, items, ContextBudget(max_tokens=100, target_tokens=20),
             sdk.collector("Full"))
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert any("truncated" in p for p in rebuilt.report.incomplete)


def test_dropped_event_attributes_make_the_report_incomplete() -> None:
    """An event attribute count limit: the spans say attributes were lost, the report
    says so, and events missing a required attribute are reported undecodable."""
    items = make_items(20, 3)
    sdk = make_sdk(limits=SpanLimits(max_events=1000, max_event_attributes=4))
    run_both(PIPELINE, items, _budget(items, 0.5), sdk.collector("Full", layout="events"))
    (rebuilt,) = runs_from_spans(sdk.spans)
    text = "\n".join(rebuilt.report.incomplete)
    assert "lost attributes to an attribute limit" in text
    assert "could not be decoded" in text
    assert len(rebuilt.report.included) + len(rebuilt.report.excluded) < len(items)


def _spans(tier: str = "Full", capture: str = "full", layout: str = "columns"
           ) -> tuple[list[SpanData], Any]:
    items = make_items(30, 5, pinned_index=2)
    sdk = make_sdk()
    traced = run_both(PIPELINE, items, _budget(items, 0.5),
                      sdk.collector(tier, capture, layout=layout))
    return [span_data(s) for s in sdk.spans], traced


def test_a_missing_stage_span_is_named() -> None:
    """Without its cupel.stage.slice span, a completed run's report names the missing
    span and the seqs it held."""
    spans, _ = _spans()
    (rebuilt,) = runs_from_spans([s for s in spans if s.name != "cupel.stage.slice"])
    text = "\n".join(rebuilt.report.incomplete)
    assert "the stage span cupel.stage.slice is missing" in text
    assert "events missing from the sequence" in text


def test_a_missing_root_span_is_named() -> None:
    """Without the root, the stage spans still decode and the report says the root,
    the run's start and end, are missing."""
    spans, traced = _spans()
    (rebuilt,) = runs_from_spans([s for s in spans if s.name != "cupel.pipeline"])
    text = "\n".join(rebuilt.report.incomplete)
    assert "the root span cupel.pipeline is missing" in text
    assert "no run_started event" in text
    assert len(rebuilt.report.events) == 5
    assert rebuilt.report.events == traced.report.events


def test_hashed_and_absent_content_are_flagged() -> None:
    """Hash capture: contents are sha256 digests and the report says content was
    captured as 'hash'; the default none capture says 'none'."""
    spans, traced = _spans(capture="hash")
    (rebuilt,) = runs_from_spans(spans)
    assert any("'hash'" in p for p in rebuilt.report.incomplete)
    assert all(e.item.content.startswith("sha256:") for e in rebuilt.report.included)
    spans, traced = _spans(capture="none")
    (rebuilt,) = runs_from_spans(spans)
    assert any("'none'" in p for p in rebuilt.report.incomplete)
    assert all("content not captured" in e.item.content for e in rebuilt.report.included)
    assert [e.item.tokens for e in rebuilt.report.included] == [
        e.item.tokens for e in traced.report.included]


def test_an_attribute_silently_lost_in_transport_is_noticed() -> None:
    """A backend that drops an attribute without saying so (no dropped count): the
    span's attribute-count check tells, and the report says so."""
    spans, _ = _spans(layout="events")
    damaged = []
    for span in spans:
        if span.name == "cupel.stage.slice":
            event = span.events[0]
            attributes = dict(attrs(event))
            attributes.pop("cupel.item.priority", None)
            attributes.pop("cupel.item.timestamp", None)
            damaged.append(replace(span, events=(replace(event, attributes=attributes),
                                                 *span.events[1:])))
        else:
            damaged.append(span)
    (rebuilt,) = runs_from_spans(damaged)
    assert any("dropped on the way" in p for p in rebuilt.report.incomplete)


def test_a_stage_span_under_another_parent_is_named() -> None:
    """A stage span whose parent is not the run's root is reported."""
    spans, _ = _spans()
    moved = [replace(s, parent_span_id="00000000000000ff") if s.name == "cupel.stage.score"
             else s for s in spans]
    (rebuilt,) = runs_from_spans(moved)
    assert any("is not a child of the run's cupel.pipeline span" in p
               for p in rebuilt.report.incomplete)


def test_spans_that_are_not_ours_are_refused_or_ignored() -> None:
    """Only foreign spans: a DecodeError saying no cupellation run is there. Foreign
    spans beside ours (even one named cupel.pipeline without a run id) are ignored."""
    sdk = make_sdk()
    tracer = sdk.tracer_provider.get_tracer("other")
    with tracer.start_as_current_span("GET /"), tracer.start_as_current_span("cupel.pipeline"):
        pass
    with pytest.raises(DecodeError, match="hold no cupellation run"):
        runs_from_spans(sdk.spans)
    spans, traced = _spans()
    (rebuilt,) = runs_from_spans([*spans, *(span_data(s) for s in sdk.spans)])
    assert rebuilt.report == traced.report
    assert runs_from_spans([]) == []
    with pytest.raises(DecodeError, match="not an OpenTelemetry ReadableSpan"):
        runs_from_spans([object()])


def test_two_interleaved_runs_in_one_trace_come_apart() -> None:
    """Two runs under one application span, their spans shuffled together: each is
    rebuilt whole and equal to its own in-process report, in start order."""
    sdk = make_sdk()
    collector = sdk.collector("Full")
    tracer = sdk.tracer_provider.get_tracer("app")
    items = make_items(25, 9)
    with tracer.start_as_current_span("agent.turn"):
        first = run_both(PIPELINE, items, _budget(items, 0.5), collector)
        second = run_both(PIPELINE, items[:15], _budget(items[:15], 0.3), collector)
    spans = [span_data(s) for s in sdk.spans]
    random.Random(4).shuffle(spans)
    assert len({s.trace_id for s in spans}) == 1
    one, two = runs_from_spans(spans)
    assert one.report == first.report
    assert two.report == second.report
    assert one.trace_id == two.trace_id == spans[0].trace_id


def test_a_span_seen_twice_makes_the_report_say_events_repeated() -> None:
    """An exporter that delivered a stage span twice: the events are not counted
    twice; the report says which events were repeated."""
    spans, traced = _spans()
    (slice_span,) = [s for s in spans if s.name == "cupel.stage.slice"]
    (rebuilt,) = runs_from_spans([*spans, slice_span])
    text = "\n".join(rebuilt.report.incomplete)
    assert "events repeated (ignored)" in text
    assert rebuilt.report.excluded == traced.report.excluded
