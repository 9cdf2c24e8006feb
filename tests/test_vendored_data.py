"""The data vendored in tests/data stays what scripts/vendor_spec.py and
scripts/vendor_seeds.py made of the upstream files: all 58 required conformance vectors
with their data and no comments, the wire format's 13 JSON examples, and the MIT notice and
commit beside them. The scripts' stripping and extraction are checked on hard cases."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest
import tomli

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
VECTORS = DATA / "conformance" / "required"
SEEDS = DATA / "seeds"
COMMIT = "0b82dad6ace5baffbb721f5374058bd1ce091551"


def _script(name: str) -> ModuleType:
    """scripts/<name>.py, imported as a module."""
    spec = importlib.util.spec_from_file_location(f"_vendoring_{name}",
                                                  ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


vendor_spec = _script("vendor_spec")
vendor_seeds = _script("vendor_seeds")


def test_the_58_required_vectors_are_vendored_without_comments() -> None:
    """Every folder holds its required vectors (28 scoring, 16 slicing, 4 placing, 10
    pipeline); each parses with tomli, and stripping comments again changes nothing
    (so none is left)."""
    counts = {folder.name: len(list(folder.glob("*.toml"))) for folder in VECTORS.iterdir()}
    assert counts == {"scoring": 28, "slicing": 16, "placing": 4, "pipeline": 10}
    for path in sorted(VECTORS.glob("*/*.toml")):
        text = path.read_text(encoding="utf-8")
        assert tomli.loads(text)["test"]["stage"] == path.parent.name
        assert vendor_spec.strip_toml_comments(text) == text, path


@pytest.mark.parametrize("folder", [DATA / "conformance", SEEDS], ids=lambda p: p.name)
def test_the_upstream_notice_and_commit_are_kept(folder: Path) -> None:
    """Beside each vendored folder: upstream's MIT licence, and a README naming the
    repository, the full commit and the script that regenerates the folder."""
    licence = (folder / "LICENSE").read_text(encoding="utf-8")
    assert licence.startswith("MIT License\n\nCopyright (c) 2026 Wollax\n")
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "wollax/cupel" in readme
    assert COMMIT in readme
    assert "scripts/vendor_" in readme


def test_stripping_removes_every_comment_and_keeps_every_string() -> None:
    """Full-line and trailing comments go (with the blank lines they leave); a ``#`` in
    a basic, literal or multi-line string, after an escaped quote, or in a key stays;
    the stripped document parses to the same value."""
    source = '''# leading comment

[test]   # table comment
name = "a # not a comment"   # trailing
path = 'C:\\#dir' # literal string
quoted = "say \\"#1\\" twice" # escaped quotes
"key # too" = 1
# a comment between keys

multi = """
line # kept
  # kept too
"""  # after the string
raw = \'\'\'
# kept\'\'\'
numbers = [1, 2, # in an array
  3]
'''
    expected = '''[test]
name = "a # not a comment"
path = 'C:\\#dir'
quoted = "say \\"#1\\" twice"
"key # too" = 1

multi = """
line # kept
  # kept too
"""
raw = \'\'\'
# kept\'\'\'
numbers = [1, 2,
  3]
'''
    stripped = vendor_spec.strip_toml_comments(source)
    assert stripped == expected
    assert vendor_spec.same_value(tomli.loads(source), tomli.loads(stripped))


def test_same_value_tells_apart_what_equality_would_not() -> None:
    """``1``, ``1.0`` and ``true`` differ; key order and array order count; NaN equals
    NaN; -0.0 is not 0.0; a date-time's offset counts even at the same instant."""
    same = vendor_spec.same_value
    assert not same({"a": 1}, {"a": 1.0})
    assert not same({"a": 1}, {"a": True})
    assert not same({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert not same([1, 2], [2, 1])
    assert not same(0.0, -0.0)
    assert same({"x": [math.nan]}, {"x": [math.nan]})
    utc = datetime(2024, 1, 1, tzinfo=UTC)
    assert not same(utc, utc.astimezone(timezone(timedelta(hours=1))))
    assert same({"t": utc, "s": "x"}, {"t": utc, "s": "x"})


def test_vendoring_regenerates_the_folder_and_check_finds_any_difference(
        tmp_path: Path) -> None:
    """vendor() writes each stripped vector, removes stale vectors and leaves other
    files alone; check mode then passes, and names a file edited by hand or one that
    does not parse."""
    source, dest = tmp_path / "src", tmp_path / "dest"
    (source / "placing").mkdir(parents=True)
    (source / "placing" / "a.toml").write_text('# about a\n[test]\nstage = "placing" # p\n')
    (dest / "placing").mkdir(parents=True)
    (dest / "placing" / "stale.toml").write_text("x = 1\n")
    (dest / "README.md").write_text("ours\n")
    assert vendor_spec.vendor(source, dest, check_only=False) == []
    assert (dest / "placing" / "a.toml").read_text() == '[test]\nstage = "placing"\n'
    assert not (dest / "placing" / "stale.toml").exists()
    assert (dest / "README.md").read_text() == "ours\n"
    assert vendor_spec.vendor(source, dest, check_only=True) == []
    (dest / "placing" / "a.toml").write_text('[test]\nstage = "slicing"\n')
    assert vendor_spec.main(["--check", str(source), str(dest)]) == 1
    (source / "placing" / "b.toml").write_text('[test]\nname = "unterminated\n')
    problems = vendor_spec.vendor(source, dest, check_only=False)
    assert [problem.split(":")[0] for problem in problems] == [str(source / "placing/b.toml")]


def test_the_seed_fixtures_are_the_13_examples() -> None:
    """tests/data/seeds holds the 12 JSON examples of the seeds, each valid JSON, and
    context_items.json: the 7 items of the SelectionReport examples, in order."""
    names = sorted(path.name for path in SEEDS.glob("*.json"))
    expected = sorted([*vendor_seeds.FIXTURES["SelectionReport"],
                       *vendor_seeds.FIXTURES["Exclusion Reasons"], "context_items.json"])
    assert names == expected
    fixtures = {name: json.loads((SEEDS / name).read_text(encoding="utf-8")) for name in names}
    report = fixtures["selection_report_complete.json"]
    in_report = [entry["item"] for entry in [*report["included"], *report["excluded"]]]
    assert fixtures["context_items.json"][:4] == in_report
    assert fixtures["exclusion_reason_filtered.json"] == {"reason": "Filtered",
                                                          "filter_name": "max_age_filter"}


def test_seed_examples_are_found_after_each_marker_whatever_they_hold(tmp_path: Path) -> None:
    """json_examples takes the object after each "JSON example" line, braces inside
    strings included; vendor() refuses a seed whose example count changed."""
    text = ('Title\nJSON example:\n{\n"a": "} {",\n"b": {"c": [1, {"d": "\\"}"}]}\n}\n'
            "prose { not json }\nJSON example — X:\n{ \"e\": 2 }\n")
    assert [json.loads(example) for example in vendor_seeds.json_examples(text)] == [
        {"a": "} {", "b": {"c": [1, {"d": '"}'}]}}, {"e": 2}]
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "000.txt").write_text("SelectionReport\nJSON example:\n{}\n", encoding="utf-8")
    problems = vendor_seeds.vendor(seeds, tmp_path / "out", check_only=False)
    assert any("1 JSON examples, expected 4" in problem for problem in problems)
    assert not (tmp_path / "out").exists()
