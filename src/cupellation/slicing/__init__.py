"""Slicers: choosing the scored items that fit the token budget
(``spec/src/slicers.md``).

The built-in slicers are also importable from :mod:`cupellation`; import this
module for their quota entries, for :class:`Slicer` when you write a slicer of
your own, and for what a slicer reports beside its choice.

- :class:`GreedySlice` — value density (score per token), highest first.
- :class:`KnapsackSlice` — 0/1 knapsack over discretised token counts.
- :class:`QuotaSlice` — per-kind percentage budgets around an inner slicer.
- :class:`CountQuotaSlice` — per-kind item counts (require/cap) around an
  inner slicer.
- :class:`CountConstrainedKnapsackSlice` — the same counts around a knapsack.

Any object with a ``slice(scored, budget, /)`` method satisfies
:class:`Slicer`; :func:`slice_with_details` also returns the cap exclusions
and count shortfalls of slicers that record them. A slicer's input is a
sequence of :class:`~cupellation.ScoredItem` (an item and its score), as the Sort stage
hands it; :class:`ScoredItems` is the pipeline's column-wise form of it.

Every built-in slicer is an immutable value with a table form, the ``slicer``
of a policy file and of ``run_started``'s record: ``type_name``
(``"count_quota"``), ``to_dict()`` and ``from_dict(table)``; an inner slicer
is a nested table. Adding a built-in slicer: its module (the class with
``type_name``, ``settings``, ``to_dict``/``from_dict`` and
``@SLICERS.register``), its export here, its test, and the slicer list in
``cupellation.policy``'s doc.
"""

from __future__ import annotations

from .._model import ScoredItems
from ._count_quota import CountConstrainedKnapsackSlice, CountQuotaEntry, CountQuotaSlice
from ._greedy import GreedySlice
from ._knapsack import KnapsackSlice
from ._protocol import (
    CapExclusion,
    CountRequirementShortfall,
    DetailedSlicer,
    ScarcityBehavior,
    SliceOutcome,
    Slicer,
    slice_with_details,
)
from ._quota import QuotaEntry, QuotaSlice

__all__ = [
    "CapExclusion",
    "CountConstrainedKnapsackSlice",
    "CountQuotaEntry",
    "CountQuotaSlice",
    "CountRequirementShortfall",
    "DetailedSlicer",
    "GreedySlice",
    "KnapsackSlice",
    "QuotaEntry",
    "QuotaSlice",
    "ScarcityBehavior",
    "ScoredItems",
    "SliceOutcome",
    "Slicer",
    "slice_with_details",
]
