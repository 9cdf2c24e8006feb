"""The columns layout: every decision of a large run survives the SDK's DEFAULT span
limits and Tempo's 2,048-byte value truncation; a lost part or chunk is named in
``incomplete``; the layout is named on the root span."""

from __future__ import annotations

import json
import math
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cupellation import (
    ContextBudget,
    ContextItem,
    DiagnosticTraceCollector,
    FanOutCollector,
    GreedySlice,
    Pipeline,
    TraceDetailLevel,
)
from cupellation.events import Verification
from cupellation.exceptions import InvalidValueError
from cupellation.otel import (
    SpanCollector,
    SpanData,
    SpanLayout,
    runs_from_spans,
    spans_from_jaeger_json,
    spans_from_otlp_json,
    spans_from_otlp_proto,
)
from cupellation.otel._columns import MAX_CHUNK_BYTES, chunk_text
from cupellation.otel._spans import span_data
from cupellation.scoring import CompositeScorer, PriorityScorer, RecencyScorer

from ._support import (
    jaeger_document,
    make_sdk,
    no_context_leak,
    otlp_document,
    otlp_proto_bytes,
    run_both,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from _harness import make_items

PIPELINE = Pipeline(CompositeScorer([(RecencyScorer(), 2.0), (PriorityScorer(), 1.0)]),
                    GreedySlice())
#: The SDK's documented default limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and
#: OTEL_SPAN_EVENT_COUNT_LIMIT).
SDK_DEFAULT_LIMIT = 128


def _budget(items: list[ContextItem], fraction: float) -> ContextBudget:
    target = int(sum(item.tokens for item in items) * fraction)
    return ContextBudget(max_tokens=2 * target, target_tokens=target)


def _with_wide_text(items: list[ContextItem]) -> list[ContextItem]:
    """Some contents with multi-byte characters, so chunks must cut between them."""
    return [replace(item, content=item.content + " — ünïcødé ✓ 漢字 🙂") if k % 7 == 0
            else item for k, item in enumerate(items)]


def _tempo_cut(value: Any) -> Any:
    if isinstance(value, str):
        raw = value.encode("utf-8")
        if len(raw) > MAX_CHUNK_BYTES:
            return raw[:MAX_CHUNK_BYTES].decode("utf-8", errors="ignore")
    return value


def tempo_truncated(spans: list[SpanData]) -> list[SpanData]:
    """What Tempo's distributor keeps with max_attribute_bytes = 2,048: any attribute
    key or string value longer than that is cut (arrays are not cut element-wise)."""
    out = []
    for span in spans:
        attributes = {_tempo_cut(k): _tempo_cut(v) for k, v in span.attributes.items()}
        events = tuple(replace(e, attributes={_tempo_cut(k): _tempo_cut(v)
                                              for k, v in e.attributes.items()})
                       for e in span.events)
        out.append(replace(span, attributes=attributes, events=events))
    return out


@pytest.mark.parametrize(("size", "tier", "capture"), [
    (5_000, "Full", "full"),
    (5_000, "StageAndExclusions", "none"),
    (50_000, "Full", "full"),
])
def test_a_large_run_survives_default_limits_and_tempo_truncation(
        size: int, tier: str, capture: str) -> None:
    """5,000 and 50,000 candidates through an SDK TracerProvider with its DEFAULT limits
    (128 attributes, 128 events per span) and Tempo's truncation of every string over
    2,048 bytes: no span loses anything or holds more than 128 attributes, and the
    report rebuilt from the spans equals the in-process one, its digest verified."""
    items = _with_wide_text(make_items(size, 13, pinned_index=7))
    sdk = make_sdk(limits=None)  # the SDK's defaults
    collector = sdk.collector(tier, capture)
    assert collector.layout is SpanLayout.COLUMNS
    traced = run_both(PIPELINE, items, _budget(items, 0.4), collector,
                      TraceDetailLevel.parse(tier))
    assert traced.error is None
    for span in sdk.spans:
        assert span.dropped_attributes == 0
        assert span.dropped_events == 0
        assert len(span.attributes or {}) <= SDK_DEFAULT_LIMIT
        assert len(span.events) <= SDK_DEFAULT_LIMIT
        for value in (span.attributes or {}).values():
            if isinstance(value, str):
                assert len(value.encode("utf-8")) <= MAX_CHUNK_BYTES
    parts = [s for s in sdk.spans if s.name.endswith(".part")]
    if size == 50_000:
        assert parts, "a 50,000-item run needs part spans"
    spans = tempo_truncated([span_data(s) for s in sdk.spans])
    (rebuilt,) = runs_from_spans(spans)
    expected = traced.report
    if capture != "full":
        assert set(rebuilt.report.incomplete) == {
            *expected.incomplete,
            "item content was captured as 'none': contents and metadata are not the "
            "originals"}
        rebuilt_report = rebuilt.report
        assert [e.item.tokens for e in rebuilt_report.excluded] == [
            e.item.tokens for e in expected.excluded]
        assert [(e.score, e.reason) for e in rebuilt_report.excluded] == [
            (e.score, e.reason) for e in expected.excluded]
        assert len(rebuilt_report.included) == len(expected.included)
    else:
        assert rebuilt.report == expected
    assert rebuilt.verification is Verification.VERIFIED


def test_the_root_span_names_the_layout() -> None:
    """cupel.layout on the root span is 'columns' by default and 'events' when asked
    for; both rebuild the same whole report from a small run."""
    items = make_items(40, 3)
    reports = []
    for layout in ("columns", "events"):
        sdk = make_sdk()
        traced = run_both(PIPELINE, items, _budget(items, 0.5), sdk.collector(layout=layout))
        (root,) = sdk.by_name("cupel.pipeline")
        assert (root.attributes or {})["cupel.layout"] == layout
        (rebuilt,) = runs_from_spans(sdk.spans)
        assert rebuilt.report == traced.report
        reports.append(rebuilt.report)
        events = [e for s in sdk.spans for e in s.events
                  if e.name in ("cupel.exclusion", "cupel.item.included")]
        assert bool(events) == (layout == "events")
    assert reports[0].included == reports[1].included
    assert reports[0].excluded == reports[1].excluded


def test_a_bad_layout_is_refused_naming_the_value() -> None:
    """An unknown layout name raises InvalidValueError naming the field and value."""
    with pytest.raises(InvalidValueError, match=r"layout.*'columns' or 'events'.*rows"):
        SpanCollector(layout="rows")
    assert SpanLayout.parse("EVENTS") is SpanLayout.EVENTS


def test_chunks_cut_between_characters_and_stay_under_the_limit() -> None:
    """chunk_text never splits a multi-byte character and never exceeds the limit; the
    chunks join back to the text."""
    text = ("aé漢🙂" * 3000).encode("utf-8")
    chunks = chunk_text(text, 100)
    assert "".join(chunks).encode("utf-8") == text
    assert all(0 < len(c.encode("utf-8")) <= 100 for c in chunks)


def _large_spans() -> tuple[list[SpanData], Any]:
    items = make_items(20_000, 5, pinned_index=1)
    sdk = make_sdk(limits=None)
    traced = run_both(PIPELINE, items, _budget(items, 0.3), sdk.collector("Full", "full"))
    return [span_data(s) for s in sdk.spans], traced


def test_a_lost_part_span_is_named_in_incomplete() -> None:
    """Without one cupel.stage.slice.part span, the report says which part and which
    chunks of the slice span's columns are missing, and never holds a wrong decision."""
    spans, traced = _large_spans()
    parts = [s for s in spans if s.name == "cupel.stage.slice.part"]
    assert len(parts) >= 2
    lost = parts[1]
    (rebuilt,) = runs_from_spans([s for s in spans if s is not lost])
    assert not rebuilt.is_complete
    first = rebuilt.report.incomplete[0]
    assert "cupel.stage.slice" in first
    assert f"part spans {lost.attributes['cupel.columns.part']} of {len(parts)}" in first
    assert "column chunks" in first
    truth = {(e.item, e.score, e.reason) for e in traced.report.excluded}
    assert all((e.item, e.score, e.reason) in truth for e in rebuilt.report.excluded)


def test_a_lost_or_truncated_chunk_is_named_in_incomplete() -> None:
    """A chunk attribute dropped from a span, or one cut short (a length limit under
    2,048 bytes), is named: the stage's decisions are reported missing, not guessed."""
    spans, _ = _large_spans()
    at = next(k for k, s in enumerate(spans) if s.name == "cupel.stage.slice")
    dropped = dict(spans[at].attributes)
    del dropped["cupel.columns.3"]
    damaged = [*spans[:at], replace(spans[at], attributes=dropped), *spans[at + 1:]]
    (rebuilt,) = runs_from_spans(damaged)
    assert "cupel.stage.slice" in rebuilt.report.incomplete[0]
    text = "\n".join(rebuilt.report.incomplete)
    assert "lost 1 of its" in text
    assert "column chunks (3)" in text
    cut = dict(spans[at].attributes)
    cut["cupel.columns.3"] = cut["cupel.columns.3"][:1000]
    damaged = [*spans[:at], replace(spans[at], attributes=cut), *spans[at + 1:]]
    (rebuilt,) = runs_from_spans(damaged)
    text = "\n".join(rebuilt.report.incomplete)
    assert "truncated" in text
    assert not rebuilt.is_complete


def test_a_changed_value_in_the_columns_is_a_digest_mismatch() -> None:
    """One score changed inside the columns' JSON text (same length, still valid): the
    fold sees a whole run, and the run digest says it was changed."""
    items = make_items(60, 2)
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", "full"))
    spans = [span_data(s) for s in sdk.spans]
    at = next(k for k, s in enumerate(spans) if s.name == "cupel.stage.slice")
    count = spans[at].attributes["cupel.columns.chunk_count"]
    chunks = [spans[at].attributes[f"cupel.columns.{k}"] for k in range(count)]
    text = "".join(chunks)
    marker = '"cupel.exclusion.item_tokens":['
    start = text.index(marker) + len(marker)
    digit = text[start]
    text = text[:start] + ("2" if digit != "2" else "3") + text[start + 1:]
    attributes = dict(spans[at].attributes)
    offset = 0
    for k, chunk in enumerate(chunks):  # the same cuts, one digit changed
        attributes[f"cupel.columns.{k}"] = text[offset:offset + len(chunk)]
        offset += len(chunk)
    (rebuilt,) = runs_from_spans([*spans[:at], replace(spans[at], attributes=attributes),
                                  *spans[at + 1:]])
    assert rebuilt.verification is Verification.MISMATCH
    assert not rebuilt.is_complete


def test_a_lone_surrogate_escaped_in_the_columns_is_named_not_raised() -> None:
    """Six characters of a value inside the columns' JSON replaced by the escape
    ``\\ud800`` (same length: every byte count holds): JSON reads it as a lone
    surrogate, which no event can hold; the row is named as undecodable and its
    decision missing, never a UnicodeEncodeError out of the reader (found by the
    mutation campaign's hostile-text mutations)."""
    items = make_items(60, 2)
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", "full"))
    spans = [span_data(s) for s in sdk.spans]
    at = next(k for k, s in enumerate(spans) if s.name == "cupel.stage.slice")
    attributes = dict(spans[at].attributes)
    chunk = attributes["cupel.columns.0"]
    start = chunk.index('"cupel.exclusion.item_kind":["') + len('"cupel.exclusion.item_kind":["')
    attributes["cupel.columns.0"] = chunk[:start] + "\\ud800" + chunk[start + 6:]
    (rebuilt,) = runs_from_spans([*spans[:at], replace(spans[at], attributes=attributes),
                                  *spans[at + 1:]])
    assert not rebuilt.is_complete
    text = "\n".join(rebuilt.report.incomplete)
    assert "could not be decoded" in text
    assert "lone surrogate" in text


@pytest.mark.parametrize("layout", ["columns", "events"])
def test_a_lone_surrogate_in_the_run_id_of_in_process_spans_is_named_not_raised(
        layout: str) -> None:
    """Spans made in process whose run id has one character replaced by a lone
    surrogate on every span (same length: every integrity count holds; only such
    spans can carry one, a JSON reader refuses it): the run is rebuilt and its digest
    reads as a mismatch that names the text, never a UnicodeEncodeError out of the
    digest check (found by a helper reading the decoder)."""
    items = make_items(60, 2)
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4),
             sdk.collector("Full", "full", layout=layout))
    spans = [span_data(s) for s in sdk.spans]
    run_id = str(spans[0].attributes["cupel.run.id"])
    damaged = run_id[:-1] + "\ud800"
    spans = [replace(s, attributes={k: damaged if v == run_id else v
                                    for k, v in s.attributes.items()}) for s in spans]
    (rebuilt,) = runs_from_spans(spans)
    assert rebuilt.verification is Verification.MISMATCH
    assert not rebuilt.is_complete
    assert any("not Unicode ('\\ud800'" in note for note in rebuilt.report.incomplete)


@pytest.mark.parametrize("key", ["cupel.columns.chunk_count", "cupel.columns.part_count"])
def test_a_damaged_huge_count_is_named_without_listing_it(key: str) -> None:
    """A chunk or part count damaged to 10**12 is named with what arrived ("lost ...
    of its 1000000000000 column chunks"), counted from the chunks found: the reader
    never lists 0..count (found by the generated-input test, which ran out of 24 GB)."""
    items = make_items(60, 2)
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", "full"))
    spans = [span_data(s) for s in sdk.spans]
    at = next(k for k, s in enumerate(spans) if s.name == "cupel.stage.slice")
    attributes = {**spans[at].attributes, key: 10**12}
    if key.endswith("part_count"):
        attributes["cupel.columns.chunk_count"] = 10**12
    (rebuilt,) = runs_from_spans([*spans[:at], replace(spans[at], attributes=attributes),
                                  *spans[at + 1:]])
    assert not rebuilt.is_complete
    text = "\n".join(rebuilt.report.incomplete)
    assert f"of its {10**12} column chunks" in text
    if key.endswith("part_count"):
        assert f"part spans 0-{10**12 - 1} of {10**12}" in text


def test_part_spans_rebuild_from_every_file_format() -> None:
    """A run large enough for part spans, saved as OTLP/JSON (hex and base64 ids),
    Jaeger JSON and OTLP protobuf, rebuilds exactly from each."""
    items = make_items(20_000, 8, pinned_index=3)
    sdk = make_sdk(limits=None)
    traced = run_both(PIPELINE, items, _budget(items, 0.3), sdk.collector("Full", "full"))
    assert any(s.name.endswith(".part") for s in sdk.spans)
    for spans in (spans_from_otlp_json(json.dumps(otlp_document(sdk.spans))),
                  spans_from_otlp_json(json.dumps(otlp_document(sdk.spans, ids="base64"))),
                  spans_from_jaeger_json(json.dumps(jaeger_document(sdk.spans))),
                  spans_from_otlp_proto(otlp_proto_bytes(sdk.spans))):
        (rebuilt,) = runs_from_spans(spans)
        assert rebuilt.report == traced.report
        assert rebuilt.verification is Verification.VERIFIED


def test_two_span_collectors_in_one_fan_out_leave_no_span_current() -> None:
    """A columns and an events SpanCollector side by side in one FanOutCollector: the
    fan-out closes stages and runs in reverse order, so no context stays attached, and
    each collector's spans rebuild the in-process report."""
    items = make_items(300, 6, pinned_index=0)
    columns_sdk, events_sdk = make_sdk(), make_sdk()
    diagnostics = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    with no_context_leak():
        PIPELINE.run(items, _budget(items, 0.4), FanOutCollector(
            diagnostics, columns_sdk.collector(), events_sdk.collector(layout="events")))
    for sdk in (columns_sdk, events_sdk):
        (rebuilt,) = runs_from_spans(sdk.spans)
        assert rebuilt.report == diagnostics.build_report()


def test_column_rows_decode_alike_through_the_typed_record_and_the_events_module(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Column rows go through the column blocks' fast path, or the log reader's typed
    records of their JSON array (or, row by row, of their JSON lines); the events and
    report are exactly those the events module's own decoding gives, for a whole run
    and for one with a row whose reason disagrees with its item (incomplete either
    way)."""
    import cupellation.otel._spandecode as decode  # noqa: PLC0415

    items = _with_wide_text(make_items(300, 4))
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", "full"))
    spans = [span_data(s) for s in sdk.spans]
    at = next(k for k, s in enumerate(spans) if s.name == "cupel.stage.slice")
    count = int(str(spans[at].attributes["cupel.columns.chunk_count"]))
    text = "".join(str(spans[at].attributes[f"cupel.columns.{k}"]) for k in range(count))
    marker = '"cupel.exclusion.item_tokens":['
    start = text.index(marker) + len(marker)
    broken = (text[:start] + "-" + text[start:]).encode()  # the reason's tokens negative
    attributes = {k: v for k, v in spans[at].attributes.items()
                  if not k.startswith("cupel.columns.")}
    chunks = chunk_text(broken)
    attributes.update({f"cupel.columns.{k}": chunk for k, chunk in enumerate(chunks)})
    attributes.update({"cupel.columns.chunk_count": len(chunks), "cupel.columns.byte_count":
                       len(broken), "cupel.columns.part_count": 0})
    mangled = [*spans[:at], replace(spans[at], attributes=attributes), *spans[at + 1:]]
    by_block = [runs_from_spans(spans)[0], runs_from_spans(mangled)[0]]
    monkeypatch.setattr(decode, "block_events", lambda *args: None)
    fast = [runs_from_spans(spans)[0], runs_from_spans(mangled)[0]]
    monkeypatch.setattr(decode, "_row_records", lambda flats, plain=False: None)
    by_row = [runs_from_spans(spans)[0], runs_from_spans(mangled)[0]]
    monkeypatch.setattr(decode, "fast_record", lambda line: None)
    slow = [runs_from_spans(spans)[0], runs_from_spans(mangled)[0]]
    for one, other in zip(fast, by_row, strict=True):
        assert one.events == other.events
        assert one.report == other.report
    for one, other in zip(fast, slow, strict=True):
        assert one.events == other.events
        assert one.report == other.report
    for one, other in zip(by_block, fast, strict=True):
        assert one.events == other.events
        assert one.report == other.report
    assert fast[0].is_complete
    assert fast[0].verification is Verification.VERIFIED
    assert not fast[1].is_complete
    assert fast[1].verification is Verification.MISMATCH


@pytest.mark.parametrize("capture", ["full", "none"])
def test_columns_decode_column_by_column_exactly_as_row_by_row(capture: str) -> None:
    """Each row's flat event built column by column equals what exclusion_flat or
    included_flat makes of that row's attributes (keys in the same order), on every
    carrier of a real run."""
    import json as json_module  # noqa: PLC0415

    from cupellation.otel._columns import column_rows, columns_from_document  # noqa: PLC0415
    from cupellation.otel._names import exclusion_flat, included_flat  # noqa: PLC0415
    from cupellation.otel._spandecode import column_flats  # noqa: PLC0415

    items = _with_wide_text(make_items(400, 5))
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", capture))
    spans = [span_data(s) for s in sdk.spans]
    checked = 0
    for span in spans:
        count = span.attributes.get("cupel.columns.chunk_count")
        if not isinstance(count, int):
            continue
        holders = [span, *(s for s in spans if s.parent_span_id == span.span_id
                           and s.name == span.name + ".part")]
        chunks = {k: str(h.attributes[f"cupel.columns.{k}"]) for h in holders
                  for k in range(count) if f"cupel.columns.{k}" in h.attributes}
        document = columns_from_document(json_module.loads("".join(
            chunks[k] for k in range(count))))
        stage = None if span.name == "cupel.pipeline" else span.name.split(".")[-1]
        for name, columns in document.items():
            rows = column_rows(columns)
            expected = [exclusion_flat(row, "r", stage) if name == "cupel.exclusion"
                        else included_flat(row, "r") for row in rows]
            built = column_flats(name, columns, "r", stage)
            assert [list(flat.items()) for flat in built] == [
                list(flat.items()) for flat in expected]
            checked += len(rows)
    assert checked == 400


def _column_rows(count: int, seed: int) -> list[dict[str, Any]]:
    """The flat rows the span reader makes of a Full run's columns (copies, as
    ``column_flats`` gives them to the decoder)."""
    import cupellation.otel._spandecode as decode  # noqa: PLC0415

    items = make_items(count, seed)
    sdk = make_sdk()
    run_both(PIPELINE, items, _budget(items, 0.4), sdk.collector("Full", "full"))
    flats: list[dict[str, Any]] = []
    original = decode.column_flats

    def keep(*args: Any) -> list[dict[str, Any]]:
        out = original(*args)
        flats.extend(dict(flat) for flat in out)
        return out

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decode, "column_flats", keep)
        patch.setattr(decode, "block_events", lambda *args: None)  # the row path's rows
        runs_from_spans(sdk.spans)
    return flats


@pytest.mark.parametrize("damage", [None, "\ud800", float("nan"), float("inf"), True, 2**64,
                                    -1, "Deduplicated", "Nonesuch"],
                         ids=["none", "surrogate", "nan", "inf", "bool", "huge", "negative",
                              "other-reason", "unknown-reason"])
def test_a_batch_of_column_rows_decodes_exactly_as_row_by_row(damage: object) -> None:
    """One column block's rows decoded together (one JSON array, one msgspec call)
    give exactly the events and named failures that row-by-row decoding through each
    row's JSON line gives: undamaged, and with one row's value replaced by a lone
    surrogate, a NaN or infinity, a bool, an integer past int64, a negative count,
    or a reason name that does not fit the row (each either makes the whole batch
    fall back to the row-by-row path, or leaves the row to the events module's path)."""
    import cupellation.otel._spandecode as decode  # noqa: PLC0415

    flats = _column_rows(120, 3)
    rows = [dict(flat) for flat in flats if flat["type"] == "item_excluded"][:40]
    assert len(rows) == 40
    if damage is not None:
        key = {str: "item.kind", float: "score", bool: "candidate_index",
               int: "item.tokens"}[type(damage)]
        if damage in ("Deduplicated", "Nonesuch"):
            key = "reason.name"
        rows[17][key] = damage
    together = decode.RunDecoding("r", [])
    together.capture = "full"
    together.decode_rows([dict(row) for row in rows], "here")
    if (isinstance(damage, str) and damage.isascii()) or not isinstance(damage, str | float):
        # Values msgspec can have read: converted without the JSON array, alike.
        converted = decode.RunDecoding("r", [])
        converted.capture = "full"
        converted.decode_rows([dict(row) for row in rows], "here", plain=True)
        assert converted.events == together.events
        assert converted.failure_notes == together.failure_notes
    one_by_one = decode.RunDecoding("r", [])
    one_by_one.capture = "full"
    for row in rows:
        one_by_one.decode(dict(row), "here", json_native=True)
    assert together.events == one_by_one.events
    assert together.failure_notes == one_by_one.failure_notes
    assert len(together.events) == 40 - sum(together.failures.values())
    batch = decode._row_records([dict(row) for row in rows])
    if damage is None:
        assert batch == [decode._fast_record(dict(row)) for row in rows]


@pytest.mark.parametrize("text", [
    b'{"a":[1,2.5,-0.0,1e5,18446744073709551616,"x",null,true]}', b'[1e400]', b'[-1e400]',
    b'[NaN]', b'[Infinity]', b'["\\ud800"]', b'["\\udc00\\ud800"]', b'["\xed\xa0\x80"]',
    b'\xef\xbb\xbf[1]', b'["\\uD83D\\uDE00"]', b'["a\nb"]', b'[1,]', b'[01]', b'["\xff"]',
    b'[1] x', b'', b'[0.1e-400, 123456789012345678901234567890.5]'],
    ids=lambda text: repr(text)[:30])
def test_the_columns_text_reads_as_json_loads_reads_it(text: bytes) -> None:
    """The columns' JSON text, read by msgspec with json.loads behind it, gives what
    json.loads gives (NaN, infinities, lone surrogates and a byte order mark
    included: msgspec refuses those and json.loads reads them), and refuses what it
    refuses."""
    from cupellation.otel._spandecode import _read_json  # noqa: PLC0415

    try:
        expected: Any = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):  # noqa: PT011 - json.loads' own errors
            _read_json(text)
        return
    value, by_msgspec = _read_json(text)
    assert repr(value) == repr(expected)
    # What msgspec read holds no lone surrogate and no NaN or infinity (the rows'
    # records may then be converted without a JSON array); it reads all other texts
    # but one with a byte order mark.
    assert by_msgspec == (_plain(value) and not text.startswith(b"\xef\xbb\xbf"))


def _plain(value: Any) -> bool:
    """No lone surrogate in any string, no NaN or infinity, at any depth."""
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(_plain, value))
    if isinstance(value, dict):
        return all(map(_plain, value)) and all(map(_plain, value.values()))
    return True


_VALUES: list[Any] = [
    "2025-01-01T00:00:00Z", "2025-01-01T00:00:00+02:00", "2025-01-01t00:00:00z",
    "2025-01-01 00:00:00Z", "2025-01-01T00:00:00", "2025-01-01", "2025-02-30T00:00:00Z",
    "2025-01-01T00:00:60Z", "2025-01-01T00:00:00.1234567891Z", "2025-01-01T00:00:00+24:00",
    "10000-01-01T00:00:00Z", 0, 1, -1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30, 0.0,
    -0.0, 1.5, 1e308, 5e-324, 1.0, True, False, None, "", "x", "0", "1.0", [], ["a"],
    ["a", 1], [[]], {}, {"a": 1}, "Memory", "Chat", "BudgetExceeded", "Deduplicated",
    "Slice", "item_excluded", "item_included", "{}", '{"a":1}', "[1]", "\x00", "🙂"]


def test_converting_plain_rows_gives_the_records_their_json_array_gives() -> None:
    """Rows holding only what msgspec can have read (no lone surrogate, no NaN or
    infinity), randomly damaged (1 to 3 members each replaced by a time in another
    form, an integer past int64, a bool, null, a list, an object, a name, or
    removed), give through ``msgspec.convert`` exactly the records (byte for byte
    when encoded) or the refusal that one JSON array of them gives."""
    import msgspec  # noqa: PLC0415

    import cupellation.otel._spandecode as decode  # noqa: PLC0415

    flats = _column_rows(100, 8)
    keys = sorted({key for flat in flats for key in flat} | {"extra"})
    rng = random.Random(11)
    refused = 0
    for _ in range(3000):
        row = dict(rng.choice(flats))
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(keys)
            if rng.random() < 0.1:
                row.pop(key, None)
            else:
                row[key] = rng.choice(_VALUES)
        converted = decode._row_records([row], plain=True)
        decoded = decode._row_records([row])
        assert (converted is None) == (decoded is None)
        if converted is None:
            refused += 1
        else:
            assert msgspec.json.encode(converted) == msgspec.json.encode(decoded)
            assert repr(converted) == repr(decoded)
    assert 0 < refused < 3000
