"""Scorers (``spec/src/scorers``): the relevance score of every candidate item.

A scorer's :meth:`~Scorer.score_all` takes the scoreable items and returns one
score per item, in order. Built-ins are immutable and validate their
configuration when constructed::

    from datetime import timedelta
    from cupellation.scoring import (
        CompositeScorer, DecayScorer, ExponentialCurve, KindScorer, RecencyScorer, utc_now,
    )

    scorer = CompositeScorer([
        (RecencyScorer(), 3.0),
        (KindScorer(), 1.0),
        (DecayScorer(ExponentialCurve(half_life=timedelta(hours=24)), clock=utc_now), 1.0),
    ])
    scores = scorer.score_all(items)

Custom scoring is a plain function ``fn(item, all_items) -> float`` wrapped in
:class:`FunctionScorer`, or a subclass of :class:`ScorerBase`. :func:`score_array`
checks what a scorer returned, as the pipeline and the composites do.
"""

from __future__ import annotations

from ._base import FunctionScorer, Scorer, ScorerBase, ScorerFunction, score_array
from ._composite import CompositeScorer, ScaledScorer
from ._decay import DecayCurve, DecayScorer, ExponentialCurve, StepCurve, WindowCurve, utc_now
from ._frequency import FrequencyScorer
from ._kind import DEFAULT_KIND_WEIGHTS, KindScorer
from ._metadata import TRUST_KEY, MetadataKeyScorer, MetadataTrustScorer
from ._rank import PriorityScorer, RecencyScorer
from ._reflexive import ReflexiveScorer
from ._tag import TagScorer

__all__ = [
    "DEFAULT_KIND_WEIGHTS",
    "TRUST_KEY",
    "CompositeScorer",
    "DecayCurve",
    "DecayScorer",
    "ExponentialCurve",
    "FrequencyScorer",
    "FunctionScorer",
    "KindScorer",
    "MetadataKeyScorer",
    "MetadataTrustScorer",
    "PriorityScorer",
    "RecencyScorer",
    "ReflexiveScorer",
    "ScaledScorer",
    "Scorer",
    "ScorerBase",
    "ScorerFunction",
    "StepCurve",
    "TagScorer",
    "WindowCurve",
    "score_array",
    "utc_now",
]
