"""Every reading command answers the same from a fleet store as from the files that were
loaded into it: ``audit``, ``report``, ``why``, ``replay`` and ``diff`` with ``--store``,
for a generated fleet of several services, with whole, cut and damaged runs."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cupellation.cli import main
from cupellation.events import event_to_dict
from cupellation.logs import read_runs
from cupellation.store import RunQuery, Store

from ._runs import write_people_log, write_random_log

#: Keys that say where a run was read (a file's name and line, the store's URL) or how
#: many lines a file had: the store's answer differs there by design.
_PLACES = frozenset({"source", "line", "lines", "damaged_lines", "sources"})


@dataclass
class Fleet:
    """Two services' logs, loaded into one store."""

    url: str
    logs: dict[str, Path]
    run_ids: list[str]

    @property
    def files(self) -> list[str]:
        """Every log, as command-line arguments."""
        return [str(path) for path in self.logs.values()]


def _cut(log: Path) -> None:
    """Damage the log as a Collector or a TTL would: one run loses a middle event, one
    loses its end, and a line is half written."""
    lines = log.read_bytes().split(b"\n")
    runs: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        if line:
            runs.setdefault(json.loads(line)["run_id"], []).append(index)
    chosen = [indices for indices in runs.values() if len(indices) > 4][:2]
    dropped = {chosen[0][2], chosen[1][-1]}
    kept = [line for index, line in enumerate(lines) if index not in dropped]
    log.write_bytes(b"\n".join(kept) + b'{"type":"item_excluded","schema":3,"run_id":\n')


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def fleet(store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Fleet:
    """Logs of services ``web`` (whole), ``batch`` (cut and damaged) and ``chat`` (runs
    with sessions, users and conversations), loaded with ``cupellation store load``."""
    logs = {"web": tmp_path / "web.jsonl", "batch": tmp_path / "batch.jsonl",
            "chat": tmp_path / "chat.jsonl"}
    write_random_log(logs["web"], seed=11, runs=14)
    write_random_log(logs["batch"], seed=12, runs=14)
    write_people_log(logs["chat"], seed=13, runs=16)
    _cut(logs["batch"])
    for service, path in logs.items():
        code, _ = _run(capsys, "store", "load", str(path), "--into", store.url,
                       "--service", service)
        assert code == 0
    run_ids = [run.run_id for path in logs.values() for run in read_runs(str(path))]
    return Fleet(store.url, logs, run_ids)


def _normal(value: Any) -> Any:
    """``value`` without where it was read, lists of runs in run-id order (a store
    returns runs newest first, files in the order written)."""
    if isinstance(value, dict):
        return {k: sorted(v) if k.endswith(("_runs", "_examples")) and isinstance(v, list)
                and all(isinstance(e, str) for e in v)
                else _normal(v) for k, v in value.items() if k not in _PLACES}
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        if items and all(isinstance(v, dict) for v in items):
            return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
        return items
    return value


def _same(capsys: pytest.CaptureFixture[str], fleet: Fleet, files: list[str],
          *argv: str) -> Any:
    """The command's exit status and JSON answer from the store equal the files'."""
    from_files = _run(capsys, *argv[:1], *files, *argv[1:])
    from_store = _run(capsys, *argv[:1], "--store", fleet.url, *argv[1:])
    assert from_store[0] == from_files[0]
    answer = json.loads(from_files[1]) if from_files[1] else None
    assert (_normal(json.loads(from_store[1])) if from_store[1] else None) == _normal(answer)
    return answer


def test_audit_answers_as_the_files_do(fleet: Fleet, capsys: pytest.CaptureFixture[str]
                                       ) -> None:
    """audit --store gives the files' summary — counts, reasons, utilisation, the
    incomplete runs and why — over the fleet, per service, and in a time window; and
    --strict exits 3 from both, for the cut runs."""
    whole = _same(capsys, fleet, fleet.files, "audit", "--format", "json")
    assert whole["runs"]["incomplete"] >= 2
    web = _same(capsys, fleet, [str(fleet.logs["web"])], "audit", "--format", "json",
                *(["--service", "web"]))
    assert web["runs"]["total"] == 14
    starts = sorted(run.started_at for run in read_runs(*fleet.files)
                    if run.started_at is not None)
    middle = starts[len(starts) // 2].isoformat()
    _same(capsys, fleet, fleet.files, "audit", "--format", "json", "--since", middle)
    _same(capsys, fleet, fleet.files, "audit", "--format", "json", "--until", middle)
    _same(capsys, fleet, fleet.files, "audit", "--format", "json", "--strict")


def test_report_answers_as_the_files_do(fleet: Fleet, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    """report --store --run ID prints every run's report as the files do, with the same
    exit status (3 for a run the store holds in part), and 1 for an unknown run."""
    statuses = set()
    for run_id in fleet.run_ids:
        code, _ = _run(capsys, "report", *fleet.files, "--run", run_id, "--format", "json")
        statuses.add(code)
        _same(capsys, fleet, fleet.files, "report", "--run", run_id, "--format", "json")
    assert statuses == {0, 3}
    _same(capsys, fleet, fleet.files, "report", "--run", "no-such-run", "--format", "json")


def _matches(answer: dict[str, Any]) -> list[str]:
    return sorted(json.dumps(match, sort_keys=True) for match in answer["matches"])


def test_why_answers_as_the_files_do_newest_first_in_pages(
        fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    """why --store answers --match and --content as the files do (a literal the pattern
    needs is pushed into SQL, Python's pattern decides); --limit/--offset page the runs
    with a match, newest first, and the pages together are the whole answer."""
    for pattern in ("^a", "item 2", "é\u2028", "[xz]", "b|c", "tab\\there", "(?i)LINE"):
        _same(capsys, fleet, fleet.files, "why", "--match", pattern, "--format", "json")
    answer = _same(capsys, fleet, fleet.files, "why", "--content", "<b>&3", "--format",
                   "json")
    assert answer is not None
    code, out = _run(capsys, "why", *fleet.files, "--match", "a", "--format", "json")
    assert code == 0
    everything = json.loads(out)
    pages: list[str] = []
    newest_first: list[str] = []
    for offset in range(0, 40, 3):
        code, out = _run(capsys, "why", "--store", fleet.url, "--match", "a", "--format",
                         "json", "--limit", "3", "--offset", str(offset))
        if code == 1:
            break
        page = json.loads(out)
        pages.extend(_matches(page))
        for match in page["matches"]:
            if match["run_id"] not in newest_first:
                newest_first.append(match["run_id"])
    assert sorted(pages) == _matches(everything)
    starts = {run.run_id: run.started_at for run in read_runs(*fleet.files)
              if run.started_at is not None}
    assert newest_first == sorted(newest_first, key=lambda r: starts[r], reverse=True)


def test_replay_and_diff_answer_as_the_files_do(fleet: Fleet,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """replay --store re-runs the same runs with the same outcome as the files; diff
    --store compares two stored runs as diff --log does, and says 1 for a missing one."""
    _same(capsys, fleet, fleet.files, "replay", "--policy", "chat", "--format", "json")
    _same(capsys, fleet, fleet.files, "replay", "--policy", "rag", "--match", "a",
          "--format", "json")
    a, b = fleet.run_ids[0], fleet.run_ids[3]
    logs = [part for path in fleet.files for part in ("--log", path)]
    for pair in ((a, b), (a, "missing")):
        from_files = _run(capsys, "diff", *pair, *logs, "--format", "json")
        from_store = _run(capsys, "diff", *pair, "--store", fleet.url, "--format", "json")
        assert from_store == from_files


def test_store_load_is_idempotent_and_names_damage(fleet: Fleet,
                                                   capsys: pytest.CaptureFixture[str]
                                                   ) -> None:
    """Loading the fleet's logs again adds nothing and says so; the half-written line
    is named with its file and line; --strict makes it exit 3; trace files and a URL
    with a password are refused with exit 2 and one line."""
    code, out = _run(capsys, "store", "load", *fleet.files, "--into", fleet.url,
                     "--format", "json")
    data = json.loads(out)
    assert (code, data["loaded"], data["damaged"]) == (0, 0, 1)
    assert data["skipped"] == sum(1 for run in read_runs(*fleet.files)
                                  for _ in range(run.event_count))
    assert re.fullmatch(r".*batch\.jsonl:\d+: not a readable record.*",
                        data["damaged_lines"][0])
    code, _ = _run(capsys, "store", "load", *fleet.files, "--into", fleet.url, "--strict")
    assert code == 3
    assert main(["store", "load", fleet.files[0], "--into", "http://me:pw@127.0.0.1/x"]) == 2
    err = capsys.readouterr().err
    assert "pw" not in err
    assert err.count("\n") == 1


def test_report_without_a_run_shows_the_newest(fleet: Fleet,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """report --store without --run shows the store's newest run (a file's is its last
    line's run)."""
    newest = max((run for run in read_runs(*fleet.files) if run.started_at is not None),
                 key=lambda run: run.started_at or 0)
    code, out = _run(capsys, "report", "--store", fleet.url, "--format", "json",
                     "--allow-incomplete")
    expected = _run(capsys, "report", *fleet.files, "--run", newest.run_id, "--format",
                    "json", "--allow-incomplete")
    assert (code, out) == expected


#: Each run filter with values that keep some runs, and one that keeps none.
_FILTERS = {
    "--session": ["s-1", "s-2", "s-9"],
    "--user": ["u-2", "U-2"],
    "--conversation": ["c-3", "c-9"],
    "--reason": ["BudgetExceeded", "Deduplicated", "PinnedOverride", "NoSuchReason"],
    "--kind": ["ToolOutput", "Document", "toolOutput"],
    "--policy": ["KNAPSACK", "recency", "truncate", "true", "nothing-like-it"],
}


def _kept(fleet: Fleet, option: str, value: str) -> set[str]:
    """The runs a filter keeps, counted from the files by their events (not by the
    code under test)."""
    kept = set()
    for run in read_runs(*fleet.files, keep_events=True):
        flat = [event_to_dict(event) for event in run.events]
        started = next((f for f in flat if f["type"] == "run_started"), {})
        field = {"--session": "session_id", "--user": "user_id",
                 "--conversation": "conversation_id"}.get(option)
        if field is not None:
            hit = started.get(field) == value
        elif option == "--reason":
            hit = any(f["type"] == "item_excluded" and f.get("reason.name") == value
                      for f in flat)
        elif option == "--kind":
            hit = any(f.get("item.kind") == value for f in flat)
        else:
            hit = any(k.startswith("pipeline.") and value.lower() in str(v).lower()
                      for k, v in started.items())
        if hit:
            kept.add(run.run_id)
    return kept


def test_run_filters_answer_as_the_files_do(fleet: Fleet,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--session, --user, --conversation, --reason, --kind and --policy keep the same
    runs from the store (in SQL) as from the files (in Python): audit counts exactly the
    runs the events say match, why and replay answer alike, a filter that matches
    nothing exits 1 from both, and report shows the newest matching run."""
    for option, values in _FILTERS.items():
        for value in values:
            expected = _kept(fleet, option, value)
            answer = _same(capsys, fleet, fleet.files, "audit", "--format", "json",
                           option, value)
            if not expected:
                assert answer is None or answer["runs"]["total"] == 0
                assert main(["audit", *fleet.files, option, value]) == 1
                assert main(["audit", "--store", fleet.url, option, value]) == 1
                capsys.readouterr()
                continue
            assert answer["runs"]["total"] == len(expected), (option, value)
            _same(capsys, fleet, fleet.files, "why", "--match", "a", "--format", "json",
                  option, value)
    _same(capsys, fleet, fleet.files, "replay", "--policy", "chat", "--format", "json",
          "--strategy", "greedy", "--user", "u-1")
    _same(capsys, fleet, fleet.files, "audit", "--format", "json", "--session", "s-2",
          "--reason", "BudgetExceeded", "--service", "chat")
    chosen = _kept(fleet, "--conversation", "c-2")
    newest = max((run for run in read_runs(*fleet.files) if run.run_id in chosen),
                 key=lambda run: run.started_at or 0)
    from_store = _run(capsys, "report", "--store", fleet.url, "--conversation", "c-2",
                      "--format", "json", "--allow-incomplete")
    assert from_store == _run(capsys, "report", *fleet.files, "--run", newest.run_id,
                              "--format", "json", "--allow-incomplete")


def test_times_outside_the_stores_span_answer_as_the_files_do(
        fleet: Fleet, store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    """``--since``/``--until`` beyond ClickHouse's DateTime64 span (1900-2262), which
    the server refuses to bind, answer as the file reader does: a bound on the open
    side is no bound, one on the other side keeps nothing. ``stats`` (no file
    counterpart) counts every run or none."""
    for option, value in (("--since", "0001-01-01"), ("--until", "9999-12-31"),
                          ("--since", "9999-12-31"), ("--until", "0001-01-02"),
                          ("--since", "1899-12-31T23:59:59")):
        _same(capsys, fleet, fleet.files, "audit", "--format", "json", option, value)
    everything = _run(capsys, "stats", "--store", fleet.url, "--format", "json")
    assert everything[0] == 0
    total = json.loads(everything[1])["runs"]
    assert total > 0
    for option, value, expected in (("--since", "0001-01-01", total),
                                    ("--until", "9999-12-31", total),
                                    ("--since", "9999-12-31", 0),
                                    ("--until", "0001-01-02", 0)):
        code, out = _run(capsys, "stats", "--store", fleet.url, "--format", "json",
                         option, value)
        assert json.loads(out)["runs"] == expected, (option, value)
        assert code in (0, 1)
    assert store.trace_run_ids(RunQuery(since=datetime(1, 1, 1, tzinfo=UTC),
                                        until=datetime(9999, 12, 31, tzinfo=UTC))) == []
