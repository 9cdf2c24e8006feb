"""The Cupel data model: ContextItem, ContextKind, ContextSource, ContextBudget,
OverflowStrategy and ScoredItem (``spec/src/data-model``).

The definitions live in :mod:`cupellation._datamodel`; this module gathers the
names the rest of the package uses. The wire shapes of ContextItem and
ContextBudget are declared once, in :mod:`cupellation._datamodel.wire`.
"""

from __future__ import annotations

from ._datamodel.budget import ContextBudget, OverflowStrategy, effective_limits
from ._datamodel.item import ContextItem
from ._datamodel.jsondata import (
    EMPTY_METADATA,
    MAX_METADATA_DEPTH,
    check_finite,
    first_wide_int,
    fits_int64,
    format_timestamp,
    freeze_json,
    parse_timestamp,
    thaw_json,
)
from ._datamodel.names import ContextKind, ContextSource, ascii_fold, check_text, listed, tupled
from ._datamodel.scored import CountRequirementShortfall, ScoredItem, ScoredItems, items_tokens

__all__ = [
    "EMPTY_METADATA",
    "MAX_METADATA_DEPTH",
    "ContextBudget",
    "ContextItem",
    "ContextKind",
    "ContextSource",
    "CountRequirementShortfall",
    "OverflowStrategy",
    "ScoredItem",
    "ScoredItems",
    "ascii_fold",
    "check_finite",
    "check_text",
    "effective_limits",
    "first_wide_int",
    "fits_int64",
    "format_timestamp",
    "freeze_json",
    "items_tokens",
    "listed",
    "parse_timestamp",
    "thaw_json",
    "tupled",
]
