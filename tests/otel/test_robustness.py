"""The span sink never breaks a run: failing providers and processors, no provider at
all, the global providers, one sink shared by many runs and threads, nested runs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.util._once import Once

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    Pipeline,
    RecencyScorer,
    TraceDetailLevel,
)
from cupellation.events import RunStarted, StageStarted
from cupellation.otel import SpanCollector, runs_from_spans
from cupellation.scoring import FunctionScorer

from ._support import Raising, Watcher, attrs, make_sdk, no_context_leak, run_both

BUDGET = ContextBudget(max_tokens=100, target_tokens=40)
ITEMS = [ContextItem("pinned", 5, pinned=True), ContextItem("x", 20), ContextItem("x", 20),
         ContextItem("y", 30), ContextItem("z", 10, kind="Document"), ContextItem("w", 12)]
PIPELINE = Pipeline(scorer=RecencyScorer(), budget=BUDGET)
EXPECTED = PIPELINE.run(ITEMS)


class RaisingOnce(Raising):
    """Raises like Raising, but only the first time."""

    def __init__(self, where: str, name: str | None) -> None:
        super().__init__(where, name)
        self.fired = False

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        """Raise on the first matching start only."""
        if not self.fired and self.where == "start" and span.name == self.name:
            self.fired = True
            raise RuntimeError(f"refusing to start {span.name}")

    def on_end(self, span: ReadableSpan) -> None:
        """Raise on the first matching end only."""
        if not self.fired and self.where == "end" and span.name == self.name:
            self.fired = True
            raise RuntimeError(f"refusing to end {span.name}")


def _errors(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name == "cupellation" and r.levelno >= logging.ERROR]


@pytest.mark.parametrize(("where", "name"), [
    ("start", "cupel.pipeline"), ("start", "cupel.stage.classify"),
    ("start", "cupel.stage.slice"), ("end", "cupel.stage.score"),
    ("end", "cupel.stage.place"), ("end", "cupel.pipeline"),
])
def test_a_raising_span_processor_never_breaks_the_run(
        where: str, name: str, caplog: pytest.LogCaptureFixture) -> None:
    """A processor raising when a span starts or ends: the run returns what it would
    untraced, the error is logged once on the cupellation logger, every span that was
    started is ended, no context stays attached, and the next run is traced whole.

    (The watcher sees a start only once it succeeded: a span whose start raised is
    never handed to the caller, so nobody could end it; it sees every end, even one
    after which a processor raises.)"""
    watcher = Watcher()
    raising = RaisingOnce(where, name)
    sdk = make_sdk(processors=[raising, watcher] if where == "start" else [watcher, raising])
    collector = sdk.collector("Full")
    caplog.set_level(logging.ERROR, logger="cupellation")
    with no_context_leak():
        traced = run_both(PIPELINE, ITEMS, BUDGET, collector)
    assert traced.error is None
    assert traced.result == EXPECTED
    assert len(_errors(caplog)) == 1
    assert "SpanCollector" in _errors(caplog)[0].getMessage()
    assert watcher.open == []
    sdk.exporter.clear()
    with no_context_leak():
        again = run_both(PIPELINE, ITEMS, BUDGET, collector)
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert rebuilt.report == again.report
    assert rebuilt.is_complete


def test_a_tracer_provider_that_raises_is_logged_and_the_run_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    """get_tracer raising: the sink reports itself disabled (logged), and the run is
    the untraced one."""

    class Broken(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            raise RuntimeError("no tracer today")

    caplog.set_level(logging.ERROR, logger="cupellation")
    collector = SpanCollector(tracer_provider=Broken(), meter_provider=metrics.NoOpMeterProvider())
    assert collector.is_enabled is False
    assert PIPELINE.run(ITEMS, BUDGET, collector) == EXPECTED
    assert _errors(caplog)
    assert "could not get a tracer" in _errors(caplog)[0].getMessage()


def test_a_meter_that_raises_ends_the_runs_spans(caplog: pytest.LogCaptureFixture) -> None:
    """A counter whose add raises mid-run: logged once, every span ended, contexts
    detached, the run unchanged."""

    class BrokenCounter:
        def add(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("counter broken")

    class BrokenMeter(metrics.NoOpMeter):
        def create_counter(self, *args: Any, **kwargs: Any) -> Any:
            return BrokenCounter()

    class BrokenMeterProvider(metrics.MeterProvider):
        def get_meter(self, *args: Any, **kwargs: Any) -> metrics.Meter:
            return BrokenMeter("broken")

    watcher = Watcher()
    sdk = make_sdk(processors=[watcher])
    collector = SpanCollector(tracer_provider=sdk.tracer_provider,
                              meter_provider=BrokenMeterProvider(), tier="Full")
    caplog.set_level(logging.ERROR, logger="cupellation")
    with no_context_leak():
        assert PIPELINE.run(ITEMS, BUDGET, collector) == EXPECTED
    assert len(_errors(caplog)) == 1
    assert watcher.open == []


def test_record_ignores_events_of_runs_it_never_saw_start() -> None:
    """A stage event of an unknown run, or an empty delivery, is ignored quietly."""
    sdk = make_sdk()
    collector = sdk.collector("Full")
    collector.record(())
    collector.record((StageStarted(run_id="nope", seq=1, stage="Score", items_in=3),))
    assert sdk.spans == ()


def test_without_any_provider_the_sink_is_disabled_and_costs_no_events() -> None:
    """With no global provider set and none given, is_enabled is False (the pipeline
    then builds no event for it) and a FanOutCollector leaves it out; the API's no-op
    providers given explicitly are the same."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    collector = SpanCollector()
    assert collector.is_enabled is False
    assert FanOutCollector(collector).is_enabled is False
    explicit = SpanCollector(tracer_provider=trace.NoOpTracerProvider(),
                             meter_provider=metrics.NoOpMeterProvider())
    assert explicit.is_enabled is False
    assert PIPELINE.run(ITEMS, BUDGET, collector) == EXPECTED
    traced_only = SpanCollector(tracer_provider=make_sdk().tracer_provider)
    assert traced_only.is_enabled is True


@pytest.fixture
def fresh_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let a test set OpenTelemetry's global providers, and put them back after it."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER_SET_ONCE", Once())
    monkeypatch.setattr(metrics_internal, "_METER_PROVIDER", None)
    monkeypatch.setattr(metrics_internal, "_PROXY_METER_PROVIDER",
                        metrics_internal._ProxyMeterProvider())


def test_the_global_providers_are_used_once_set(fresh_globals: None) -> None:
    """A sink built before the application sets its global providers starts
    recording when they are set (this test sets them, and restores them after)."""
    collector = SpanCollector(tier="StageOnly")
    assert collector.is_enabled is False
    sdk = make_sdk()
    trace.set_tracer_provider(sdk.tracer_provider)
    metrics.set_meter_provider(sdk.meter_provider)
    assert collector.is_enabled is True
    traced = run_both(PIPELINE, ITEMS, BUDGET, collector, TraceDetailLevel.STAGE_ONLY)
    (rebuilt,) = runs_from_spans(sdk.spans)
    assert rebuilt.run_id == traced.events[0].run_id
    assert sdk.metric_points()["cupel.runs"][0].value == 1


def test_one_sink_serves_many_runs_from_many_threads() -> None:
    """One SpanCollector shared by 6 threads, each running 5 selections under its own
    application span: 30 runs come back, each whole, equal to its in-process report,
    its stage spans under its own root and its root under its thread's span."""
    sdk = make_sdk()
    collector = sdk.collector("Full")
    tracer = sdk.tracer_provider.get_tracer("app")
    reports: dict[str, Any] = {}
    parents: dict[str, int] = {}
    lock = threading.Lock()
    failures: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for turn in range(5):
                items = [*ITEMS, ContextItem(f"thread {thread} turn {turn}", 7)]
                with tracer.start_as_current_span(f"agent.{thread}") as span, \
                        no_context_leak():
                    traced = run_both(PIPELINE, items, BUDGET, collector)
                with lock:
                    reports[traced.events[0].run_id] = traced.report
                    parents[traced.events[0].run_id] = span.get_span_context().span_id
        except BaseException as exc:  # surfaced below
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    rebuilt = runs_from_spans(sdk.spans)
    assert len(rebuilt) == 30
    by_id = {span.context.span_id: span for span in sdk.spans}
    for run in rebuilt:
        assert run.report == reports[run.run_id]
        assert run.is_complete
        (root,) = [s for s in sdk.by_name("cupel.pipeline")
                   if attrs(s)["cupel.run.id"] == run.run_id]
        assert root.parent is not None
        assert root.parent.span_id == parents[run.run_id]
        assert by_id[root.parent.span_id].name.startswith("agent.")
        for span in sdk.spans:
            if attrs(span).get("cupel.run.id") == run.run_id and span is not root:
                assert span.parent is not None
                assert span.parent.span_id == root.context.span_id


def test_a_run_inside_a_scorer_nests_under_the_outer_score_span() -> None:
    """A scorer that itself runs a pipeline with the same sink: the inner run's root
    is a child of the outer cupel.stage.score span, and both runs rebuild whole."""
    sdk = make_sdk()
    collector = sdk.collector("Full")
    inner_reports: list[Any] = []

    def score(item: ContextItem, items: Sequence[ContextItem]) -> float:
        if item.content == "y":
            diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
            PIPELINE.run(ITEMS, BUDGET, FanOutCollector(diagnostics, collector))
            inner_reports.append(diagnostics.build_report())
        return float(item.tokens)

    outer = run_both(Pipeline(scorer=FunctionScorer(score), budget=BUDGET), ITEMS, BUDGET,
                     collector)
    runs = {run.run_id: run for run in runs_from_spans(sdk.spans)}
    assert len(runs) == 2
    outer_id = outer.events[0].run_id
    assert runs[outer_id].report == outer.report
    (inner_id,) = set(runs) - {outer_id}
    assert runs[inner_id].report == inner_reports[0]
    (outer_score,) = [s for s in sdk.by_name("cupel.stage.score")
                      if attrs(s)["cupel.run.id"] == outer_id]
    (inner_root,) = [s for s in sdk.by_name("cupel.pipeline")
                     if attrs(s)["cupel.run.id"] == inner_id]
    assert inner_root.parent is not None
    assert inner_root.parent.span_id == outer_score.context.span_id


def test_a_sampled_out_run_makes_no_stage_spans_and_leaves_no_context() -> None:
    """When the sampler drops the root, the sink starts no stage span for the run
    and still detaches what it attached."""
    started: list[str] = []

    class CountingTracer(trace.Tracer):
        def __init__(self, inner: trace.Tracer) -> None:
            self.inner = inner

        def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
            started.append(name)
            return self.inner.start_span(name, *args, **kwargs)

        def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    class Counting(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
            return CountingTracer(super().get_tracer(*args, **kwargs))

    collector = SpanCollector(tracer_provider=Counting(sampler=ALWAYS_OFF), tier="Full")
    with no_context_leak():
        assert PIPELINE.run(ITEMS, BUDGET, collector) == EXPECTED
    assert started == ["cupel.pipeline"]


def test_run_started_is_recorded_once_per_run_with_its_own_tier() -> None:
    """Beside a DiagnosticTraceCollector at another level, the sink's root says its own
    tier (the FanOutCollector hands each child its own run_started)."""
    sdk = make_sdk()
    diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    PIPELINE.run(ITEMS, BUDGET, FanOutCollector(diagnostics, sdk.collector("StageOnly")))
    (root,) = sdk.by_name("cupel.pipeline")
    assert attrs(root)["cupel.verbosity"] == "StageOnly"
    first = diagnostics.events[0]
    assert isinstance(first, RunStarted)
    assert first.detail_level == "Full"
