"""``SelectOptions``: the selection options every message entry point shares, as one
frozen value.

:func:`~cupellation.select_messages`, :func:`~cupellation.select_messages_with_report`,
:class:`~cupellation.MessageHistory` and the agent-framework integrations
(:mod:`cupellation.integrations`) take one :class:`SelectOptions`; their keyword
arguments (``max_tokens=8000``) are sugar for the same fields, and a keyword given
beside an options value replaces that field of it. An entry point added later takes
the value too, instead of copying its fields again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict, Unpack

from .._collectors import TraceCollector
from .._model import ContextBudget, ContextKind
from .._pipeline import Pipeline
from ..events import RunInfo
from ..exceptions import ConfigurationError, InvalidTypeError, InvalidValueError
from ..policy import Policy
from ._messages import FORMATS, MessageFormat
from ._tokens import CounterSpec, TextCounter
from ._trim import check_limits

__all__ = ["SelectKeywords", "SelectOptions", "ThinkingMode", "TrimLimits", "merged_options"]

#: What happens to Anthropic thinking blocks of kept messages (see SelectOptions).
ThinkingMode = Literal["keep", "strip_after_change"]
#: Token limits per kind (``trim``): kind names or kinds to limits. Three mappings,
#: because a mapping's key type is invariant (a ``dict[str, int]`` is not a
#: ``Mapping[str | ContextKind, int]``).
TrimLimits = Mapping[str, int] | Mapping[ContextKind, int] | Mapping[str | ContextKind, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectOptions:
    """How messages are selected: the budget, the policy, how they are read and
    counted, and where the run is recorded. Frozen; :meth:`replace` gives a changed
    copy. Every field has a default, so ``SelectOptions(max_tokens=8000)`` is whole.

    - The budget: ``max_tokens`` (and ``target_tokens``, default ``max_tokens``), or
      ``budget``, or the policy's own.
    - ``policy``: a :class:`~cupellation.policy.Policy`, a preset name (default
      ``"chat"``) or a :class:`~cupellation.Pipeline`. Whatever its placer, units
      are placed in conversation order, and nothing is deduplicated.
    - ``collector`` receives each run's events (spans, logs, a report);
      ``run_info`` (a :class:`~cupellation.RunInfo`: session, user, conversation)
      is recorded in each run's ``run_started`` event with the token counter used.
    - ``token_counter``: ``"auto"``, ``"o200k_base"``, ``"cl100k_base"``,
      ``"estimate"`` or a callable ``text -> int`` (see :mod:`cupellation.chat`).
    - ``trim``: token limits per kind, such as ``{"ToolOutput": 800}``: a message or
      tool result over its limit is cut to its head and tail before units are made.
    - ``format``: ``"openai"``, ``"openai-responses"``, ``"anthropic"`` or
      ``"langchain"``; recognised when None.
    - ``anthropic_thinking``: ``"keep"`` sends thinking blocks unchanged;
      ``"strip_after_change"`` removes them from the kept assistant messages after
      the first message left out or trimmed, except the current turn's first
      assistant message, which Anthropic requires to start with its thinking block.

    The fields are checked when the value is made: a wrong one raises
    :class:`~cupellation.exceptions.InvalidValueError` or
    :class:`~cupellation.exceptions.InvalidTypeError` naming it.

    .. versionadded:: 0.4
    """

    max_tokens: int | None = None
    target_tokens: int | None = None
    budget: ContextBudget | None = None
    policy: Policy | Pipeline | str | None = None
    collector: TraceCollector | None = None
    token_counter: CounterSpec | TextCounter = "auto"
    trim: TrimLimits | None = None
    format: MessageFormat | None = None
    anthropic_thinking: ThinkingMode = "keep"
    run_info: RunInfo | None = None

    def __post_init__(self) -> None:
        if self.anthropic_thinking not in ("keep", "strip_after_change"):
            raise InvalidValueError("anthropic_thinking", self.anthropic_thinking,
                                    "must be 'keep' or 'strip_after_change'")
        if self.format is not None and self.format not in FORMATS:
            raise InvalidValueError("format", self.format,
                                    f"must be one of {', '.join(FORMATS)} or None")
        for name in ("max_tokens", "target_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidTypeError(name, value, "an integer or None")
        if self.budget is not None:
            if not isinstance(self.budget, ContextBudget):
                raise InvalidTypeError("budget", self.budget, "a ContextBudget or None")
            if self.max_tokens is not None or self.target_tokens is not None:
                raise ConfigurationError("budget", self.budget,
                                         "give either budget= or max_tokens= / target_tokens=")
        if self.run_info is not None and not isinstance(self.run_info, RunInfo):
            raise InvalidTypeError("run_info", self.run_info, "a RunInfo or None")
        check_limits(self.trim)  # raises naming the kind or the limit

    @staticmethod
    def merge(options: SelectOptions | None, keywords: SelectKeywords) -> SelectOptions:
        """``options`` (None: the defaults) with the fields named in ``keywords``
        replaced: what an entry point taking both an options value and keyword sugar
        selects with. A budget given as keywords replaces the options' budget value
        and the other way round."""
        return merged_options(options, keywords)

    def replace(self, **changes: Unpack[SelectKeywords]) -> SelectOptions:
        """A copy with ``changes`` (field names as keywords), checked again."""
        return dataclasses.replace(self, **changes)


class SelectKeywords(TypedDict, total=False):
    """The keyword form of :class:`SelectOptions` (each key one of its fields, of the
    field's type): what ``**keywords: Unpack[SelectKeywords]`` accepts in every entry
    point. A test holds its keys and types equal to the dataclass's fields."""

    max_tokens: int | None
    target_tokens: int | None
    budget: ContextBudget | None
    policy: Policy | Pipeline | str | None
    collector: TraceCollector | None
    token_counter: CounterSpec | TextCounter
    trim: TrimLimits | None
    format: MessageFormat | None
    anthropic_thinking: ThinkingMode
    run_info: RunInfo | None


_DEFAULT = SelectOptions()
_FIELDS = frozenset(field.name for field in dataclasses.fields(SelectOptions))


def merged_options(options: SelectOptions | None, keywords: Mapping[str, Any]
                   ) -> SelectOptions:
    """``options`` (default: every field's default) with the fields ``keywords``
    give replaced; a budget given as keywords replaces the options' budget and the
    other way round, so the two forms never meet in one value. (The entry points'
    keywords arrive typed as ``SelectKeywords``; any mapping is taken here, checked
    by name and by the dataclass, because the integrations add their format to it.)"""
    if options is None:
        options = _DEFAULT
    elif not isinstance(options, SelectOptions):
        raise InvalidTypeError("options", options, "a SelectOptions or None")
    if not keywords:
        return options
    if not _FIELDS.issuperset(keywords):
        unknown = sorted(set(keywords) - _FIELDS)
        raise InvalidValueError(unknown[0], keywords[unknown[0]],
                                f"is not an option (the options are {', '.join(sorted(_FIELDS))})")
    if options is _DEFAULT:  # the common call: keywords alone, made at once
        return SelectOptions(**keywords)
    changes = dict(keywords)
    if "budget" in changes and changes["budget"] is not None:
        changes.setdefault("max_tokens", None)
        changes.setdefault("target_tokens", None)
    elif changes.get("max_tokens") is not None or changes.get("target_tokens") is not None:
        changes.setdefault("budget", None)
    return dataclasses.replace(options, **changes)
