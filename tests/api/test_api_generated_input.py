"""The Python API's acceptance test for hostile input: generated input (Hypothesis,
no deadline) to SelectionReport.from_json, the event decoders (event_from_json,
event_from_dict, events_from_json_lines), the trace decoders of cupellation.otel
(OTLP/JSON, Jaeger JSON, OTLP protobuf) and read_runs (plain and gzip logs, gzip
with corrupt deflate data included) raises only the library's named errors
(CupelError subclasses): never KeyError, TypeError, zlib.error, RecursionError,
OverflowError or any other exception from inside.

Inputs are real artifacts of a demo run (its events as JSON lines, its audit log,
its report, its spans in each trace format) mutated at the JSON level (values
replaced by hostile ones, keys deleted or renamed, containers nested deeply) and
at the byte level (bytes flipped, inserted, cut), and values generated from
scratch. The default run keeps the example counts small; the ``exhaustive``
variants run many more."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import tempfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import ContextBudget, ContextItem, SelectionReport, build_report
from cupellation.events import event_from_dict, event_from_json, events_from_json_lines
from cupellation.exceptions import CupelError, InvalidTextError, InvalidTypeError
from cupellation.logs import read_runs
from cupellation.otel import (
    parse_trace,
    read_trace,
    spans_from_jaeger_json,
    spans_from_otlp_json,
)

from ._artifacts import demo_artifacts

#: (examples in the default run, examples in the exhaustive run) per property. The
#: exhaustive count was 2,500 until 0.4: the ten properties then took 6.5 of the suite's
#: 31 minutes on 2 cores. 600 (6,000 inputs over the readers) keeps every mutation kind
#: drawn many times; scripts/ and CUPELLATION_* do not change it, edit it here to go deeper.
DEFAULT, EXHAUSTIVE = 100, 600
EXAMPLES = [pytest.param(DEFAULT, id="default"),
            pytest.param(EXHAUSTIVE, id="exhaustive", marks=pytest.mark.exhaustive)]

WIDE_INTS = [2**63, -(2**63) - 1, 2**64, 10**30, -(10**30), 2**63 - 1, -1, 0]
HOSTILE_TEXT = ["", " ", "\ud800", "x\udfff", "\u2028", "\x00", "\ufeff{", "é😀", "NaN",
                "Infinity", "-1", "9" * 40, "Message", "Full", "StageOnly", "Slice",
                "run_started", "item_excluded", "BudgetExceeded", "Deduplicated", "{",
                "[]", '{"a":1}', "sha256:", "1970-01-01T00:00:00Z",
                "9999-12-31T23:59:59.999999-05:00", "0001-01-01T00:00:00+05:00",
                "ffffffffffffffffffffffffffffffff", "AAAAAAAAAAAAAAAAAAAAAA=="]
FLOATS = [0.5, -0.0, 1e308, -1e308, 5e-324, float("nan"), float("inf"), float("-inf")]

#: Texts every JSON decoder meets sooner or later, mixed into the generated ones.
HOSTILE_DOCUMENTS = [
    b"[" * 5000, b'{"a":' * 3000, b"[" * 5000 + b"]" * 5000, b'"\\ud800"',
    b'{"schema":2,"type":"stage_started","run_id":"\\udfff","seq":0}',
    b"9" * 5000, b'{"seq":' + b"9" * 5000 + b"}", b"1e999", b"-1e999", b"NaN", b"\xef\xbb\xbf{}",
    b"\xed\xa0\x80", b"\x1f\x8b\x08\x00", b"", b"\n", b"null", b"{}", b"[]",
]
hostile_documents = st.sampled_from(HOSTILE_DOCUMENTS)

scalars = st.one_of(
    st.none(), st.booleans(), st.sampled_from(WIDE_INTS), st.integers(),
    st.sampled_from(FLOATS), st.floats(), st.sampled_from(HOSTILE_TEXT), st.text(max_size=12))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=8)), inner,
                      max_size=4),
    max_leaves=12)


def _deep(levels: int, leaf: Any) -> Any:
    for level in range(levels):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


def _paths(value: Any) -> list[tuple[Any, ...]]:
    """The places in a JSON value (the root too), down to 100 levels."""
    found: list[tuple[Any, ...]] = []
    pending: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while pending:
        path, current = pending.pop()
        found.append(path)
        if len(path) >= 100:
            continue
        if isinstance(current, dict):
            pending.extend(((*path, key), inner) for key, inner in current.items())
        elif isinstance(current, list):
            pending.extend(((*path, index), inner) for index, inner in enumerate(current))
    return found


def _mutate_json(data: st.DataObject, value: Any) -> Any:
    """``value`` with one to three hostile changes at drawn places."""
    value = json.loads(json.dumps(value))
    for _ in range(data.draw(st.integers(1, 3), label="changes")):
        paths = _paths(value)
        path = data.draw(st.sampled_from(paths), label="path")
        op = data.draw(st.sampled_from(
            ["replace", "replace", "delete", "rename", "wrap", "deep", "duplicate"]),
            label="op")
        new: Any = data.draw(json_values, label="value")
        if op == "deep":  # the last change: nothing walks into it afterwards
            new = _deep(data.draw(st.sampled_from([63, 64, 65, 200, 3000])), new)
        if not path:
            value = new if op != "wrap" else [value]
            if op == "deep":
                break
            continue
        parent = value
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if op == "delete":
            del parent[last]
        elif op == "rename" and isinstance(parent, dict):
            parent[data.draw(st.sampled_from(HOSTILE_TEXT), label="key")] = parent.pop(last)
        elif op == "wrap":
            parent[last] = [parent[last]]
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(last, parent[last])
        else:
            parent[last] = new
        if op == "deep":
            break
    return value


def _dumps(data: st.DataObject, value: Any) -> str:
    """JSON text of ``value``; NaN and infinities as their (invalid) tokens, lone
    surrogates as escapes or raw."""
    try:
        return json.dumps(value, ensure_ascii=data.draw(st.booleans(), label="ascii"))
    except RecursionError:
        return "[" * 5000


def _mutate_bytes(data: st.DataObject, raw: bytes) -> bytes:
    """``raw`` with a few bytes flipped, inserted or cut, or cut short."""
    buffer = bytearray(raw)
    for _ in range(data.draw(st.integers(0, 3), label="byte changes")):
        if not buffer:
            break
        at = data.draw(st.integers(0, len(buffer) - 1), label="at")
        op = data.draw(st.sampled_from(["flip", "insert", "cut", "truncate"]), label="byte op")
        if op == "flip":
            buffer[at] ^= data.draw(st.integers(1, 255), label="mask")
        elif op == "insert":
            buffer[at:at] = data.draw(st.binary(min_size=1, max_size=4), label="bytes")
        elif op == "cut":
            del buffer[at:at + data.draw(st.integers(1, 8), label="cut")]
        else:
            del buffer[at:]
    return bytes(buffer)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def only_named_errors(call: Callable[[], object]) -> None:
    """Run ``call``; a CupelError is an answer, anything else fails the test."""
    with contextlib.suppress(CupelError):
        call()


def _settings(examples: int) -> Callable[[Any], Any]:
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@cache
def _demo_report_json() -> str:
    return build_report(demo_artifacts().events).to_json()


def _event_lines() -> list[bytes]:
    return demo_artifacts().events_jsonl.splitlines()


# -- SelectionReport.from_json ---------------------------------------------------------


@pytest.mark.parametrize("examples", EXAMPLES)
def test_report_from_json_on_mutated_reports_raises_only_named_errors(examples: int) -> None:
    """The demo's report, mutated as JSON and as bytes, strictly or not."""
    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        value = _mutate_json(data, json.loads(_demo_report_json()))
        raw = _mutate_bytes(data, _dumps(data, value).encode("utf-8", "surrogatepass"))
        strict = data.draw(st.booleans(), label="strict")
        only_named_errors(lambda: SelectionReport.from_json(raw, strict=strict))
        only_named_errors(lambda: SelectionReport.from_json(_text(raw), strict=strict))
        only_named_errors(lambda: SelectionReport.from_dict(value, strict=strict))

    check()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_report_from_json_on_generated_values_raises_only_named_errors(examples: int) -> None:
    """JSON values and bytes generated from scratch, and report-shaped objects whose
    members are generated."""
    @_settings(examples)
    @given(value=json_values, raw=st.binary(max_size=64) | hostile_documents,
           members=st.dictionaries(st.sampled_from(
               ["events", "included", "excluded", "total_candidates",
                "total_tokens_considered", "count_requirement_shortfalls", "overflow",
                "incomplete"]), json_values))
    def check(value: Any, raw: bytes, members: dict[str, Any]) -> None:
        report = {"events": [], "included": [], "excluded": [], "total_candidates": 0,
                  "total_tokens_considered": 0, **members}
        for candidate in (value, report):
            only_named_errors(partial(SelectionReport.from_dict, candidate))
            only_named_errors(partial(SelectionReport.from_json, json.dumps(candidate)))
        only_named_errors(lambda: SelectionReport.from_json(raw))

    check()


# -- ContextItem and ContextBudget -----------------------------------------------------


@cache
def _item_and_budget() -> tuple[dict[str, Any], dict[str, Any]]:
    item = ContextItem(content="Doc 'Quotas': vCPU quotas are per project", tokens=60,
                       kind="Document", source="rag", priority=2, tags=("ops", "quota"),
                       metadata={"url": "https://example.invalid/q", "rank": [1, 2.5],
                                 "nested": {"ok": True}},
                       timestamp=datetime(2026, 11, 20, 9, 0, tzinfo=UTC),
                       future_relevance_hint=0.5, original_tokens=90)
    budget = ContextBudget(max_tokens=1000, target_tokens=800, output_reserve=100,
                           reserved_slots={"Message": 2},
                           estimation_safety_margin_percent=10.0)
    return item.to_dict(), budget.to_dict()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_items_and_budgets_from_json_on_mutated_values_raise_only_named_errors(
        examples: int) -> None:
    """A ContextItem and a ContextBudget with every field set, mutated as JSON and as
    bytes: from_dict and from_json give a value or a CupelError, and a value given
    round-trips through its own JSON."""
    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        owners: tuple[Any, ...] = (ContextItem, ContextBudget)
        for owner, sample in zip(owners, _item_and_budget(), strict=True):
            value = _mutate_json(data, sample)
            raw = _mutate_bytes(data, _dumps(data, value).encode("utf-8", "surrogatepass"))
            only_named_errors(lambda: owner.from_json(raw))  # noqa: B023
            only_named_errors(lambda: owner.from_json(_text(raw)))  # noqa: B023
            try:
                made = owner.from_dict(value)
            except CupelError:
                continue
            # Compared as JSON text: a NaN hint (allowed, written "NaN") is not == itself.
            assert owner.from_json(made.to_json()).to_json() == made.to_json()

    check()


# -- the event decoders ----------------------------------------------------------------


@pytest.mark.parametrize("examples", EXAMPLES)
def test_event_decoders_on_mutated_event_lines_raise_only_named_errors(examples: int) -> None:
    """Each line of the demo's events, mutated: event_from_json (text and bytes),
    event_from_dict (the mutated mapping) and events_from_json_lines over the whole
    run with that line replaced."""
    lines = _event_lines()

    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        number = data.draw(st.integers(0, len(lines) - 1), label="line")
        value = _mutate_json(data, json.loads(lines[number]))
        raw = _mutate_bytes(data, _dumps(data, value).encode("utf-8", "surrogatepass"))
        only_named_errors(lambda: event_from_json(raw, line=number + 1))
        only_named_errors(lambda: event_from_json(_text(raw)))
        only_named_errors(lambda: event_from_dict(value))
        whole = [*lines[:number], raw, *lines[number + 1:]]
        only_named_errors(lambda: list(events_from_json_lines(whole)))
        only_named_errors(lambda: list(events_from_json_lines(
            _text(b"\n".join(whole)).split("\n"))))

    check()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_event_decoders_on_generated_values_raise_only_named_errors(examples: int) -> None:
    """Generated JSON values, and flat records of a known type whose fields are
    generated (so every codec sees hostile values, not just the envelope)."""
    types = ["run_started", "stage_started", "stage_completed", "item_excluded",
             "item_included", "overflow", "count_shortfall", "run_completed", "run_failed",
             "future_type"]
    keys = sorted({key for line in _event_lines() for key in json.loads(line)})

    @_settings(examples)
    @given(value=json_values, kind=st.sampled_from(types),
           fields=st.dictionaries(st.sampled_from(keys), json_values, max_size=8),
           raw=st.binary(max_size=48) | hostile_documents)
    def check(value: Any, kind: str, fields: dict[str, Any], raw: bytes) -> None:
        record = {"schema": 2, "type": kind, "run_id": "r", "seq": 0, **fields}
        for candidate in (value, record):
            only_named_errors(partial(event_from_dict, candidate))
            only_named_errors(partial(event_from_json, json.dumps(candidate)))
        only_named_errors(lambda: event_from_json(raw))
        only_named_errors(lambda: list(events_from_json_lines([raw, json.dumps(record)])))

    check()


# -- the trace decoders ------------------------------------------------------------------


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("form", ["otlp_json", "jaeger_json"])
def test_trace_decoders_on_mutated_traces_raise_only_named_errors(
        examples: int, form: str) -> None:
    """The demo's spans as OTLP/JSON and as Jaeger JSON, mutated: the format's own
    reader, parse_trace (which recognises the format) and read_trace (which also
    rebuilds the runs)."""
    document = json.loads(getattr(demo_artifacts(), form))
    reader = spans_from_otlp_json if form == "otlp_json" else spans_from_jaeger_json

    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        value = _mutate_json(data, document)
        raw = _mutate_bytes(data, _dumps(data, value).encode("utf-8", "surrogatepass"))
        only_named_errors(lambda: reader(raw))
        only_named_errors(lambda: reader(_text(raw)))
        only_named_errors(lambda: parse_trace(raw))
        only_named_errors(lambda: read_trace(raw))
        only_named_errors(lambda: read_trace(_text(raw)))

    check()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_trace_decoders_on_mutated_protobuf_raise_only_named_errors(examples: int) -> None:
    """The demo's spans as OTLP protobuf, with bytes flipped, inserted or cut."""
    proto = demo_artifacts().otlp_proto

    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        raw = _mutate_bytes(data, proto)
        only_named_errors(lambda: parse_trace(raw))
        only_named_errors(lambda: read_trace(raw))

    check()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_trace_decoders_on_generated_values_raise_only_named_errors(examples: int) -> None:
    """Generated values, and OTLP and Jaeger documents whose spans are generated."""
    @_settings(examples)
    @given(value=json_values, spans=st.lists(json_values, max_size=3),
           raw=st.binary(max_size=64) | hostile_documents)
    def check(value: Any, spans: list[Any], raw: bytes) -> None:
        otlp = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
        jaeger = {"data": [{"traceID": "1", "spans": spans}]}
        for document in (value, otlp, jaeger):
            text = json.dumps(document)
            only_named_errors(partial(parse_trace, text))
            only_named_errors(partial(read_trace, text))
            only_named_errors(partial(spans_from_otlp_json, document))
            only_named_errors(partial(spans_from_jaeger_json, document))
        only_named_errors(lambda: parse_trace(raw))
        only_named_errors(lambda: read_trace(raw))

    check()


# -- read_runs -------------------------------------------------------------------------------


def _read_all(source: Any, **options: Any) -> None:
    """read_runs over ``source``: it never raises for what a file holds, and accounts
    for every line it read."""
    reader = read_runs(source, **options)
    runs = list(reader)
    assert reader.stats.lines == reader.stats.accounted
    for run in runs:
        assert isinstance(run.report, SelectionReport)


@pytest.mark.parametrize("examples", EXAMPLES)
def test_read_runs_on_mutated_logs_never_raises(examples: int) -> None:
    """The demo's audit log with lines mutated, dropped, repeated or swapped, then
    mutated as bytes, read plain and gzipped (the gzip stream itself mutated too,
    so its deflate data is corrupt or cut), from a file object and from a path."""
    lines = demo_artifacts().audit_log.splitlines()

    @_settings(examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        log = list(lines)
        for _ in range(data.draw(st.integers(1, 3), label="line changes")):
            at = data.draw(st.integers(0, len(log) - 1), label="line")
            op = data.draw(st.sampled_from(["mutate", "mutate", "drop", "repeat", "swap"]),
                           label="line op")
            if op == "mutate" and log[at] in lines:  # an original line: still shallow JSON
                value = _mutate_json(data, json.loads(log[at]))
                log[at] = _dumps(data, value).encode("utf-8", "surrogatepass")
            elif op == "drop" and len(log) > 1:
                del log[at]
            elif op == "repeat":
                log.insert(at, log[at])
            else:
                log[0], log[at] = log[at], log[0]
        raw = _mutate_bytes(data, b"\n".join(log) + b"\n")
        _read_all(io.BytesIO(raw), rotated=False)
        packed = _mutate_bytes(data, gzip.compress(raw))
        _read_all(io.BytesIO(packed), rotated=False)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "audit.jsonl"
            path.write_bytes(packed)
            _read_all(path)
            run_id = demo_artifacts().events[0].run_id
            _read_all(path, run_id=data.draw(st.sampled_from(["", "r", run_id])),
                      since="2000-01-01")

    check()


@pytest.mark.parametrize("examples", EXAMPLES)
def test_read_runs_on_generated_lines_never_raises(examples: int) -> None:
    """Lines generated from scratch: JSON values, records with generated fields,
    envelopes a shipper might add, raw bytes."""
    keys = sorted({key for line in _event_lines() for key in json.loads(line)})

    @_settings(examples)
    @given(values=st.lists(json_values, max_size=4),
           fields=st.dictionaries(st.sampled_from(keys), json_values, max_size=6),
           raw=st.lists(st.binary(max_size=40) | hostile_documents, max_size=3),
           kind=st.sampled_from(["item_excluded", "run_started", "run_completed", "x"]))
    def check(values: list[Any], fields: dict[str, Any], raw: list[bytes], kind: str) -> None:
        record = {"schema": 2, "type": kind, "run_id": "r", "seq": 0, **fields}
        lines = [json.dumps(v).encode("utf-8", "surrogatepass") for v in values]
        lines += [json.dumps(record).encode("utf-8", "surrogatepass"),
                  json.dumps({"log": json.dumps(record)}).encode("utf-8", "surrogatepass"),
                  b"2024-01-01T00:00:00Z stdout F " + json.dumps(record).encode(
                      "utf-8", "surrogatepass"),
                  *raw]
        _read_all(io.BytesIO(b"\n".join(lines)), rotated=False)

    check()


def test_a_run_id_that_is_not_text_is_refused_by_name() -> None:
    """read_runs(run_id=...) with a lone surrogate (which no log line can hold) or a
    number is refused at once, naming run_id."""
    with pytest.raises(InvalidTextError) as info:
        read_runs(io.BytesIO(b""), run_id="x\ud800")
    assert info.value.field == "run_id"
    with pytest.raises(InvalidTypeError):
        read_runs(io.BytesIO(b""), run_id=7)  # type: ignore[arg-type]


def test_a_corrupt_gzip_is_a_source_error_naming_the_file(tmp_path: Path) -> None:
    """Corrupt deflate data, a bad CRC, a cut stream and a broken header: the reader
    names the file in stats.source_errors and goes on; no zlib.error or EOFError
    escapes, and the runs read before the damage are kept."""
    raw = demo_artifacts().audit_log * 40
    packed = gzip.compress(raw)
    broken = {
        "deflate.gz": packed[:30] + bytes(b ^ 0x5A for b in packed[30:60]) + packed[60:],
        "crc.gz": packed[:-8] + bytes(b ^ 0xFF for b in packed[-8:-4]) + packed[-4:],
        "cut.gz": packed[:len(packed) // 2],
        "header.gz": b"\x1f\x8b\x08\xff" + b"\x00" * 40,
    }
    for name, data in broken.items():
        path = tmp_path / name
        path.write_bytes(data)
        reader = read_runs(path, rotated=False)
        list(reader)
        assert len(reader.stats.source_errors) == 1, name
        assert reader.stats.source_errors[0].startswith(f"{path}: stopped reading"), name
    with pytest.raises(zlib.error):  # the data really is corrupt deflate data
        gzip.decompress(broken["deflate.gz"])
