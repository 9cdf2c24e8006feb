"""Declarative policies: a whole pipeline configuration as a value, a TOML or
JSON file, or one of seven named presets.

    from cupellation import CompositeScorer, ContextBudget, KindScorer, RecencyScorer
    from cupellation.policy import Policy, get_preset, load_policy

    pipeline = get_preset("chat").build_pipeline(ContextBudget(8000, 6000))
    policy = load_policy("policies/review.toml")
    print(policy.to_toml())
    mine = Policy(scorer=CompositeScorer([(RecencyScorer(), 2.0), (KindScorer(), 1.0)]))

A policy holds the built-in strategies themselves; each writes its own table
(``to_dict``) and reads it back (``from_dict``), and the strategy registry is
the one builder that policies, the conformance runner and
:meth:`~cupellation.Pipeline.from_policy` share.

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
``scorer.children[1].weight``, and the value. A decay scorer without
``reference_time`` reads the clock at run time (the one given to
``build_pipeline``, else the wall clock); in Python, ``reference_time`` is
``DecayScorer(curve, clock=FixedClock(moment))``.

A policy round-trips exactly: ``Policy.from_dict(p.to_dict()) == p``, and
``load_policy`` of ``p.to_toml()`` or ``p.to_json()`` gives ``p`` back.

.. versionchanged:: 0.4
   Placers, slicers and decay curves are imported from their own packages
   (``cupellation.placing``, ``cupellation.slicing``, ``cupellation.scoring``) only.
"""

from __future__ import annotations

from .._pipeline import Policy
from .._registry import PLACER_TYPES, SCORER_TYPES, SLICER_TYPES
from ._load import PolicyFormat, load_policy
from ._presets import PRESET_NAMES, get_preset, presets

__all__ = [
    "PLACER_TYPES",
    "PRESET_NAMES",
    "SCORER_TYPES",
    "SLICER_TYPES",
    "Policy",
    "PolicyFormat",
    "get_preset",
    "load_policy",
    "presets",
]
