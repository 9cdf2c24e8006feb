"""Stage spans tell the stages' true time: their start and end come from the
pipeline's own measurement, so a busy exporter thread holding the interpreter does
not stretch them."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from cupellation import ContextBudget, ContextItem, Pipeline
from cupellation.events import PipelineStage, StageCompleted
from cupellation.otel import runs_from_spans
from cupellation.scoring import RecencyScorer

from ._support import make_sdk, run_both

ITEMS = [ContextItem(f"item {k}", 10 + k % 17) for k in range(300)]
BUDGET = ContextBudget(max_tokens=2_000, target_tokens=1_000)


class SlowExporter(SpanExporter):
    """Exports on the batch processor's thread, spinning in Python (holding the
    interpreter) for a while on every call."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []
        self.calls = 0
        self.lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Spin for 20 ms of pure Python, then keep the spans."""
        deadline = time.perf_counter() + 0.02
        count = 0
        while time.perf_counter() < deadline:
            count += 1
        with self.lock:
            self.spans.extend(spans)
            self.calls += 1
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release."""


def test_stage_spans_last_the_measured_duration_under_a_slow_exporter_thread() -> None:
    """With a BatchSpanProcessor whose exporter thread spins while the runs go on, every
    stage span's end minus start is its cupel.stage.duration_ms to the nanosecond, and
    the rebuilt reports' stage durations equal the in-process ones."""
    exporter = SlowExporter()
    processor = BatchSpanProcessor(exporter, schedule_delay_millis=1, max_export_batch_size=2)
    sdk = make_sdk(processors=[processor])
    collector = sdk.collector("StageAndExclusions", "none")
    traced = [run_both(Pipeline(RecencyScorer()), ITEMS, BUDGET, collector) for _ in range(8)]
    processor.force_flush()
    assert exporter.calls > 1
    stages = [s for s in sdk.spans if s.name.startswith("cupel.stage.")
              and not s.name.endswith(".part")]
    assert len(stages) == 8 * 5
    for span in stages:
        assert span.start_time is not None
        assert span.end_time is not None
        duration_ms = (span.attributes or {})["cupel.stage.duration_ms"]
        assert isinstance(duration_ms, float)
        assert span.end_time - span.start_time == round(duration_ms * 1_000_000)
    expected = [[(e.stage, e.duration_ms) for e in t.events
                 if isinstance(e, StageCompleted) and e.stage is not PipelineStage.SORT]
                for t in traced]
    rebuilt = runs_from_spans(sdk.spans)
    assert [[(e.stage, e.duration_ms) for e in run.events
             if isinstance(e, StageCompleted) and e.stage is not PipelineStage.SORT]
            for run in rebuilt] == expected
    processor.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
