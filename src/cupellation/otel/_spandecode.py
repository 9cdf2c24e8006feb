"""Decoding one run's spans into events: each span's events and its columns (with
their part spans), and what a span says it lost on the way, noted as problems.
:mod:`._decode` gathers a run's spans, calls these, and folds the events."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from ..events import (
    ContentCapture,
    ItemExcluded,
    ItemIncluded,
    PipelineEvent,
    apply_content_capture,
    event_from_dict,
)
from ..events._capture import placeholder_content
from ..events._records import INCLUSIONS, RECORD_DECODER
from ..exceptions import DecodeError
from ..logs._decode import checked_record, fast_record
from ..reasons import KNOWN_EXCLUSION_REASONS, reason_field_types
from ._blocks import block_events
from ._columns import (
    BYTE_COUNT,
    CHUNK_COUNT,
    PART_COUNT,
    PART_INDEX,
    PART_SUFFIX,
    Columns,
    column_rows,
    columns_from_document,
    is_chunk_attribute,
)
from ._digest import block_digest
from ._names import (
    CHECK_COUNT,
    CHECK_TEXT,
    EVENT_TYPES,
    EXCLUSION_ATTRIBUTES,
    EXCLUSION_EVENT,
    INCLUDED_ATTRIBUTES,
    INCLUDED_EVENT,
    OTHER_ATTRIBUTES,
    OTHER_EVENT,
    STAGE_ATTRIBUTES,
    STAGE_PREFIX,
    check_totals,
    exclusion_flat,
    exclusion_head,
    exclusion_key,
    included_flat,
    included_head,
    included_key,
    other_flat,
    reason_field_attribute,
    share_item_fields,
    stage_flat,
)
from ._spans import SpanData, SpanEventData, shown

__all__ = [
    "Parts",
    "RunDecoding",
    "check_losses",
    "column_flats",
    "decode_columns",
    "decode_span_events",
    "span_label",
    "unknown_attributes",
]

_encode_json = msgspec.json.encode
#: How many undecodable events a report names one by one before it only counts them.
_NAMED_FAILURES = 5
#: A placeholder content for an item decoded without one and without a usable
#: candidate index; replaced by the events module's ``none`` capture placeholder right after
#: decoding.
_NO_CONTENT = "-"


class RunDecoding:
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
        events module does (anything that record does not decide takes the events module's path)."""
        fill = self._fill(flat)
        try:
            record = _fast_record(flat) if json_native else None
            event = record.event() if record is not None else event_from_dict(flat)
        except DecodeError as exc:
            self._failed(where, flat, exc)
            return
        self._add(event, fill)

    def decode_rows(self, flats: list[dict[str, Any]], where: str, plain: bool = False
                    ) -> None:
        """Decode column rows exactly as ``decode(flat, where, json_native=True)``
        decodes each, with one msgspec call for all their typed records (see
        :func:`_row_records`, and there ``plain``)."""
        fills = [self._fill(flat) for flat in flats]
        records = _row_records(flats, plain)
        if records is None:
            records = [_fast_record(flat) for flat in flats]
        else:
            records = [checked_record(record) for record in records]
        for flat, fill, record in zip(flats, fills, records, strict=True):
            try:
                event = record.event() if record is not None else event_from_dict(flat)
            except DecodeError as exc:
                self._failed(where, flat, exc)
                continue
            self._add(event, fill)

    def _fill(self, flat: dict[str, Any]) -> bool:
        """Give an item event decoded without content the placeholder content (True
        when it did: the event then gets the ``none`` capture placeholder)."""
        fill = (flat.get("type") in ("item_excluded", "item_included")
                and "item.content" not in flat and self.capture in ("none", None))
        if fill:
            # The events module's own placeholder when the index allows it, so that the item
            # decoded is already the one ``none`` capture shows and ``_add`` need not
            # build every item a second time (rebuilding 1,000 decisions at the default
            # capture spent a third of its time on that second item).
            index = flat.get("candidate_index")
            flat["item.content"] = (placeholder_content(index)
                                    if type(index) is int and index >= 0 else _NO_CONTENT)
        return fill

    def _failed(self, where: str, flat: dict[str, Any], exc: DecodeError) -> None:
        self.failures[where] += 1
        if len(self.failure_notes) < _NAMED_FAILURES:
            self.failure_notes.append(f"{where} (seq {flat.get('seq', '?')}): {exc}")

    def _add(self, event: PipelineEvent, fill: bool) -> None:
        if fill and isinstance(event, ItemExcluded | ItemIncluded):
            item = event.item
            # Already what ``none`` capture shows (the placeholder naming this index,
            # no metadata) unless ``_fill`` could not name the index: only then rebuilt.
            if item.metadata or item.content != placeholder_content(event.candidate_index):
                event = apply_content_capture(event, ContentCapture.NONE)
            if self.capture is None:
                self.problems.append("item events carry no content and the run's content "
                                     "capture is unknown (its root span is missing)")
                self.capture = "none"
        self.events.append(event)


def _fast_record(flat: dict[str, Any]) -> Any:
    """The log reader's typed record of ``flat`` (a column row), or None for the
    events module's path: also when ``flat`` holds a lone surrogate (which ``json.loads`` makes
    of a ``\\ud800`` escape and no JSON line can hold), which the events module's path then
    names as a decoding failure instead of raising UnicodeEncodeError."""
    try:
        line = _encode_json(flat)
    except UnicodeEncodeError:
        return None
    return fast_record(line)


#: A list of records (each element as ``RECORD_DECODER`` decodes one), and its decoder.
_ROWS_TYPE: Any = list[RECORD_DECODER.type]  # type: ignore[name-defined]
_ROWS_DECODER = msgspec.json.Decoder(_ROWS_TYPE)
_convert = msgspec.convert


def _row_records(flats: list[dict[str, Any]], plain: bool = False) -> list[Any] | None:
    """The typed record of each flat, as :func:`_fast_record` decodes it before its
    checks, from ONE JSON array (one encode, one decode, all in C); None when any
    row fails (a lone surrogate, a value its record refuses): the caller then takes
    each row through :func:`_fast_record`, which gives exactly today's per-row
    answers. An element of an array decodes exactly as the same object alone does,
    so a batch that decodes gives the records the rows would give one by one. The
    1,000 rows of benchmarks/bench_otel.py's rebuild get their checked records in
    2.0 ms this way, where one encode and decode per row took 2.6 ms (the two timed
    interleaved, in one process).

    ``plain``: every string in ``flats`` is UTF-8 text and every float finite (the
    values msgspec read, as :func:`_read_json` says, and the decoder's own), so the
    JSON array holds exactly those values and ``msgspec.convert`` of the rows gives
    what decoding it gives (the same records, or a refusal; checked on 150,000
    randomly damaged rows), without writing it: 0.6 ms instead of 1.3 ms for those
    1,000 rows."""
    if plain:
        try:
            return _convert(flats, _ROWS_TYPE)  # type: ignore[no-any-return]
        except ValueError:  # msgspec.ValidationError
            return None
    try:
        return _ROWS_DECODER.decode(_encode_json(flats))  # type: ignore[no-any-return]
    except (UnicodeEncodeError, ValueError, RecursionError):
        return None


def span_label(span: SpanData) -> str:
    return f"span {span.name}" + (f" ({span.span_id})" if span.span_id else "")


def check_losses(run: RunDecoding, span: SpanData) -> None:
    """Note what a span says it lost, and compare its integrity checks."""
    label = span_label(span)
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


def unknown_attributes(run: RunDecoding, where: str, attributes: Mapping[str, Any],
                        known: frozenset[str], open_prefix: str | None = None) -> None:
    """Flag the ``cupel.*`` attributes the encoder never writes on this carrier (an
    ``open_prefix`` holds the fields of a reason or event this version does not know)."""
    unknown = [name for name in attributes if name.startswith("cupel.") and name not in known
               and not (open_prefix is not None and name.startswith(open_prefix))
               and is_chunk_attribute(name) is None]
    if unknown:
        run.problems.append(f"{where} carries cupel.* attributes this version does not "
                            f"write, which were ignored: {', '.join(sorted(unknown))}")


#: The reasons known when this module was read: their attributes are all in
#: EXCLUSION_ATTRIBUTES. One registered later adds its own fields' attributes.
_KNOWN_AT_IMPORT: Final = frozenset(KNOWN_EXCLUSION_REASONS)


def _exclusion_attributes(reason: str) -> frozenset[str]:
    """The attributes an exclusion event with the known reason ``reason`` may carry."""
    if reason in _KNOWN_AT_IMPORT:
        return EXCLUSION_ATTRIBUTES
    return EXCLUSION_ATTRIBUTES | {reason_field_attribute(field)
                                   for field in reason_field_types(reason) or ()}


def _decode_span_event(run: RunDecoding, span: SpanData, event: SpanEventData,
                       carrier_stage: str | None, json_native: bool = False) -> None:
    name, attributes = event.name, event.attributes
    where = f"a {name} event on {span.name}"
    if name == EXCLUSION_EVENT:
        reason = attributes.get("cupel.exclusion.reason")
        known = isinstance(reason, str) and reason in KNOWN_EXCLUSION_REASONS
        unknown_attributes(run, where, attributes,
                           _exclusion_attributes(reason) if isinstance(reason, str) and known
                           else EXCLUSION_ATTRIBUTES, None if known else "cupel.exclusion.")
        run.decode(exclusion_flat(attributes, run.run_id, carrier_stage), where, json_native)
    elif name == INCLUDED_EVENT:
        reason = attributes.get("cupel.item.reason")
        known = isinstance(reason, str) and reason in INCLUSIONS
        unknown_attributes(run, where, attributes, INCLUDED_ATTRIBUTES,
                            None if known else "cupel.item.reason.")
        run.decode(included_flat(attributes, run.run_id), where, json_native)
    elif name in EVENT_TYPES or name == OTHER_EVENT:
        unknown_attributes(run, where, attributes, OTHER_ATTRIBUTES.get(name, frozenset()),
                            OTHER_EVENT + "." if name == OTHER_EVENT else None)
        run.decode(other_flat(name, attributes, run.run_id), where)
    elif name.startswith(STAGE_PREFIX) and carrier_stage is None:
        unknown_attributes(run, where, attributes, STAGE_ATTRIBUTES)
        for flat in stage_flat(attributes, run.run_id):
            run.decode(flat, f"the {name} event on {span.name}")


def decode_span_events(run: RunDecoding, span: SpanData, carrier_stage: str | None) -> None:
    for event in span.events:
        _decode_span_event(run, span, event, carrier_stage)


#: The parts of a carrier span's columns: (carrier name, carrier span id) -> part spans.
Parts = dict[tuple[str, str | None], list[SpanData]]
_EXPORT_FIX = ("spans were lost between the process and the backend (an exporter queue or "
               "batch limit, a receiver's size limit, or a backend dropping spans)")


def _ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 7]`` as ``"1-3, 7"`` (at most 10 ranges shown)."""
    bounds: list[int] = []  # the first and last of each range, flattened
    for number in numbers:
        if bounds and number == bounds[-1] + 1:
            bounds[-1] = number
        else:
            bounds += [number, number]
    return _shown(bounds)


def _gaps(found: set[int], total: int) -> tuple[int, str]:
    """How many of ``0 .. total - 1`` are not in ``found``, and which, as
    :func:`_ranges` shows them; in time and memory of the size of ``found``."""
    if total <= 0:
        return 0, ""
    present = sorted(k for k in found if 0 <= k < total)
    bounds: list[int] = []  # the first and last of each gap, flattened
    start = 0
    for k in [*present, total]:
        if k > start:
            bounds += [start, k - 1]
        start = k + 1
    return total - len(present), _shown(bounds)


def _shown(bounds: list[int]) -> str:
    """Ranges given as their flattened first and last numbers, as ``"1-3, 7"`` (at
    most 10 shown)."""
    shown = [str(a) if a == b else f"{a}-{b}" for a, b in zip(bounds[::2], bounds[1::2],
                                                                 strict=True)]
    return ", ".join(shown[:10]) + (", ..." if len(shown) > 10 else "")


def _gather_chunks(run: RunDecoding, span: SpanData, label: str, parts: Parts
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


def _columns_of(run: RunDecoding, span: SpanData, parts: Parts
                ) -> tuple[dict[str, Columns], bool] | None:
    """The item-event columns a span holds (with its part spans) and whether msgspec
    read them (see :func:`_read_json`), or None when it has no columns or they cannot
    be read whole (which is noted)."""
    total = span.attributes.get(CHUNK_COUNT)
    if total is None:
        return None
    label = span_label(span)
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
    # Counted from what arrived, never by listing 0..total: the counts are data, and a
    # damaged one (10**12) must not become a list that size.
    missing, missing_text = _gaps(set(chunks), total)
    extra = sorted(k for k in chunks if k >= total)
    if missing or extra:
        lost_parts, lost_text = _gaps(found_parts, part_count)
        what = (f"part spans {lost_text} of {part_count} ({span.name}{PART_SUFFIX})"
                f" and " if lost_parts else "")
        if missing:
            run.problems.append(
                f"{label} lost {what}{missing} of its {total} column chunks "
                f"({missing_text}): the decisions it carried are missing. Cause: "
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
        document, plain = _read_json(data)
        return columns_from_document(document), plain
    except (ValueError, RecursionError) as exc:
        run.problems.append(f"{label}: its columns are not readable JSON ({exc}): the "
                            "decisions it carried are missing")
        return None


_decode_json = msgspec.json.decode


def _read_json(data: bytes) -> tuple[Any, bool]:
    """What ``json.loads(data)`` gives, and True when msgspec read it: msgspec refuses
    every text ``json.loads`` refuses, and also what ``json.loads`` would turn into
    values no event holds (NaN, an overflowing number as an infinity, a lone
    surrogate, a UTF-8 byte order mark), which ``json.loads`` then reads as before,
    so each such row is named; a text both read gives equal values (checked over
    400,000 random numbers). The 270 KB of columns of benchmarks/bench_otel.py's
    rebuild are read in 0.6 ms where ``json.loads`` takes 1.2 ms."""
    try:
        return _decode_json(data), True
    except ValueError:  # msgspec.DecodeError and ValidationError
        return json.loads(data), False


def _is_text(value: str) -> bool:
    """True when ``value`` holds no lone surrogate (it encodes as UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def decode_columns(run: RunDecoding, span: SpanData, parts: Parts,
                    carrier_stage: str | None) -> None:
    found = _columns_of(run, span, parts)
    if found is None:
        return
    document, plain = found
    # The rows' own strings are plain when msgspec read them; the decoder adds these.
    plain = plain and _is_text(run.run_id) and (carrier_stage is None
                                                or _is_text(carrier_stage))
    first = len(run.events)
    for name, columns in document.items():
        if name not in (EXCLUSION_EVENT, INCLUDED_EVENT):
            run.problems.append(f"{span_label(span)}: its columns hold {columns[2]} "
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
        events = (block_events(name, columns, run.run_id, carrier_stage, run.capture)
                  if plain else None)
        if events is not None:
            run.events.extend(events)  # every row decoded, none needing a note
            continue
        where = f"a {name} event on {span.name}"
        run.decode_rows(column_flats(name, columns, run.run_id, carrier_stage), where,
                        plain)
    run.column_events.update(map(id, run.events[first:]))
