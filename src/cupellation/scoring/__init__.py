"""Scorers (``spec/src/scorers``): the relevance score of every candidate item.

The built-in scorers are also importable from :mod:`cupellation`; import this
module for the decay curves and clocks, and for :class:`Scorer`,
:class:`ScorerBase` and :class:`FunctionScorer` when you write a scorer of your own.

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

Every built-in scorer (and decay curve) compares by value and has a table
form, the ``scorer`` of a policy file and of ``run_started``'s record:
``type_name`` (``"recency"``), ``to_dict()`` and ``from_dict(table)``::

    CompositeScorer([(RecencyScorer(), 3.0), (KindScorer(), 1.0)]).to_dict()
    # {"type": "composite", "children": [{"type": "recency", "weight": 3.0},
    #                                    {"type": "kind", "weight": 1.0}]}

A decay scorer's clock is in its table only as a :class:`FixedClock`
(``reference_time``); any other clock stands for "the time of the run".

Adding a built-in scorer: its module (the class with ``type_name``,
``settings``, ``to_dict``/``from_dict`` and ``@SCORERS.register``), its
export here, its test, and the scorer list in ``cupellation.policy``'s doc.
"""

from __future__ import annotations

from ._base import Clock, FunctionScorer, Scorer, ScorerBase, ScorerFunction, score_array
from ._composite import CompositeScorer, ScaledScorer
from ._decay import (
    DecayCurve,
    DecayScorer,
    ExponentialCurve,
    FixedClock,
    StepCurve,
    WindowCurve,
    utc_now,
)
from ._frequency import FrequencyScorer
from ._kind import DEFAULT_KIND_WEIGHTS, KindScorer
from ._metadata import TRUST_KEY, MetadataKeyScorer, MetadataTrustScorer
from ._rank import PriorityScorer, RecencyScorer
from ._reflexive import ReflexiveScorer
from ._tag import TagScorer

__all__ = [
    "DEFAULT_KIND_WEIGHTS",
    "TRUST_KEY",
    "Clock",
    "CompositeScorer",
    "DecayCurve",
    "DecayScorer",
    "ExponentialCurve",
    "FixedClock",
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
