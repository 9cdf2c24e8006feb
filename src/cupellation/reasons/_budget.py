"""The exclusion reason ``BudgetExceeded``:
the item did not fit in the tokens still available (Slice, or Place under Truncate)."""

from typing import ClassVar

from ._base import BaseExclusionReason, Rivals, register_exclusion_reason

__all__ = ["BudgetExceeded"]


@register_exclusion_reason
class BudgetExceeded(BaseExclusionReason, frozen=True, kw_only=True):
    """The item did not fit in the tokens still available (Slice, or Place under Truncate)."""

    item_tokens: int
    available_tokens: int

    word: ClassVar[str] = "budget"
    style: ClassVar[str] = "#e8590c"
    tokens_field: ClassVar[str | None] = "item_tokens"

    def sentence(self) -> str:
        """The item's tokens against the room left."""
        return (f"it needs {self.item_tokens:,} tokens and {self.available_tokens:,} "
                "were left in the budget")

    def counterfactual(self) -> str:
        """A larger budget."""
        return "a budget with room for its tokens would include it"

    def rivals(self) -> Rivals:
        """The included items that scored at least as high."""
        return Rivals(kind="higher score", higher_scored=True)
