"""Every exception cupellation raises on purpose.

The hierarchy::

    CupelError                                 base of everything below
    ├── InvalidValueError(CupelError, ValueError)
    │   │   a value is out of its allowed range or shape; ``.field`` and
    │   │   ``.value`` name the offending field and the value given
    │   ├── ConfigurationError                 a scorer, slicer, placer or
    │   │   │                                  pipeline was configured wrongly
    │   │   ├── CustomStrategyError            a recorded strategy table names a
    │   │   │                                  custom strategy (known by its
    │   │   │                                  repr only): it cannot be rebuilt
    │   │   └── NonMonotonicSlicerError        budget simulation was asked of a
    │   │                                      slicer whose inclusion is not
    │   │                                      monotonic in the budget (QuotaSlice,
    │   │                                      the count quota slicers)
    │   ├── SpecArgumentError                  an analytics argument the
    │   │                                      specification refuses, with its
    │   │                                      exact message
    │   ├── CountRequirementError              a count quota's require_count
    │   │                                      cannot be met and its scarcity
    │   │                                      behaviour is Throw
    │   ├── InvalidTextError                   a string holds a lone surrogate
    │   │                                      (U+D800..U+DFFF): not Unicode
    │   │                                      text, so no UTF-8 output (JSON,
    │   │                                      logs, spans) could hold it
    │   └── MetadataTooDeepError               metadata nests mappings and lists
    │                                          deeper than ContextItem's
    │                                          MAX_METADATA_DEPTH (64)
    ├── InvalidTypeError(CupelError, TypeError)
    │       a value has the wrong type (``tokens=True``, ``tokens="3"``);
    │       ``.field`` and ``.value`` as above
    ├── RunNotReplayableError                  a logged run cannot be run again: its
    │                                          log lacks what a re-run needs
    ├── PipelineError                          a run could not complete (also:
    │   │                                      a slicer or placer returned what
    │   │                                      is not a selection of its input)
    │   ├── PinnedBudgetError(PipelineError, ValueError)
    │   │       pinned items need more than ``maxTokens - outputReserve``
    │   ├── BudgetOverflowError(PipelineError)
    │   │       the Throw overflow strategy found the merged selection
    │   │       over ``targetTokens``
    │   ├── ScorerError(PipelineError, ValueError)
    │   │       a scorer returned NaN or infinity, something that is not a
    │   │       real number (text, None), or the wrong number of scores
    │   └── TableTooLargeError(PipelineError)
    │           a knapsack's DP table would exceed 50,000,000 cells (the
    │           specification's TableTooLarge); raised before allocating
    ├── DecodeError(CupelError, ValueError)
    │   │   JSON (an event, a report, an item) could not be decoded; names the
    │   │   field and value, and the line number where there is one
    │   └── FormatMismatchError                a chat message list given with
    │                                          ``format=`` holds a message that
    │                                          reads as another format, which it
    │                                          names (``.detected_format``)
    ├── BackendError                           a trace backend could not be asked,
    │   │                                      or could not answer (unreachable,
    │   │                                      refused, unknown project or trace)
    │   ├── RedirectRefusedError               a redirect to another origin, to a
    │   │                                      scheme other than http(s), or past
    │   │                                      the fifth hop; ``.target`` names it
    │   ├── MalformedAnswerError               the answer is not HTTP a client can
    │   │                                      trust (bad status line, too many or
    │   │                                      too long headers, a short body, bad
    │   │                                      chunked encoding)
    │   └── FetchLimitError                    the deadline (``timeout``), the body
    │       │                                  size or the request count was reached
    │       │                                  before anything whole was read;
    │       │                                  ``.limit`` names which
    │       └── PartialFetchError              the same, after part of the data was
    │                                          read: ``.spans`` holds it and
    │                                          ``.missing`` says what is not there
    └── StoreError                             the fleet store (``cupellation.store``)
        │                                      could not be reached or answer
        ├── StoreInUseError                    a second embedded (chDB) store was
        │                                      opened while another is open: chDB
        │                                      runs one engine per process
        └── StoreSchemaError                   ``otel_logs``/``otel_traces`` exist
                                               but not in the Collector's Map
                                               mode (its JSON mode, or columns
                                               missing)

Catch ``CupelError`` for anything cupellation raised, or the builtin
``ValueError`` / ``TypeError`` where you already do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "BackendError",
    "BudgetOverflowError",
    "ConfigurationError",
    "CountRequirementError",
    "CupelError",
    "CustomStrategyError",
    "DecodeError",
    "FetchLimitError",
    "FormatMismatchError",
    "InvalidTextError",
    "InvalidTypeError",
    "InvalidValueError",
    "MalformedAnswerError",
    "MetadataTooDeepError",
    "NonMonotonicSlicerError",
    "PartialFetchError",
    "PinnedBudgetError",
    "PipelineError",
    "RedirectRefusedError",
    "RunNotReplayableError",
    "ScorerError",
    "SpecArgumentError",
    "StoreError",
    "StoreInUseError",
    "StoreSchemaError",
    "TableTooLargeError",
]


class CupelError(Exception):
    """Base class of every exception cupellation raises deliberately.

    Every one pickles, so a failure in a worker process (``multiprocessing``,
    ``concurrent.futures``) reaches its parent whole: it is rebuilt from its
    message and attributes, not by calling ``__init__`` again, whose arguments
    differ from class to class.

    .. versionchanged:: 0.4
       Exceptions with more than one argument pickle (they failed to unpickle).
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(cls: type[CupelError], args: tuple[Any, ...], state: dict[str, Any]
             ) -> CupelError:
    """A pickled exception back, without calling its ``__init__``."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


#: How much of a value's repr an error message shows (the value itself is kept whole
#: on the exception): a megabyte of content must not become a megabyte of message.
_SHOWN_CHARS = 200


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except RecursionError:  # a container nested past the recursion limit
        return f"<{type(value).__name__} nested too deeply to show>"
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


class _FieldErrorMixin:
    """Carries the offending field name and value on a validation error."""

    field: str
    value: Any

    def _init_field(self, field: str, value: Any, problem: str) -> str:
        self.field = field
        self.value = value
        return f"{field}: {problem} (got {_shown(value)})"


class InvalidValueError(_FieldErrorMixin, CupelError, ValueError):
    """A value is outside what its field allows.

    ``str(err)`` reads ``"<field>: <problem> (got <value>)"``.
    """

    def __init__(self, field: str, value: Any, problem: str) -> None:
        super().__init__(self._init_field(field, value, problem))
        self.problem = problem


class ConfigurationError(InvalidValueError):
    """A scorer, slicer, placer or pipeline was given an invalid configuration."""


class CustomStrategyError(ConfigurationError):
    """A strategy table is ``{"type": "custom", "repr": ...}``: the record of a
    strategy that is not a built-in (a :class:`~cupellation.scoring.FunctionScorer`,
    a user's own slicer), which only its ``repr`` describes.

    Such a run reads like any other, but its pipeline cannot be rebuilt from the
    record. ``field`` is the path of the custom strategy (``scorer.children[1]``)
    and ``value`` its recorded ``repr``.
    """

    def __init__(self, field: str, value: Any) -> None:
        super().__init__(field, value, "is a custom strategy, recorded by its repr only; it "
                                       "cannot be rebuilt from the record (only built-in "
                                       "strategies can)")


class NonMonotonicSlicerError(ConfigurationError):
    """Budget simulation (``analytics/budget-simulation.md``) was asked of a pipeline
    whose slicer does not include items monotonically as the budget grows.

    ``str(err)`` is exactly the specification's message (its
    ``InvalidOperationException``); ``field`` is ``"slicer"`` and ``value`` the slicer.
    """

    def __init__(self, message: str, slicer: Any) -> None:
        super().__init__("slicer", slicer, message)
        self.args = (message,)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SpecArgumentError(InvalidValueError):
    """An argument the analytics chapters refuse (their ``ArgumentException``).

    ``str(err)`` is exactly the specification's message (``"searchCeiling must be
    >= targetItem.Tokens"``); ``field`` names the Python argument and ``value``
    holds what was given.
    """

    def __init__(self, message: str, *, field: str, value: Any) -> None:
        super().__init__(field, value, message)
        self.args = (message,)
        self.message = message

    def __str__(self) -> str:
        return self.message


class CountRequirementError(InvalidValueError):
    """A kind has fewer candidates than its ``require_count`` under ``ScarcityBehavior.THROW``.

    ``str(err)`` is exactly the specification's message, e.g.
    ``CountConstrainedKnapsackSlice: candidate pool for kind 'tool' has 1 items but
    RequireCount is 3.``; ``field`` is ``"require_count"`` and ``value`` the
    required count.
    """

    def __init__(self, message: str, *, kind: str, required_count: int,
                 satisfied_count: int) -> None:
        super().__init__("require_count", required_count, message)
        self.args = (message,)
        self.message = message
        self.kind = kind
        self.required_count = required_count
        self.satisfied_count = satisfied_count

    def __str__(self) -> str:
        return self.message


class InvalidTextError(InvalidValueError):
    """A string holds a lone surrogate code point (U+D800..U+DFFF).

    Such a string is not Unicode text: UTF-8 cannot encode it, so every output
    (JSON, log lines, span attributes) would fail on it later, far from the
    cause. The data model refuses it where it is built; ``field`` names the
    field (``content``, ``tags[2]``, ``metadata['a'][0]``, ...) and ``index``
    the position of the first lone surrogate.

    .. versionadded:: 0.3
    """

    def __init__(self, field: str, value: str, index: int) -> None:
        code = ord(value[index])
        super().__init__(field, value, f"holds a lone surrogate U+{code:04X} at index "
                                       f"{index}: not Unicode text, so no UTF-8 output "
                                       "could hold it")
        self.index = index


class MetadataTooDeepError(InvalidValueError):
    """Metadata nests mappings and lists deeper than the documented limit.

    ``ContextItem`` accepts ``ContextItem.MAX_METADATA_DEPTH`` (64) levels of containers,
    counting the metadata mapping itself; deeper data is refused at
    construction, so no encoder or decoder has to recurse without bound.
    ``field`` names where (``metadata['k'][0][...]``: the first two levels of the
    path, then ``[...]``) and ``limit`` is the limit.
    """

    def __init__(self, field: str, value: Any, limit: int) -> None:
        super().__init__(field, value, f"nests mappings and lists more than {limit} levels "
                                       "deep (the limit of ContextItem.metadata)")
        self.limit = limit


class InvalidTypeError(_FieldErrorMixin, CupelError, TypeError):
    """A value has the wrong type for its field."""

    def __init__(self, field: str, value: Any, expected: str) -> None:
        problem = f"must be {expected}, not {type(value).__name__}"
        super().__init__(self._init_field(field, value, problem))
        self.problem = problem


class RunNotReplayableError(CupelError):
    """A logged run cannot be run again (``cupellation.analytics``): ``cause`` says
    which of ``no_start``, ``not_full_detail``, ``content_dropped``,
    ``metadata_dropped``, ``custom_strategy``, ``incomplete`` or ``missing_events``, ``run_id``
    names the run, and ``str(err)`` says why in a sentence."""

    def __init__(self, run_id: str, cause: str, explanation: str) -> None:
        super().__init__(f"run {run_id} cannot be re-run: {explanation}")
        self.run_id = run_id
        self.cause = cause
        self.explanation = explanation


class PipelineError(CupelError):
    """A pipeline run could not complete."""


class PinnedBudgetError(PipelineError, ValueError):
    """Pinned items need more tokens than ``maxTokens - outputReserve`` allows."""

    def __init__(self, pinned_tokens: int, available_tokens: int, *, detail: str = "") -> None:
        super().__init__(
            f"Pinned items require {pinned_tokens} tokens, but only "
            f"{available_tokens} are available (maxTokens - outputReserve)"
            + (f": {detail}" if detail else "")
        )
        #: What the caller knows of the pinned items (select_messages names the
        #: messages and suggests trim=); empty from the pipeline itself.
        self.detail = detail
        self.pinned_tokens = pinned_tokens
        self.available_tokens = available_tokens


class BudgetOverflowError(PipelineError):
    """The merged selection exceeds ``targetTokens`` under the Throw strategy."""

    def __init__(self, merged_tokens: int, target_tokens: int) -> None:
        super().__init__(
            f"Selected items require {merged_tokens} tokens, "
            f"exceeding target budget of {target_tokens}"
        )
        self.merged_tokens = merged_tokens
        self.target_tokens = target_tokens


class ScorerError(PipelineError, ValueError):
    """A scorer produced an unusable result (NaN, infinity, text, wrong length).

    ``scorer`` names it, ``index`` is the candidate (or, inside a composite, the
    position) whose score was wrong when one was, and ``detail`` says what was wrong.
    """

    def __init__(self, scorer: str, index: int | None, detail: str) -> None:
        where = f" for candidate index {index}" if index is not None else ""
        super().__init__(f"scorer {scorer} {detail}{where}")
        self.scorer = scorer
        self.index = index
        self.detail = detail


class TableTooLargeError(PipelineError):
    """A knapsack's dynamic-programming table would exceed the cell limit.

    The specification's ``TableTooLarge``: raised by KnapsackSlice (and by
    CountConstrainedKnapsackSlice, whose phase 2 is a knapsack) before the
    table is allocated, when ``candidates * (capacity + 1)`` is above
    ``limit`` (50,000,000). ``candidates`` counts the items with a positive
    token count and ``capacity`` is ``floor(target_tokens / bucket_size)``.
    A larger ``bucket_size`` or a smaller target makes the table smaller.
    """

    def __init__(self, slicer: str, candidates: int, capacity: int, limit: int) -> None:
        cells = candidates * (capacity + 1)
        super().__init__(
            f"{slicer}: the DP table would need {cells:,} cells ({candidates:,} candidates "
            f"x {capacity + 1:,} capacity columns), more than the limit of {limit:,}; "
            f"use a larger bucket_size or a smaller target"
        )
        self.slicer = slicer
        self.candidates = candidates
        self.capacity = capacity
        self.cells = cells
        self.limit = limit


class DecodeError(CupelError, ValueError):
    """Serialized data could not be decoded."""

    def __init__(
        self, field: str, value: Any, problem: str, *, line: int | None = None
    ) -> None:
        where = f"line {line}: " if line is not None else ""
        super().__init__(f"{where}{field}: {problem} (got {_shown(value)})")
        self.field = field
        self.value = value
        self.problem = problem
        self.line = line


class FormatMismatchError(DecodeError):
    """A chat message list was given with ``format=`` (``select_messages``,
    ``select_messages_with_report``, ``MessageHistory``, ``ordering_problems``), but
    one of its messages reads as another format: an Anthropic ``tool_use`` block in
    a list given as ``"openai"``, say. Read in the format given, its tool exchanges
    would not be seen, and a window could break the provider's rules.

    ``field`` names the message (``messages[3]``), ``value`` is the message,
    ``given_format`` the format given and ``detected_format`` the one the message
    shows; ``str(err)`` says what shows it.
    """

    def __init__(self, field: str, value: Any, *, given_format: str, detected_format: str,
                 shown_by: str) -> None:
        super().__init__(field, value, f"{shown_by}: it reads as {detected_format}, not as "
                                       f"the format given ({given_format}); pass "
                                       f"format={detected_format!r}, or leave format= out "
                                       "to have the format recognised")
        self.given_format = given_format
        self.detected_format = detected_format
        self.shown_by = shown_by


class BackendError(CupelError):
    """A backend could not be asked, or could not answer what was asked (unreachable,
    unauthorised, an unknown project, experiment or trace). The message is one line
    and never holds a header's value.

    .. versionchanged:: 0.4
       Imported from ``cupellation.exceptions``; no longer from
       ``cupellation.otel``.
    """


class RedirectRefusedError(BackendError):
    """A redirect that is not followed: to another origin (scheme, host or port; the
    one exception is ``http`` on its default port to ``https`` on its default port of
    the same host), to a scheme other than ``http``/``https``, or past the fifth hop.
    ``target`` is the refused location, without its query or credentials.

    .. versionadded:: 0.4
    """

    def __init__(self, message: str, *, target: str) -> None:
        super().__init__(message)
        self.target = target


class MalformedAnswerError(BackendError):
    """An answer that is not well-formed HTTP: a bad status line (an HTTP/0.9 body),
    more than 100 headers, a header line over 64 KiB, a body shorter than its
    ``Content-Length``, bad chunked encoding, a connection closed mid-answer.

    .. versionadded:: 0.4
    """


class FetchLimitError(BackendError):
    """A fetch reached one of its bounds before any of the data asked for was read:
    ``limit`` is ``"timeout"`` (the deadline of the whole fetch), ``"max_body_bytes"``
    (one answer's size) or ``"max_requests"`` (requests per fetch).

    .. versionadded:: 0.4
    """

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class PartialFetchError(FetchLimitError):
    """A fetch reached one of its bounds (``limit``, as for :class:`FetchLimitError`)
    after part of the data was read. ``spans`` holds what was read whole (pages and
    traces), ``missing`` says in words what was not (``"4 of 10 traces"``), and
    ``requests`` counts the requests made. Nothing read is thrown away: a caller can
    show it, saying it is not whole.

    .. versionadded:: 0.4
    """

    def __init__(self, message: str, *, limit: str, spans: Sequence[Any], missing: str,
                 requests: int) -> None:
        super().__init__(message, limit=limit)
        self.spans = tuple(spans)
        self.missing = missing
        self.requests = requests
class StoreError(CupelError):
    """The fleet store could not be opened, reached or queried; the message names the
    store and what failed.

    .. versionadded:: 0.4
    """


class StoreInUseError(StoreError):
    """An embedded store (``chdb://``) was opened while another embedded path is open
    in this process: chDB runs one engine per process. Close the first store (or open
    the same path again) first. ``open_path`` is the path that is open.

    .. versionadded:: 0.4
    """

    def __init__(self, wanted: str, open_path: str) -> None:
        super().__init__(f"cannot open the embedded store at {wanted!r}: chDB runs one "
                         f"engine per process and {open_path!r} is open; close it first")
        self.wanted = wanted
        self.open_path = open_path


class StoreSchemaError(StoreError):
    """A table the store reads exists in a shape cupellation does not read: the
    Collector's JSON mode (``LogAttributes JSON``) or a column missing or of another
    type. ``table`` and ``column`` name it.

    .. versionadded:: 0.4
    """

    def __init__(self, table: str, column: str, problem: str) -> None:
        super().__init__(f"table {table}: column {column} {problem}")
        self.table = table
        self.column = column
        self.problem = problem
