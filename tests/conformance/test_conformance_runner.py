"""The conformance runner: real placing vectors pass; every kind of broken vector file
becomes a failed result naming the file, never an exception."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cupellation.conformance import (
    ConformanceSummary,
    VectorFailure,
    VectorResult,
    _runner,
    collect_vector_files,
    run_paths,
    run_vector_file,
)

#: The specification's required vectors, vendored in tests/data.
REQUIRED_DIR = Path(__file__).resolve().parents[1] / "data" / "conformance" / "required"
PLACING_DIR = REQUIRED_DIR / "placing"

GOOD_PLACING = """\
[test]
name = "two items, u-shaped"
stage = "placing"
placer = "u-shaped"

[[items]]
content = "lo"
tokens = 1
score = 0.1

[[items]]
content = "hi"
tokens = 1
score = 0.9
timestamp = 2024-01-01T00:00Z

[expected]
ordered_contents = {expected}
"""


def write(directory: Path, name: str, text: str | bytes) -> Path:
    """Write ``text`` to ``directory/name`` and return the path."""
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def assert_failed(result: VectorResult, path: Path, *fragments: str) -> None:
    """The result is a failure for ``path`` whose reason names the file and each fragment."""
    assert result.passed is False
    assert result.path == path
    assert result.reason is not None
    assert path.name in result.reason
    for fragment in fragments:
        assert fragment in result.reason, result.reason


def test_real_placing_folder_passes() -> None:
    """All four required placing vectors pass through run_paths."""
    summary = run_paths([PLACING_DIR])
    assert (summary.passed, summary.failed, summary.total) == (4, 0, 4)
    assert all(r.stage == "placing" and r.reason is None for r in summary.results)
    assert [r.path.name for r in summary.results] == sorted(p.name for p in PLACING_DIR.iterdir())


def test_real_vector_result_fields() -> None:
    """A passing result carries the path, [test].name and stage."""
    path = PLACING_DIR / "u-shaped-basic.toml"
    result = run_vector_file(path)
    assert result == VectorResult(path, "UShapedPlacer places highest scores at edges",
                                  "placing", True, None)


def test_every_required_vector_passes() -> None:
    """All 58 required vectors of the specification pass: scoring, slicing,
    placing and pipeline, including every [expected.diagnostics] assertion."""
    summary = run_paths([str(REQUIRED_DIR)])
    assert summary.total == 58
    failures = [f"{r.path.name}: {r.reason}" for r in summary.results if not r.passed]
    assert failures == []
    by_stage = {stage: sum(1 for r in summary.results if r.stage == stage)
                for stage in ("scoring", "slicing", "placing", "pipeline")}
    assert by_stage == {"scoring": 28, "slicing": 16, "placing": 4, "pipeline": 10}


def test_passing_temporary_vector(tmp_path: Path) -> None:
    """A hand-written correct placing vector passes (extra fields are ignored)."""
    text = GOOD_PLACING.format(expected='["hi", "lo"]') + 'future_field = "ignored"\n'
    result = run_vector_file(write(tmp_path, "ok.toml", text))
    assert result.passed, result.reason
    assert result.name == "two items, u-shaped"


def test_wrong_expectation_fails_with_both_orders(tmp_path: Path) -> None:
    """A vector whose expected order is wrong fails, and the reason shows both orders."""
    path = write(tmp_path, "wrong.toml", GOOD_PLACING.format(expected='["lo", "hi"]'))
    result = run_vector_file(path)
    assert_failed(result, path, "['lo', 'hi']", "['hi', 'lo']")
    assert result.stage == "placing"
    assert result.name == "two items, u-shaped"


def test_malformed_toml_fails(tmp_path: Path) -> None:
    """A file that is not valid TOML is a failure naming the file, not an exception."""
    path = write(tmp_path, "broken.toml", "[test\nname = ")
    result = run_vector_file(path)
    assert_failed(result, path, "invalid TOML")
    assert result.stage is None
    assert result.name == "broken.toml"


def test_non_utf8_file_fails(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 are reported as invalid TOML."""
    path = write(tmp_path, "binary.toml", b"\xff\xfe[test]\n")
    assert_failed(run_vector_file(path), path, "invalid TOML")


def test_missing_test_table_fails(tmp_path: Path) -> None:
    """A TOML file without a [test] table fails."""
    path = write(tmp_path, "no-test.toml", "[expected]\nordered_contents = []\n")
    assert_failed(run_vector_file(path), path, "no [test] table")


def test_test_not_a_table_fails(tmp_path: Path) -> None:
    """A 'test' key that is not a table counts as no [test] table."""
    path = write(tmp_path, "scalar-test.toml", 'test = "placing"\n')
    assert_failed(run_vector_file(path), path, "no [test] table")


def test_missing_stage_fails(tmp_path: Path) -> None:
    """A [test] table without 'stage' fails and keeps the vector's name."""
    path = write(tmp_path, "no-stage.toml", '[test]\nname = "nameless stage"\n')
    result = run_vector_file(path)
    assert_failed(result, path, "stage")
    assert result.name == "nameless stage"


def test_unknown_stage_fails(tmp_path: Path) -> None:
    """An unknown stage fails, naming the stage."""
    path = write(tmp_path, "odd.toml", '[test]\nname = "x"\nstage = "juggling"\n')
    result = run_vector_file(path)
    assert_failed(result, path, "unknown stage 'juggling'")
    assert result.stage == "juggling"


def test_non_string_stage_fails(tmp_path: Path) -> None:
    """A stage that is not a string is an unknown stage."""
    path = write(tmp_path, "int-stage.toml", "[test]\nstage = 3\n")
    result = run_vector_file(path)
    assert_failed(result, path, "unknown stage 3")
    assert result.stage is None


def test_missing_required_key_fails(tmp_path: Path) -> None:
    """A placing vector without [expected] fails with the missing key named."""
    text = GOOD_PLACING.format(expected="[]").replace("[expected]\nordered_contents = []\n", "")
    path = write(tmp_path, "no-expected.toml", text)
    assert_failed(run_vector_file(path), path, "missing required key 'expected'")


def test_unknown_placer_fails(tmp_path: Path) -> None:
    """A placing vector naming an unknown placer fails with the configuration error."""
    text = GOOD_PLACING.format(expected="[]").replace('"u-shaped"', '"sideways"')
    path = write(tmp_path, "sideways.toml", text)
    assert_failed(run_vector_file(path), path, "ConfigurationError", "sideways")


def test_mistyped_value_fails(tmp_path: Path) -> None:
    """A mistyped item field (tokens as a string) fails with the type error."""
    text = GOOD_PLACING.format(expected="[]").replace("tokens = 1\nscore = 0.1",
                                                      'tokens = "1"\nscore = 0.1')
    path = write(tmp_path, "typo.toml", text)
    assert_failed(run_vector_file(path), path, "InvalidTypeError", "tokens")


def test_unreadable_path_fails(tmp_path: Path) -> None:
    """A path that cannot be read is a failure, not an exception."""
    path = tmp_path / "missing.toml"
    assert_failed(run_vector_file(path), path, "cannot read file")


@pytest.fixture
def bogus_stage(monkeypatch: pytest.MonkeyPatch) -> str:
    """Register an extra stage name 'bogus' whose module is not installed."""
    monkeypatch.setattr(_runner, "STAGES", (*_runner.STAGES, "bogus"))
    return "bogus"


def test_stage_without_module_is_not_implemented(tmp_path: Path, bogus_stage: str) -> None:
    """A known stage whose runner module does not exist fails with '<stage> not implemented'."""
    path = write(tmp_path, "later.toml", f'[test]\nname = "n"\nstage = "{bogus_stage}"\n')
    result = run_vector_file(path)
    assert result.passed is False
    assert result.reason == "bogus not implemented"
    assert result.stage == "bogus"


def _install_stage(monkeypatch: pytest.MonkeyPatch, runner: Any) -> None:
    module = types.ModuleType("cupellation.conformance._bogus")
    module.run_bogus_vector = runner  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupellation.conformance._bogus", module)


def test_unexpected_exception_in_stage_runner_fails(
    tmp_path: Path, bogus_stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception inside a stage runner is a failure with its type and message."""

    def explode(doc: Mapping[str, Any]) -> None:
        raise RuntimeError("boom")

    _install_stage(monkeypatch, explode)
    path = write(tmp_path, "explode.toml", '[test]\nstage = "bogus"\n')
    assert_failed(run_vector_file(path), path, "RuntimeError: boom")


def test_vector_failure_message_is_the_reason(
    tmp_path: Path, bogus_stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VectorFailure raised by a stage runner becomes the reason; its doc is passed in."""
    seen: list[Mapping[str, Any]] = []

    def refuse(doc: Mapping[str, Any]) -> None:
        seen.append(doc)
        raise VectorFailure("score 0.5 != 0.25")

    _install_stage(monkeypatch, refuse)
    path = write(tmp_path, "refuse.toml", '[test]\nstage = "bogus"\nextra = 1\n')
    assert_failed(run_vector_file(path), path, "score 0.5 != 0.25")
    assert seen[0]["test"]["extra"] == 1


def test_stage_module_without_runner_fails(
    tmp_path: Path, bogus_stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage module lacking run_<stage>_vector is a failure, not 'not implemented'."""
    monkeypatch.setitem(sys.modules, "cupellation.conformance._bogus",
                        types.ModuleType("cupellation.conformance._bogus"))
    path = write(tmp_path, "empty-module.toml", '[test]\nstage = "bogus"\n')
    assert_failed(run_vector_file(path), path, "AttributeError")


def test_broken_import_inside_stage_module_fails(
    tmp_path: Path, bogus_stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage module whose own import fails is a failure naming the missing module."""
    real_import = importlib.import_module

    def fake_import(name: str, package: str | None = None) -> types.ModuleType:
        if name == "cupellation.conformance._bogus":
            raise ModuleNotFoundError("No module named 'somedep'", name="somedep")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    path = write(tmp_path, "dep.toml", '[test]\nstage = "bogus"\n')
    result = run_vector_file(path)
    assert_failed(result, path, "ModuleNotFoundError", "somedep")


def test_passing_stage_runner(
    tmp_path: Path, bogus_stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stage runner that returns None marks the vector passed."""
    _install_stage(monkeypatch, lambda doc: None)
    path = write(tmp_path, "fine.toml", '[test]\nname = "fine"\nstage = "bogus"\n')
    assert run_vector_file(path) == VectorResult(path, "fine", "bogus", True, None)


def test_run_paths_mixes_passes_and_failures(tmp_path: Path) -> None:
    """run_paths counts passes and failures and keeps going after a failure."""
    write(tmp_path, "a-bad.toml", "not = [valid")
    write(tmp_path, "b-good.toml", GOOD_PLACING.format(expected='["hi", "lo"]'))
    write(tmp_path, "sub/c-wrong.toml", GOOD_PLACING.format(expected='["lo", "hi"]'))
    summary = run_paths([tmp_path])
    assert isinstance(summary, ConformanceSummary)
    assert (summary.passed, summary.failed) == (1, 2)
    assert [r.path.name for r in summary.failures] == ["a-bad.toml", "c-wrong.toml"]


def test_collect_recurses_sorts_and_deduplicates(tmp_path: Path) -> None:
    """Folders are searched recursively for *.toml; overlaps are kept once; output sorted."""
    b = write(tmp_path, "b.toml", "")
    a = write(tmp_path, "nested/deeper/a.toml", "")
    write(tmp_path, "notes.txt", "")
    (tmp_path / "dir.toml").mkdir()
    files = collect_vector_files([b, tmp_path, str(a), tmp_path / "nested" / ".." / "b.toml"])
    assert files == sorted([a, b])


def test_collect_takes_explicit_file_of_any_name(tmp_path: Path) -> None:
    """A file named explicitly is taken even without the .toml suffix."""
    vector = write(tmp_path, "vector.txt", "")
    assert collect_vector_files([vector]) == [vector]


def test_collect_missing_path_raises_naming_it(tmp_path: Path) -> None:
    """A path that does not exist raises FileNotFoundError carrying that path."""
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as info:
        run_paths([missing])
    assert info.value.filename == str(missing)


def test_empty_folder_gives_empty_summary(tmp_path: Path) -> None:
    """A folder with no vectors gives zero results."""
    summary = run_paths([tmp_path])
    assert (summary.total, summary.passed, summary.failed) == (0, 0, 0)


def test_missing_tomli_raises_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without tomli the runner raises ModuleNotFoundError telling what to install."""
    monkeypatch.setitem(sys.modules, "tomli", None)
    path = write(tmp_path, "x.toml", "")
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'cupellation\[cli\]'"):
        run_vector_file(path)
    with pytest.raises(ModuleNotFoundError, match="tomli"):
        run_paths([tmp_path])


# -- pipeline [config] and [budget] keys ---------------------------------------

PIPELINE_DIR = REQUIRED_DIR / "pipeline"


def _pipeline_variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """greedy-chronological.toml with ``old`` replaced by ``new``, written to tmp_path."""
    text = (PIPELINE_DIR / "greedy-chronological.toml").read_text(encoding="utf-8")
    assert old in text
    return write(tmp_path, name, text.replace(old, new, 1))


def test_pipeline_unknown_config_key_fails_with_a_suggestion(tmp_path: Path) -> None:
    """A misspelt pipeline setting is not handed to the slicer and dropped: the
    vector fails naming the key, and the pipeline's own keys are suggested."""
    path = _pipeline_variant(tmp_path, "dedup.toml", "deduplication = true",
                             "deduplication = true\ndeduplicaton = false")
    result = run_vector_file(path)
    assert_failed(result, path, "UnsupportedConfigError", "config.deduplicaton",
                  "did you mean 'deduplication'")


def test_pipeline_unknown_scorer_entry_key_fails(tmp_path: Path) -> None:
    """An unknown key in a [[config.scorers]] entry fails the vector, naming its path."""
    path = _pipeline_variant(tmp_path, "scorer.toml", "weight = 1.0",
                             "weight = 1.0\nhalf_life = 3")
    result = run_vector_file(path)
    assert_failed(result, path, "config.scorers[0].half_life")


def test_pipeline_unknown_budget_key_fails(tmp_path: Path) -> None:
    """[budget] keys the runner does not apply (reserved_slots) fail the vector."""
    path = _pipeline_variant(tmp_path, "budget.toml", "output_reserve = 0",
                             "output_reserve = 0\nreserved_slots = 2")
    result = run_vector_file(path)
    assert_failed(result, path, "budget.reserved_slots")


def test_pipeline_scorer_entries_read_nested_composite_children(tmp_path: Path) -> None:
    """A [[config.scorers]] entry that is itself a composite has its children under
    ``children``; they are built (a lone nested recency child scores as recency,
    so the vector's expectations still hold)."""
    path = _pipeline_variant(
        tmp_path, "nested.toml", 'type = "recency"\nweight = 1.0',
        'type = "composite"\nweight = 1.0\n\n[[config.scorers.children]]\n'
        'type = "recency"\nweight = 1.0')
    result = run_vector_file(path)
    assert result.passed, result.reason
