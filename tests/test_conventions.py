"""Project conventions that a reviewer would otherwise have to check by eye."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import cupellation
from cupellation import events, reasons
from cupellation.scoring import DecayScorer, ExponentialCurve, StepCurve, WindowCurve
from cupellation.scoring import utc_now as clock

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_says_what_it_proves() -> None:
    """Every test function in the suite has a docstring."""
    missing = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                    and node.name.startswith("test") and not ast.get_docstring(node)):
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert missing == []


def test_public_modules_declare_all_and_export_what_exists() -> None:
    """Every module of the package, private ones included, has an explicit __all__
    whose names exist (a private module's public names are what others may import)."""
    problems = []
    for info in pkgutil.walk_packages(cupellation.__path__, "cupellation."):
        last = info.name.split(".")[-1]
        if last == "__main__":
            continue  # runs the CLI
        module = importlib.import_module(info.name)
        names = getattr(module, "__all__", None)
        if names is None:
            problems.append(f"{info.name} has no __all__")
            continue
        problems.extend(f"{info.name}.{name} is missing" for name in names
                        if not hasattr(module, name))
    assert problems == []
    assert all(hasattr(cupellation, name) for name in cupellation.__all__)


def test_library_code_never_configures_global_telemetry_or_logging() -> None:
    """No module of the library calls logging.basicConfig, structlog.configure or
    set_tracer_provider: the application owns that global state."""
    forbidden = ("basicConfig(", "structlog.configure(", "set_tracer_provider(",
                 "gc.disable(")
    offenders = [f"{path.relative_to(ROOT)}: {needle}"
                 for path in sorted((ROOT / "src").rglob("*.py"))
                 for needle in forbidden if needle in path.read_text(encoding="utf-8")]
    assert offenders == []


#: The top level's names, reviewed: a name added to ``cupellation.__all__`` is added
#: here too, in the same commit, so that the top level grows only by a decision a
#: reviewer sees (the rest lives in its module).
_TOP_LEVEL = frozenset({
    "NULL_COLLECTOR", "ChronologicalPlacer", "CompositeScorer", "ContextBudget",
    "ContextItem", "ContextKind", "ContextSource", "CountConstrainedKnapsackSlice",
    "CountQuotaSlice", "CupelError", "DecayScorer", "DiagnosticTraceCollector",
    "EventCollector", "FanOutCollector", "FrequencyScorer", "FunctionScorer", "GreedySlice",
    "KindScorer", "KnapsackSlice", "MessageHistory", "MetadataKeyScorer",
    "MetadataTrustScorer", "OverflowStrategy", "Pipeline", "PriorityScorer", "QuotaSlice",
    "RecencyScorer", "ReflexiveScorer", "ReportBuilder", "RunInfo", "ScaledScorer", "ScoredItem",
    "SelectOptions", "SelectionReport", "TagScorer", "TraceCollector", "TraceDetailLevel",
    "UShapedPlacer", "__version__", "build_report", "events", "exceptions", "reasons",
    "select_messages", "select_messages_with_report",
})


def test_the_top_level_holds_the_reviewed_names_and_events_and_reasons_are_public() -> None:
    """The top level holds exactly the reviewed list of names (the pipeline's parts,
    the agent builder's select_messages, select_messages_with_report, SelectOptions,
    MessageHistory and RunInfo); events and reasons have public modules whose JSON
    helpers take and give text."""
    assert set(cupellation.__all__) == _TOP_LEVEL
    assert len(cupellation.__all__) == len(_TOP_LEVEL)  # no name listed twice
    for name in ("Pipeline", "ContextItem", "ContextBudget", "DiagnosticTraceCollector",
                 "TraceDetailLevel", "FanOutCollector", "build_report", "ReportBuilder"):
        assert name in cupellation.__all__
    assert "ItemExcluded" in events.__all__
    assert "BudgetExceeded" in reasons.__all__
    assert all((DecayScorer, ExponentialCurve, StepCurve, WindowCurve, clock))


def test_names_follow_one_convention_for_mappings_and_json_text() -> None:
    """to_dict/from_dict give and take mappings, to_json/from_json text, throughout."""
    item = cupellation.ContextItem(content="x", tokens=1)
    assert isinstance(item.to_dict(), dict)
    assert isinstance(item.to_json(), str)
    assert cupellation.ContextItem.from_json(item.to_json()) == item
    report = cupellation.Pipeline(scorer=cupellation.RecencyScorer()).dry_run(
        [item], cupellation.ContextBudget(max_tokens=5, target_tokens=5))
    assert isinstance(report.to_dict(), dict)
    assert cupellation.SelectionReport.from_json(report.to_json()) == report


def test_the_version_is_one_everywhere() -> None:
    """``cupellation.__version__`` (the instrumentation scope's version) is the
    pyproject version, and CHANGELOG's newest entry names it."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'\nversion = "{cupellation.__version__}"\n' in text
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    newest = next(line for line in changelog.splitlines() if line.startswith("## "))
    assert newest.startswith(f"## {cupellation.__version__} ")


#: Where tests, examples, benchmarks and scripts live: none may read outside the clone.
_SELF_CONTAINED = ("tests", "examples", "benchmarks", "scripts", ".ci", "docker")
#: Text that names a place outside the repository: a sibling folder ("../x"), this
#: machine's work tree, or a shell path climbing above the repository root.
_OUTSIDE = re.compile(r"\.\./|/work/|\$\{?root\}?/\.\.")
#: ``Path(__file__)`` followed by ``.parent`` / ``.parents[N]`` steps.
_FILE_PARENTS = re.compile(
    r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent\b|\.parents\[\d+\])+)")


def _levels_up(chain: str) -> int:
    """How many folders ``chain`` (``.parent`` / ``.parents[N]`` steps) climbs from a file."""
    return sum(1 if step == ".parent" else int(step[len(".parents["):-1]) + 1
               for step in re.findall(r"\.parent\b(?!s)|\.parents\[\d+\]", chain))


def _outside_reference(relative: Path, line: str) -> bool:
    """Whether ``line`` of the file at ``relative`` (to the root) names a path outside
    the repository."""
    # tests/x/probe.py (3 parts) reaches the root with 3 steps up: parents[2].
    return bool(_OUTSIDE.search(line)) or any(
        _levels_up(match.group(1)) > len(relative.parts)
        for match in _FILE_PARENTS.finditer(line))


def test_no_test_example_benchmark_or_script_reads_outside_the_repository() -> None:
    """A bare clone tests itself: nothing in tests/, examples/, benchmarks/, scripts/,
    .ci/ or docker/ refers to ../shared, to this machine's work tree, or climbs from
    its own file above the repository root (the conformance vectors and the seeds'
    examples are vendored in tests/data). The checker itself is checked on lines
    that must and must not be flagged."""
    offenders: list[str] = []
    for top in _SELF_CONTAINED:
        for path in sorted((ROOT / top).rglob("*")):
            if (not path.is_file() or path == Path(__file__).resolve()
                    or "__pycache__" in path.parts):
                continue
            relative = path.relative_to(ROOT)
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders.extend(f"{relative}:{number}: {line.strip()}"
                             for number, line in enumerate(text.splitlines(), start=1)
                             if _outside_reference(relative, line))
    assert offenders == []
    probe = Path("tests", "x", "probe.py")
    probe_lines = {
        'Path(__file__).resolve().parents[2].parent / "shared"': True,
        "Path(__file__).resolve().parents[3]": True,
        "Path(__file__).resolve().parents[1].parent.parent": True,
        "Path(__file__).parent.parent.parent.parent": True,
        'open("../shared/seeds/a.txt")': True,
        'vectors="$root/../shared/conformance"': True,
        'root = "/work/main"': True,
        "Path(__file__).resolve().parents[2]": False,
        'Path(__file__).parent.parent / "data"': False,
        'tmp_path / "nested" / ".." / "b.toml"': False,
        'root="$(cd "$(dirname "$0")/.." && pwd)"': False,
    }
    assert {line: _outside_reference(probe, line) for line in probe_lines} == probe_lines


#: The machine's own device files, and mounting, named in a test.
_REAL_SPECIAL_FILES = re.compile(r"/dev/(?:null|full|zero)\b|\bu?mount\s*\(|[\"']u?mount[\"']")


def test_no_test_touches_the_real_device_files_or_mounts() -> None:
    """Outside tests/conftest.py (which guards them), no test or helper names /dev/null,
    /dev/full or /dev/zero, or mounts anything: tests use the mknod-made devices, the
    FIFO and the injected full disk of tests/conftest.py (stdin from /dev/null is
    ``subprocess.DEVNULL``). The pattern is checked on lines it must and must not flag."""
    offenders = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
                 for path in sorted((ROOT / "tests").rglob("*.py"))
                 if path.name != "conftest.py" or path.parent != ROOT / "tests"
                 if path != Path(__file__).resolve()
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(),
                                               start=1)
                 if _REAL_SPECIAL_FILES.search(line)]
    assert offenders == []
    flagged = {'cli("select", src, "-o", "/dev/null")': True,
               'open("/dev/full", "wb")': True,
               'subprocess.run(["mount", "-t", "tmpfs", "x", d])': True,
               "libc.mount(b'tmpfs', d)": True,
               "stdin=subprocess.DEVNULL": False,
               "mounts = _mounts(service)": False,
               'Path("/dev/stdin")': False}
    assert {line: bool(_REAL_SPECIAL_FILES.search(line)) for line in flagged} == flagged


# -- the direction of the layers (DESIGN-12, design.md "The direction of the layers") --

_SRC = ROOT / "src"
_EXPORTERS = ROOT / "exporters" / "src"
#: Each layer, top (imported by everything below) to bottom, by the first part of the
#: module's name under ``cupellation`` (``otel`` covers ``cupellation.otel._names``).
#: A module may import from its own layer and the layers above it, never below.
_LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("model", frozenset({"_model", "reasons", "exceptions", "_version", "files",
                       "settings", "_toml", "_policytext"})),
    ("events", frozenset({"events"})),
    ("report", frozenset({"_report"})),
    ("collectors", frozenset({"_collectors"})),
    ("strategies", frozenset({"_tables", "_order", "scoring", "slicing", "placing"})),
    ("registry", frozenset({"_registry"})),
    ("pipeline", frozenset({"_pipeline", "_run", "_fused", "_attribution"})),
    ("projections", frozenset({"otel", "logs", "_tracecontext"})),
    ("store", frozenset({"store"})),
    ("built", frozenset({"policy", "conformance", "chat", "analytics"})),
    ("integrations", frozenset({"integrations"})),
    ("faces", frozenset({"cli", "_html", "_htmlstyle", "html", "testing", "__init__",
                         "cupellation_entry_point", "cupellation_pytest_plugin"})),
    ("exporters", frozenset({"cupellation_exporters"})),
)
#: Known violations in files the strategies branch is rewriting (issue 12's other
#: half); the lead removes each entry when that branch lands. Entries are
#: "importer -> imported name".
#: Imports that break the layers, each with why. None: the CLI loads the optional
#: cupellation-exporters distribution at run time (importlib), never by an import
#: statement, so the core never depends on it.
_KNOWN_VIOLATIONS: frozenset[str] = frozenset()

def _module_name(path: Path) -> str:
    base = _EXPORTERS if _EXPORTERS in path.parents else _SRC
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] + (["__init__"] if len(parts) == 2 else [])
    return ".".join(parts)


def _layer(module: str) -> int:
    parts = module.split(".")
    unit = parts[0] if parts[0] != "cupellation" else (parts[1] if len(parts) > 1 else "__init__")
    for index, (_, units) in enumerate(_LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"{module} is in no layer: add it to _LAYERS")


def _is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return any((base / relative).with_suffix(".py").exists() or (base / relative).is_dir()
               for base in (_SRC, _EXPORTERS))


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """(module imported, name imported from it or None) for every import of a file."""
    return _imports_of(path.read_text(encoding="utf-8"), _module_name(path),
                       path.name == "__init__.py")


def _imports_of(source: str, module: str, is_package: bool) -> list[tuple[str, str | None]]:
    """The imports of ``source`` (module ``module``), relative ones resolved."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    if package and package[-1] == "__init__":
        package = package[:-1]
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "") if not node.level else ".".join(
                package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.extend((base, alias.name) for alias in node.names)
    return found


def _ours(name: str) -> bool:
    return name.split(".", maxsplit=1)[0] in ("cupellation", "cupellation_exporters")


def test_imports_follow_the_layers_and_no_private_name_crosses_a_module() -> None:
    """Parsing every module of src/cupellation and exporters/src: each imports only
    from its own layer or the layers above it (so no cycle between layers can
    exist), no two top-level units import each other, and no module imports
    another module's private name (a private module's public names are fine)."""
    upward: list[str] = []
    private: list[str] = []
    units: dict[str, set[str]] = {}
    files = sorted(_SRC.rglob("*.py")) + sorted(_EXPORTERS.rglob("*.py"))
    for path in files:
        importer = _module_name(path)
        for imported, name in _imports(path):
            if not _ours(imported):
                continue
            target = f"{imported}.{name}" if name and _is_module(f"{imported}.{name}") else imported
            if _layer(target) > _layer(importer) and (
                    f"{importer} -> {target}" not in _KNOWN_VIOLATIONS):
                upward.append(f"{importer} -> {target}")
            if (name is not None and name.startswith("_") and not name.startswith("__")
                    and not _is_module(target)):
                entry = f"{importer} -> {imported}.{name}"
                if entry not in _KNOWN_VIOLATIONS:
                    private.append(entry)
            units.setdefault(importer.split(".")[1] if importer.startswith("cupellation.")
                             else importer.split(".")[0], set()).add(
                target.split(".")[1] if target.startswith("cupellation.") and "." in target
                else target.split(".")[0])
    assert upward == []
    assert private == []
    cycles = sorted(f"{a} <-> {b}" for a, targets in units.items() for b in targets
                    if a < b and a in units.get(b, set()))
    assert cycles == []


def test_the_layer_checker_sees_what_it_must() -> None:
    """The import checker itself: relative imports resolve (also from a function body),
    a lower layer and a private name are told apart from a private module's public
    names."""
    source = ("from ..events import RunStarted\nfrom ..events._flat import flat_keys\n"
              "from . import _decode\ndef f():\n    from ..otel._names import _SHARED\n")
    found = _imports_of(source, "cupellation.logs._reader", is_package=False)
    assert found == [("cupellation.events", "RunStarted"), ("cupellation.events._flat",
                                                              "flat_keys"),
                     ("cupellation.logs", "_decode"), ("cupellation.otel._names", "_SHARED")]
    assert _layer("cupellation.otel._names") > _layer("cupellation.events")
    assert _layer("cupellation.events._flat") == _layer("cupellation.events")
    assert _layer("cupellation._report.fold") < _layer("cupellation._pipeline")
    assert _is_module("cupellation.logs._decode")
    assert not _is_module("cupellation.otel._names._SHARED")


#: The third-party distributions each layer adds to those of the layers above it (a
#: layer may import what the layers above it may). The pipeline core stays on msgspec
#: and numpy; OpenTelemetry's API enters with the projections, its SDK only with the
#: faces and the exporters.
_THIRD_PARTY: dict[str, frozenset[str]] = {
    "model": frozenset({"msgspec"}),
    "strategies": frozenset({"numpy"}),
    "projections": frozenset({"opentelemetry-api", "structlog"}),
    "store": frozenset({"clickhouse-connect"}),
    "integrations": frozenset({"langchain", "langchain-core", "langgraph", "openai-agents",
                               "pydantic-ai"}),
    "faces": frozenset({"rich", "opentelemetry-sdk", "opentelemetry-exporter", "protobuf",
                        "pytest"}),
    "exporters": frozenset({"grpc"}),
}
#: Import names whose distribution is not their first part (the rest are read as
#: their first part with "_" as "-").
_DISTRIBUTIONS: tuple[tuple[str, str], ...] = (
    ("opentelemetry.sdk", "opentelemetry-sdk"), ("opentelemetry.exporter",
                                                 "opentelemetry-exporter"),
    ("opentelemetry", "opentelemetry-api"), ("google.protobuf", "protobuf"),
    ("agents", "openai-agents"),
)


def _distribution(imported: str) -> str | None:
    """The third-party distribution an import names; None for the standard library
    and the project's own modules."""
    top = imported.split(".", maxsplit=1)[0]
    if not top or _ours(imported) or top in sys.stdlib_module_names or top == "__future__":
        return None
    for prefix, distribution in _DISTRIBUTIONS:
        if imported == prefix or imported.startswith(prefix + "."):
            return distribution
    return top.replace("_", "-")


def _third_party_problems(imports: Mapping[str, list[str]]) -> list[str]:
    """``importer -> distribution`` for each module importing a distribution its layer
    may not (``imports`` maps a module to the modules it imports)."""
    allowed: list[frozenset[str]] = []
    so_far: frozenset[str] = frozenset()
    for name, _ in _LAYERS:
        so_far |= _THIRD_PARTY.get(name, frozenset())
        allowed.append(so_far)
    return sorted({f"{importer} -> {distribution}"
                   for importer, names in imports.items() for imported in names
                   if (distribution := _distribution(imported)) is not None
                   and distribution not in allowed[_layer(importer)]})


def test_each_layer_imports_only_its_own_third_party_packages() -> None:
    """Every import of a third-party package, at module level or inside a function,
    is one its layer (or a layer above it) declares in _THIRD_PARTY: the pipeline core
    imports no OpenTelemetry, structlog or store client (design.md: it knows nothing
    of them); only the faces and the exporters import the OpenTelemetry SDK and exporters. The
    checker itself is checked on made-up imports it must and must not flag."""
    imports = {_module_name(path): [imported for imported, _ in _imports(path)]
               for path in sorted(_SRC.rglob("*.py")) + sorted(_EXPORTERS.rglob("*.py"))}
    assert _third_party_problems(imports) == []
    made_up = {"cupellation._run": ["opentelemetry.trace", "numpy", "os"],
               "cupellation.otel._collector": ["opentelemetry.sdk.trace", "structlog"],
               "cupellation.cli._app": ["opentelemetry.sdk.trace", "rich.table"],
               "cupellation.events": ["numpy", "msgspec"]}
    assert _third_party_problems(made_up) == [
        "cupellation._run -> opentelemetry-api", "cupellation.events -> numpy",
        "cupellation.otel._collector -> opentelemetry-sdk"]


def test_the_core_reaches_the_exporters_only_through_their_entry_point() -> None:
    """cupellation-exporters depends on cupellation, not the reverse: no module of
    src/cupellation names it in an import (static or importlib), and the CLI finds it
    through the ``cupellation.exporters`` entry point it registers."""
    from importlib.metadata import entry_points  # noqa: PLC0415 - this test's alone

    naming = [str(path.relative_to(_SRC)) for path in sorted(_SRC.rglob("*.py"))
              if re.search(r"import_module\(\s*[\"']cupellation_exporters|"
                           r"^\s*(from|import)\s+cupellation_exporters",
                           path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert naming == []
    found = [entry.value for entry in entry_points(group="cupellation.exporters")]
    assert found == ["cupellation_exporters"]


_MAX_INTERNAL_PARAMETERS = 7


def _functions() -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for path in sorted(_SRC.rglob("*.py")) + sorted(_EXPORTERS.rglob("*.py")):
        module = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{module}.{node.name}", node


def test_internal_functions_take_few_parameters() -> None:
    """No internal function of src/cupellation or exporters/src takes more than 7
    parameters (self apart): a small options value does instead. Public signatures
    keep the shape the specification or OpenTelemetry gives them. (How long and how
    branched a function is, ruff's complexity rules measure: see the next test.)"""
    crowded = []
    for name, node in _functions():
        arguments = node.args
        count = len(arguments.posonlyargs) + len(arguments.args) + len(arguments.kwonlyargs)
        if arguments.args and arguments.args[0].arg in ("self", "cls"):
            count -= 1
        if node.name.startswith("_") and not node.name.startswith("__") and (
                count > _MAX_INTERNAL_PARAMETERS):
            crowded.append(f"{name}: {count} parameters")
    assert crowded == []


#: ruff's complexity rules, which replaced the module and function line caps.
_COMPLEXITY = ("C901", "PLR0912", "PLR0915")
#: The reviewed copy of pyproject's complexity debt ([tool.ruff.lint.per-file-ignores]):
#: the files whose functions were past the limits when the rules came in (issue 27). The
#: debt may only shrink: pyproject may drop an entry, never add one that is not here.
_COMPLEXITY_DEBT: frozenset[str] = frozenset({
    "benchmarks/bench_logs.py",
    "exporters/src/cupellation_exporters/_replay.py",
    "exporters/src/cupellation_exporters/_replay_spans.py",
    "src/cupellation/analytics/_replay.py",
    "src/cupellation/chat/_messages.py",
    "src/cupellation/chat/_parsing.py",
    "src/cupellation/chat/_reading.py",
    "src/cupellation/chat/_units.py",
    "src/cupellation/cli/_analytics.py",
    "src/cupellation/cli/_app.py",
    "src/cupellation/cli/_config.py",
    "src/cupellation/cli/_export.py",
    "src/cupellation/cli/_inputs.py",
    "src/cupellation/cli/_reportcmd.py",
    "src/cupellation/cli/_select.py",
    "src/cupellation/cli/_storecmd.py",
    "src/cupellation/cli/_whycmd.py",
    "src/cupellation/conformance/_pipeline.py",
    "src/cupellation/otel/_backends.py",
    "src/cupellation/otel/_collector.py",
    "src/cupellation/otel/_decode.py",
    "src/cupellation/otel/_http.py",
    "src/cupellation/otel/_names.py",
    "src/cupellation/otel/_spans.py",
    "src/cupellation/_toml.py",
    "src/cupellation/slicing/_count_quota.py",
    "src/cupellation/store/_values.py",
    "tests/api/test_api_generated_input.py",
    "tests/chat/_provider_rules.py",
    "tests/pipeline/test_pipeline_properties.py",
    "tests/slicing/_slicing_support.py",
})


def _complexity_problems(debt: Mapping[str, list[str]], offending: set[str],
                         reviewed: frozenset[str]) -> tuple[list[str], list[str], list[str]]:
    """The debt entries not in the reviewed copy, those that do not ignore all three
    rules, and those whose file no longer offends (each must leave the list)."""
    added = sorted(set(debt) - reviewed)
    partial = sorted(name for name, rules in debt.items() if set(rules) != set(_COMPLEXITY))
    paid = sorted(set(debt) - offending)
    return added, partial, paid


def test_complexity_is_measured_by_ruff_and_its_debt_only_shrinks() -> None:
    """pyproject.toml selects ruff's C901 (at 10), PLR0912 and PLR0915 (in place of the
    module and function line caps); its per-file ignore list of them is complexity
    debt that only shrinks: every entry is in the reviewed copy above, ignores the
    three rules, and names a file that still offends them (ruff run once on those
    files without the ignores). The checker itself is checked on a made-up list."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lint = config["tool"]["ruff"]["lint"]
    assert {"C90", "PL"} <= set(lint["select"])
    assert set(_COMPLEXITY).isdisjoint(lint["ignore"])
    assert lint["mccabe"]["max-complexity"] == 10
    debt = {name: rules for name, rules in lint["per-file-ignores"].items()
            if set(rules) & set(_COMPLEXITY)}
    found = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", ",".join(_COMPLEXITY),
         "--config", "lint.mccabe.max-complexity=10", "--output-format", "json",
         "--exit-zero", *sorted(debt)],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    offending = {Path(entry["filename"]).resolve().relative_to(ROOT).as_posix()
                 for entry in json.loads(found)}
    assert _complexity_problems(debt, offending, _COMPLEXITY_DEBT) == ([], [], [])
    made_up = {"a.py": list(_COMPLEXITY), "b.py": ["C901"], "new.py": list(_COMPLEXITY)}
    assert _complexity_problems(made_up, {"b.py", "new.py"}, frozenset({"a.py", "b.py"})) == (
        ["new.py"], ["b.py"], ["a.py"])
