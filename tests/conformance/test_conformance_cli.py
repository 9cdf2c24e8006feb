"""The ``cupellation`` command line: ``conformance`` output, exit codes, ``--version``,
errors naming bad paths, and ``python -m cupellation.cli``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import cupellation
from cupellation.cli import SUBCOMMANDS, main

#: The specification's required placing vectors, vendored in tests/data.
PLACING_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required" / "placing"
SUMMARY = re.compile(r"^(\d+) passed, (\d+) failed$")

WRONG_VECTOR = """\
[test]
name = "wrong on purpose"
stage = "placing"
placer = "chronological"

[[items]]
content = "a"
tokens = 1
score = 0.5

[expected]
ordered_contents = ["b"]
"""


def lines(text: str) -> list[str]:
    """Non-empty output lines."""
    return [line for line in text.splitlines() if line]


def test_conformance_all_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """The placing folder: no FAIL lines, final line '4 passed, 0 failed', exit 0."""
    assert main(["conformance", str(PLACING_DIR)]) == 0
    out = lines(capsys.readouterr().out)
    assert out == ["4 passed, 0 failed"]


def test_conformance_failure_lines_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failing vector prints 'FAIL <path>: <reason>' and the summary; exit 1."""
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(WRONG_VECTOR, encoding="utf-8")
    status = main(["conformance", str(PLACING_DIR), str(wrong)])
    out = lines(capsys.readouterr().out)
    assert status == 1
    assert out[-1] == "4 passed, 1 failed"
    assert SUMMARY.match(out[-1])
    fails = [line for line in out if line.startswith("FAIL ")]
    assert len(fails) == 1
    assert fails[0].startswith(f"FAIL {wrong}: ")
    assert "['b']" in fails[0]


def test_conformance_malformed_file_does_not_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed TOML file is reported as a FAIL line, not a traceback."""
    (tmp_path / "junk.toml").write_text("[[[", encoding="utf-8")
    assert main(["conformance", str(tmp_path)]) == 1
    out = lines(capsys.readouterr().out)
    assert out[0].startswith(f"FAIL {tmp_path / 'junk.toml'}: junk.toml: invalid TOML")
    assert out[-1] == "0 passed, 1 failed"


def test_verbose_prints_pass_lines(capsys: pytest.CaptureFixture[str]) -> None:
    """-v adds one PASS line per passing vector before the summary."""
    assert main(["conformance", "-v", str(PLACING_DIR)]) == 0
    out = lines(capsys.readouterr().out)
    assert len([line for line in out if line.startswith("PASS ")]) == 4
    assert out[-1] == "4 passed, 0 failed"


def test_no_vectors_found_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder with no .toml files: a message naming it on stderr, no summary, exit 2."""
    assert main(["conformance", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no .toml vector files" in captured.err
    assert str(tmp_path) in captured.err


def test_missing_path_exit_2_names_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A path that does not exist: exit 2 and an error naming that path."""
    missing = tmp_path / "nope"
    assert main(["conformance", str(PLACING_DIR), str(missing)]) == 2
    captured = capsys.readouterr()
    assert str(missing) in captured.err
    assert captured.out == ""


def test_conformance_requires_a_path(capsys: pytest.CaptureFixture[str]) -> None:
    """'conformance' with no PATH is a usage error (exit 2)."""
    assert main(["conformance"]) == 2
    assert "PATH" in capsys.readouterr().err


def test_missing_tomli_exit_2_with_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without tomli the command says to install the cli extra and exits 2."""
    monkeypatch.setitem(sys.modules, "tomli", None)
    assert main(["conformance", str(PLACING_DIR)]) == 2
    assert "pip install 'cupellation[cli]'" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version and exits 0."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"cupellation {cupellation.__version__}"


def test_no_command_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No subcommand: exit 2 and one line on stderr naming the commands."""
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "a command is required" in err
    assert "select" in err


def test_unknown_command_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown subcommand is a usage error."""
    assert main(["frobnicate"]) == 2
    assert "frobnicate" in capsys.readouterr().err


def test_help_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    """--help lists the registered subcommands and exits 0."""
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert name in out


def test_python_dash_m_runs_conformance() -> None:
    """`python -m cupellation.cli conformance <placing dir>` prints the summary and exits 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "cupellation.cli", "conformance", str(PLACING_DIR)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "4 passed, 0 failed"
