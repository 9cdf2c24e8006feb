"""Rebuilding runs from their spans: spans -> the event stream -> the SelectionReport.

The decoder reads only what :mod:`._names` says the encoder writes, through the
inverse functions there, then folds the events with the spine's
:class:`~cupellation.ReportBuilder`, which checks the stream's integrity. What
spans lose that the fold cannot see in the events themselves (events or
attributes a span limit dropped, truncated strings, a missing stage span, a
stage span that is not the root's child) is added to the report's
``incomplete`` list, so a rebuilt report is either whole or says what it lacks.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace as replace_struct

from .._events.digest import (
    COLUMNS_HMAC_PREFIX,
    COLUMNS_SHA256_PREFIX,
    DigestCheck,
    Verification,
    check_digest,
)
from .._events.lines import LineEncoder, verify_events
from .._events.records import INCLUSIONS
from .._events.settings import resolve_digest_key
from .._report import ReportBuilder, SelectionReport
from ..events import (
    ContentCapture,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    RunCompleted,
    RunFailed,
    apply_content_capture,
    event_from_dict,
)
from ..exceptions import DecodeError
from ..logs._decode import fast_record
from ..reasons import KNOWN_EXCLUSION_REASONS
from ._backends import backend_of, documents_in, merged_spans, spans_from_backend_document
from ._columns import (
    BYTE_COUNT,
    CHUNK_COUNT,
    COLUMN_ATTRIBUTES,
    LAYOUT,
    PART_COUNT,
    PART_INDEX,
    PART_SUFFIX,
    Columns,
    column_rows,
    columns_from_document,
    is_chunk_attribute,
)
from ._digest import block_digest, columns_digest
from ._jaeger import is_jaeger_document, spans_from_jaeger_json
from ._names import (
    ALL_STAGES,
    CHECK_COUNT,
    CHECK_TEXT,
    EVENT_TYPES,
    EXCLUSION_ATTRIBUTES,
    EXCLUSION_EVENT,
    INCLUDED_ATTRIBUTES,
    INCLUDED_EVENT,
    OTHER_ATTRIBUTES,
    OTHER_EVENT,
    OUTCOME,
    ROOT_ATTRIBUTES,
    ROOT_SPAN,
    RUN_ID,
    SPAN_STAGES,
    STAGE_ATTRIBUTES,
    STAGE_NAME,
    STAGE_PREFIX,
    check_totals,
    exclusion_flat,
    exclusion_head,
    exclusion_key,
    included_flat,
    included_head,
    included_key,
    other_flat,
    run_flat,
    share_item_fields,
    stage_flat,
    stage_from_label,
    stage_span_name,
)
from ._spans import (
    OTLP_EXTRA,
    SpanData,
    SpanEventData,
    is_otlp_document,
    shown,
    span_data,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)

__all__ = [
    "RebuiltRun",
    "column_flats",
    "events_from_spans",
    "parse_trace",
    "read_trace",
    "read_trace_file",
    "reports_from_spans",
    "runs_from_spans",
]

_ROOT_KNOWN: frozenset[str] = ROOT_ATTRIBUTES | COLUMN_ATTRIBUTES | {LAYOUT}
_STAGE_KNOWN: frozenset[str] = STAGE_ATTRIBUTES | COLUMN_ATTRIBUTES

_encode_json = msgspec.json.encode
#: How many undecodable events a report names one by one before it only counts them.
_NAMED_FAILURES = 5
#: A placeholder content for an item decoded without one; replaced by the spine's
#: ``none`` capture placeholder right after decoding.
_NO_CONTENT = "-"


@dataclass(frozen=True, slots=True)
class RebuiltRun:
    """One run rebuilt from its spans.

    ``report`` is the SelectionReport folded from ``events``; its ``incomplete``
    lists what the events lack and then ``problems``, what the decoder found lost
    on the way (dropped events or attributes, truncated values, missing spans,
    ``cupel.*`` attributes this version does not write). ``trace_id`` is the trace
    the root span belongs to, when known. ``verification`` is what checking the
    run's digest (the root's ``cupel.run.digest``) against the rebuilt events found
    (see :class:`~cupellation.events.Verification`); ``digest`` the one recorded.
    """

    run_id: str
    report: SelectionReport
    events: tuple[PipelineEvent, ...]
    trace_id: str | None = None
    problems: tuple[str, ...] = ()
    verification: Verification = Verification.UNVERIFIED
    digest: str | None = None

    @property
    def is_complete(self) -> bool:
        """True when the report holds the whole run."""
        return self.report.is_complete


class _Run:
    """The decoding of one run: its spans, its events, the problems met."""

    def __init__(self, run_id: str, spans: list[SpanData]) -> None:
        self.run_id = run_id
        self.spans = spans
        self.events: list[PipelineEvent] = []
        self.problems: list[str] = []
        self.failures: Counter[str] = Counter()
        self.failure_notes: list[str] = []
        self.capture: str | None = None
        # The columns digest's inputs: the events decoded from column rows (by id),
        # and each carrier's block digest over the chunks received.
        self.column_events: set[int] = set()
        self.blocks: list[bytes] = []

    def decode(self, flat: dict[str, Any], where: str, json_native: bool = False) -> None:
        """Decode one flat event, or note why it could not be. ``json_native``: every
        value is what ``json.loads`` makes (a column row), so the event may come
        through the log reader's typed record of its JSON line, which checks it as the
        spine does (anything that record does not decide takes the spine's path)."""
        fill = (flat.get("type") in ("item_excluded", "item_included")
                and "item.content" not in flat and self.capture in ("none", None))
        if fill:
            flat["item.content"] = _NO_CONTENT
        try:
            record = _fast_record(flat) if json_native else None
            event = record.event() if record is not None else event_from_dict(flat)
        except DecodeError as exc:
            self.failures[where] += 1
            if len(self.failure_notes) < _NAMED_FAILURES:
                self.failure_notes.append(f"{where} (seq {flat.get('seq', '?')}): {exc}")
            return
        if fill and isinstance(event, ItemExcluded | ItemIncluded):
            event = apply_content_capture(event, ContentCapture.NONE)
            if self.capture is None:
                self.problems.append("item events carry no content and the run's content "
                                     "capture is unknown (its root span is missing)")
                self.capture = "none"
        self.events.append(event)


def _fast_record(flat: dict[str, Any]) -> Any:
    """The log reader's typed record of ``flat`` (a column row), or None for the
    spine's path: also when ``flat`` holds a lone surrogate (which ``json.loads`` makes
    of a ``\\ud800`` escape and no JSON line can hold), which the spine's path then
    names as a decoding failure instead of raising UnicodeEncodeError."""
    try:
        line = _encode_json(flat)
    except UnicodeEncodeError:
        return None
    return fast_record(line)


def _span_label(span: SpanData) -> str:
    return f"span {span.name}" + (f" ({span.span_id})" if span.span_id else "")


def _check_losses(run: _Run, span: SpanData) -> None:
    """Note what a span says it lost, and compare its integrity checks."""
    label = _span_label(span)
    lost = False
    if span.dropped_events:
        lost = True
        run.problems.append(
            f"{label} lost {span.dropped_events} events to a span event limit (the "
            "OpenTelemetry SDK keeps the newest 128 by default): their decisions are "
            "missing. Fix: raise OTEL_SPAN_EVENT_COUNT_LIMIT (or the SpanLimits' "
            "max_events), or use the columns layout (SpanCollector(layout='columns'))")
    if span.dropped_attributes:
        lost = True
        run.problems.append(f"{label} lost {span.dropped_attributes} attributes to an "
                            "attribute limit. Fix: raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT "
                            "(the SDK keeps 128 by default)")
    events_lost = [e for e in span.events if e.dropped_attributes]
    if events_lost:
        lost = True
        run.problems.append(
            f"{label}: {len(events_lost)} events lost attributes to an attribute limit "
            f"({sum(e.dropped_attributes for e in events_lost)} in all)")
    expected_count = span.attributes.get(CHECK_COUNT)
    expected_text = span.attributes.get(CHECK_TEXT)
    if lost or not isinstance(expected_count, int) or not isinstance(expected_text, int):
        return
    count, text = check_totals(span.attributes)
    for event in span.events:
        if event.name.startswith("cupel."):
            event_count, event_text = check_totals(event.attributes)
            count += event_count
            text += event_text
    if count < expected_count:
        run.problems.append(f"{label} holds {count} of the {expected_count} cupel.* attributes "
                            "written on it and its events: some were dropped on the way")
    elif text < expected_text:
        run.problems.append(
            f"{label}: its string values hold {text} of the {expected_text} characters "
            "written: some were truncated (an attribute value length limit)")
    elif (count, text) != (expected_count, expected_text):
        run.problems.append(f"{label} holds more cupel.* data than was written on it "
                            f"({count} attributes, {text} characters; {expected_count} and "
                            f"{expected_text} written)")


def _unknown_attributes(run: _Run, where: str, attributes: Mapping[str, Any],
                        known: frozenset[str], open_prefix: str | None = None) -> None:
    """Flag the ``cupel.*`` attributes the encoder never writes on this carrier (an
    ``open_prefix`` holds the fields of a reason or event this version does not know)."""
    unknown = [name for name in attributes if name.startswith("cupel.") and name not in known
               and not (open_prefix is not None and name.startswith(open_prefix))
               and is_chunk_attribute(name) is None]
    if unknown:
        run.problems.append(f"{where} carries cupel.* attributes this version does not "
                            f"write, which were ignored: {', '.join(sorted(unknown))}")


def _decode_span_event(run: _Run, span: SpanData, event: SpanEventData,
                       carrier_stage: str | None, json_native: bool = False) -> None:
    name, attributes = event.name, event.attributes
    where = f"a {name} event on {span.name}"
    if name == EXCLUSION_EVENT:
        reason = attributes.get("cupel.exclusion.reason")
        known = isinstance(reason, str) and reason in KNOWN_EXCLUSION_REASONS
        _unknown_attributes(run, where, attributes, EXCLUSION_ATTRIBUTES,
                            None if known else "cupel.exclusion.")
        run.decode(exclusion_flat(attributes, run.run_id, carrier_stage), where, json_native)
    elif name == INCLUDED_EVENT:
        reason = attributes.get("cupel.item.reason")
        known = isinstance(reason, str) and reason in INCLUSIONS
        _unknown_attributes(run, where, attributes, INCLUDED_ATTRIBUTES,
                            None if known else "cupel.item.reason.")
        run.decode(included_flat(attributes, run.run_id), where, json_native)
    elif name in EVENT_TYPES or name == OTHER_EVENT:
        _unknown_attributes(run, where, attributes, OTHER_ATTRIBUTES.get(name, frozenset()),
                            OTHER_EVENT + "." if name == OTHER_EVENT else None)
        run.decode(other_flat(name, attributes, run.run_id), where)
    elif name.startswith(STAGE_PREFIX) and carrier_stage is None:
        _unknown_attributes(run, where, attributes, STAGE_ATTRIBUTES)
        for flat in stage_flat(attributes, run.run_id):
            run.decode(flat, f"the {name} event on {span.name}")


def _decode_span_events(run: _Run, span: SpanData, carrier_stage: str | None) -> None:
    for event in span.events:
        _decode_span_event(run, span, event, carrier_stage)


#: The parts of a carrier span's columns: (carrier name, carrier span id) -> part spans.
_Parts = dict[tuple[str, str | None], list[SpanData]]
_PART_KNOWN: frozenset[str] = frozenset({RUN_ID, PART_INDEX, CHECK_COUNT, CHECK_TEXT})
_EXPORT_FIX = ("spans were lost between the process and the backend (an exporter queue or "
               "batch limit, a receiver's size limit, or a backend dropping spans)")


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``"1-3, 7"`` (at most 10 ranges shown)."""
    spans: list[str] = []
    start = prev = numbers[0]
    for number in [*numbers[1:], None]:
        if number is not None and number == prev + 1:
            prev = number
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if number is not None:
            start = prev = number
    return ", ".join(spans[:10]) + (", ..." if len(spans) > 10 else "")


def _gather_chunks(run: _Run, span: SpanData, label: str, parts: _Parts
                   ) -> tuple[dict[int, str], set[int]] | None:
    """The column chunks of ``span`` and its part spans by index, and the part indices
    found; None (noted) when one chunk arrived twice with different text."""
    chunks: dict[int, str] = {}
    found_parts: set[int] = set()
    for holder in [span, *parts.get((span.name, span.span_id), [])]:
        if holder is not span:
            index = holder.attributes.get(PART_INDEX)
            if isinstance(index, int):
                found_parts.add(index)
        for name, value in holder.attributes.items():
            k = is_chunk_attribute(name)
            if k is None:
                continue
            if not isinstance(value, str):
                run.problems.append(f"{label}: its column chunk {k} is not text")
                continue
            if k in chunks and chunks[k] != value:
                run.problems.append(f"{label}: its column chunk {k} arrived twice, "
                                    "with different text")
                return None
            chunks[k] = value
    return chunks, found_parts


def _columns_of(run: _Run, span: SpanData, parts: _Parts) -> dict[str, Columns] | None:
    """The item-event columns a span holds (with its part spans), or None when it has
    no columns or they cannot be read whole (which is noted)."""
    total = span.attributes.get(CHUNK_COUNT)
    if total is None:
        return None
    label = _span_label(span)
    part_count = span.attributes.get(PART_COUNT, 0)
    byte_count = span.attributes.get(BYTE_COUNT)
    if not isinstance(total, int) or not isinstance(part_count, int) or total < 0:
        run.problems.append(f"{label}: its column counts are damaged ({CHUNK_COUNT}="
                            f"{shown(total)}, {PART_COUNT}={shown(part_count)}): the "
                            "decisions it carried are missing")
        return None
    gathered = _gather_chunks(run, span, label, parts)
    if gathered is None:
        return None
    chunks, found_parts = gathered
    # The carrier's block digest, over the chunks as received (see ._digest).
    pieces = [chunks[k].encode("utf-8", "surrogatepass") for k in sorted(chunks)]
    run.blocks.append(block_digest(span.name, b"".join(pieces), list(map(len, pieces))))
    missing = [k for k in range(total) if k not in chunks]
    extra = sorted(k for k in chunks if k >= total)
    if missing or extra:
        lost_parts = sorted(set(range(part_count)) - found_parts)
        what = (f"part spans {_ranges(lost_parts)} of {part_count} ({span.name}{PART_SUFFIX})"
                f" and " if lost_parts else "")
        if missing:
            run.problems.append(
                f"{label} lost {what}{len(missing)} of its {total} column chunks "
                f"({_ranges(missing)}): the decisions it carried are missing. Cause: "
                f"{_EXPORT_FIX}")
        else:
            run.problems.append(f"{label} holds column chunks past its {CHUNK_COUNT} "
                                f"{total} ({_ranges(extra)}): the decisions it carried are "
                                "not trusted")
        return None
    data = b"".join(pieces)
    size = len(data)
    if isinstance(byte_count, int) and size != byte_count:
        run.problems.append(
            f"{label}: its column chunks hold {size} of the {byte_count} bytes written: "
            "some were truncated (an attribute value length limit under 2,048 bytes, "
            "such as OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT); the decisions it carried are "
            "missing")
        return None
    try:
        return columns_from_document(json.loads(data))
    except (ValueError, RecursionError) as exc:
        run.problems.append(f"{label}: its columns are not readable JSON ({exc}): the "
                            "decisions it carried are missing")
        return None


def column_flats(name: str, columns: Columns, run_id: str, carrier_stage: str | None
                 ) -> list[dict[str, Any]]:
    """The flat events of one event name's columns, column by column: each attribute
    name is mapped once, and each row's flat is exactly what ``exclusion_flat`` or
    ``included_flat`` makes of that row's attributes (a null is no attribute)."""
    names, values, count = columns
    excluded = name == EXCLUSION_EVENT
    keys = map(exclusion_key if excluded else included_key, names)
    pairs = [(key, column) for key, column in zip(keys, values, strict=True)
             if key is not None]
    head = exclusion_head(run_id, carrier_stage) if excluded else included_head(run_id)
    flats: list[dict[str, Any]] = []
    for k in range(count):
        flat = head.copy()
        for key, column in pairs:
            value = column[k]
            if value is not None:
                flat[key] = value
        flats.append(share_item_fields(flat) if excluded else flat)
    return flats


def _decode_columns(run: _Run, span: SpanData, parts: _Parts,
                    carrier_stage: str | None) -> None:
    document = _columns_of(run, span, parts)
    if document is None:
        return
    first = len(run.events)
    for name, columns in document.items():
        if name not in (EXCLUSION_EVENT, INCLUDED_EVENT):
            run.problems.append(f"{_span_label(span)}: its columns hold {columns[2]} "
                                f"{name!r} rows this version does not write; ignored")
            continue
        known = EXCLUSION_ATTRIBUTES if name == EXCLUSION_EVENT else INCLUDED_ATTRIBUTES
        if any(n.startswith("cupel.") and n not in known and is_chunk_attribute(n) is None
               for n in columns[0]):
            # An attribute this version does not write: row by row, as span events are,
            # so each row says which of its attributes were ignored.
            for row in column_rows(columns):
                _decode_span_event(run, span, SpanEventData(name=name, attributes=row),
                                   carrier_stage, json_native=True)
            continue
        where = f"a {name} event on {span.name}"
        for flat in column_flats(name, columns, run.run_id, carrier_stage):
            run.decode(flat, where, json_native=True)
    run.column_events.update(map(id, run.events[first:]))


def _check_parts(run: _Run, parts: _Parts, carriers: list[SpanData]) -> None:
    """Losses on part spans, and part spans whose carrier is missing."""
    known = {(s.name, s.span_id) for s in carriers}
    for (name, parent), found in parts.items():
        for part in found:
            _check_losses(run, part)
            _unknown_attributes(run, f"the {part.name} span", part.attributes, _PART_KNOWN)
        if (name, parent) not in known:
            run.problems.append(f"{len(found)} {name}{PART_SUFFIX} spans have no {name} "
                                "span: the decisions they carry cannot be read")


def _expected_stages(root: SpanData) -> list[str]:
    """The chapter stages whose spans a run with this root must have."""
    outcome = root.attributes.get(OUTCOME)
    if outcome == "completed":
        return [stage.value for stage in SPAN_STAGES]
    if outcome == "failed":
        failed_at = root.attributes.get("cupel.run.stage")
        reached = []
        for stage in ALL_STAGES:
            if stage in SPAN_STAGES:
                reached.append(stage.value)
            if stage.value == failed_at:
                return reached
        return []  # failed before the first stage, or at a stage this version does not know
    return []


def _decode_roots(run: _Run, roots: list[SpanData], parts: _Parts) -> None:
    if not roots:
        run.problems.append(f"the root span {ROOT_SPAN} is missing: the run's start, end "
                            "and included items are unknown")
    elif len(roots) > 1:
        run.problems.append(f"{len(roots)} {ROOT_SPAN} spans carry run id {run.run_id}")
    for root in roots:
        capture = root.attributes.get("cupel.run.content_capture")
        if isinstance(capture, str):
            run.capture = capture
    if roots and run.capture is None:
        run.capture = "full"  # a root without the member: nothing says content was dropped
    for root in roots:
        _check_losses(run, root)
        _unknown_attributes(run, f"the {ROOT_SPAN} span", root.attributes, _ROOT_KNOWN)
        for flat in run_flat(root.attributes):
            flat.setdefault("run_id", run.run_id)
            run.decode(flat, f"the {ROOT_SPAN} span")
        _decode_span_events(run, root, None)
        _decode_columns(run, root, parts, None)


def _decode_stages(run: _Run, roots: list[SpanData], stages: list[SpanData],
                   parts: _Parts) -> None:
    root_ids = {r.span_id for r in roots if r.span_id is not None}
    seen: set[str] = set()
    for span in stages:
        _check_losses(run, span)
        label = span.attributes.get(STAGE_NAME)
        if not isinstance(label, str):
            label = span.name[len(STAGE_PREFIX):]
        seen.add(stage_from_label(label))
        if root_ids and span.parent_span_id not in root_ids:
            run.problems.append(f"{_span_label(span)} is not a child of the run's "
                                f"{ROOT_SPAN} span")
        _unknown_attributes(run, f"the {span.name} span", span.attributes, _STAGE_KNOWN)
        for flat in stage_flat(span.attributes, run.run_id):
            run.decode(flat, f"the {span.name} span")
        _decode_span_events(run, span, stage_from_label(label))
        _decode_columns(run, span, parts, stage_from_label(label))
    if len(roots) == 1:
        for stage in _expected_stages(roots[0]):
            if stage not in seen:
                run.problems.append(f"the stage span {stage_span_name(stage)} is missing")


def _rebuild(run_id: str, spans: list[SpanData], digest_key: bytes | None) -> RebuiltRun:
    run = _Run(run_id, spans)
    roots = [s for s in spans if s.name == ROOT_SPAN]
    parts: _Parts = {}
    for span in spans:
        if span.name.endswith(PART_SUFFIX):
            parts.setdefault((span.name[:-len(PART_SUFFIX)], span.parent_span_id),
                             []).append(span)
    stages = [s for s in spans if s.name != ROOT_SPAN and not s.name.endswith(PART_SUFFIX)]
    _decode_roots(run, roots, parts)
    _decode_stages(run, roots, stages, parts)
    _check_parts(run, parts, roots + stages)
    failed = sum(run.failures.values())
    if failed:
        run.problems.append(f"{failed} events could not be decoded and are missing: "
                            + "; ".join(run.failure_notes)
                            + ("; ..." if failed > len(run.failure_notes) else ""))
    run.events.sort(key=lambda e: e.seq)
    builder = ReportBuilder(run_id)
    for event in run.events:
        builder.add(event)
    end = builder.end_event
    recorded = None if end is None else end.digest
    if recorded is None:
        check = DigestCheck(Verification.UNVERIFIED)
    elif recorded.startswith((COLUMNS_SHA256_PREFIX, COLUMNS_HMAC_PREFIX)):
        check = _check_columns(run, recorded, digest_key)
    else:
        check = verify_events(run.events, digest_key)
    builder.set_digest_check(check)
    report = builder.result()
    problems = tuple(dict.fromkeys(run.problems))
    if problems:
        # The loss first: what the spans lost on the way (with its cause and fix) comes
        # before what the fold finds missing as a consequence.
        report = replace(report, incomplete=problems + tuple(
            note for note in report.incomplete if note not in problems))
    trace_id = next((r.trace_id for r in roots if r.trace_id), None) or next(
        (s.trace_id for s in spans if s.trace_id), None)
    return RebuiltRun(run_id=run_id, report=report, events=tuple(run.events),
                      trace_id=trace_id, problems=problems, verification=check.status,
                      digest=recorded)


def _check_columns(run: _Run, recorded: str, digest_key: bytes | None) -> DigestCheck:
    """Check a columns-form digest (see ._digest): the lines of the events that are not
    column rows, in seq order, and the block digests of the chunks received."""
    encoder = LineEncoder(ContentCapture.FULL)
    lines = hashlib.sha256()
    for event in run.events:
        if id(event) in run.column_events:
            continue
        if isinstance(event, RunCompleted | RunFailed):
            event = replace_struct(event, digest=None)  # noqa: PLW2901
        lines.update(encoder.event_line(event))
    hashed = lines.digest()
    return check_digest(recorded, columns_digest(hashed, run.blocks),
                        columns_digest(hashed, run.blocks, digest_key) if digest_key else None)


def _is_ours(span: SpanData) -> bool:
    run_id = span.attributes.get(RUN_ID)
    return isinstance(run_id, str) and bool(run_id) and (
        span.name in (ROOT_SPAN, ROOT_SPAN + PART_SUFFIX) or span.name.startswith(STAGE_PREFIX))


def runs_from_spans(spans: Iterable[Any], *, digest_key: bytes | str | None = None
                    ) -> list[RebuiltRun]:
    """Rebuild every cupellation run found among ``spans``.

    ``spans`` holds SDK ``ReadableSpan`` objects (as an ``InMemorySpanExporter``
    returns them) or :class:`SpanData` (as the readers of OTLP and Jaeger JSON
    return them), in any order, from any number of traces; spans that are not
    cupellation's are ignored. Runs are told apart by ``cupel.run.id``, so runs
    interleaved in one trace come apart. Each run's digest (``cupel.run.digest``) is
    checked against the rebuilt events, keyed ones with ``digest_key`` (or the
    ``CUPELLATION_DIGEST_KEY`` environment variable). Returns one :class:`RebuiltRun` per run,
    in the order the runs started; an empty list for no spans. Raises
    :class:`~cupellation.exceptions.DecodeError` for spans none of which are
    cupellation's, or for an object that is not a span.
    """
    data = [span_data(span) for span in spans]
    groups: dict[str, list[SpanData]] = {}
    for span in data:
        if _is_ours(span):
            groups.setdefault(span.attributes[RUN_ID], []).append(span)
    if data and not groups:
        names = sorted({span.name for span in data})
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise DecodeError("spans", f"{len(data)} spans ({shown})",
                          f"hold no cupellation run: no {ROOT_SPAN} or {STAGE_PREFIX}* span "
                          f"carries {RUN_ID}")
    key = resolve_digest_key(digest_key)
    runs = [_rebuild(run_id, group, key) for run_id, group in groups.items()]

    def started(run: RebuiltRun) -> tuple[int, int]:
        starts = [s.start_ns for s in groups[run.run_id]
                  if s.name == ROOT_SPAN and s.start_ns is not None]
        return (0, min(starts)) if starts else (1, 0)

    return sorted(runs, key=started)


def events_from_spans(spans: Iterable[Any]) -> list[list[PipelineEvent]]:
    """The event stream of each run found among ``spans`` (see :func:`runs_from_spans`),
    in seq order. Events that did not survive are simply absent: fold them with
    :func:`~cupellation.build_report` and the report says what is missing, or use
    :func:`runs_from_spans` to also learn what the spans themselves lost."""
    return [list(run.events) for run in runs_from_spans(spans)]


def reports_from_spans(spans: Iterable[Any]) -> list[SelectionReport]:
    """The SelectionReport of each run found among ``spans`` (see :func:`runs_from_spans`)."""
    return [run.report for run in runs_from_spans(spans)]


# -- files -------------------------------------------------------------------------------------


def parse_trace(data: str | bytes) -> list[SpanData]:
    """The spans of a trace document, its format recognised from its content: OTLP/JSON
    (one object, or JSON lines as the collector's file exporter writes; Tempo's
    ``batches``), Jaeger's JSON (``{"data": [...]}``), or OTLP protobuf bytes.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the problem for
    anything else.
    """
    raw: bytes | None = None
    if isinstance(data, bytes | bytearray | memoryview):
        raw = bytes(data)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _parse_proto(raw)
    elif isinstance(data, str):
        text = data
    else:
        raise DecodeError("trace", type(data).__name__, "must be text or bytes")
    stripped = text.lstrip("\ufeff \t\r\n")
    if not stripped:
        raise DecodeError("trace", "", "is empty")
    if stripped[0] not in "{[":
        if raw is not None:
            return _parse_proto(raw)
        raise DecodeError("trace", stripped[:40], "is not JSON (OTLP/JSON or Jaeger JSON)")
    try:
        whole = json.loads(stripped)
    except (ValueError, RecursionError):
        return _parse_lines(stripped)
    documents = whole if isinstance(whole, list) else [whole]
    spans: list[SpanData] = []
    for k, document in enumerate(documents):
        if backend_of(document) is not None:
            where = "trace" if not isinstance(whole, list) else f"trace[{k}]"
            spans.extend(spans_from_backend_document(document, where))
        elif is_jaeger_document(document):
            spans.extend(spans_from_jaeger_json(document))
        elif is_otlp_document(document):
            spans.extend(spans_from_otlp_json(document))
        else:
            shown = sorted(document)[:8] if isinstance(document, Mapping) else type(
                document).__name__
            where = "trace" if not isinstance(whole, list) else f"trace[{k}]"
            raise DecodeError(where, shown, _NOT_A_TRACE)
    return merged_spans(spans) if any(backend_of(d) for d in documents) else spans


#: What a trace document may be, for the error naming one that is none of them.
_NOT_A_TRACE = ("is not a trace: expected OTLP/JSON (resourceSpans), Tempo's (batches, or "
                "trace.resourceSpans), Jaeger's (data[].spans, or v3's result.resourceSpans), "
                "a page of Phoenix's REST API (data[] and next_cursor) or MLflow's trace JSON "
                "(traces[].trace_info and spans)")


def _parse_lines(text: str) -> list[SpanData]:
    """Several JSON documents (lines, or written back to back): pages of Phoenix or
    MLflow answers, Jaeger v3's stream of results, or OTLP/JSON lines (as the
    collector's file exporter writes them, read by :func:`spans_from_otlp_json`)."""
    try:
        documents = list(documents_in(text))
    except DecodeError:
        documents = []
    if not documents or backend_of(documents[0][1]) is None:
        return spans_from_otlp_json(text)  # JSON lines (or a clear error naming the line)
    spans: list[SpanData] = []
    for line, document in documents:
        if backend_of(document) is None:
            shown = sorted(document)[:8] if isinstance(document, Mapping) else type(
                document).__name__
            raise DecodeError("trace", shown, _NOT_A_TRACE, line=line)
        try:
            spans.extend(spans_from_backend_document(document))
        except DecodeError as exc:
            raise DecodeError(exc.field, exc.value, exc.problem, line=line) from None
    return merged_spans(spans)


def _parse_proto(raw: bytes) -> list[SpanData]:
    try:
        return spans_from_otlp_proto(raw)
    except ImportError:
        raise DecodeError("trace", f"{len(raw)} bytes", "is not JSON; if it is OTLP protobuf, "
                          f"reading it needs pip install '{OTLP_EXTRA}'") from None


def read_trace(data: str | bytes, *, digest_key: bytes | str | None = None
               ) -> list[RebuiltRun]:
    """Rebuild the runs in a trace document (any format :func:`parse_trace` reads).

    Raises :class:`~cupellation.exceptions.DecodeError` naming the problem for
    data that is not a trace or holds no cupellation run.
    """
    spans = parse_trace(data)
    if not spans:
        raise DecodeError("trace", f"{len(data)} characters or bytes", "holds no spans")
    return runs_from_spans(spans, digest_key=digest_key)


def read_trace_file(path: str | PathLike[str], *, digest_key: bytes | str | None = None
                    ) -> list[RebuiltRun]:
    """Rebuild the runs in a trace file: OTLP/JSON lines, one OTLP/JSON or Tempo
    object, Jaeger's downloaded JSON, or OTLP protobuf (recognised from the content).

    Returns one :class:`RebuiltRun` (``run_id``, ``report``, ``events``) per run, in
    the order they started. Raises :class:`~cupellation.exceptions.DecodeError`
    naming the file and the problem for a file that is not a trace or holds no
    cupellation run (and :class:`OSError` for a file that cannot be read).
    """
    data = Path(path).read_bytes()
    try:
        return read_trace(data, digest_key=digest_key)
    except DecodeError as exc:
        field = str(path) if exc.field == "trace" else f"{path}: {exc.field}"
        raise DecodeError(field, exc.value, exc.problem, line=exc.line) from None
