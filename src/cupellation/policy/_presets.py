"""The seven named presets of the .NET implementation (``CupelPresets``).

Source. The Cupel specification (``spec/src`` of wollax/cupel) does not define
the presets: it mentions ``CupelPolicy`` and an intent such as
``"code-review"`` only in passing (``spec/src/analytics/policy-sensitivity.md``).
A search of the documentation corpora found only the repository README's list
of names ("Available presets: Chat, CodeReview, Rag, DocumentQa, ToolUse,
LongRunning, Debugging"). The definitions below are the ones documented in
the project's design notes for that work, in wollax/cupel
``.planning/phases/completed/08-policy-system-named-presets/08-02-PLAN.md``
(its preset table: scorers with weights, slicer, placer) and the matching
``08-02-SUMMARY.md`` (every preset deduplicates and throws on overflow;
DocumentQa uses a knapsack of bucket size 100; Rag and DocumentQa place
U-shaped, the others chronologically). No implementation code was read.

=============  ======================================  =========  =============
Preset         Scorers (relative weight)               Slicer     Placer
=============  ======================================  =========  =============
Chat           Recency 3, Kind 1                       Greedy     Chronological
CodeReview     Kind 2, Priority 2, Recency 1           Greedy     Chronological
Rag            Reflexive 3, Kind 1                     Greedy     U-shaped
DocumentQa     Kind 2, Reflexive 2, Priority 1         Knapsack   U-shaped
ToolUse        Kind 2, Recency 2, Priority 1           Greedy     Chronological
LongRunning    Recency 3, Frequency 1, Kind 1          Greedy     Chronological
Debugging      Priority 3, Kind 2, Recency 1           Greedy     Chronological
=============  ======================================  =========  =============

Kind uses the specification's default kind weights. All presets: deduplication
on, overflow strategy Throw, no budget (pass one to ``build_pipeline``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .._model import OverflowStrategy, ascii_fold
from .._pipeline import Policy
from .._tables import suggest
from ..exceptions import InvalidTypeError, InvalidValueError
from ..placing import ChronologicalPlacer, Placer, UShapedPlacer
from ..scoring import (
    CompositeScorer,
    FrequencyScorer,
    KindScorer,
    PriorityScorer,
    RecencyScorer,
    ReflexiveScorer,
    Scorer,
)
from ..slicing import GreedySlice, KnapsackSlice, Slicer

__all__ = ["PRESET_NAMES", "get_preset", "presets"]


def _preset(name: str, description: str, scorers: tuple[tuple[Scorer, float], ...],
            slicer: Slicer, placer: Placer) -> Policy:
    return Policy(name=name, description=description, scorer=CompositeScorer(scorers),
                  slicer=slicer, placer=placer, deduplication=True,
                  overflow_strategy=OverflowStrategy.THROW)


_PRESETS: Mapping[str, Policy] = MappingProxyType({
    policy.name: policy for policy in (
        _preset("Chat",
                "Conversation: the latest turns matter most, then the kind of item.",
                ((RecencyScorer(), 3.0), (KindScorer(), 1.0)),
                GreedySlice(), ChronologicalPlacer()),
        _preset("CodeReview",
                "Code review: the kind of item and the caller's priorities weigh "
                "equally, recency breaks ties.",
                ((KindScorer(), 2.0), (PriorityScorer(), 2.0), (RecencyScorer(), 1.0)),
                GreedySlice(), ChronologicalPlacer()),
        _preset("Rag",
                "Retrieval: the caller's relevance hint leads; the best items sit at "
                "both edges of the window.",
                ((ReflexiveScorer(), 3.0), (KindScorer(), 1.0)),
                GreedySlice(), UShapedPlacer()),
        _preset("DocumentQa",
                "Questions over documents: kind and relevance hint, then priority; a "
                "knapsack packs the budget tightly and the best items sit at the edges.",
                ((KindScorer(), 2.0), (ReflexiveScorer(), 2.0), (PriorityScorer(), 1.0)),
                KnapsackSlice(bucket_size=100), UShapedPlacer()),
        _preset("ToolUse",
                "Agents calling tools: kind and recency weigh equally, then priority.",
                ((KindScorer(), 2.0), (RecencyScorer(), 2.0), (PriorityScorer(), 1.0)),
                GreedySlice(), ChronologicalPlacer()),
        _preset("LongRunning",
                "Long sessions: recency first, then items whose tags recur, then kind.",
                ((RecencyScorer(), 3.0), (FrequencyScorer(), 1.0), (KindScorer(), 1.0)),
                GreedySlice(), ChronologicalPlacer()),
        _preset("Debugging",
                "Debugging: the caller's priorities first (errors, failing output), "
                "then kind, then recency.",
                ((PriorityScorer(), 3.0), (KindScorer(), 2.0), (RecencyScorer(), 1.0)),
                GreedySlice(), ChronologicalPlacer()),
    ) if policy.name is not None
})

#: The preset names, in the .NET implementation's order.
PRESET_NAMES: tuple[str, ...] = tuple(_PRESETS)


def _fold(name: str) -> str:
    folded = ascii_fold(name)
    for separator in ("-", "_", " "):
        folded = folded.replace(separator, "")
    return folded


_BY_FOLDED = {_fold(name): policy for name, policy in _PRESETS.items()}


def presets() -> Mapping[str, Policy]:
    """The seven presets by name (a read-only mapping, in the .NET order)."""
    return _PRESETS


def get_preset(name: str) -> Policy:
    """The preset called ``name``, ignoring case, ``-``, ``_`` and spaces
    (``"codereview"``, ``"code-review"`` and ``"CodeReview"`` are the same).

    Raises :class:`~cupellation.exceptions.InvalidValueError` listing the
    names for an unknown one.
    """
    if not isinstance(name, str):
        raise InvalidTypeError("name", name, "a preset name (a string)")
    policy = _BY_FOLDED.get(_fold(name))
    if policy is None:
        raise InvalidValueError(
            "name", name,
            f"is not a preset{suggest(name, PRESET_NAMES)} (the presets are: "
            f"{', '.join(PRESET_NAMES)})",
        )
    return policy
