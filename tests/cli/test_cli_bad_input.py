"""Every bad input the newcomer's report lists, run as a real process: exit status 2
(1 for a failed selection), exactly one line on stderr naming the file, the line or
JSON path and the field, no traceback anywhere, and no output file left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _cli_support import (
    BUDGET,
    assert_one_line_error,
    cli,
    files_in,
    wait_until_blocked_reading_stdin,
)

GOOD = '[{"content": "a", "tokens": 1}]\n'


def _outputs(tmp_path: Path) -> list[str]:
    out = tmp_path / "outs"
    out.mkdir()
    return ["--report", str(out / "report.json"), "--events", str(out / "events.jsonl"),
            "--html", str(out / "report.html"), "--output", str(out / "items.json"),
            "--out", str(out / "dir")]


def test_latin1_file_names_the_byte_and_line(tmp_path: Path) -> None:
    """A Latin-1 file is refused as 'not UTF-8 at byte N (line L)', before anything
    is written."""
    source = tmp_path / "latin1.json"
    source.write_bytes(b'[{"content": "ok", "tokens": 1},\n {"content": "caf\xe9", "tokens": 3}]')
    result = cli("select", source, *BUDGET, *_outputs(tmp_path))
    assert_one_line_error(result, 2, "latin1.json: not UTF-8 at byte 50 (line 2)", "0xe9")
    assert files_in(tmp_path / "outs") == []


def test_lone_surrogate_escape_is_refused_before_any_output(tmp_path: Path) -> None:
    """A JSON string ``"x\\ud800"`` (a lone surrogate escape) is refused with its JSON
    path, and no report is written (it used to leave a 0-byte report.json)."""
    source = tmp_path / "surrogate.json"
    source.write_text('[{"content": "fine", "tokens": 1}, {"content": "x\\ud800", "tokens": 3}]')
    result = cli("select", source, *BUDGET, *_outputs(tmp_path))
    assert_one_line_error(result, 2, "surrogate.json: items[1].content: contains a lone "
                                     "surrogate")
    assert files_in(tmp_path / "outs") == []


def test_lone_surrogate_in_json_lines_names_the_line_and_a_pair_is_fine(tmp_path: Path) -> None:
    """In JSON Lines the line is named (here in a metadata key's value); a proper
    surrogate pair (an emoji written as two escapes) is accepted."""
    source = tmp_path / "s.jsonl"
    source.write_text('{"content": "\\ud83d\\ude00 ok", "tokens": 1}\n'
                      '{"content": "b", "tokens": 1, "metadata": {"k": ["\\udfff"]}}\n')
    result = cli("select", source, *BUDGET)
    assert_one_line_error(result, 2, "s.jsonl:2: metadata.k[0]: contains a lone surrogate")
    source.write_text('{"content": "\\ud83d\\ude00 ok", "tokens": 1}\n')
    ok = cli("select", source, *BUDGET)
    assert ok.code == 0, ok.err
    assert json.loads(ok.out)[0]["content"] == "\U0001f600 ok"


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"])
def test_timestamp_outside_the_range_in_utc_is_the_models_decode_error(
        tmp_path: Path, stamp: str) -> None:
    """Year 1 with a positive offset (and year 9999 with a negative one) cannot be
    converted to UTC: the model's DecodeError, with the JSON path of the field."""
    source = tmp_path / "old.json"
    source.write_text(json.dumps([{"content": "a", "tokens": 1},
                                  {"content": "old", "tokens": 1, "timestamp": stamp}]))
    result = cli("select", source, *BUDGET)
    assert_one_line_error(result, 2, "old.json: items[1].timestamp: is outside the datetime "
                                     "range once converted to UTC", stamp)


@pytest.mark.parametrize("suffix", ["json", "jsonl", "metadata"])
def test_json_nested_100000_deep_is_a_clear_error(tmp_path: Path, suffix: str) -> None:
    """An array (or a JSON Lines row) nested 100,000 deep gives 'nested too deeply',
    not a RecursionError traceback; metadata the JSON parser can read (950 levels) is
    refused by the data model's depth limit, still as one line naming the path."""
    source = tmp_path / f"deep.{suffix}"
    if suffix == "json":
        source.write_text("[" * 100_000 + "]" * 100_000)
        expected = "deep.json: JSON nested too deeply"
    elif suffix == "metadata":
        source.write_text('[{"content": "a", "tokens": 1, "metadata": {"k": '
                          + "[" * 950 + "]" * 950 + "}}]")
        expected = ("deep.metadata: items[0].metadata['k'][...]: nests mappings and lists "
                    "more than 64 levels deep")
    else:
        source.write_text(GOOD.strip()[1:-1] + "\n" + '{"content": ' + "[" * 100_000
                          + "]" * 100_000 + "}\n")
        expected = "deep.jsonl:2: JSON nested too deeply"
    assert_one_line_error(cli("select", source, *BUDGET), 2, expected)


def test_wrong_field_type_names_the_json_path_or_the_line(tmp_path: Path) -> None:
    """``items[3].tokens`` for a JSON array; ``FILE:LINE: tokens`` for JSON Lines; an
    unknown key gets a suggestion; a non-object entry is named."""
    rows = [{"content": f"c{k}", "tokens": 1} for k in range(3)]
    array = tmp_path / "a.json"
    array.write_text(json.dumps([*rows, {"content": "bad", "tokens": "many"}], indent=1))
    assert_one_line_error(cli("select", array, *BUDGET), 2,
                          "a.json: items[3].tokens: must be an integer", "'many'")
    lines = tmp_path / "l.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in rows) + '\n\n{"content": "x", '
                     '"tokns": 1}\n')
    assert_one_line_error(cli("select", lines, *BUDGET), 2,
                          "l.jsonl:5: tokns: is not a ContextItem field; did you mean `tokens`?")
    array.write_text('[{"content": "a", "tokens": 1}, 7]')
    assert_one_line_error(cli("select", array, *BUDGET), 2,
                          "a.json: items[1]: must be a JSON object")


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    """A syntax error in a JSON array names its line and column; NaN is refused as
    not JSON; text that is not JSON at all says what was expected."""
    source = tmp_path / "broken.json"
    source.write_text('[\n  {"content": "a", "tokens": 1},\n  {"content": "b" "tokens": 2}\n]')
    assert_one_line_error(cli("select", source, *BUDGET), 2,
                          "broken.json:3: not valid JSON: Expecting ',' delimiter (column 19)")
    source.write_text('[{"content": "a", "tokens": 1, "futureRelevanceHint": NaN}]')
    assert_one_line_error(cli("select", source, *BUDGET), 2, "broken.json: not valid JSON",
                          "NaN")
    source.write_text("content,tokens\na,1\n")
    assert_one_line_error(cli("select", source, *BUDGET), 2,
                          "broken.json:1: not JSON: expected a JSON array")


def test_missing_file_folder_and_unreadable_input(tmp_path: Path) -> None:
    """A missing file, a folder given as ITEMS, and an unreadable file: one line each."""
    assert_one_line_error(cli("select", tmp_path / "no.json", *BUDGET), 2,
                          "no.json: no such file")
    assert_one_line_error(cli("select", tmp_path, *BUDGET), 2, "is a folder, not a file")
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.json"
        locked.write_text(GOOD)
        locked.chmod(0)
        assert_one_line_error(cli("select", locked, *BUDGET), 2, "permission denied")


def test_out_dash_is_refused_and_no_folder_named_dash_appears(tmp_path: Path) -> None:
    """``--out -`` is refused (it used to create a folder named '-'), pointing to
    ``--report -`` for standard output."""
    source = tmp_path / "c.json"
    source.write_text(GOOD)
    for command in (["select", source, *BUDGET], ["demo"]):
        result = cli(*command, "--out", "-", cwd=tmp_path)
        assert_one_line_error(result, 2, "--out needs a folder", "--report -")
        assert not (tmp_path / "-").exists()


def test_out_pointing_at_a_file_says_so(tmp_path: Path) -> None:
    """``--out FILE`` says '--out FILE: is a file, not a folder' (it used to say
    'cannot read <input>'), for select and demo; an output file inside a file fails
    the same way before the run."""
    source = tmp_path / "c.json"
    source.write_text(GOOD)
    existing = tmp_path / "report.json"
    existing.write_text("keep me")
    for command in (["select", source, *BUDGET], ["demo"]):
        assert_one_line_error(cli(*command, "--out", existing), 2,
                              f"--out {existing}: is a file, not a folder")
    assert_one_line_error(cli("select", source, *BUDGET, "--report", existing / "r.json"), 2,
                          "is a file, not a folder")
    assert_one_line_error(cli("select", source, *BUDGET, "--html", tmp_path), 2,
                          f"--html {tmp_path}: is a folder, not a file")
    assert_one_line_error(cli("select", source, *BUDGET, "--events",
                              tmp_path / "nowhere" / "e.jsonl"), 2, "does not exist")
    assert existing.read_text() == "keep me"


def test_bad_input_leaves_existing_outputs_untouched(tmp_path: Path) -> None:
    """Outputs are written only after a run: a bad input leaves a previous report as it
    was, and no temporary file behind."""
    out = tmp_path / "o"
    out.mkdir()
    report = out / "report.json"
    report.write_text("previous")
    source = tmp_path / "bad.json"
    source.write_text('[{"content": "a", "tokens": -1.5}]')
    assert_one_line_error(cli("select", source, *BUDGET, "--report", report, "--out", out), 2,
                          "items[0].tokens")
    assert files_in(out) == ["report.json"]
    assert report.read_text() == "previous"


def test_demo_into_head_exits_quietly(tmp_path: Path) -> None:
    """``cupellation demo | head -1``: the demo's writes to the closed pipe end the
    process with status 141 (128 + SIGPIPE, as a killed Unix tool), its files are
    complete, and stderr is empty: no traceback, no 'Exception ignored' noise."""
    demo = subprocess.Popen([sys.executable, "-m", "cupellation.cli", "demo", "--out",
                             str(tmp_path / "d")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    head = subprocess.run(["head", "-1"], stdin=demo.stdout, capture_output=True, check=True)
    assert demo.stdout is not None
    assert demo.stderr is not None
    demo.stdout.close()
    err = demo.stderr.read().decode()
    assert demo.wait(timeout=60) == 141
    assert err == ""
    assert head.stdout.decode().startswith("The demo with the SupportDemo policy")
    assert json.loads((tmp_path / "d" / "report.json").read_text())["total_candidates"] == 22


def test_select_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """Placed items printed into a pipe that closes at once: status 141, nothing on
    stderr."""
    source = tmp_path / "many.json"
    source.write_text(json.dumps([{"content": f"item {k} " + "x" * 200, "tokens": 1}
                                  for k in range(3000)]))
    select = subprocess.Popen([sys.executable, "-m", "cupellation.cli", "select", str(source),
                               "--max-tokens", "10000", "--target-tokens", "5000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL)
    assert select.stdout is not None
    assert select.stderr is not None
    select.stdout.read(10)
    select.stdout.close()
    err = select.stderr.read().decode()
    assert select.wait(timeout=60) == 141
    assert err == ""


def test_ctrl_c_exits_130_with_one_line(tmp_path: Path) -> None:
    """SIGINT while select waits on standard input: status 130, 'cupellation:
    interrupted', no traceback, nothing written."""
    process = subprocess.Popen([sys.executable, "-m", "cupellation.cli", "select", "-",
                                *BUDGET, "--out", str(tmp_path / "o")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    wait_until_blocked_reading_stdin(process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130
    assert out == b""
    assert err.decode().strip() == "cupellation: interrupted"
    assert not (tmp_path / "o").exists()


def test_control_characters_are_escaped_on_the_terminal(tmp_path: Path) -> None:
    """Content with an ANSI escape, a carriage return and a bidi override is shown
    escaped in the summary tables, in notes, in the JSON printed on stdout (still JSON
    for the same strings) and in an HTML page printed there, never raw."""
    nasty = "red \x1b[31mALERT\x1b[0m\rback \u202eevil\u0085next"
    source = tmp_path / "n.json"
    source.write_text(json.dumps([{"content": "sys " + nasty, "tokens": 1, "pinned": True},
                                  {"content": nasty, "tokens": 2,
                                   "timestamp": "2024-01-01T00:00:00Z"}]))
    as_json = cli("select", source, *BUDGET)
    as_text = cli("select", source, *BUDGET, "--format", "text")
    report = cli("select", source, *BUDGET, "--report", "-")
    page = cli("select", source, *BUDGET, "--html", "-")
    assert "\\u001b[31mALERT" in page.out  # shown as a visible escape by render_html
    for result in (as_json, as_text, report, page):
        assert result.code == 0, result.err
        for raw in ("\x1b", "\r", "\u202e", "\u0085"):
            assert raw not in result.out + result.err
    assert [row["content"] for row in json.loads(as_json.out)] == [nasty, "sys " + nasty]
    assert json.loads(report.out)["included"][0]["item"]["content"] == nasty
    assert "\\x1b[31mALERT" in as_text.out
    assert "\\u202eevil" in as_text.out
    assert "\\x1b[31m" in as_json.err  # the note quotes the pinned item's content escaped


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    """Argument errors (a missing ITEMS, a non-number budget, an unknown option) are one
    line naming the command and pointing to --help, status 2."""
    assert_one_line_error(cli("select"), 2, "cupellation select: error:", "ITEMS",
                          "--help")
    assert_one_line_error(cli("select", "x.json", "--max-tokens", "lots"), 2,
                          "invalid int value: 'lots'")
    assert_one_line_error(cli("demo", "--frobnicate"), 2, "unrecognized arguments")
