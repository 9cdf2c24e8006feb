"""A selection-like span workload: what a traced pipeline run emits, made directly
with the SDK tracer (one root span, five stage spans, item events)."""

from __future__ import annotations

from opentelemetry.trace import TracerProvider

from cupellation_exporters.conventions import (
    EXCLUSION_COUNT_ATTRIBUTE,
    PIPELINE_SPAN,
    STAGES,
    stage_span_name,
)

SPANS_PER_RUN = 1 + len(STAGES)


def run_selections(tracer_provider: TracerProvider, runs: int) -> int:
    """Emit ``runs`` pipeline runs' spans; returns how many spans ended."""
    tracer = tracer_provider.get_tracer("cupellation.tests.workload")
    for run in range(runs):
        with tracer.start_as_current_span(PIPELINE_SPAN, attributes={
                "cupel.candidates": 40, "cupel.budget.target_tokens": 6000,
                "cupel.run": run}):
            for index, stage in enumerate(STAGES):
                with tracer.start_as_current_span(stage_span_name(stage)) as span:
                    span.set_attribute(EXCLUSION_COUNT_ATTRIBUTE, index % 3)
                    span.add_event("cupel.exclusion", {
                        "cupel.item.index": index, "cupel.item.score": 0.25 * index,
                        "cupel.reason": "BudgetExceeded"})
    return runs * SPANS_PER_RUN
