"""The event declarations: every decision a run makes, as typed, sequenced events.

Each event is declared here once, as a frozen, slotted ``msgspec`` struct built
by keyword and read by name; the flat form (:mod:`.flat`), the canonical lines
(:mod:`.lines`) and the log reader's typed records (:mod:`.records`) are all
derived from these declarations.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar, Final, TypeAlias

import msgspec

from .._model import ContextBudget, ContextItem
from ..exceptions import InvalidTypeError
from ..reasons import ExclusionReason, InclusionReason

__all__ = [
    "KNOWN_EVENTS",
    "PIPELINE_KEYS",
    "BaseEvent",
    "CountShortfall",
    "ItemExcluded",
    "ItemIncluded",
    "Overflow",
    "PipelineEvent",
    "PipelineStage",
    "RunCompleted",
    "RunFailed",
    "RunInfo",
    "RunStarted",
    "StageCompleted",
    "StageName",
    "StageStarted",
    "UnknownEvent",
    "event_type_name",
]


class PipelineStage(enum.Enum):
    """The pipeline's stages. ``Sort`` is internal: the specification's
    PipelineStage omits it, so reports and spans leave it out, but the event
    stream still times it."""

    CLASSIFY = "Classify"
    SCORE = "Score"
    DEDUPLICATE = "Deduplicate"
    SORT = "Sort"
    SLICE = "Slice"
    PLACE = "Place"

    def __str__(self) -> str:
        return self.value

    # Members are singletons compared by identity, so the identity hash agrees
    # with equality; Enum's own __hash__ is a Python-level call, and the report
    # fold keys several dicts by stage on every run.
    __hash__ = object.__hash__


#: A stage as found in events: a known :class:`PipelineStage`, or the name of
#: a stage this version does not know (decoded from elsewhere).
StageName: TypeAlias = PipelineStage | str

#: The keys of ``run_started.pipeline`` (flat keys ``pipeline.<key>``), in the order
#: they are written: each strategy's ``to_dict()`` as compact JSON text, whether
#: deduplication is on, and the overflow strategy.
PIPELINE_KEYS: Final = ("scorer", "slicer", "placer", "deduplication", "overflow_strategy")

_RUN_INFO_TEXT: Final = ("session_id", "user_id", "conversation_id", "token_counter",
                         "service")


class RunInfo(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """What the application knows about a run that the pipeline does not: the
    session, user and conversation it belongs to, and how its tokens were counted.

    Every field is optional. ``Pipeline.run(..., run_info=RunInfo(...))`` copies
    them into the run's ``run_started`` event, so logs and spans can be tied back to
    the application's own records::

        RunInfo(session_id="s-42", user_id="u-7", token_counter="tiktoken:o200k_base")

    ``token_counter`` names the counter (``"tiktoken:o200k_base"``,
    ``"estimate:chars/4"``); ``token_estimates`` is True when any count is an
    estimate. ``service`` names the service that ran it, as OpenTelemetry's
    ``service.name`` does (the Collector's ``ServiceName`` column); left None, the
    sink that records the run fills it in (``OTEL_SERVICE_NAME`` or its SDK
    provider's resource), so an audit file and the Collector's tables agree.
    """

    session_id: str | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    token_counter: str | None = None
    token_estimates: bool = False
    service: str | None = None

    def __post_init__(self) -> None:
        for name in _RUN_INFO_TEXT:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(name, value, "a string or None")
        if not isinstance(self.token_estimates, bool):
            raise InvalidTypeError("token_estimates", self.token_estimates, "a bool")

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, by name (as ``run_started`` takes them)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _RUN_INFO_TEXT
                               if getattr(self, name) is not None}
        if self.token_estimates:
            out["token_estimates"] = True
        return out


class BaseEvent(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """Fields every event has: its run and its place in the run's sequence."""

    type: ClassVar[str]
    run_id: str
    seq: int


class RunStarted(BaseEvent, frozen=True, kw_only=True):
    """A run began.

    ``pipeline`` describes the configuration (:data:`PIPELINE_KEYS`);
    ``candidate_tokens`` sums every candidate's tokens, negative ones included.
    ``detail_level`` names what the stream records (``StageOnly``,
    ``StageAndExclusions`` or ``Full``) and ``content_capture`` how item content
    was kept, so a rebuilt report knows what it holds. ``trace_id``/``span_id``
    are the W3C ids of the span current when the run started, if any. The last
    six fields are the run's :class:`RunInfo`, when the application gave one;
    ``service`` (absent from files written before it existed, read as None) is
    filled in by the sink when the application left it out.
    """

    type: ClassVar[str] = "run_started"
    started_at: datetime
    budget: ContextBudget
    pipeline: Mapping[str, str | bool]
    candidate_count: int
    candidate_tokens: int
    detail_level: str
    content_capture: str = "full"
    trace_id: str | None = None
    span_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    token_counter: str | None = None
    token_estimates: bool = False
    service: str | None = None

    @property
    def run_info(self) -> RunInfo:
        """The application's :class:`RunInfo` recorded with the run."""
        return RunInfo(session_id=self.session_id, user_id=self.user_id,
                       conversation_id=self.conversation_id, token_counter=self.token_counter,
                       token_estimates=self.token_estimates, service=self.service)

    def __hash__(self) -> int:  # the pipeline description is a (read-only) mapping
        return hash((self.run_id, self.seq, self.started_at, self.budget,
                     frozenset(self.pipeline.items()), self.candidate_count))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only description cannot be pickled or deep-copied: carry a copy.
        values = msgspec.structs.asdict(self)
        values["pipeline"] = (dict(self.pipeline), isinstance(self.pipeline, MappingProxyType))
        return (_rebuild_event, (RunStarted, values, "pipeline"))


class StageStarted(BaseEvent, frozen=True, kw_only=True):
    """A stage began with ``items_in`` items."""

    type: ClassVar[str] = "stage_started"
    stage: StageName
    items_in: int


class StageCompleted(BaseEvent, frozen=True, kw_only=True):
    """A stage finished: wall-clock ``duration_ms``, items in and out."""

    type: ClassVar[str] = "stage_completed"
    stage: StageName
    duration_ms: float
    items_in: int
    items_out: int


class ItemExcluded(BaseEvent, frozen=True, kw_only=True):
    """Candidate ``candidate_index`` was excluded at ``stage`` with ``score`` (its score
    when the decision was made; 0.0 before scoring) for ``reason``."""

    type: ClassVar[str] = "item_excluded"
    stage: StageName
    candidate_index: int
    score: float
    item: ContextItem
    reason: ExclusionReason


class ItemIncluded(BaseEvent, frozen=True, kw_only=True):
    """Candidate ``candidate_index`` was placed at ``position`` (0-based, final order)."""

    type: ClassVar[str] = "item_included"
    candidate_index: int
    position: int
    score: float
    item: ContextItem
    reason: InclusionReason


class Overflow(BaseEvent, frozen=True, kw_only=True):
    """Under the Proceed strategy, the merged selection exceeded ``targetTokens``.

    The specification's OverflowEvent: ``item_indices`` are the candidate
    indices of every item present at the time (pinned and sliced).
    """

    type: ClassVar[str] = "overflow"
    tokens_over_budget: int
    item_indices: tuple[int, ...]
    budget: ContextBudget


class CountShortfall(BaseEvent, frozen=True, kw_only=True):
    """A count-quota slicer could not meet ``required_count`` items of ``kind``."""

    type: ClassVar[str] = "count_shortfall"
    kind: str
    required_count: int
    satisfied_count: int


class RunCompleted(BaseEvent, frozen=True, kw_only=True):
    """The run returned ``included_count`` items holding ``included_tokens``.

    ``digest``, when a sink wrote one, is the run's digest
    (``sha256:<hex>`` or ``hmac-sha256:<hex>``; see :class:`~cupellation.events.RunDigest`;
    on columns-layout spans ``sha256-columns:<hex>`` or ``hmac-sha256-columns:<hex>``):
    absent from the events the pipeline emits, present in what an audit log, an
    event file or a span holds.
    """

    type: ClassVar[str] = "run_completed"
    duration_ms: float
    included_count: int
    included_tokens: int
    excluded_count: int
    digest: str | None = None


class RunFailed(BaseEvent, frozen=True, kw_only=True):
    """The run raised during ``stage`` (None before the first stage).

    ``error_type`` and ``error_text`` are the exception's class name and text;
    ``exception`` is the exception object itself, in process only (it is not
    part of the flat mapping, so a decoded event has None). ``digest`` is as in
    :class:`RunCompleted`.
    """

    type: ClassVar[str] = "run_failed"
    stage: StageName | None = None
    error_type: str
    error_text: str
    duration_ms: float
    exception: BaseException | None = None
    digest: str | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The live exception (its traceback, its frames) does not travel:
        # ``error_type`` and ``error_text`` say what it was.
        return (_rebuild_event, (RunFailed, {**msgspec.structs.asdict(self),
                                             "exception": None}, None))

    def __deepcopy__(self, memo: dict[int, Any]) -> RunFailed:
        # Every field is immutable but the exception, which is a live object, not
        # part of the value: the copy refers to the same one.
        return self


class UnknownEvent(BaseEvent, frozen=True, kw_only=True):
    """An event of a type this version does not know, kept with its fields."""

    type: ClassVar[str] = "unknown"
    event_type: str
    fields: Mapping[str, Any]

    def __hash__(self) -> int:  # decoded values may be unhashable: hash the keys
        return hash((self.run_id, self.seq, self.event_type, frozenset(self.fields)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # The read-only fields cannot be pickled or deep-copied: carry a copy.
        values = msgspec.structs.asdict(self)
        values["fields"] = (dict(self.fields), isinstance(self.fields, MappingProxyType))
        return (_rebuild_event, (UnknownEvent, values, "fields"))


def _rebuild_event(cls: type[BaseEvent], values: dict[str, Any], mapping: str | None) -> Any:
    """An event rebuilt by pickle or deepcopy; ``mapping`` names the field that
    travelled as (a plain copy, whether it was read-only)."""
    if mapping is not None:
        copied, read_only = values[mapping]
        values = {**values, mapping: MappingProxyType(copied) if read_only else copied}
    return cls(**values)


PipelineEvent: TypeAlias = (
    RunStarted
    | StageStarted
    | StageCompleted
    | ItemExcluded
    | ItemIncluded
    | Overflow
    | CountShortfall
    | RunCompleted
    | RunFailed
    | UnknownEvent
)

#: Every event type this version knows (the flat form's ``type`` values).
KNOWN_EVENTS: Final[tuple[type[BaseEvent], ...]] = (
    RunStarted, StageStarted, StageCompleted, ItemExcluded, ItemIncluded, Overflow,
    CountShortfall, RunCompleted, RunFailed,
)


def event_type_name(event: PipelineEvent) -> str:
    """The wire ``type`` of ``event`` (an unknown event's own type name)."""
    return event.event_type if isinstance(event, UnknownEvent) else event.type
