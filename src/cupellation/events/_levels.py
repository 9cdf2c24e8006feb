"""What a sink records and how much item content it keeps: the shared enums of the
event layer (the pipeline, the report fold, logs and spans all read them)."""

from __future__ import annotations

import enum

from ..exceptions import InvalidValueError
from ..settings import CAPTURE_ENV_VAR, read, warn_invalid

__all__ = ["ContentCapture", "TraceDetailLevel", "resolve_capture"]


class TraceDetailLevel(enum.IntEnum):
    """How much a collector records, matching the OpenTelemetry chapter's tiers.

    ``STAGE_ONLY`` (run and stage events), ``STAGE_AND_EXCLUSIONS`` (those plus
    one event per excluded candidate) and ``FULL`` (plus one per included
    candidate: everything). ``STAGE`` and ``ITEM`` are the names of the first
    and last level from before the middle tier existed.
    """

    STAGE_ONLY = 0
    STAGE_AND_EXCLUSIONS = 1
    FULL = 2
    STAGE = 0
    ITEM = 2

    @property
    def tier(self) -> str:
        """The tier's name in the OpenTelemetry chapter (``"StageAndExclusions"``)."""
        return _TIERS[self]

    @classmethod
    def parse(cls, value: TraceDetailLevel | str | int) -> TraceDetailLevel:
        """A member, its value, its name, or the chapter's tier name (any case)."""
        if isinstance(value, bool):
            raise InvalidValueError("detail_level", value, "must be a TraceDetailLevel")
        if isinstance(value, int):
            try:
                return cls(value)
            except ValueError:
                pass
        elif isinstance(value, str):
            wanted = value.replace("_", "").replace("-", "").lower()
            for member_name, member in cls.__members__.items():
                if wanted in (member_name.replace("_", "").lower(), member.tier.lower()):
                    return member
        raise InvalidValueError("detail_level", value,
                                "must be StageOnly, StageAndExclusions or Full")


_TIERS = {TraceDetailLevel.STAGE_ONLY: "StageOnly",
          TraceDetailLevel.STAGE_AND_EXCLUSIONS: "StageAndExclusions",
          TraceDetailLevel.FULL: "Full"}


class ContentCapture(enum.Enum):
    """How much item content a projection keeps (see
    :func:`~cupellation.events.apply_content_capture`).

    ``FULL`` keeps it; ``HASH`` replaces it with ``sha256:<hex>`` (equal content
    stays equal) and drops metadata; ``NONE`` replaces it with a placeholder
    naming the candidate index and drops metadata.
    """

    FULL = "full"
    HASH = "hash"
    NONE = "none"

    @classmethod
    def parse(cls, value: ContentCapture | str) -> ContentCapture:
        """Accept a member or its name (``"hash"``), case-insensitively."""
        if isinstance(value, ContentCapture):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.value == value.strip().lower():
                    return member
        raise InvalidValueError("content_capture", value, "must be 'full', 'hash' or 'none'")


def resolve_capture(value: ContentCapture | str | None, default: ContentCapture
                    ) -> ContentCapture:
    """The content capture in force: ``value`` when given (a bad one raises
    :class:`~cupellation.exceptions.InvalidValueError`), else
    ``CUPELLATION_CAPTURE_CONTENT`` when set and not empty, else ``default``.

    An invalid variable warns once and ``default`` applies.
    """
    if value is not None:
        return ContentCapture.parse(value)
    text = (read(CAPTURE_ENV_VAR) or "").strip()
    if not text:
        return default
    try:
        return ContentCapture.parse(text)
    except ValueError:
        warn_invalid(CAPTURE_ENV_VAR, text, f"is not full, hash or none; the default "
                   f"({default.value}) applies")
        return default
