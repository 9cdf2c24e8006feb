"""The exclusion reason ``Deduplicated``:
a byte-exact duplicate of another candidate that scored at least as high."""

from typing import ClassVar

from ._base import BaseExclusionReason, Rivals, register_exclusion_reason

__all__ = ["Deduplicated"]


@register_exclusion_reason
class Deduplicated(BaseExclusionReason, frozen=True, kw_only=True):
    """A byte-exact duplicate of another candidate that scored at least as high.

    ``deduplicated_against`` is the kept candidate's index in the event
    stream, and its content in a SelectionReport.
    """

    deduplicated_against: int | str

    word: ClassVar[str] = "duplicate"
    style: ClassVar[str] = "#868e96"
    budget_helps: ClassVar[bool] = False

    def sentence(self) -> str:
        """The copy kept instead."""
        return "a copy with the same content scored at least as high and is kept instead"

    def counterfactual(self) -> str:
        """Nothing: the copy is kept."""
        return "a copy with the same content is kept instead (deduplication)"

    def rivals(self) -> Rivals:
        """The copy that was kept (it takes no room of this item's)."""
        return Rivals(kind="duplicate", reference=self.deduplicated_against,
                      label="a copy was kept")
