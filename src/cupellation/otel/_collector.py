"""SpanCollector: the event stream as live OpenTelemetry spans and metrics."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

from ..events import (
    ContentCapture,
    CountShortfall,
    ItemEventBatch,
    ItemExcluded,
    ItemIncluded,
    Overflow,
    PipelineEvent,
    PipelineStage,
    RunCompleted,
    RunFailed,
    RunStarted,
    StageCompleted,
    StageStarted,
    TraceDetailLevel,
    UnknownEvent,
    apply_content_capture,
    event_to_dict,
    resolve_capture,
    stamp_service,
)
from ..events._lines import LineEncoder, RunLineEncoder
from ..exceptions import InvalidValueError
from ..settings import check_service, resolve_digest_key, resolve_service
from ._columns import LAYOUT, ColumnSet, SpanLayout
from ._digest import DIGEST, columns_digest
from ._encode import (
    exclusion_batch_attributes,
    exclusion_batch_columns,
    flat_stage,
    included_batch_attributes,
    included_batch_columns,
    stage_event_attributes,
)
from ._names import (
    BACKEND_ATTRIBUTES,
    CHECK_COUNT,
    CHECK_TEXT,
    EXCLUSION_COUNT,
    EXCLUSION_EVENT,
    INCLUDED_EVENT,
    ROOT_SPAN,
    RUN_ID,
    SPAN_STAGES,
    STAGE_DURATION,
    STAGE_NAME,
    UTILIZATION,
    check_totals,
    other_attributes,
    other_event_name,
    run_attributes,
    stage_label,
    stage_span_name,
)
from ._providers import Providers
from ._runstate import RunState, add_events, warn_unprojectable
from ._values import (
    DEFAULT_VALUE_CAP,
    INPUT_MIME,
    INPUT_VALUE,
    JSON_MIME,
    OUTPUT_MIME,
    OUTPUT_VALUE,
    TEXT_MIME,
    identity_attributes,
    input_value,
    output_value,
    stage_input_value,
    stage_output_from,
)

__all__ = ["SpanCollector"]

_logger = logging.getLogger("cupellation")

_SPAN_STAGES = frozenset(SPAN_STAGES)
_encode_json = msgspec.json.encode
ITEM_TOKENS_COLUMN: Final = "cupel.exclusion.item_tokens"


class SpanCollector:
    """A trace collector that turns each run into OpenTelemetry spans and metrics.

    Uses the OpenTelemetry API only: the application owns the SDK and passes its
    providers, or sets global ones. ``tracer_provider`` and ``meter_provider``
    default to the global providers; with neither configured (the API's no-op or
    the unset global), ``is_enabled`` is False and the pipeline builds no events
    for this collector at all.

    Each run is a span ``cupel.pipeline``, a child of the span current when the
    run starts, with one child span per stage (``cupel.stage.classify``,
    ``score``, ``deduplicate``, ``slice``, ``place``; Sort has none). A stage span
    is current while its stage runs, so a scorer or slicer that starts its own
    span nests under ``cupel.stage.score`` or ``cupel.stage.slice``.

    ``tier`` (``"StageOnly"``, ``"StageAndExclusions"`` or ``"Full"``, or a
    :class:`~cupellation.TraceDetailLevel`) picks what the spans carry, as in the
    specification's OpenTelemetry chapter. ``content_capture`` (``"none"``,
    ``"hash"`` or ``"full"``) says how item content appears in telemetry; when not
    given, the ``CUPELLATION_CAPTURE_CONTENT`` environment variable decides, and
    without it content is left out (``"none"``): telemetry often leaves the
    process and is kept by third parties, so content, which may be private,
    appears only when asked for, as with OpenTelemetry's GenAI content switch.

    One instance may serve any number of runs, from any number of threads: each
    run's state is kept under its run id. ``record`` never raises: if the tracer,
    a span processor or the meter fails, the error goes to the ``cupellation``
    logger once for that run, every span of the run that is open is ended and
    every context it attached is detached, and the run itself goes on untouched.

    ``service`` names the service each run's ``run_started`` records when the run's
    :class:`~cupellation.RunInfo` names none; without it, the tracer provider's
    resource ``service.name`` (what the backend shows), else ``OTEL_SERVICE_NAME``
    (see :func:`~cupellation.settings.resolve_service`).

    .. versionchanged:: 0.3
       ``layout="columns"`` is the default.
    """

    __slots__ = ("_capture", "_closed", "_encoder", "_key", "_layout", "_level", "_lines",
                 "_lock", "_providers", "_runs", "_service", "_value_cap")

    def __init__(self, *, tracer_provider: trace.TracerProvider | None = None,
                 meter_provider: metrics.MeterProvider | None = None,
                 tier: TraceDetailLevel | str = TraceDetailLevel.STAGE_ONLY,
                 content_capture: ContentCapture | str | None = None,
                 digest_key: bytes | str | None = None,
                 layout: SpanLayout | str = SpanLayout.COLUMNS,
                 value_cap: int = DEFAULT_VALUE_CAP, service: str | None = None) -> None:
        self._level = TraceDetailLevel.parse(tier)
        self._service = check_service(service)
        self._layout = SpanLayout.parse(layout)
        if type(value_cap) is not int or value_cap < 256:
            raise InvalidValueError("value_cap", value_cap,
                                    "must be an int of at least 256 (bytes)")
        self._value_cap = value_cap
        self._capture = resolve_capture(content_capture, ContentCapture.NONE)
        self._providers = Providers(tracer_provider, meter_provider)
        self._lock = threading.Lock()
        self._runs: dict[str, RunState] = {}
        self._key = resolve_digest_key(digest_key)
        self._lines = RunLineEncoder(self._capture, self._key)
        self._encoder = LineEncoder(self._capture)
        self._closed = False

    # -- the collector protocol -------------------------------------------------------

    @property
    def is_enabled(self) -> bool:
        """True when a tracer or meter provider that records is configured (and the
        collector is not closed)."""
        return not self._closed and (self._providers.tracer() is not None
                                     or self._providers.instruments() is not None)

    @property
    def detail_level(self) -> TraceDetailLevel:
        """The tier, as the pipeline's detail level."""
        return self._level

    @property
    def tier(self) -> str:
        """The chapter's name of the tier (``"StageOnly"``, ...)."""
        return self._level.tier

    @property
    def content_capture(self) -> ContentCapture:
        """How item content appears in the spans."""
        return self._capture

    @property
    def layout(self) -> SpanLayout:
        """How per-item decisions travel: as columns on each span (the default) or as
        one span event per item."""
        return self._layout

    def record(self, events: Sequence[PipelineEvent], /) -> None:
        """Project one delivery of the run's events onto its spans and metrics."""
        try:
            if isinstance(events, ItemEventBatch):
                if self._layout is SpanLayout.EVENTS:  # columns: the chunks are hashed
                    self._digest(events)
                self._on_batch(events)
                return
            if len(events) == 1 and isinstance(events[0], StageStarted | StageCompleted):
                self._on_stage_event(events[0])
                return
            columns = self._layout is SpanLayout.COLUMNS
            for event in stamp_service(events, self._run_service):
                if isinstance(event, RunStarted):
                    self._on_event(event)  # (columns: hashes its line from its flat form)
                    if not columns:
                        self._digest((event,))
                    continue
                if columns and type(event) is RunCompleted and event.digest is None:
                    self._run_completed(event, hash_line=True)
                    continue
                digest = self._digest((event,))
                if digest is not None:
                    event = msgspec.structs.replace(event, digest=digest)  # noqa: PLW2901
                self._on_event(event)
        except Exception:
            run_id = events.run_id if isinstance(events, ItemEventBatch) else (
                events[0].run_id if len(events) else "?")
            _logger.exception("cupellation: SpanCollector failed on run %s; its spans are "
                              "ended and it records nothing more of that run", run_id)
            self._abandon(run_id)

    @property
    def service(self) -> str | None:
        """The service a run that names none is recorded under, were it to start now
        (``service=``, else the provider's resource, else the environment)."""
        return self._run_service()

    def _run_service(self) -> str | None:
        return resolve_service(self._service, self._providers.tracer_provider())

    def _digest(self, events: Sequence[PipelineEvent]) -> str | None:
        """The span projection's run digest, in one place, for each delivery of a run
        that has spans. The events layout hashes every event in its line form (after
        content capture) and returns the run's digest when the delivery ends it. The
        columns layout hashes here only the lines of events that are not column rows
        (the end event's without its digest); the chunks are hashed as they are
        written, and the digest is set on the root when it ends (see ._digest)."""
        run = self._get(events[0].run_id)
        if run is None or not run.spans_on:
            return None
        if self._layout is SpanLayout.EVENTS:
            return self._lines.digest(events)
        line, update = self._encoder.event_line, run.lines.update
        for event in events:
            if isinstance(event, ItemExcluded | ItemIncluded):
                continue
            if isinstance(event, RunCompleted | RunFailed) and event.digest is not None:
                event = msgspec.structs.replace(event, digest=None)  # noqa: PLW2901
            update(line(event))
        return None

    def _on_stage_event(self, event: StageStarted | StageCompleted) -> None:
        """A delivery of one stage event (twelve a run, the StageOnly tier's whole
        work): what ``record`` does for any event (no service to stamp, a line to
        hash, no digest to set), with the run looked up once."""
        run = self._get(event.run_id)
        if run is None:
            return
        if run.spans_on:
            if self._layout is SpanLayout.EVENTS:
                self._lines.digest((event,))
            else:
                run.lines.update(self._encoder.event_line(event))
        if type(event) is StageStarted:
            self._stage_started(event, run)
        else:
            self._stage_completed(event, run)  # type: ignore[arg-type]

    def flush(self) -> None:
        """Nothing is held back: spans are live, and end as their runs end (an SDK's
        span processor decides when they are exported)."""

    def close(self) -> None:
        """End the spans of runs still open (as when the collector fails on a run) and
        disable the collector."""
        self._closed = True
        with self._lock:
            open_runs = list(self._runs)
        for run_id in open_runs:
            self._abandon(run_id)

    def __repr__(self) -> str:
        return (f"SpanCollector(tier={self._level.tier!r}, "
                f"content_capture={self._capture.value!r}, layout={self._layout.value!r})")

    # -- per-run state -------------------------------------------------------------------

    def _get(self, run_id: str) -> RunState | None:
        with self._lock:
            return self._runs.get(run_id)

    def _pop(self, run_id: str) -> RunState | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def _abandon(self, run_id: str) -> None:
        """End whatever is open of a run that failed inside the collector, detach what it
        attached (innermost first), and forget it. Never raises."""
        run = self._pop(run_id)
        self._lines.forget(run_id)
        if run is not None:
            run.end_open()

    # -- events --------------------------------------------------------------------------

    def _on_event(self, event: PipelineEvent) -> None:
        kind = type(event)
        if kind is StageStarted or kind is StageCompleted:
            run = self._get(event.run_id)
            if run is not None and kind is StageStarted:
                self._stage_started(event, run)  # type: ignore[arg-type]
            elif run is not None:
                self._stage_completed(event, run)  # type: ignore[arg-type]
        elif kind is RunStarted:
            self._run_started(event)  # type: ignore[arg-type]
        elif kind is RunCompleted:
            self._run_completed(event)  # type: ignore[arg-type]
        elif kind is RunFailed:
            self._run_failed(event)  # type: ignore[arg-type]
        elif kind in (Overflow, CountShortfall, UnknownEvent):
            self._other(event)
        elif isinstance(event, ItemExcluded):  # an item event delivered on its own
            self._on_batch(ItemEventBatch(
                run_id=event.run_id, first_seq=event.seq, stage=event.stage,
                candidate_indices=(event.candidate_index,), items=(event.item,),
                scores=(event.score,), reasons=(event.reason,)))
        elif isinstance(event, ItemIncluded):
            self._on_batch(ItemEventBatch(
                run_id=event.run_id, first_seq=event.seq, stage=None,
                candidate_indices=(event.candidate_index,), items=(event.item,),
                scores=(event.score,), reasons=(event.reason,), positions=(event.position,)))

    def _run_started(self, event: RunStarted) -> None:
        tracer = self._providers.tracer()
        instruments = self._providers.instruments()
        if tracer is None and instruments is None:
            return
        run = RunState(event.run_id, tracer, instruments, event.budget.target_tokens)
        with self._lock:
            self._runs[event.run_id] = run
        if instruments is not None:
            instruments.candidates.add(event.candidate_count)
        if tracer is None:
            return
        captured = apply_content_capture(event, self._capture)
        flat = event_to_dict(captured)
        attributes = run_attributes(flat)
        attributes[LAYOUT] = self._layout.value
        attributes[INPUT_VALUE] = input_value(event)
        attributes[INPUT_MIME] = TEXT_MIME
        attributes.update(identity_attributes(event))
        attributes.update(BACKEND_ATTRIBUTES)
        root = tracer.start_span(ROOT_SPAN, attributes=attributes)
        run.root = root
        run.recording = root.is_recording()
        trace_id = root.get_span_context().trace_id
        run.trace_id = format(trace_id, "032x") if trace_id else None
        run.root_attributes = attributes
        run.root_context = trace.set_span_in_context(root)
        run.root_token = otel_context.attach(run.root_context)
        if run.recording and self._layout is SpanLayout.COLUMNS:
            # The run's first line for the digest: event_line's bytes, from the flat
            # form made above rather than flattening the event a second time.
            run.lines.update(_encode_json(flat) + b"\n")

    def _stage_started(self, event: StageStarted, run: RunState) -> None:
        if run.stage_span is not None:  # a stage never completed: close it first
            self._end_stage_span(run, None)
        run.stage = event.stage
        if not run.spans_on:
            return
        attributes = stage_event_attributes(event)
        if event.stage in _SPAN_STAGES:
            attributes.update(BACKEND_ATTRIBUTES)
            attributes[INPUT_VALUE] = stage_input_value(stage_label(event.stage),
                                                        event.items_in)
            attributes[INPUT_MIME] = JSON_MIME
            assert run.tracer is not None
            span = run.tracer.start_span(stage_span_name(event.stage),
                                         context=run.root_context, attributes=attributes)
            # The span's own start (an SDK span has it as an int; a tracer whose spans do
            # not say leaves the end to the span).
            start = getattr(span, "start_time", None)
            run.stage_start_ns = start if type(start) is int else None
            run.stage_span = span
            run.stage_columns = ColumnSet()
            run.stage_attributes = attributes
            run.stage_totals = [0, 0]
            run.stage_exclusions = 0
            run.stage_dropped = []
            run.stage_token = otel_context.attach(trace.set_span_in_context(span))
        else:
            del attributes[RUN_ID]
            run.internal = attributes

    def _stage_completed(self, event: StageCompleted, run: RunState) -> None:
        stage = event.stage
        instruments = run.instruments
        if instruments is not None and stage in _SPAN_STAGES:
            label = {STAGE_NAME: stage_label(stage)}
            instruments.stage_duration.record(event.duration_ms / 1000.0, label)
            removed = event.items_in - event.items_out
            if self._level is TraceDetailLevel.STAGE_ONLY and removed > 0:
                instruments.exclusions.add(removed, label)
        run.stage = None
        if not run.spans_on:
            return
        attributes = stage_event_attributes(event)
        if run.stage_span is not None and run.stage_attributes.get(STAGE_NAME) == (
                attributes[STAGE_NAME]):
            self._end_stage_span(run, attributes)
        else:
            del attributes[RUN_ID]
            run.root_event(stage_span_name(stage), {**(run.internal or {}),
                                                           **attributes})
            run.internal = None
        if stage is PipelineStage.PLACE:
            self._flush_included(run)

    def _end_stage_span(self, run: RunState, completion: dict[str, Any] | None,
                        error: str | None = None) -> None:
        """Set a stage span's last attributes and checks, end it and detach its context
        (the span is ended and the context detached even if setting attributes fails)."""
        span, run.stage_span = run.stage_span, None
        token, run.stage_token = run.stage_token, None
        assert span is not None
        end_ns: int | None = None
        if completion is not None:
            # The stage's own clock: the span lasts exactly the stage's measured duration,
            # whatever the sinks and the exporter's thread took around it.
            duration = completion.get(STAGE_DURATION)
            if isinstance(duration, float) and run.stage_start_ns is not None:
                end_ns = run.stage_start_ns + (round(duration * 1_000_000)
                                               if duration > 0 else 0)
        try:
            try:
                written = run.stage_attributes
                new = {k: v for k, v in (completion or {}).items() if k not in written}
                if self._level is not TraceDetailLevel.STAGE_ONLY:
                    new[EXCLUSION_COUNT] = run.stage_exclusions
                if run.stage_columns:
                    name = stage_span_name(str(written.get(STAGE_NAME, "")))
                    new.update(run.write_columns(span, name, run.stage_columns, end_ns))
                new[OUTPUT_VALUE] = self._stage_output(run, written, completion)
                new[OUTPUT_MIME] = JSON_MIME
                count, length = check_totals({**written, **new})
                new[CHECK_COUNT] = count + run.stage_totals[0]
                new[CHECK_TEXT] = length + run.stage_totals[1]
                span.set_attributes(new)
                if error is not None:
                    span.set_status(Status(StatusCode.ERROR, error))
            finally:
                span.end(end_time=end_ns)
        finally:
            if token is not None:
                otel_context.detach(token)

    def _stage_output(self, run: RunState, written: dict[str, Any],
                      completion: dict[str, Any] | None) -> str:
        """A stage span's ``output.value`` (no batches are held at StageOnly)."""
        return stage_output_from(
            written, completion, capture=self._capture, cap=self._value_cap,
            dropped=None if self._level is TraceDetailLevel.STAGE_ONLY else run.stage_dropped,
            trace_id=run.trace_id, tokens=run.dropped_tokens)

    def _on_batch(self, batch: ItemEventBatch) -> None:
        run = self._get(batch.run_id)
        if run is None or not batch:
            return
        if run.spans_on:
            (run.dropped if batch.excluded else run.kept).append(batch)
        if batch.excluded:
            instruments = run.instruments
            if instruments is not None:
                label = stage_label(batch.stage) if batch.stage is not None else ""
                for name, count in Counter(r.name for r in batch.reasons).items():
                    instruments.exclusions.add(count, {"cupel.exclusion.reason": name,
                                                       STAGE_NAME: label})
            if not run.spans_on:
                return
            on_stage = run.stage_span is not None and run.stage == batch.stage
            stage = flat_stage(run.stage) if on_stage else None
            if on_stage:
                run.stage_dropped.append(batch)
            if self._layout is SpanLayout.COLUMNS:
                target = run.stage_columns if on_stage else run.root_columns
                columns = exclusion_batch_columns(batch, self._capture, stage)
                if columns is not None:
                    target.add_columns(EXCLUSION_EVENT, *columns)
                    added = columns[0]
                    # The tokens column, for the summaries' largest-first lists.
                    run.dropped_tokens[id(batch)] = columns[1][ITEM_TOKENS_COLUMN]
                else:
                    rows = exclusion_batch_attributes(batch, self._capture, stage)[0]
                    added = target.add(EXCLUSION_EVENT, rows)
                    warn_unprojectable(len(rows) - added)
            else:
                carrier = run.stage_span if on_stage else run.root
                totals = run.stage_totals if on_stage else run.root_totals
                added = add_events(
                    carrier, EXCLUSION_EVENT,
                    exclusion_batch_attributes(batch, self._capture, stage), totals)
            if on_stage:
                run.stage_exclusions += added
            return
        if not run.spans_on:
            return
        if self._layout is SpanLayout.COLUMNS:
            columns = included_batch_columns(batch, self._capture)
            if columns is not None:
                run.root_columns.add_columns(INCLUDED_EVENT, *columns)
            else:
                rows = included_batch_attributes(batch, self._capture)[0]
                warn_unprojectable(len(rows) - run.root_columns.add(INCLUDED_EVENT, rows))
        elif run.stage is PipelineStage.PLACE and run.stage_span is not None:
            run.included.append(batch)  # the chapter: recorded after Place completes
        else:
            add_events(run.root, INCLUDED_EVENT,
                       included_batch_attributes(batch, self._capture), run.root_totals)

    def _flush_included(self, run: RunState) -> None:
        batches, run.included = run.included, []
        for batch in batches:
            add_events(run.root, INCLUDED_EVENT,
                       included_batch_attributes(batch, self._capture), run.root_totals)

    def _other(self, event: PipelineEvent) -> None:
        run = self._get(event.run_id)
        if run is None or not run.spans_on:
            return
        flat = event_to_dict(event)
        on_stage = run.stage_span is not None
        attributes = other_attributes(flat)
        name = other_event_name(flat["type"])
        if on_stage:
            assert run.stage_span is not None
            count, length = check_totals(attributes)
            run.stage_totals[0] += count
            run.stage_totals[1] += length
            run.stage_span.add_event(name, attributes)
        else:
            run.root_event(name, attributes)

    def _run_completed(self, event: RunCompleted, hash_line: bool = False) -> None:
        """End the run; with ``hash_line`` (the columns layout, an end event without a
        digest) first hash its line for the digest, from the flat form its attributes
        are made of (event_line's bytes, the event flattened once)."""
        run = self._pop(event.run_id)
        if run is None:
            return
        target = run.target_tokens
        try:
            flat = event_to_dict(event)
            if hash_line and run.spans_on:
                run.lines.update(_encode_json(flat) + b"\n")
            end = run_attributes(flat)
            if target > 0:
                end[UTILIZATION] = event.included_tokens / target
            self._end_run(run, end, None)
        finally:
            if run.instruments is not None:
                run.instruments.run_ended("completed", event.duration_ms, None)
                if target > 0:
                    run.instruments.utilization.record(event.included_tokens / target)

    def _run_failed(self, event: RunFailed) -> None:
        run = self._pop(event.run_id)
        if run is None:
            return
        try:
            self._end_run(run, run_attributes(event_to_dict(event)), event)
        finally:
            if run.instruments is not None:
                run.instruments.run_ended("failed", event.duration_ms, event.error_type)

    def _end_run(self, run: RunState, end: dict[str, Any], failed: RunFailed | None) -> None:
        """Close a run's open stage span, write the root's last events and attributes,
        end the root and detach its context. Each step runs even if an earlier one
        fails (the first failure is raised afterwards), so nothing stays open."""
        root, token = run.root, run.root_token
        run.root_token = None
        if root is None:
            return
        description = None if failed is None else f"{failed.error_type}: {failed.error_text}"
        try:
            try:
                if run.stage_span is not None:  # the failed stage, or one never completed
                    self._end_stage_span(run, None, description)
            finally:
                try:
                    if run.recording:
                        self._finish_root(run, root, end, failed, description)
                finally:
                    run.root = None
                    root.end()
        finally:
            if token is not None:
                otel_context.detach(token)

    def _finish_root(self, run: RunState, root: Span, end: dict[str, Any],
                     failed: RunFailed | None, description: str | None) -> None:
        if run.internal is not None:  # a spanless stage that never completed
            run.root_event(stage_span_name(run.stage or ""), run.internal)
            run.internal = None
        self._flush_included(run)
        written = run.root_attributes
        new = {k: v for k, v in end.items() if k not in written}
        if run.root_columns:
            new.update(run.write_columns(root, ROOT_SPAN, run.root_columns, None))
        new[OUTPUT_VALUE] = output_value(
            outcome=str(end.get("cupel.run.outcome", "failed")),
            included_count=end.get("cupel.run.included_count"),
            included_tokens=end.get("cupel.run.included_tokens"),
            excluded_count=end.get("cupel.run.excluded_count"),
            kept=run.kept, dropped=run.dropped, capture=self._capture, cap=self._value_cap,
            trace_id=run.trace_id, tokens=run.dropped_tokens)
        new[OUTPUT_MIME] = TEXT_MIME
        run.kept = run.dropped = []
        run.dropped_tokens = {}
        if self._layout is SpanLayout.COLUMNS:
            new[DIGEST] = columns_digest(run.lines.digest(), run.blocks, self._key)
        count, length = check_totals({**written, **new})
        new[CHECK_COUNT] = count + run.root_totals[0]
        new[CHECK_TEXT] = length + run.root_totals[1]
        root.set_attributes(new)
        if failed is not None:
            if failed.exception is not None:
                root.record_exception(failed.exception)
            root.set_status(Status(StatusCode.ERROR, description))
