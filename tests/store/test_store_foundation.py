"""The store's foundation: URLs and credentials, the one chDB engine, the Collector's
tables, the rows as the Collector writes them, and ``load`` of audit logs — each
checked against the file reader's answer on the same data."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import build_report
from cupellation.events import Verification
from cupellation.exceptions import (
    InvalidValueError,
    StoreError,
    StoreInUseError,
    StoreSchemaError,
)
from cupellation.logs import read_runs
from cupellation.settings import (
    STORE_PASSWORD_ENV_VAR,
    STORE_PASSWORD_FILE_ENV_VAR,
    STORE_USER_ENV_VAR,
    resolve_store_credentials,
)
from cupellation.store import (
    LOGS_TABLE,
    TRACES_TABLE,
    Store,
    attribute_text,
    go_float,
    open_store,
    parse_store_url,
    typed_flat,
)

from ._runs import edge_run, write_random_log

#: ES6 number-to-string as Go's float64AsString writes it (values from the ECMAScript
#: and Go test vectors: the exponent cut-offs at 1e-6 and 1e21).
GO_FLOATS = [
    (0.5, "0.5"), (1.0, "1"), (-0.0, "-0"), (0.0, "0"), (1e-7, "1e-7"), (1e-6, "0.000001"),
    (1.5e21, "1.5e+21"), (1e21, "1e+21"), (1e20, "100000000000000000000"),
    (123456789.123, "123456789.123"), (-2.5e-10, "-2.5e-10"),
    (0.30000000000000004, "0.30000000000000004"), (5e-324, "5e-324"),
    (1.7976931348623157e308, "1.7976931348623157e+308"), (9.999999999999999e20,
                                                         "999999999999999900000"),
]


@pytest.mark.parametrize(("value", "text"), GO_FLOATS)
def test_floats_are_written_as_go_writes_them(value: float, text: str) -> None:
    """A double attribute becomes the string pdata's float64AsString makes (ES6 style:
    fixed notation from 1e-6 up to 1e21, else an exponent without padding)."""
    assert go_float(value) == text
    assert attribute_text(value) == text


def test_other_values_are_written_as_go_writes_them() -> None:
    """Ints are decimal, bools true/false, strings themselves, lists compact JSON with
    Go's HTML escapes and ES6 floats."""
    assert attribute_text(-(2**63)) == "-9223372036854775808"
    assert attribute_text(True) == "true"
    assert attribute_text("é\u2028<") == "é\u2028<"
    assert attribute_text(["a<b", "\u2028", 1, 1e21, 0.5, False]) == (
        '["a\\u003cb","\\u2028",1,1e+21,0.5,false]')


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_float_reads_back_as_itself(value: float) -> None:
    """Every finite double, written as Go writes it, reads back as the same double
    (a float-typed key), whichever way the exponent is spelt."""
    assert typed_flat({"score": go_float(value)})["score"] == value
    assert typed_flat({"score": repr(value)})["score"] == value


def test_strings_are_read_by_the_declared_type() -> None:
    """A string is read as its key's declared type — text stays text even when it looks
    like a number; a value that does not parse stays text for the decoder to refuse."""
    flat = typed_flat({"seq": "7", "item.content": "42", "item.tags": '["a","b"]',
                       "item.pinned": "true", "score": "1.5e21", "items_in": "x",
                       "pipeline.deduplication": "false"})
    assert flat == {"seq": 7, "item.content": "42", "item.tags": ["a", "b"],
                    "item.pinned": True, "score": 1.5e21, "items_in": "x",
                    "pipeline.deduplication": False}


def test_urls_name_a_place_and_never_a_password(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    """chdb:// and http(s):// URLs are read; a password in a URL, another scheme or a bad
    database name is refused naming the URL (never echoing the password); credentials
    come from the environment, the password file winning."""
    place = parse_store_url("chdb:///var/x?database=fleet")
    assert (place.embedded, place.path, place.database) == (True, "/var/x", "fleet")
    place = parse_store_url("https://ch.example:9440/audit")
    assert (place.host, place.port, place.database, place.embedded) == (
        "ch.example", 9440, "audit", False)
    assert parse_store_url("http://ch").port == 8123
    with pytest.raises(InvalidValueError, match="password") as caught:
        parse_store_url("http://me:s3cret@ch:8123/db")
    assert "s3cret" not in str(caught.value)
    for bad in ("ftp://x", "chdb://", "http:///db", "http://ch/bad-name!"):
        with pytest.raises(InvalidValueError, match="url"):
            parse_store_url(bad)
    monkeypatch.setenv(STORE_USER_ENV_VAR, "auditor")
    monkeypatch.setenv(STORE_PASSWORD_ENV_VAR, "from-env")
    assert resolve_store_credentials() == ("auditor", "from-env")
    secret = tmp_path / "secret"
    secret.write_text("from-file\nignored\n", encoding="utf-8")
    monkeypatch.setenv(STORE_PASSWORD_FILE_ENV_VAR, str(secret))
    assert resolve_store_credentials() == ("auditor", "from-file")
    monkeypatch.setenv(STORE_PASSWORD_FILE_ENV_VAR, str(tmp_path / "missing"))
    with pytest.raises(InvalidValueError, match=STORE_PASSWORD_FILE_ENV_VAR):
        resolve_store_credentials()


def test_one_embedded_engine_per_process(store: Store, tmp_path: Path) -> None:
    """While one chDB store is open, the same path opens again but another path is a
    StoreInUseError naming both; once every store of the first path is closed, the
    other path opens."""
    again = open_store(store.url, database="again")
    again.close()
    with pytest.raises(StoreInUseError, match="one engine per process"):
        open_store(f"chdb://{tmp_path}/other")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.run_ids()
    other = open_store(f"chdb://{tmp_path}/other")
    other.close()


def test_the_tables_are_the_collectors(store: Store) -> None:
    """otel_logs and otel_traces are created with the exporter's columns, in its order
    and types (Map attributes), plus only an index on the run id."""
    def columns(table: str) -> list[tuple[str, str]]:
        return [(str(n), str(t)) for n, t in store.session.rows(
            "SELECT name, type FROM system.columns WHERE database = {d:String} AND "
            "table = {t:String} ORDER BY position", {"d": store.session.database, "t": table})]
    logs = columns(LOGS_TABLE)
    assert [name for name, _ in logs[:16]] == [
        "Timestamp", "TraceId", "SpanId", "TraceFlags", "SeverityText", "SeverityNumber",
        "ServiceName", "Body", "ResourceSchemaUrl", "ResourceAttributes", "ScopeSchemaUrl",
        "ScopeName", "ScopeVersion", "ScopeAttributes", "LogAttributes", "EventName"]
    assert dict(logs)["LogAttributes"] == "Map(LowCardinality(String), String)"
    assert len(logs) == 16 + 8  # the exporter's eight materialised resource columns
    traces = dict(columns(TRACES_TABLE))
    assert traces["SpanAttributes"] == "Map(LowCardinality(String), String)"
    assert traces["Events.Attributes"] == "Array(Map(LowCardinality(String), String))"
    indexes = [str(r[0]) for r in store.session.rows(
        "SELECT name FROM system.data_skipping_indices WHERE database = {d:String} AND "
        "table = 'otel_logs'", {"d": store.session.database})]
    assert "idx_cupel_run_id" in indexes
    assert "idx_log_attr_value" in indexes


def test_tables_in_json_mode_are_refused(store_dir: Path) -> None:
    """An otel_logs made by the exporter's JSON mode (LogAttributes JSON) is refused
    with a StoreSchemaError naming the table and column, and the store is closed."""
    url = f"chdb://{store_dir}?database=jsonmode"
    with open_store(url) as store:
        store.session.command(f"DROP TABLE {store.logs_table}")
        store.session.command(f"CREATE TABLE {store.logs_table} (Timestamp DateTime64(9), "
                              "TraceId String, SpanId String, ServiceName String, Body "
                              "String, ResourceAttributes JSON, LogAttributes JSON) "
                              "ENGINE = MergeTree ORDER BY Timestamp")
    with pytest.raises(StoreSchemaError, match="otel_logs: column LogAttributes is JSON"):
        open_store(url)
    with open_store(url, database="jsonmode_after") as store:  # the engine was freed
        assert store.run_ids() == []


def _by_run(runs: object) -> dict[str, object]:
    return {run.run_id: run for run in runs}  # type: ignore[attr-defined]


@pytest.mark.parametrize("stream", [False, True], ids=["file()", "streamed"])
def test_a_loaded_log_reads_back_as_the_file_does(store: Store, tmp_path: Path,
                                                  stream: bool) -> None:
    """Runs loaded from an audit log (chDB's file() or the server's streamed INSERT)
    read back through the store with the file's reports, digests verified; a second
    load adds nothing; blank, other and damaged lines are counted, damaged ones named
    by line."""
    log = tmp_path / "audit.jsonl"
    write_random_log(log, seed=3, runs=25)
    with log.open("a", encoding="utf-8") as handle:
        handle.write('\n{"run_id": "x", "seq": \nfrom another program\n')
    stats = store.load([log], service="svc", stream=stream)
    records = sum(1 for line in log.read_bytes().split(b"\n") if line.startswith(b'{"type"'))
    assert (stats.loaded, stats.skipped, stats.damaged, stats.other_lines,
            stats.blank_lines, stats.runs) == (records, 0, 1, 1, 1, 25)
    assert [d.line for d in stats.damaged_lines] == [records + 2]
    again = store.load([log], stream=stream)
    assert (again.loaded, again.skipped) == (0, records)
    files = _by_run(read_runs(str(log)))
    stored = _by_run(store.read_runs())
    assert stored.keys() == files.keys()
    for run_id, run in files.items():
        assert stored[run_id].report == run.report  # type: ignore[attr-defined]
        assert stored[run_id].verification is Verification.VERIFIED  # type: ignore[attr-defined]
    services = store.session.rows(f"SELECT DISTINCT ServiceName, Body != '' FROM "
                                  f"{store.logs_table}")
    assert services == [("svc", True)]


def test_gzip_logs_load(store: Store, tmp_path: Path) -> None:
    """A gzip audit log loads (file() on chDB, decompressed while streamed on a server)
    with the plain log's rows."""
    plain = tmp_path / "audit.jsonl"
    write_random_log(plain, seed=4, runs=5)
    packed = tmp_path / "audit.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    first = store.load([packed])
    assert first.loaded == plain.read_bytes().count(b"\n")
    assert store.load([packed], stream=True).skipped == first.loaded


def test_rows_start_at_their_runs_start(store: Store, tmp_path: Path) -> None:
    """Every row of a loaded run carries the run's started_at as Timestamp — also the
    rows of a run whose start was loaded from an earlier file."""
    log = tmp_path / "audit.jsonl"
    write_random_log(log, seed=5, runs=3)
    lines = [line + "\n" for line in log.read_text(encoding="utf-8").split("\n") if line]
    (tmp_path / "a.jsonl").write_text("".join(lines[:3]), encoding="utf-8")
    (tmp_path / "b.jsonl").write_text("".join(lines[3:]), encoding="utf-8")
    store.load([tmp_path / "a.jsonl"])
    store.load([tmp_path / "b.jsonl"])
    starts = {json.loads(line)["run_id"]: json.loads(line)["started_at"]
              for line in lines if '"run_started"' in line}
    rows = store.session.rows(
        f"SELECT LogAttributes['run_id'], groupUniqArray(toString(Timestamp)) FROM "
        f"{store.logs_table} GROUP BY 1")
    stamped = {str(run): sorted(str(t)[:19] for t in stamps) for run, stamps in rows}
    assert stamped == {run: [start[:19].replace("T", " ")] for run, start in starts.items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(contents=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6),
       hints=st.lists(st.sampled_from([1e21, 9.999999999999999e20, 1e-7, 1e-6, 5e-324, 0.5,
                                       -0.0, 1.7976931348623157e308]), min_size=6,
                      max_size=6),
       tokens=st.lists(st.sampled_from([0, 1, 2**53 + 1, 2**60]), min_size=6,
                       max_size=6))
def test_rows_the_collector_writes_rebuild_the_run(store: Store, contents: list[str],
                                                   hints: list[float],
                                                   tokens: list[int]) -> None:
    """A run written as the Collector's exporter writes OTLP log records (every value
    through Go's AsString) reads back with its in-process report — the one the file
    reader rebuilds from the same records — and a verified digest: floats at ES6's
    boundaries, any Unicode, ints past 2**53 up to int64's largest."""
    events, records = edge_run(contents, hints, tokens)
    store.write_records(records, service="svc")
    run_id = events[0].run_id
    runs = list(store.read_runs(run_ids=[run_id]))
    lines = b"".join(msgspec.json.encode(record) + b"\n" for record in records)
    from_file = list(read_runs(io.BytesIO(lines)))
    assert len(runs) == len(from_file) == 1
    assert runs[0].report == from_file[0].report == build_report(events)
    assert runs[0].verification is from_file[0].verification is Verification.VERIFIED


def test_runs_partly_stored_are_listed_incomplete(store: Store) -> None:
    """A run whose rows are partly in the store (one lost, as a Collector drop or a TTL
    would), a run without its end, and a row whose value does not parse as its
    declared type are each read back incomplete or damaged, never folded silently."""
    _, lost = edge_run(["a", "b", "c"], [0.5, 0.5, 0.5], [1, 2, 3])
    _, unended = edge_run(["d", "e"], [0.5, 0.5], [1, 2])
    _, retyped = edge_run(["f", "g"], [0.5, 0.5], [1, 2])
    retyped = [dict(r, **{"item.tokens": "many"}) if r["type"] == "item_included" else r
               for r in retyped]
    store.write_records([r for r in lost if r["seq"] != 3] + unended[:-1] + retyped)
    runs = {run.run_id: run for run in store.read_runs()}
    reader = store.read_runs()
    assert len(list(reader)) == 3
    assert reader.stats.damaged_lines == 2  # the two retyped item rows, named by the reader
    assert "item.tokens" in reader.stats.damaged[0].problem
    for run in runs.values():
        assert not run.report.is_complete
    assert any("missing from the sequence: seq 3" in p
               for p in runs[lost[0]["run_id"]].report.incomplete)
    assert not runs[unended[0]["run_id"]].finished


def test_the_counting_pass_agrees_with_the_insert_on_odd_envelopes(
        store: Store, tmp_path: Path) -> None:
    """The counting pass reads only the envelope's keys while the INSERT reads the whole
    Map: on lines whose envelope is odd (numbers, booleans, a key written twice, nested
    values, a seq given as a string or not a number) both still agree on which lines are
    records and on their runs, so a first load's count (taken from the counting pass,
    without reading the rows back) is the number of rows written, and every row carries
    its run's started_at."""
    start = '"started_at": "2026-01-02T03:04:05Z"'
    lines = [
        f'{{"type": "run_started", "schema": "s", "run_id": "a", "seq": 0, {start}}}',
        '{"type": "x", "schema": "s", "run_id": 7, "seq": "1"}',
        '{"type": true, "schema": "s", "run_id": "a", "seq": 2, "v": {"n": [1, 2]}}',
        '{"type": "x", "schema": "s", "run_id": "b", "seq": 3, "run_id": "c"}',
        '{"type": "x", "schema": "s", "run_id": "a", "seq": 4.0}',
        '{"type": "x", "schema": "s", "run_id": "a", "seq": -1}',
        '{"type": "x", "schema": "s", "run_id": "a", "seq": "01"}',
        '{"type": "x", "schema": 1.5e3, "run_id": "a", "seq": 5, "seq": "z"}',
    ]
    log = tmp_path / "odd.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = store.load([log])
    rows = store.session.rows(
        f"SELECT LogAttributes['run_id'], toString(Timestamp) FROM {store.logs_table}")
    assert stats.loaded == len(rows) == stats.loaded + stats.skipped
    assert stats.runs == len({run for run, _ in rows})
    assert stats.loaded + stats.damaged == len(lines)
    assert {stamp[:19] for run, stamp in rows if run == "a"} == {"2026-01-02 03:04:05"}
