"""Integers beyond int64 in a log or a trace are a DecodeError naming the field (and
the line), on every decoder path: the events' flat decoder, the log reader's fast
path, OTLP/JSON, Jaeger JSON; OTLP protobuf cannot carry one. Such a value is
never decoded into an event or span that the OpenTelemetry SDK fails on later,
when a log is replayed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from cupellation.events import event_from_dict, event_from_json, events_from_json_lines
from cupellation.exceptions import DecodeError
from cupellation.logs import read_runs
from cupellation.logs._decode import fast_event
from cupellation.otel import parse_trace, spans_from_jaeger_json, spans_from_otlp_json
from cupellation_exporters import spans_from_events

from ._artifacts import demo_artifacts

WIDE = (2**63, -(2**63) - 1, 2**64, 10**30)


def _int_fields() -> list[tuple[int, str]]:
    """(line number, key) of every integer field in the demo run's event lines."""
    found = []
    for number, line in enumerate(demo_artifacts().events_jsonl.splitlines(), start=1):
        for key, value in json.loads(line).items():
            if type(value) is int and key != "schema":
                found.append((number, key))
    return found


def test_every_integer_field_of_every_event_refuses_values_beyond_int64() -> None:
    """Each integer field of each line of a real run (seq, counts, indices, tokens,
    reason numbers, budget numbers), set to a value just past either end of int64
    or far beyond: event_from_json raises a DecodeError naming that field and the
    line, and the log reader's fast path declines the line (so it never builds the
    event either)."""
    lines = demo_artifacts().events_jsonl.splitlines()
    fields = _int_fields()
    assert {"seq", "candidate_index", "item.tokens", "reason.item_tokens",
            "reason.available_tokens", "budget.max_tokens", "items_in",
            "included_tokens"} <= {key for _, key in fields}
    for number, key in fields:
        record = json.loads(lines[number - 1])
        for wide in WIDE:
            record[key] = wide
            text = json.dumps(record)
            with pytest.raises(DecodeError) as info:
                event_from_json(text, line=number)
            assert (info.value.field, info.value.line) == (key, number), key
            assert fast_event(text.encode()) is None


def test_the_largest_int64_values_still_decode() -> None:
    """The ends of int64 themselves are valid: a seq of 2**63 - 1 decodes."""
    record = json.loads(demo_artifacts().events_jsonl.splitlines()[1])
    record["seq"] = 2**63 - 1
    assert event_from_json(json.dumps(record)).seq == 2**63 - 1


def test_json_lines_name_the_line_of_a_wide_integer() -> None:
    """events_from_json_lines raises on the line holding the value, naming it."""
    lines = demo_artifacts().events_jsonl.decode().splitlines()
    record = json.loads(lines[5])
    record["seq"] = 2**64
    lines[5] = json.dumps(record)
    with pytest.raises(DecodeError) as info:
        list(events_from_json_lines(lines))
    assert (info.value.field, info.value.line) == ("seq", 6)


@pytest.mark.parametrize("data", [
    {"schema": 2, "type": "future_event", "run_id": "r", "seq": 0, "x": [1, {"y": 2**70}]},
    {"schema": 2, "type": "item_excluded", "run_id": "r", "seq": 0, "stage": "Slice",
     "candidate_index": 0, "score": 0.5, "item.content": "a", "item.tokens": 1,
     "item.kind": "Message", "item.source": "Chat", "reason.name": "FutureReason",
     "reason.extra": 2**63},
    {"schema": 2, "type": "item_included", "run_id": "r", "seq": 0, "candidate_index": 0,
     "position": 0, "score": 0.5, "item.content": "a", "item.tokens": 1,
     "item.kind": "Message", "item.source": "Chat", "reason.name": "Scored",
     "reason.weight": -(2**64)},
    {"schema": 2, "type": "overflow", "run_id": "r", "seq": 0, "tokens_over_budget": 1,
     "item_indices": [0, 2**63], "budget.max_tokens": 1, "budget.target_tokens": 1,
     "budget.output_reserve": 0},
])
def test_fields_kept_as_found_refuse_wide_integers_too(data: dict[str, Any]) -> None:
    """An unknown event's fields, an unknown reason's fields and list members are
    kept as found, so they are checked as found: a wide integer anywhere in them is
    a DecodeError naming the field (its path inside, for nested values)."""
    with pytest.raises(DecodeError) as info:
        event_from_dict(data, line=3)
    assert info.value.line == 3
    assert info.value.field.split("[")[0] in data


def test_the_log_reader_counts_the_line_as_damaged_and_replay_stays_clean(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An audit log whose one line holds a seq beyond int64: read_runs never raises,
    counts that line as damaged naming the field and the line, and the run reads
    incomplete. Replaying what was read through the OpenTelemetry SDK (the spans
    replay makes, encoded by the OTLP exporters' encoder) logs no error: before the
    fix the wide value reached the SDK, which failed on it after the read had
    succeeded."""
    lines = demo_artifacts().audit_log.splitlines()
    record = json.loads(lines[7])
    record["candidate_index"] = 2**64
    lines[7] = json.dumps(record).encode()
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = read_runs(path)
    runs = list(reader)
    assert reader.stats.damaged_lines == 1
    damaged = reader.stats.damaged[0]
    assert damaged.line == 8
    assert damaged.problem.startswith("candidate_index:")
    assert len(runs) == 1
    assert not runs[0].is_complete
    caplog.set_level(logging.WARNING)
    spans = spans_from_events(next(iter(read_runs(path, keep_events=True))).events,
                              content_capture="full")
    assert spans
    encode_spans(spans)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def _otlp_with(change: Any) -> str:
    """The demo's OTLP/JSON line, then a second line with ``change`` made to a span."""
    document = json.loads(demo_artifacts().otlp_json)
    change(document["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    return demo_artifacts().otlp_json + json.dumps(document) + "\n"


@pytest.mark.parametrize(("change", "field"), [
    (lambda span: span["attributes"].append(
        {"key": "big", "value": {"intValue": str(2**63)}}), "attributes"),
    (lambda span: span["attributes"].append(
        {"key": "big", "value": {"arrayValue": {"values": [{"intValue": -(2**63) - 1}]}}}),
     "arrayValue.values[0].intValue"),
    (lambda span: span.update(startTimeUnixNano=str(2**64)), "startTimeUnixNano"),
    (lambda span: span.update(endTimeUnixNano="-1"), "endTimeUnixNano"),
    (lambda span: span.update(droppedEventsCount=2**32), "droppedEventsCount"),
])
def test_otlp_json_refuses_integers_otlp_cannot_carry(change: Any, field: str) -> None:
    """OTLP/JSON (JSON lines, as the exporters' file exporter writes them): an
    intValue beyond int64, a time beyond fixed64 or below 0, a dropped count beyond
    uint32 on the second line is a DecodeError naming its path and line 2;
    parse_trace, which a replay re-exports from, raises the same."""
    text = _otlp_with(change)
    with pytest.raises(DecodeError) as info:
        spans_from_otlp_json(text)
    assert field in info.value.field
    assert info.value.line == 2
    with pytest.raises(DecodeError):
        parse_trace(text)


@pytest.mark.parametrize(("tag", "where"), [
    ({"key": "big", "type": "int64", "value": 2**63}, "tags"),
    ({"key": "big", "type": "int64", "value": "99999999999999999999"}, "tags"),
    ({"key": "cupel.overflow.item_indices", "type": "string",
      "value": json.dumps([1, 2**63])}, "tags"),
])
def test_jaeger_json_refuses_wide_integers(tag: dict[str, Any], where: str) -> None:
    """Jaeger JSON: an int64 tag beyond int64 (as a number or as text), and a list
    attribute (JSON text) holding one, are DecodeErrors naming the tag."""
    document = json.loads(demo_artifacts().jaeger_json)
    document["data"][0]["spans"][0]["tags"].append(tag)
    with pytest.raises(DecodeError) as info:
        spans_from_jaeger_json(json.dumps(document))
    assert where in info.value.field


def test_jaeger_times_beyond_otlp_nanoseconds_are_refused() -> None:
    """A Jaeger start time (microseconds) whose nanoseconds pass 2**64 - 1 is refused."""
    document = json.loads(demo_artifacts().jaeger_json)
    document["data"][0]["spans"][0]["startTime"] = 2**64 // 1000 + 1
    with pytest.raises(DecodeError, match="startTime"):
        spans_from_jaeger_json(json.dumps(document))


def test_protobuf_carries_only_int64_and_reads_its_extremes() -> None:
    """OTLP protobuf types its integers (int64 attributes, fixed64 times), so no wider
    value can arrive that way; the demo's protobuf, with an attribute at 2**63 - 1
    added, reads whole."""
    from opentelemetry.proto.common.v1 import common_pb2  # noqa: PLC0415
    from opentelemetry.proto.trace.v1 import trace_pb2  # noqa: PLC0415

    message = trace_pb2.TracesData()
    message.ParseFromString(demo_artifacts().otlp_proto)
    span = message.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.append(common_pb2.KeyValue(
        key="big", value=common_pb2.AnyValue(int_value=2**63 - 1)))
    spans = parse_trace(message.SerializeToString())
    assert any(s.attributes.get("big") == 2**63 - 1 for s in spans)

