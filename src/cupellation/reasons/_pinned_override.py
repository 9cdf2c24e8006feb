"""The exclusion reason ``PinnedOverride``:
the item would have fitted had the pinned items not taken the budget."""

from typing import ClassVar

from ._base import BaseExclusionReason, Rivals, register_exclusion_reason

__all__ = ["PinnedOverride"]


@register_exclusion_reason
class PinnedOverride(BaseExclusionReason, frozen=True, kw_only=True):
    """The item would have fitted had the pinned items not taken the budget.

    ``displaced_by`` is the pinned candidate's index in the event stream, and
    its content in a SelectionReport.
    """

    displaced_by: int | str

    word: ClassVar[str] = "pinned override"
    style: ClassVar[str] = "#9c36b5"

    def sentence(self) -> str:
        """The pinned items took the room."""
        return "it would have fitted had the pinned items not taken the budget"

    def counterfactual(self) -> str:
        """Fewer pinned tokens, or more budget."""
        return "fewer pinned tokens, or a larger budget, would leave room for it"

    def rivals(self) -> Rivals:
        """The pinned item that took the room."""
        return Rivals(kind="pinned", reference=self.displaced_by,
                      label="displaced by the pinned item", takes_room=True)
