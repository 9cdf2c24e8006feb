"""read_runs: picking records out of any log, grouping interleaved runs, counting
every line, surviving any input, and the fast path agreeing with the spine."""

from __future__ import annotations

import gzip
import io
import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupellation import SelectionReport
from cupellation.events import EVENT_SCHEMA_VERSION, _records, event_from_dict, event_to_json
from cupellation.logs import AuditLog, _decode, _reader, read_runs
from cupellation.logs._decode import FastDecoder, fast_event
from pipeline._runs import RecordedRun, runs

from ._workload import run_once


def _log(tmp_path: Path, count: int = 5, seed: int = 1, name: str = "a.jsonl"
         ) -> tuple[Path, dict[str, SelectionReport]]:
    path = tmp_path / name
    rng = random.Random(seed)
    with AuditLog(path) as audit:
        reports = dict(run_once(rng, audit, count=rng.randint(1, 12)) for _ in range(count))
    return path, reports


def _lines(path: Path) -> list[str]:
    # Not splitlines(): content may hold U+2028, which JSON leaves raw.
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def test_interleaved_runs_from_many_writers_are_grouped_by_run_id(tmp_path: Path) -> None:
    """Lines of several runs shuffled together (each run's own order kept) still give
    one complete report per run, equal to the in-process one."""
    path, reports = _log(tmp_path, count=8)
    by_run: dict[str, list[str]] = {}
    for line in _lines(path):
        by_run.setdefault(json.loads(line)["run_id"], []).append(line)
    rng = random.Random(2)
    queues = list(by_run.values())
    mixed = []
    while queues:
        queue = rng.choice(queues)
        mixed.append(queue.pop(0))
        if not queue:
            queues.remove(queue)
    rebuilt = {run.run_id: run.report for run in read_runs(io.StringIO("\n".join(mixed)))}
    assert rebuilt == reports


def test_records_are_found_inside_shipper_envelopes_and_text_prefixes(tmp_path: Path) -> None:
    """The same records nested as {"log": {...}}, {"record": {...}}, {"message": "<json>"},
    Fluent Bit/Vector {"log": "<json>\\n"}, after a container-runtime prefix, and mixed
    with other programs' lines all rebuild the same report; the other lines are counted
    as other, none as damaged."""
    path, reports = _log(tmp_path, count=1)
    wrappers: list[Callable[[Any], Any]] = [
        lambda r: {"log": r},
        lambda r: {"record": r, "host": "a"},
        lambda r: {"message": json.dumps(r), "level": "info"},
        lambda r: {"log": json.dumps(r) + "\n", "stream": "stdout", "time": "t"},
        lambda r: {"kubernetes": {"pod": "x"}, "data": {"json": r}},
    ]
    lines = []
    for k, line in enumerate(_lines(path)):
        record = json.loads(line)
        if k % 7 == 6:
            lines.append("2024-05-01T10:00:00Z stdout F " + line)
        else:
            lines.append(json.dumps(wrappers[k % len(wrappers)](record)))
        lines.append('{"level": "info", "msg": "GET /health 200"}')
        lines.append("plain text from another program")
    reader = read_runs(io.StringIO("\n".join(lines) + "\n\n"))
    assert {run.run_id: run.report for run in reader} == reports
    records = len(_lines(path))
    assert reader.stats.records == records
    assert reader.stats.other_lines == 2 * records
    assert reader.stats.blank_lines == 1
    assert reader.stats.damaged_lines == 0


def test_damaged_lines_are_counted_with_file_and_line_and_a_gap_makes_incomplete(
        tmp_path: Path) -> None:
    """A truncated line, a mistyped field and a deleted line: the first two are damaged
    (named with file and line number), the run with the hole says which seq is missing,
    and every line is accounted for."""
    path, _ = _log(tmp_path, count=1)
    lines = _lines(path)
    assert len(lines) > 6
    lines[2] = lines[2][:40]
    lines[3] = lines[3].replace('"seq":3', '"seq":"three"')
    del lines[5]
    damaged = tmp_path / "d.jsonl"
    damaged.write_text("\n".join(lines) + "\n")
    reader = read_runs(damaged)
    (run,) = list(reader)
    stats = reader.stats
    assert stats.damaged_lines == 2
    assert [(d.source, d.line) for d in stats.damaged] == [(str(damaged), 3), (str(damaged), 4)]
    assert "seq" in stats.damaged[1].problem
    assert not run.is_complete
    assert any("missing from the sequence" in p and "5" in p for p in run.report.incomplete)
    assert stats.lines == stats.accounted == len(lines)


def test_future_schema_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    """Records of a newer schema are counted as such and skipped; the run they belonged
    to is reported incomplete, and nothing raises."""
    path, _ = _log(tmp_path, count=1)
    lines = _lines(path)
    newer = [line.replace(f'"schema":{EVENT_SCHEMA_VERSION}',
                          f'"schema":{EVENT_SCHEMA_VERSION + 1}') for line in lines[:3]]
    reader = read_runs(io.StringIO("\n".join(newer + lines[3:])))
    (run,) = list(reader)
    assert reader.stats.future_schema_lines == 3
    assert reader.stats.damaged_lines == 0
    assert not run.is_complete


def test_an_unfinished_run_is_reported_at_the_end_with_what_it_has(tmp_path: Path) -> None:
    """A run whose end never came is yielded when the input ends, after the finished
    runs, saying that run_completed is missing."""
    path, reports = _log(tmp_path, count=2)
    lines = _lines(path)
    first_run = json.loads(lines[0])["run_id"]
    cut = [line for line in lines
           if not (json.loads(line)["run_id"] == first_run
                   and json.loads(line)["type"] == "run_completed")]
    found = list(read_runs(io.StringIO("\n".join(cut))))
    assert [run.run_id for run in found][-1] == first_run
    assert found[-1].finished is False
    assert any("no run_completed" in p for p in found[-1].report.incomplete)
    assert found[0].report == reports[found[0].run_id]


def test_gzip_is_detected_by_magic_and_a_truncated_gzip_is_reported(tmp_path: Path) -> None:
    """A gzip file is read whatever its name; one cut short yields what it holds and a
    source error instead of an exception."""
    path, reports = _log(tmp_path, count=3)
    packed = tmp_path / "plain-name.log"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert {r.run_id: r.report for r in read_runs(packed)} == reports
    cut = tmp_path / "cut.log"
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size // 2])
    reader = read_runs(cut)
    list(reader)
    assert reader.stats.source_errors
    assert "truncated" in reader.stats.source_errors[0]


def test_standard_input_and_binary_streams_are_read(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """'-' reads standard input (its binary buffer)."""
    path, reports = _log(tmp_path, count=2)

    class FakeStdin(io.TextIOWrapper):
        pass

    monkeypatch.setattr("sys.stdin", FakeStdin(io.BytesIO(path.read_bytes())))
    assert {r.run_id: r.report for r in read_runs("-")} == reports


def test_time_window_and_run_id_filters(tmp_path: Path) -> None:
    """since/until keep runs started in the window; run_id keeps one run and skips
    other lines unread (counted as skipped); a bad time is refused at once."""
    path, reports = _log(tmp_path, count=4)
    all_runs = list(read_runs(path))
    starts = sorted(run.started_at for run in all_runs if run.started_at is not None)
    later = list(read_runs(path, since=starts[2]))
    assert {r.run_id for r in later} == {r.run_id for r in all_runs
                                         if r.started_at is not None and r.started_at >= starts[2]}
    assert list(read_runs(path, until="2000-01-01")) == []
    target = all_runs[1].run_id
    reader = read_runs(path, run_id=target)
    assert [r.report for r in reader] == [reports[target]]
    assert reader.stats.skipped_lines > 0
    with pytest.raises(ValueError, match="since"):
        read_runs(path, since="yesterday")


def test_memory_stays_bounded_as_completed_runs_accumulate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader keeps no state for runs it has yielded: after 400 runs the open-run
    table is empty, and the traced memory peak reading 400 runs is about that of
    reading 40 (well under twice), not ten times. (The bounded caches — names and
    metadata checked once, remembered run ids — are made small here so that both reads
    fill them.)"""
    monkeypatch.setattr(_records, "_CACHE_LIMIT", 64)
    monkeypatch.setattr(_decode, "_NAMES_KEPT", 64)
    monkeypatch.setattr(_reader, "_ENDED_REMEMBERED", 16)
    rng = random.Random(9)
    small, large = tmp_path / "s.jsonl", tmp_path / "l.jsonl"
    with AuditLog(small) as a, AuditLog(large) as b:
        for k in range(400):
            if k < 40:
                run_once(random.Random(k), a, count=30)
            run_once(random.Random(k), b, count=30)
    del rng

    def peak(path: Path) -> int:
        for cache in (_records.METADATA, _decode._kinds, _decode._sources):
            cache.clear()
        tracemalloc.start()
        reader = read_runs(path)
        for _ in reader:
            pass
        assert not reader._open
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    assert peak(large) < 2 * peak(small)


def test_more_open_runs_than_allowed_yields_the_oldest_early(tmp_path: Path) -> None:
    """Past max_open_runs the oldest open run is yielded as incomplete, saying why."""
    path, _ = _log(tmp_path, count=3)
    lines = [line for line in _lines(path) if '"type":"run_completed"' not in line]
    found = list(read_runs(io.StringIO("\n".join(lines)), max_open_runs=1))
    assert len(found) == 3
    assert any("stopped waiting" in p for p in found[0].report.incomplete)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs)
def test_the_fast_path_decodes_exactly_what_the_spine_decodes(run: RecordedRun) -> None:
    """For every event of random runs, the fast decoder's event (when it takes the
    line) equals event_from_dict's, every slot of the items included, and it takes
    the frequent event types."""
    decoder = FastDecoder()
    for event in run.events:
        line = event_to_json(event).encode()
        fast = decoder.event(line)
        spine = event_from_dict(msgspec.json.decode(line))
        if fast is not None:
            assert fast == spine
            item = getattr(fast, "item", None)
            if item is not None:
                for name in type(item).__slots__:
                    assert getattr(item, name) == getattr(spine.item, name), name  # type: ignore[union-attr]
        elif event.type in ("stage_started", "stage_completed", "run_completed"):
            pytest.fail(f"the fast path refused a plain {event.type}")


_MUTATIONS = st.sampled_from([
    ('"seq":', '"seq":-'), ('"seq":', '"seq":1e999,"x":'),
    ('"item.tokens":', '"item.tokens":1.5,"y":'),
    ('"item.content":"', '"item.content":"'), ('"item.kind":"', '"item.kind":" '),
    ('"schema":2', '"schema":3'), ('"schema":2', '"schema":true'),
    ('"run_id":"', '"run_id":"","z":"'),
    ('"reason.name":"', '"reason.name":"X'), ('"score":', '"score":null,"w":'),
    ('"item.metadata":"', '"item.metadata":"['),
    ('"item.tokens":', '"item.tokens":9223372036854775808,"v":'),
    ('"stage":"', '"stage":"\\u0000'), ('"item.timestamp":"', '"item.timestamp":"x'),
    ('"reason.available_tokens":', '"reason.available_tokens":"'),
    ('"item.content":"', '"item.content":"","q":"'), ('"seq":', '"seq":0,"seq":'),
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs, _MUTATIONS, st.integers(0, 10_000))
def test_the_fast_path_never_accepts_what_the_spine_rejects(
        run: RecordedRun, mutation: tuple[str, str], pick: int) -> None:
    """Mutated lines (wrong types, out-of-range numbers, empty strings, duplicate keys,
    other schemas, unknown reasons): when the fast path accepts one, the spine accepts
    it too and decodes the same event."""
    if not run.events:
        return
    line = event_to_json(run.events[pick % len(run.events)])
    old, new = mutation
    mutated = line.replace(old, new, 1).encode()
    fast = fast_event(mutated)
    if fast is None:
        return
    assert fast == event_from_dict(msgspec.json.decode(mutated))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.recursive(st.none() | st.booleans() | st.integers()
                 | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=3)
                 | st.dictionaries(st.sampled_from(["schema", "type", "run_id", "seq", "log",
                                                    "message", "item.content", "x"]),
                                   inner, max_size=5), max_leaves=12)
    .map(lambda v: json.dumps(v).encode()),
), max_size=20), st.booleans())
def test_any_input_is_read_to_the_end_and_every_line_is_accounted_for(
        chunks: list[bytes], packed: bool) -> None:
    """Arbitrary bytes, text and JSON of any shape (optionally gzipped, possibly cut
    short) never raise: every line is counted in exactly one bucket."""
    data = b"\n".join(chunks)
    if packed:
        data = gzip.compress(data)[: max(2, len(data) * 3 // 4)]
    reader = read_runs(io.BytesIO(data))
    list(reader)
    assert reader.stats.lines == reader.stats.accounted


def test_blocks_give_whole_lines_and_mark_overlong_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's block reading gives every line whole with its newline (a last line
    may have none; \\r stays inside its line), however lines fall across blocks, and a
    line past MAX_LINE_BYTES as one None, holding no more than that of it."""
    from cupellation.logs import _sources  # noqa: PLC0415

    monkeypatch.setattr(_sources, "_BLOCK", 7)
    monkeypatch.setattr(_sources, "MAX_LINE_BYTES", 20)
    data = (b"a\n" + b"\n" + b"0123456789abcdef\r\n" + b"x" * 45 + b"\n" + b"short\n"
            + b"y" * 30)
    lines = [line for block in _sources._blocks(io.BytesIO(data)) for line in block]
    assert lines == [b"a\n", b"\n", b"0123456789abcdef\r\n", None, b"short\n", None]
    assert [line for block in _sources._blocks(io.BytesIO(b"p\nq")) for line in block] == [
        b"p\n", b"q"]
    assert list(_sources._blocks(io.BytesIO(b""))) == []
