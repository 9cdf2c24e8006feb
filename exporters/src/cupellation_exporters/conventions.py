"""The names cupellation's telemetry uses on the wire, in one place for the exporters,
the docker/ demo stack's guide and queries (TraceQL, Jaeger, Phoenix) to agree on.

A pipeline run is one root span, ``cupel.pipeline``, with one child span per stage,
``cupel.stage.<stage>``; a stage span carries the number of items that stage excluded
as the integer attribute ``cupel.exclusion.count``.
"""

from __future__ import annotations

from typing import Final

from ._otlp import DEFAULT_SERVICE_NAME

__all__ = [
    "EXCLUSION_COUNT_ATTRIBUTE",
    "PIPELINE_SPAN",
    "SERVICE_NAME",
    "STAGES",
    "STAGE_SPAN_PREFIX",
    "stage_span_name",
]

SERVICE_NAME: Final = DEFAULT_SERVICE_NAME
PIPELINE_SPAN: Final = "cupel.pipeline"
STAGE_SPAN_PREFIX: Final = "cupel.stage."
STAGES: Final = ("classify", "score", "deduplicate", "slice", "place")
EXCLUSION_COUNT_ATTRIBUTE: Final = "cupel.exclusion.count"


def stage_span_name(stage: str) -> str:
    """The span name of a pipeline stage, e.g. ``cupel.stage.slice``."""
    return STAGE_SPAN_PREFIX + stage
