"""Why a candidate was excluded or included (``spec/src/diagnostics/exclusion-reasons.md``).

Import it to tell reasons apart in a report (``isinstance(entry.reason,
BudgetExceeded)``), to decode one from JSON, or to register a reason of your own
(:func:`register_exclusion_reason`).

Every reason is a frozen, slotted value built by keyword and read by name::

    BudgetExceeded(item_tokens=400, available_tokens=120).available_tokens

``reason.name`` is the wire discriminator (the variant's name). Two variants
point at another candidate: :class:`Deduplicated` (the copy that was kept) and
:class:`PinnedOverride` (the pinned item that took the room). In the event
stream they hold that candidate's **index**, so no reason ever carries another
item's content and a sink's content-capture policy applies in one place; a
SelectionReport resolves the index to the item's content, which is the wire format's
wire form (``"deduplicated_against": "<content>"``).

The wire envelope is ``{"reason": "<Name>", ...fields}`` with absent fields
omitted, never null (:func:`reason_to_dict`, :func:`exclusion_reason_from_dict`).

A reason also says what it means, beside its fields, so that nothing else lists
reasons: its :meth:`~BaseExclusionReason.sentence` (``cupellation why``), its
:meth:`~BaseExclusionReason.counterfactual` and ``budget_helps`` (what would have
kept the item; ``replay``), its :meth:`~BaseExclusionReason.rivals` (what took
its place), its ``word`` (span summaries), its ``style`` (the HTML badge) and its
``tokens_field`` (the field that must equal the item's tokens, checked when a
report is rebuilt). A reason this version does not know is explained as
unknown, never as another reason. A new built-in reason is one module in this
package, its class decorated with :func:`register_exclusion_reason`, and one
import line below; an application registers its own the same way.
"""

from ._base import (
    KNOWN_EXCLUSION_REASONS,
    BaseExclusionReason,
    ExclusionReason,
    InclusionReason,
    Rivals,
    UnknownExclusionReason,
    exclusion_reason_from_dict,
    inclusion_reason_from_dict,
    reason_field_types,
    reason_fields,
    reason_styles,
    reason_to_dict,
    reason_word,
    reference_fields,
    references_of,
    register_exclusion_reason,
    unregister_exclusion_reason,
)

# The built-in reasons, one module each (importing one registers it).
from ._budget import BudgetExceeded
from ._count_cap import CountCapExceeded
from ._count_require import CountRequireCandidatesExhausted
from ._deduplicated import Deduplicated
from ._filtered import Filtered
from ._negative_tokens import NegativeTokens
from ._pinned_override import PinnedOverride
from ._quota_cap import QuotaCapExceeded
from ._quota_require import QuotaRequireDisplaced
from ._scored_too_low import ScoredTooLow

__all__ = [
    "KNOWN_EXCLUSION_REASONS",
    "REFERENCE_FIELDS",
    "RESERVED_EXCLUSION_REASONS",
    "BaseExclusionReason",
    "BudgetExceeded",
    "CountCapExceeded",
    "CountRequireCandidatesExhausted",
    "Deduplicated",
    "ExclusionReason",
    "Filtered",
    "InclusionReason",
    "NegativeTokens",
    "PinnedOverride",
    "QuotaCapExceeded",
    "QuotaRequireDisplaced",
    "Rivals",
    "ScoredTooLow",
    "UnknownExclusionReason",
    "exclusion_reason_from_dict",
    "inclusion_reason_from_dict",
    "reason_field_types",
    "reason_fields",
    "reason_styles",
    "reason_to_dict",
    "reason_word",
    "references_of",
    "register_exclusion_reason",
    "unregister_exclusion_reason",
]

#: Variants no built-in stage emits (the specification reserves them).
RESERVED_EXCLUSION_REASONS: frozenset[str] = frozenset(
    name for name, cls in KNOWN_EXCLUSION_REASONS.items() if cls.reserved)

#: Reason fields that refer to another candidate (an index in events).
REFERENCE_FIELDS: frozenset[str] = reference_fields()
