"""What every integration shares: the options, the run's ids, and the record of each
call (see :mod:`cupellation.integrations`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ..chat import MessageSelection, SelectOptions
from ..chat._options import merged_options
from ..events import RunInfo
from ..exceptions import InvalidTypeError

__all__ = ["Window"]


class Window:
    """The part of an integration that is not the framework's: its options, and what
    its calls chose.

    ``options`` (or the keywords, which replace its fields) say how each call
    selects; ``on_select`` is called with every call's
    :class:`~cupellation.chat.MessageSelection`; :attr:`last` is the last one and
    :attr:`calls` counts them. A run's ids from the framework fill the fields of
    ``options.run_info`` that the application left empty.
    """

    __slots__ = ("_calls", "_last", "_lock", "_on_select", "_options")

    def __init__(self, options: SelectOptions | None,
                 on_select: Callable[[MessageSelection[Sequence[object]]], None] | None,
                 keywords: Mapping[str, Any]) -> None:
        if on_select is not None and not callable(on_select):
            raise InvalidTypeError("on_select", on_select, "a callable or None")
        if not isinstance(keywords, Mapping):
            raise InvalidTypeError("keywords", keywords, "a mapping of SelectOptions fields")
        self._options = merged_options(options, keywords)
        self._on_select = on_select
        self._last: MessageSelection[Sequence[object]] | None = None
        self._calls = 0
        self._lock = threading.Lock()

    @property
    def options(self) -> SelectOptions:
        """The options every call selects with."""
        return self._options

    @property
    def last(self) -> MessageSelection[Sequence[object]] | None:
        """The last call's selection (None before the first call)."""
        return self._last

    @property
    def calls(self) -> int:
        """How many model calls were given a window."""
        return self._calls

    def options_for(self, *, session_id: str | None = None,
                    conversation_id: str | None = None) -> SelectOptions:
        """The options of one call: the framework's ids in the ``run_info`` fields the
        application left empty."""
        if session_id is None and conversation_id is None:
            return self._options
        given = self._options.run_info or RunInfo()
        info = msgspec.structs.replace(
            given, session_id=given.session_id or session_id,
            conversation_id=given.conversation_id or conversation_id)
        return self._options.replace(run_info=info)

    def record(self, selection: MessageSelection[Sequence[object]]) -> None:
        """Keep ``selection`` as :attr:`last` and hand it to ``on_select``."""
        with self._lock:
            self._last = selection
            self._calls += 1
        if self._on_select is not None:
            self._on_select(selection)
