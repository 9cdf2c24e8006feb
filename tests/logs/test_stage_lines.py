"""A stage event's line is one %-format of its kind's template (issue 26): byte for
byte event_to_json's line for usual values, and event_to_json's own line (or its
error) for the unusual ones the template leaves to it."""

from __future__ import annotations

from typing import Any

import pytest

from cupellation.events import (
    ContentCapture,
    PipelineStage,
    StageCompleted,
    StageStarted,
    event_to_json,
)
from cupellation.events._lines import LineEncoder
from cupellation.exceptions import CupelError

_USUAL: list[Any] = [
    StageStarted(run_id='r"%s\\é', seq=0, stage=PipelineStage.CLASSIFY, items_in=0),
    StageStarted(run_id="r", seq=10**20, stage=PipelineStage.SLICE, items_in=-3),
    StageCompleted(run_id="r%d", seq=7, stage=PipelineStage.PLACE, duration_ms=0.1 + 0.2,
                   items_in=5, items_out=4),
    StageCompleted(run_id="r", seq=7, stage=PipelineStage.SORT, duration_ms=-0.0,
                   items_in=2**70, items_out=0),
    StageCompleted(run_id="r", seq=7, stage=PipelineStage.SCORE, duration_ms=1e300,
                   items_in=1, items_out=1),
]
_UNUSUAL: list[Any] = [
    StageStarted(run_id="r", seq=1, stage="Slice", items_in=3),
    StageStarted(run_id="r", seq=1, stage="custom %s", items_in=3),
    StageStarted(run_id="r", seq=True, stage=PipelineStage.SLICE, items_in=3),
    StageStarted(run_id="r", seq=1, stage=PipelineStage.SLICE, items_in=True),
    StageCompleted(run_id="r", seq=1, stage=PipelineStage.SLICE, duration_ms=float("nan"),
                   items_in=1, items_out=1),
    StageCompleted(run_id="r", seq=1, stage=PipelineStage.SLICE, duration_ms=3,
                   items_in=1, items_out=1),
]


def _definition(event: Any) -> bytes | type[Exception]:
    try:
        return (event_to_json(event) + "\n").encode()
    except CupelError as exc:
        return type(exc)


@pytest.mark.parametrize("event", _USUAL + _UNUSUAL)
def test_a_stage_line_is_the_definition_s(event: Any) -> None:
    """Every stage event, usual (quotes and % in the run id, huge and negative counts,
    -0.0 and 1e300 durations) or unusual (a stage as text, a bool count, a NaN or int
    duration), gives event_to_json's line, or the error event_to_json raises."""
    encoder = LineEncoder(ContentCapture.NONE)
    expected = _definition(event)
    if isinstance(expected, bytes):
        assert encoder.event_line(event) == expected
    else:
        with pytest.raises(expected):
            encoder.event_line(event)
