"""Inputs that used to end in "internal error" (exit 70), a wrong report or a hang:
timestamps at the edge of the date range, a weight of 1e308, a regular expression
too large to compile, corrupt gzip data, pipes and FIFOs as input paths, and JSON
Lines whose strings hold raw line separators. Each is now a promised exit status
with, for 2, exactly one line."""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _cli_support import BUDGET, Result, assert_one_line_error, cli, run_main
from _special_files import fifo_writer

from cupellation.cli import main

EDGE_OF_TIME = "9999-12-31T23:59:59.999999Z"
#: 0001-01-01T00:00:00Z as Unix seconds: the first representable instant.
FIRST_INSTANT = -62135596800


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo folder (with its trace file) and an audit log of its one run."""
    folder = tmp_path_factory.mktemp("demo")
    assert main(["demo", "-q", "--out", str(folder), "--audit-log",
                 str(folder / "audit.jsonl")]) == 0
    return folder


@contextmanager
def pipe_path(data: bytes) -> Iterator[str]:
    """A ``/dev/fd/N`` path to a pipe a thread fills with ``data``, as the shell's
    ``<(cat FILE)`` gives: it can be read once."""
    read_end, write_end = os.pipe()

    def fill() -> None:
        try:
            _write_all(write_end, data)
        except BrokenPipeError:
            pass
        finally:
            os.close(write_end)

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    try:
        yield f"/dev/fd/{read_end}"
    finally:
        os.close(read_end)
        thread.join(timeout=30)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]


# -- timestamps at the edge of the date range ---------------------------------------------------


def _chat(tmp_path: Path, document: object, name: str = "chat.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_a_timestamp_at_the_last_instant_is_accepted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A message timed 9999-12-31T23:59:59.999999Z, alone, keeps that timestamp."""
    source = _chat(tmp_path, [{"role": "user", "content": "hi", "timestamp": EDGE_OF_TIME}])
    result = run_main(capsys, "select", source, *BUDGET, "--estimate-tokens")
    assert result.code == 0, result.err
    assert json.loads(result.out)[0]["timestamp"] == EDGE_OF_TIME


def test_a_timestamp_synthesized_past_the_last_instant_is_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An untimed message after one timed at the last instant would need a timestamp
    after it: exit 2, one line naming the message (it was an OverflowError, exit 70);
    in JSON Lines the line is named too."""
    rows = [{"role": "user", "content": "hi", "timestamp": EDGE_OF_TIME},
            {"role": "assistant", "content": "yo"}]
    result = run_main(capsys, "select", _chat(tmp_path, rows), *BUDGET, "--estimate-tokens")
    assert_one_line_error(result, 2, "chat.json: messages[1]", "after the last representable")
    lines = tmp_path / "chat.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_main(capsys, "select", lines, *BUDGET, "--estimate-tokens")
    assert_one_line_error(result, 2, "chat.jsonl:2: messages[1]")


def test_a_second_part_after_the_last_instant_is_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A message that makes two items (text and a tool call) timed at the last instant
    (each further item one microsecond after the previous): exit 2 naming the
    message's timestamp."""
    rows = [{"role": "assistant", "timestamp": EDGE_OF_TIME, "content": "calling",
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "f", "arguments": "{}"}}]}]
    result = run_main(capsys, "select", _chat(tmp_path, rows), *BUDGET, "--estimate-tokens")
    assert_one_line_error(result, 2, "messages[0].timestamp", "part 1")


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_created_at_at_the_first_instant(tmp_path: Path, fmt: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``created_at: -62135596800`` (0001-01-01T00:00:00Z) is accepted for the first
    message, and its later untimed neighbour is one microsecond after it; a system
    prompt before it would need a timestamp before the first instant: exit 2 naming
    it (both were exit 70)."""
    first = {"role": "user", "content": "hi", "created_at": FIRST_INSTANT}
    document: object = ([first, {"role": "assistant", "content": "yo"}] if fmt == "openai"
                        else {"messages": [first, {"role": "assistant", "content": "yo"}]})
    result = run_main(capsys, "select", _chat(tmp_path, document), *BUDGET,
                      "--estimate-tokens", "--chat-format", fmt)
    assert result.code == 0, result.err
    stamps = {item["timestamp"] for item in json.loads(result.out)}
    assert stamps == {"0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000001Z"}
    document = ([{"role": "system", "content": "be brief"}, first] if fmt == "openai"
                else {"system": "be brief", "messages": [first]})
    result = run_main(capsys, "select", _chat(tmp_path, document), *BUDGET,
                      "--estimate-tokens", "--chat-format", fmt)
    expected = "messages[0]" if fmt == "openai" else "chat.json: system"
    assert_one_line_error(result, 2, expected, "before the first representable")


def test_a_chat_given_as_the_other_format_is_exit_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``select --chat-format openai`` of an Anthropic transcript (a ``tool_use`` block):
    exit 2 with one line saying it reads as anthropic (it selected from the texts
    alone, the tool call and its result left out without a word)."""
    messages = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "rain"}]}]
    result = run_main(capsys, "select", _chat(tmp_path, messages), *BUDGET,
                      "--estimate-tokens", "--chat-format", "openai")
    assert_one_line_error(result, 2, "is a 'tool_use' part",
                          "it reads as anthropic, not as the format given (openai)")


# -- policy weights ----------------------------------------------------------------------------


WEIGHTS_1E308 = """\
[scorer]
type = "composite"
[[scorer.children]]
type = "recency"
weight = 1e308
[[scorer.children]]
type = "kind"
weight = 1e308
"""


@pytest.mark.parametrize("command", ["policy check", "policy show", "select", "demo",
                                     "select --scorer"])
def test_weights_summing_past_the_largest_float_are_exit_2(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two weights of 1e308 (their sum is infinite) give CompositeScorer's own message,
    'weights sum to infinity', in one line (math.fsum's OverflowError was exit 70)."""
    policy = tmp_path / "p.toml"
    policy.write_text(WEIGHTS_1E308)
    items = tmp_path / "items.json"
    items.write_text('[{"content": "a", "tokens": 1}]')
    commands: dict[str, list[str | Path]] = {
        "policy check": ["policy", "check", policy],
        "policy show": ["policy", "show", policy],
        "select": ["select", items, *BUDGET, "--policy", policy],
        "demo": ["demo", "--out", tmp_path / "d", "--policy", policy],
        "select --scorer": ["select", items, *BUDGET, "--scorer", "recency:1e308",
                            "--scorer", "kind:1e308"]}
    result = run_main(capsys, *commands[command])
    assert_one_line_error(result, 2, "scorer.children: weights sum to infinity")
    assert not (tmp_path / "d").exists()


# -- why --match -------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", ["a{99999999999}", "(", "a{2,1}"])
def test_a_regular_expression_that_cannot_compile_is_exit_2(
        demo: Path, pattern: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``why --match 'a{99999999999}'`` (a repeat count too large: OverflowError, exit
    70) and plain syntax errors are one line, exit 2."""
    result = run_main(capsys, "why", demo / "audit.jsonl", "--match", pattern)
    assert_one_line_error(result, 2, "--match is not a valid regular expression")


# -- corrupt gzip --------------------------------------------------------------------------------


def _corrupt_gzip(data: bytes) -> bytes:
    """``data`` gzipped, with the deflate stream's first bytes garbled."""
    packed = bytearray(gzip.compress(data))
    for position in range(12, 40):
        packed[position] ^= 0x5A
    return bytes(packed)


@pytest.mark.parametrize("command", ["report", "audit", "why", "export"])
def test_corrupt_gzip_log_is_exit_2_naming_the_file(
        demo: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A gzip log whose deflate data is corrupt is exit 2 and one line naming the file
    and the problem, for every command that reads logs."""
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(_corrupt_gzip((demo / "audit.jsonl").read_bytes()))
    extra = {"report": [], "audit": [], "why": ["--match", "."],
             "export": ["--to", "file", "--out", str(tmp_path / "o.jsonl")]}[command]
    result = run_main(capsys, command, broken, *extra)
    assert_one_line_error(result, 2, "broken.jsonl.gz")


def test_truncated_and_corrupt_gzip_traces_are_exit_2(
        demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A gzip trace file cut short, or with corrupt data, given to report or export:
    exit 2, one line naming the file; a whole one reads."""
    trace = (demo / "trace.jsonl").read_bytes()
    whole = tmp_path / "trace.jsonl.gz"
    whole.write_bytes(gzip.compress(trace))
    assert run_main(capsys, "report", whole).code == 0
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(trace)[:-40])
    corrupt = tmp_path / "corrupt.jsonl.gz"
    corrupt.write_bytes(gzip.compress(trace)[:30] + b"\xff" * 200)
    for path in (cut, corrupt):
        assert_one_line_error(run_main(capsys, "report", path), 2, path.name)
        assert_one_line_error(run_main(capsys, "export", path, "--to", "file", "--out",
                                       tmp_path / "o.jsonl"), 2, path.name)


# -- pipes and FIFOs as input paths ------------------------------------------------------------


def test_report_reads_a_pipe_whole(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``report <(cat audit.jsonl)`` rebuilds the complete run: the pipe is read once
    (it used to be read twice, the run's start lost and the report incomplete)."""
    expected = json.loads((demo / "report.json").read_text())
    with pipe_path((demo / "audit.jsonl").read_bytes()) as path:
        result = run_main(capsys, "report", path, "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out) == expected


def test_report_reads_a_trace_and_a_gzip_log_through_pipes(
        demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace file and a gzip log, each through a pipe, are told apart from their
    first bytes and read whole."""
    with pipe_path((demo / "trace.jsonl").read_bytes()) as path:
        assert run_main(capsys, "report", path, "--format", "json").code == 0
    with pipe_path(gzip.compress((demo / "audit.jsonl").read_bytes())) as path:
        result = run_main(capsys, "report", path, "--format", "json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["total_candidates"] == 22


def test_export_reads_a_pipe(demo: Path, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    """``export <(cat audit.jsonl) --to file`` finds the run (it found none) and writes
    its spans."""
    out = tmp_path / "spans.jsonl"
    with pipe_path((demo / "audit.jsonl").read_bytes()) as path:
        result = run_main(capsys, "export", path, "--to", "file", "--out", out)
    assert result.code == 0, result.err
    assert "exported 1 run(s)" in result.err
    assert out.read_text().startswith('{"resourceSpans"')


@pytest.mark.parametrize("command", [("report", "--format", "json"), ("audit",),
                                     ("why", "--match", "."),
                                     ("export", "--to", "file", "--out", "-")],
                         ids=lambda c: c[0])
def test_a_fifo_input_is_read_once_without_hanging(demo: Path, tmp_path: Path,
                                                   command: tuple[str, ...]) -> None:
    """``COMMAND FIFO`` (a real process, with a writer feeding the FIFO once) reads
    it and finishes with 0; ``report FIFO`` used to hang, waiting for a second writer."""
    fifo = tmp_path / "fifo"
    with fifo_writer(fifo, (demo / "audit.jsonl").read_bytes()):
        result: Result = cli(command[0], fifo, *command[1:], timeout=60)
    assert result.code == 0, result.err
    if command[0] == "report":
        assert json.loads(result.out)["total_candidates"] == 22


# -- JSON Lines with raw line separators --------------------------------------------------------

SEPARATORS = "one\u2028two\u2029three\u0085four"


def test_items_in_json_lines_may_hold_raw_line_separators(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """JSON Lines items whose strings hold a raw U+2028, U+2029 or U+0085 are read
    whole: records end at \\n only (str.splitlines() cut them into invalid JSON)."""
    source = tmp_path / "items.jsonl"
    source.write_text(json.dumps({"content": SEPARATORS, "tokens": 1}, ensure_ascii=False)
                      + "\n" + json.dumps({"content": "b", "tokens": 1}) + "\n",
                      encoding="utf-8")
    assert "\u2028" in source.read_text(encoding="utf-8")
    result = run_main(capsys, "select", source, *BUDGET)
    assert result.code == 0, result.err
    assert sorted(item["content"] for item in json.loads(result.out)) == sorted([SEPARATORS,
                                                                                "b"])


def test_chat_json_lines_may_hold_raw_line_separators(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A chat transcript in JSON Lines with raw separators in a message reads whole."""
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps({"role": "user", "content": SEPARATORS}, ensure_ascii=False)
                      + "\n" + json.dumps({"role": "assistant", "content": "ok"}) + "\n",
                      encoding="utf-8")
    result = run_main(capsys, "select", source, *BUDGET, "--estimate-tokens")
    assert result.code == 0, result.err
    assert SEPARATORS in [item["content"] for item in json.loads(result.out)]


def test_event_logs_may_hold_raw_line_separators(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An events file whose lines hold raw separators (as ensure_ascii=False JSON
    writes them) rebuilds a complete report with the content intact, in report,
    audit and why."""
    items = tmp_path / "items.json"
    items.write_text(json.dumps([{"content": SEPARATORS, "tokens": 1},
                                 {"content": "b", "tokens": 1}]))
    events = tmp_path / "events.jsonl"
    assert run_main(capsys, "select", items, *BUDGET, "-q", "--events", events).code == 0
    raw = "".join(json.dumps(json.loads(line), ensure_ascii=False) + "\n"
                  for line in events.read_text().split("\n") if line)
    assert "\u2028" in raw
    events.write_text(raw, encoding="utf-8")
    result = run_main(capsys, "report", events, "--format", "json")
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert SEPARATORS in [entry["item"]["content"] for entry in report["included"]]
    assert report.get("incomplete", []) == []
    assert run_main(capsys, "audit", events).code == 0
    assert run_main(capsys, "why", events, "--content", SEPARATORS).code == 0
