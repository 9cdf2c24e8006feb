"""The exclusion reason ``CountRequireCandidatesExhausted``:
defined for forward compatibility with count-quota diagnostics; not emitted."""

from typing import ClassVar

from ._base import BaseExclusionReason, register_exclusion_reason

__all__ = ["CountRequireCandidatesExhausted"]


@register_exclusion_reason
class CountRequireCandidatesExhausted(BaseExclusionReason, frozen=True, kw_only=True):
    """Defined for forward compatibility with count-quota diagnostics; not emitted.

    A shortfall excludes no item: cupellation reports it as a
    :class:`~cupellation.events.CountShortfall` event instead.
    """

    reserved: ClassVar[bool] = True
    kind: str

    word: ClassVar[str] = "count requirement"

    def sentence(self) -> str:
        """The kind ran out of candidates."""
        return f"the candidates of kind {self.kind} ran out"
