"""The run metrics, through the OpenTelemetry metrics API only.

| Instrument | Kind | Unit | Attributes |
|---|---|---|---|
| ``cupel.runs`` | counter | ``{run}`` | ``outcome`` (``completed``/``failed``), ``error.type`` when failed |
| ``cupel.candidates`` | counter | ``{item}`` | |
| ``cupel.exclusions`` | counter | ``{item}`` | ``cupel.stage.name``; ``cupel.exclusion.reason`` from the StageAndExclusions tier up |
| ``cupel.budget.utilization`` | histogram | ``1`` | |
| ``cupel.run.duration`` | histogram | ``s`` | ``outcome``, ``error.type`` when failed |
| ``cupel.stage.duration`` | histogram | ``s`` | ``cupel.stage.name`` |
"""  # noqa: E501

from __future__ import annotations

from typing import Any, Final

from opentelemetry import metrics

from .._version import __version__
from ._names import SCOPE_NAME

__all__ = ["Instruments", "is_noop_meter_provider"]

RUNS: Final = "cupel.runs"
CANDIDATES: Final = "cupel.candidates"
EXCLUSIONS: Final = "cupel.exclusions"
UTILIZATION: Final = "cupel.budget.utilization"
RUN_DURATION: Final = "cupel.run.duration"
STAGE_DURATION: Final = "cupel.stage.duration"

#: Boundaries (seconds) for durations that are mostly well under a millisecond.
DURATION_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                           0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: Boundaries for the fraction of the target budget a selection used.
UTILIZATION_BUCKETS: Final = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.05,
                              1.25, 1.5, 2.0)


def is_noop_meter_provider(provider: metrics.MeterProvider) -> bool:
    """True for the API's no-op provider and for the global proxy before any provider
    is set: recording through them would cost time and go nowhere."""
    return isinstance(provider, metrics.NoOpMeterProvider) or (
        type(provider).__name__ == "_ProxyMeterProvider")


def _histogram(meter: metrics.Meter, name: str, unit: str, description: str,
               buckets: tuple[float, ...]) -> metrics.Histogram:
    try:
        return meter.create_histogram(name, unit=unit, description=description,
                                      explicit_bucket_boundaries_advisory=list(buckets))
    except TypeError:  # an API from before bucket advice (opentelemetry-api < 1.23)
        return meter.create_histogram(name, unit=unit, description=description)


class Instruments:
    """The six instruments of one meter."""

    __slots__ = ("candidates", "exclusions", "run_duration", "runs", "stage_duration",
                 "utilization")

    def __init__(self, provider: metrics.MeterProvider) -> None:
        meter = provider.get_meter(SCOPE_NAME, __version__)
        self.runs = meter.create_counter(RUNS, unit="{run}",
                                         description="Selection runs, by outcome")
        self.candidates = meter.create_counter(CANDIDATES, unit="{item}",
                                               description="Candidate items considered")
        self.exclusions = meter.create_counter(
            EXCLUSIONS, unit="{item}", description="Candidate items excluded, by stage "
            "(and by reason from the StageAndExclusions tier up)")
        self.utilization = _histogram(
            meter, UTILIZATION, "1", "Tokens selected as a fraction of the target budget",
            UTILIZATION_BUCKETS)
        self.run_duration = _histogram(meter, RUN_DURATION, "s", "Duration of a selection run",
                                       DURATION_BUCKETS)
        self.stage_duration = _histogram(meter, STAGE_DURATION, "s",
                                         "Duration of a pipeline stage", DURATION_BUCKETS)

    def run_ended(self, outcome: str, duration_ms: float, error_type: str | None) -> None:
        """Count a finished run and record its duration."""
        attributes: dict[str, Any] = {"outcome": outcome}
        if error_type is not None:
            attributes["error.type"] = error_type
        self.runs.add(1, attributes)
        self.run_duration.record(duration_ms / 1000.0, attributes)
