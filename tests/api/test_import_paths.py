"""One import path per public name: a class or function is exported by the public
module it belongs to and, for what most programs import, by the top-level
``cupellation`` namespace too — never by a third module."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
from collections.abc import Iterable, Mapping
from types import ModuleType

import cupellation

#: The package whose public modules each import an agent framework (seconds each):
#: they are read, not imported (see :func:`_reexports_in_source`).
_FRAMEWORKS = "cupellation.integrations"


def _public_modules() -> tuple[list[str], list[str]]:
    """Every module of the package whose dotted name has no part starting with
    ``_``, and the exporters' distribution, which builds on the core; then, apart,
    the framework modules of ``cupellation.integrations``."""
    found = ["cupellation"]
    frameworks: list[str] = []
    pending: list[ModuleType] = [cupellation]
    while pending:
        module = pending.pop()
        for info in pkgutil.iter_modules(getattr(module, "__path__", []), module.__name__ + "."):
            if info.name.rsplit(".", 1)[1].startswith("_"):
                continue
            if module.__name__ == _FRAMEWORKS:
                frameworks.append(info.name)
            else:
                found.append(info.name)
                pending.append(importlib.import_module(info.name))
    return [*sorted(found), "cupellation_exporters"], sorted(frameworks)


def _reexports_in_source(source: str) -> list[str]:
    """The names a module's ``__all__`` lists that its own source does not define
    (by ``def``, ``class`` or assignment at module level): what it re-exports."""
    defined: set[str] = set()
    listed: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {target.id for target in targets if isinstance(target, ast.Name)}
            defined |= names
            if "__all__" in names and node.value is not None:
                listed = [item.value for item in ast.walk(node.value)
                          if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return [name for name in listed if name not in defined]


def _home(defined_in: str) -> str:
    """The public module a name defined in ``defined_in`` belongs to: its module
    without the private parts (``cupellation.slicing._greedy`` -> ``cupellation.slicing``,
    ``cupellation._model.item`` -> ``cupellation``)."""
    parts: list[str] = []
    for part in defined_in.split("."):
        if part.startswith("_"):
            break
        parts.append(part)
    return ".".join(parts)


def _exporters(modules: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """For each class or function some public module lists in ``__all__``: its
    qualified name -> (where it is defined, the public modules that export it)."""
    found: dict[int, tuple[str, str, list[str]]] = {}
    for name in modules:
        module = importlib.import_module(name)
        for exported in getattr(module, "__all__", ()):
            value = getattr(module, exported)
            if inspect.isclass(value) or inspect.isfunction(value):
                entry = found.setdefault(id(value), (
                    f"{value.__module__}.{value.__qualname__}", value.__module__, []))
                entry[2].append(name)
    return {qualified: (defined, sorted(set(where)))
            for qualified, defined, where in found.values()}


def _problems(exporters: Mapping[str, tuple[str, list[str]]]) -> list[str]:
    """The names exported by a module other than their home and the top level, or
    (defined in a private top-level module, whose home is the top level) by more
    than one public module besides the top level."""
    problems = []
    for qualified, (defined, where) in sorted(exporters.items()):
        home = _home(defined)
        others = [module for module in where if module != "cupellation"]
        if home == "cupellation" and len(others) <= 1:
            continue
        if home != "cupellation" and all(module == home for module in others):
            continue
        problems.append(f"{qualified}: {', '.join(where)}")
    return problems


def test_every_public_name_has_one_import_path_besides_the_top_level() -> None:
    """Walking every public module (the optional store included; the framework
    integrations read as source, so no framework is imported):
    each class and function is exported by its own package (placers by
    cupellation.placing, errors by cupellation.exceptions) and optionally by
    cupellation itself, nowhere else; cupellation.policy no longer re-exports
    placers, slicers and curves. The checker is checked on made-up exports."""
    modules, frameworks = _public_modules()
    assert {"cupellation.policy", "cupellation.store", "cupellation.events",
            "cupellation.integrations", "cupellation.testing"} <= set(modules)
    assert _problems(_exporters(modules)) == []
    assert frameworks == ["cupellation.integrations.langchain",
                          "cupellation.integrations.openai_agents",
                          "cupellation.integrations.pydantic_ai"]
    for name in frameworks:
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        with open(spec.origin, encoding="utf-8") as source:
            assert (name, _reexports_in_source(source.read())) == (name, [])
    assert _reexports_in_source(
        "from x import Window\ndef f(): ...\nclass C: ...\nK: int = 1\n"
        "__all__ = ['C', 'K', 'Window', 'f']\n") == ["Window"]
    made_up = {
        "cupellation.placing._u.UShapedPlacer": (
            "cupellation.placing._u", ["cupellation", "cupellation.placing"]),
        "cupellation.slicing._g.GreedySlice": (
            "cupellation.slicing._g", ["cupellation.policy", "cupellation.slicing"]),
        "cupellation.exceptions.BackendError": (
            "cupellation.exceptions", ["cupellation.exceptions", "cupellation.otel"]),
        "cupellation._model.item.ContextItem": ("cupellation._model.item", ["cupellation"]),
        "cupellation._pipeline.Prepared": ("cupellation._pipeline", ["cupellation.analytics"]),
        "cupellation._model.scored.ScoredItem": (
            "cupellation._model.scored", ["cupellation.placing", "cupellation.slicing"]),
    }
    assert _problems(made_up) == [
        "cupellation._model.scored.ScoredItem: cupellation.placing, cupellation.slicing",
        "cupellation.exceptions.BackendError: cupellation.exceptions, cupellation.otel",
        "cupellation.slicing._g.GreedySlice: cupellation.policy, cupellation.slicing"]
