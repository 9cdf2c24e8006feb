"""Loading conformance vector files and dispatching them to the stage runners.

Every problem with a vector file (unreadable, not TOML, no ``[test]`` table,
unknown stage, missing keys, a wrong result, an unexpected exception) becomes
a failed :class:`VectorResult`; only a missing ``tomli`` or a path that does
not exist is raised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ._errors import VectorFailure

__all__ = [
    "STAGES",
    "ConformanceSummary",
    "VectorResult",
    "collect_vector_files",
    "run_paths",
    "run_vector_file",
]

#: The stages a vector's ``[test].stage`` may name; each is run by
#: ``cupellation.conformance._<stage>.run_<stage>_vector(doc)``.
STAGES: tuple[str, ...] = ("scoring", "slicing", "placing", "pipeline")

_INSTALL_HINT = (
    "reading conformance vectors needs the 'tomli' package (TOML 1.1; the standard "
    "library's tomllib rejects these files): pip install 'cupellation[cli]'"
)


@dataclass(frozen=True, slots=True)
class VectorResult:
    """The outcome of one vector file.

    ``name`` is the vector's ``[test].name`` (the file name when it has none),
    ``stage`` its ``[test].stage`` (``None`` when the file could not say), and
    ``reason`` why it failed (``None`` when it passed).
    """

    path: Path
    name: str
    stage: str | None
    passed: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ConformanceSummary:
    """The results of a conformance run, in the order the files were run."""

    results: tuple[VectorResult, ...]

    @property
    def passed(self) -> int:
        """How many vectors passed."""
        return sum(1 for result in self.results if result.passed)

    @property
    def failed(self) -> int:
        """How many vectors failed."""
        return len(self.results) - self.passed

    @property
    def total(self) -> int:
        """How many vectors ran."""
        return len(self.results)

    @property
    def failures(self) -> tuple[VectorResult, ...]:
        """The failed results, in run order."""
        return tuple(result for result in self.results if not result.passed)


def _tomli() -> ModuleType:
    # Imported lazily: tomli is an optional dependency (the 'cli' extra) and
    # only conformance runs need it.
    try:
        return importlib.import_module("tomli")
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(_INSTALL_HINT, name="tomli") from exc


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and len(exc.args) == 1:
        return f"missing required key {exc.args[0]!r}"
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _stage_runner(stage: str) -> Callable[[Mapping[str, Any]], None] | None:
    """The stage's ``run_<stage>_vector``, or ``None`` when its module does not exist yet."""
    module_name = f"{__package__}._{stage}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        raise
    runner: Callable[[Mapping[str, Any]], None] = getattr(module, f"run_{stage}_vector")
    return runner


def run_vector_file(path: str | Path) -> VectorResult:
    """Run one vector file and report whether it passed; never raises for a bad file.

    Raises :class:`ModuleNotFoundError` (with an install hint) only when
    ``tomli`` is not installed.
    """
    path = Path(path)
    tomli = _tomli()
    label = path.name

    def failed(reason: str, name: str = label, stage: str | None = None) -> VectorResult:
        return VectorResult(path, name, stage, False, f"{label}: {reason}")

    try:
        with path.open("rb") as handle:
            doc = tomli.load(handle)
    except OSError as exc:
        return failed(f"cannot read file: {exc.strerror or exc}")
    except (tomli.TOMLDecodeError, UnicodeDecodeError) as exc:
        return failed(f"invalid TOML: {exc}")

    test = doc.get("test")
    if not isinstance(test, dict):
        return failed("no [test] table")
    raw_name = test.get("name")
    name = raw_name if isinstance(raw_name, str) and raw_name else label
    stage = test.get("stage")
    if stage is None:
        return failed("[test] has no 'stage'", name)
    if not isinstance(stage, str) or stage not in STAGES:
        return failed(
            f"unknown stage {stage!r} (expected one of {', '.join(STAGES)})",
            name, stage if isinstance(stage, str) else None,
        )

    try:
        runner = _stage_runner(stage)
        if runner is None:
            # Quoted exactly, without the file name: the vector is fine, the
            # implementation of its stage is what is missing.
            return VectorResult(path, name, stage, False, f"{stage} not implemented")
        runner(doc)
    except VectorFailure as exc:
        return failed(str(exc) or "expectation did not hold", name, stage)
    except Exception as exc:  # a broken vector or a bug: report it, keep running
        return failed(_describe(exc), name, stage)
    return VectorResult(path, name, stage, True, None)


def collect_vector_files(paths: Iterable[str | Path]) -> list[Path]:
    """The ``.toml`` files named by ``paths``, sorted, each once.

    A directory contributes every ``*.toml`` file below it (recursively); a
    file is taken as given. Files reached twice (say, through a directory and
    directly) are kept once, under the first spelling seen. Raises
    :class:`FileNotFoundError` naming a path that does not exist.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    found: dict[Path, Path] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*.toml") if p.is_file())
        elif path.exists():
            candidates = [path]
        else:
            raise FileNotFoundError(2, "No such file or directory", str(path))
        for candidate in candidates:
            found.setdefault(candidate.resolve(), candidate)
    return sorted(found.values())


def run_paths(paths: Iterable[str | Path]) -> ConformanceSummary:
    """Run every vector file under ``paths`` (see :func:`collect_vector_files`)."""
    files = collect_vector_files(paths)
    if files:
        _tomli()  # fail once, with the install hint, before running anything
    return ConformanceSummary(tuple(run_vector_file(path) for path in files))
