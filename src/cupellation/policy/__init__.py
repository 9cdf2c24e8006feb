"""Declarative policies: a whole pipeline configuration as a value, a TOML or
JSON file, or one of seven named presets.

    from cupellation import ContextBudget
    from cupellation.policy import get_preset, load_policy

    pipeline = get_preset("chat").build_pipeline(ContextBudget(8000, 6000))
    policy = load_policy("policies/review.toml")
    print(policy.to_toml())

A policy file (TOML shown; JSON has the same shape)::

    name = "review"
    deduplication = true
    overflow_strategy = "Truncate"          # Throw | Truncate | Proceed

    [scorer]
    type = "composite"

    [[scorer.children]]
    type = "recency"
    weight = 2.0

    [[scorer.children]]
    type = "scaled"
    weight = 1.0
    inner = { type = "priority" }

    [[scorer.children]]
    type = "decay"
    weight = 1.0
    curve = { type = "exponential", half_life = "24h" }

    [slicer]
    type = "count_quota"
    inner = { type = "greedy" }
    entries = [{ kind = "ToolOutput", require_count = 1, cap_count = 3 }]

    [placer]
    type = "u_shaped"

    [budget]                                # optional
    max_tokens = 8000
    target_tokens = 6000
    output_reserve = 1000

Scorer types: ``recency``, ``priority``, ``frequency``, ``reflexive`` (no
settings); ``kind`` (``weights``, a table of kind to weight; omitted: the
specification's defaults); ``tag`` (``tag_weights``, ``case_sensitive``);
``metadata_trust`` (``default_score``); ``metadata_key`` (``key``, ``value``,
``boost``); ``decay`` (``curve``, ``null_timestamp_score``, ``reference_time``;
curves ``exponential`` with ``half_life``, ``window`` with ``max_age``,
``step`` with ``windows = [{max_age, score}, ...]``; durations are text such
as ``"90s"``, ``"15m"``, ``"24h"``, ``"7d"``, ``"1h30m"`` or a number of
seconds); ``scaled`` (``inner``, a scorer); ``composite`` (``children``: each
a scorer table with a ``weight``; composites nest).

Slicer types: ``greedy``; ``knapsack`` (``bucket_size``); ``quota`` (``inner``,
``quotas = [{kind, require, cap}]``, percentages); ``count_quota`` (``inner``,
``entries = [{kind, require_count, cap_count}]``, ``scarcity`` Degrade or
Throw); ``count_constrained_knapsack`` (``entries``, ``bucket_size``,
``scarcity``). Placer types: ``chronological``, ``u_shaped``.

Type names ignore case, ``-`` and ``_`` and a class suffix
(``"MetadataTrustScorer"`` works). Unknown keys are refused with a "did you
mean" suggestion; every error names its path, such as
``scorer.children[1].weight``, and the value.

A policy round-trips exactly: ``Policy.from_dict(p.to_dict()) == p``, and
``load_policy`` of ``p.to_toml()`` or ``p.to_json()`` gives ``p`` back.
"""

from __future__ import annotations

from ..placing import ChronologicalPlacer, UShapedPlacer
from ..scoring import ExponentialCurve, StepCurve, WindowCurve
from ..slicing import (
    CountConstrainedKnapsackSlice,
    CountQuotaEntry,
    CountQuotaSlice,
    GreedySlice,
    KnapsackSlice,
    QuotaEntry,
    QuotaSlice,
)
from ._load import PolicyFormat, load_policy
from ._policy import PLACER_TYPES, SLICER_TYPES, PlacerSpec, Policy, SlicerSpec
from ._presets import PRESET_NAMES, get_preset, presets
from ._scorers import (
    SCORER_TYPES,
    CompositeChild,
    CompositeSpec,
    DecaySpec,
    FrequencySpec,
    KindSpec,
    MetadataKeySpec,
    MetadataTrustSpec,
    PrioritySpec,
    RecencySpec,
    ReflexiveSpec,
    ScaledSpec,
    ScorerSpec,
    TagSpec,
)

__all__ = [
    "PLACER_TYPES",
    "PRESET_NAMES",
    "SCORER_TYPES",
    "SLICER_TYPES",
    "ChronologicalPlacer",
    "CompositeChild",
    "CompositeSpec",
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "DecaySpec",
    "ExponentialCurve",
    "FrequencySpec",
    "GreedySlice",
    "KindSpec",
    "KnapsackSlice",
    "MetadataKeySpec",
    "MetadataTrustSpec",
    "PlacerSpec",
    "Policy",
    "PolicyFormat",
    "PrioritySpec",
    "QuotaEntry",
    "QuotaSlice",
    "RecencySpec",
    "ReflexiveSpec",
    "ScaledSpec",
    "ScorerSpec",
    "SlicerSpec",
    "StepCurve",
    "TagSpec",
    "UShapedPlacer",
    "WindowCurve",
    "get_preset",
    "load_policy",
    "presets",
]
