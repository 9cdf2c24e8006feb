"""The exclusion reason ``Filtered``: reserved: excluded by a user-defined filter predicate."""

from typing import ClassVar

from ._base import BaseExclusionReason, register_exclusion_reason

__all__ = ["Filtered"]


@register_exclusion_reason
class Filtered(BaseExclusionReason, frozen=True, kw_only=True):
    """Reserved: excluded by a user-defined filter predicate."""

    reserved: ClassVar[bool] = True
    filter_name: str

    word: ClassVar[str] = "filtered"
    budget_helps: ClassVar[bool] = False

    def sentence(self) -> str:
        """The filter that refused it."""
        return f"the filter {self.filter_name} refused it"

    def counterfactual(self) -> str:
        """Nothing but the filter."""
        return f"the filter {self.filter_name} refuses it"
