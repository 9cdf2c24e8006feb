"""The run metrics, and item content in telemetry: absent by default, set by the
content_capture parameter or the CUPELLATION_CAPTURE_CONTENT variable."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import metrics

from cupellation import ContextBudget, ContextItem, Pipeline, RecencyScorer, TraceDetailLevel
from cupellation.events import content_digest
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.scoring import FunctionScorer
from cupellation.settings import CAPTURE_ENV_VAR as CAPTURE_CONTENT_ENV

from ._support import Sdk, attrs, make_sdk, run_both

BUDGET = ContextBudget(max_tokens=100, target_tokens=40)
ITEMS = [ContextItem("secret alpha", 20, metadata={"user": "ursula-marker"}),
         ContextItem("secret alpha", 20), ContextItem("secret beta", 30),
         ContextItem("secret gamma", 10, kind="Document"), ContextItem("secret delta", -1)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)


def _metrics(sdk: Sdk) -> dict[str, Any]:
    data = sdk.reader.get_metrics_data()
    assert data is not None
    return {m.name: m for r in data.resource_metrics for s in r.scope_metrics
            for m in s.metrics}


def _fail(item: ContextItem, items: Sequence[ContextItem]) -> float:
    raise ValueError("scorer down")


def test_runs_candidates_exclusions_and_durations_are_counted() -> None:
    """Two completed runs and a failed one at StageAndExclusions: cupel.runs by
    outcome (error.type on failures), cupel.candidates, cupel.exclusions by reason and
    stage matching the reports, utilisation (unit 1) and durations (unit s)."""
    sdk = make_sdk()
    collector = sdk.collector("StageAndExclusions")
    level = TraceDetailLevel.STAGE_AND_EXCLUSIONS
    reports = [run_both(PIPELINE, ITEMS, BUDGET, collector, level).report for _ in range(2)]
    failed = run_both(Pipeline(scorer=FunctionScorer(_fail), budget=BUDGET), ITEMS, BUDGET,
                      collector, level)
    assert failed.error is not None
    found = _metrics(sdk)
    runs = {attrs(p)["outcome"]: p for p in found["cupel.runs"].data.data_points}
    assert runs["completed"].value == 2
    assert runs["failed"].value == 1
    assert runs["failed"].attributes["error.type"] == "ScorerError"
    (candidates,) = found["cupel.candidates"].data.data_points
    assert candidates.value == 3 * len(ITEMS)
    expected: Counter[tuple[str, str]] = Counter()
    for report in reports:
        for entry in report.excluded:
            stage = {"NegativeTokens": "classify", "Deduplicated": "deduplicate"}.get(
                entry.reason.name, "slice")
            expected[entry.reason.name, stage] += 1
    expected["NegativeTokens", "classify"] += 1  # the failed run got past Classify
    exclusions = {(attrs(p)["cupel.exclusion.reason"], attrs(p)["cupel.stage.name"]):
                  p.value for p in found["cupel.exclusions"].data.data_points}
    assert exclusions == dict(expected)
    utilization = found["cupel.budget.utilization"]
    assert utilization.unit == "1"
    (point,) = utilization.data.data_points
    assert point.count == 2
    used = sum(item.tokens for item in PIPELINE.run(ITEMS))
    assert point.sum == pytest.approx(2 * used / 40)
    run_duration = found["cupel.run.duration"]
    assert run_duration.unit == "s"
    assert sum(p.count for p in run_duration.data.data_points) == 3
    stage_duration = found["cupel.stage.duration"]
    assert stage_duration.unit == "s"
    counts = {attrs(p)["cupel.stage.name"]: p.count for p in stage_duration.data.data_points}
    assert counts == {"classify": 3, "score": 2, "deduplicate": 2, "slice": 2, "place": 2}
    assert all(p.sum < 1.0 for p in stage_duration.data.data_points)  # seconds, not ms


def test_stage_only_counts_exclusions_by_stage_without_reasons() -> None:
    """At StageOnly no exclusion event exists: cupel.exclusions counts each stage's
    items in minus items out, by stage only."""
    sdk = make_sdk()
    run_both(PIPELINE, ITEMS, BUDGET, sdk.collector("StageOnly"), TraceDetailLevel.STAGE_ONLY)
    points = _metrics(sdk)["cupel.exclusions"].data.data_points
    by_stage = {attrs(p)["cupel.stage.name"]: p.value for p in points}
    assert by_stage == {"classify": 1, "deduplicate": 1, "slice": 1}
    assert all("cupel.exclusion.reason" not in attrs(p) for p in points)


def test_metrics_alone_need_no_tracer() -> None:
    """With only a meter provider the sink is enabled, counts runs and makes no span."""
    sdk = make_sdk()
    collector = SpanCollector(meter_provider=sdk.meter_provider,
                              tracer_provider=None)
    assert collector.is_enabled
    PIPELINE.run(ITEMS, BUDGET, collector)
    assert sdk.spans == ()
    assert _metrics(sdk)["cupel.runs"].data.data_points[0].value == 1
    no_metrics = SpanCollector(tracer_provider=sdk.tracer_provider,
                               meter_provider=metrics.NoOpMeterProvider())
    PIPELINE.run(ITEMS, BUDGET, no_metrics)
    assert len(sdk.by_name("cupel.pipeline")) == 1


def _strings(sdk: Sdk) -> list[str]:
    out = []
    for span in sdk.spans:
        values = [*attrs(span).values(),
                  *(v for e in span.events for v in attrs(e).values())]
        out += [str(v) for v in values]
    return out


def _names(sdk: Sdk) -> set[str]:
    return {k for s in sdk.spans for e in s.events for k in attrs(e)} | {
        k for s in sdk.spans for k in attrs(s)}


def test_content_is_absent_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the parameter or the variable, no attribute holds any item's content or
    metadata, and the root says content_capture none."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    sdk = make_sdk()
    collector = SpanCollector(tracer_provider=sdk.tracer_provider, tier="Full")
    assert collector.content_capture.value == "none"
    run_both(PIPELINE, ITEMS, BUDGET, collector)
    assert not [s for s in _strings(sdk) if "secret" in s or "ursula-marker" in s]
    assert "cupel.item.content" not in _names(sdk)
    assert "cupel.item.metadata" not in _names(sdk)
    (root,) = sdk.by_name("cupel.pipeline")
    assert attrs(root)["cupel.run.content_capture"] == "none"


@pytest.mark.parametrize(("env", "parameter", "expected"), [
    ("full", None, "full"), ("HASH", None, "hash"), ("none", None, "none"),
    ("full", "none", "none"), ("none", "hash", "hash"), ("", None, "none"),
])
def test_the_variable_sets_capture_and_the_parameter_wins(
        monkeypatch: pytest.MonkeyPatch, env: str, parameter: str | None,
        expected: str) -> None:
    """CUPELLATION_CAPTURE_CONTENT decides when content_capture is not given; the
    parameter wins over it. full keeps contents, hash writes the events module's digest."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, env)
    sdk = make_sdk()
    collector = SpanCollector(tracer_provider=sdk.tracer_provider, tier="Full",
                              content_capture=parameter, layout="events")
    assert collector.content_capture.value == expected
    run_both(PIPELINE, ITEMS, BUDGET, collector)
    contents = {attrs(e).get("cupel.item.content") for s in sdk.spans for e in s.events
                if e.name in ("cupel.exclusion", "cupel.item.included")}
    if expected == "full":
        assert "secret alpha" in contents
        assert any("ursula-marker" in s for s in _strings(sdk))
    elif expected == "hash":
        assert content_digest("secret alpha") in contents
        assert not [s for s in _strings(sdk) if "secret" in s or "ursula-marker" in s]
    else:
        assert contents == {None}
    (run,) = runs_from_spans(sdk.spans)
    assert (f"captured as {expected!r}" in "\n".join(run.report.incomplete)) == (
        expected != "full")


def test_a_bad_variable_is_logged_and_content_stays_out(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """An unknown CUPELLATION_CAPTURE_CONTENT value is a warning (once, through warnings
    and the cupellation logger), and capture is none."""
    from cupellation import settings  # noqa: PLC0415

    monkeypatch.setattr(settings, "_warned", set())
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "everything")
    caplog.set_level(logging.WARNING, logger="cupellation")
    with pytest.warns(RuntimeWarning, match=CAPTURE_CONTENT_ENV):
        collector = SpanCollector(tracer_provider=make_sdk().tracer_provider)
    assert collector.content_capture.value == "none"
    assert any(CAPTURE_CONTENT_ENV in r.getMessage() for r in caplog.records)
