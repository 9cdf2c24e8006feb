"""Runs a pipeline conformance vector: output order and every
``[expected.diagnostics]`` assertion, through the real event stream and report,
and the same output from an untraced run (the fused path, where it applies).

The pipeline's strategies are built by the strategy registry from the tables
the stage runners' renaming gives (``[[config.scorers]]`` entries, the
``slicer`` name with the slicer's settings beside it, the ``placer`` name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import _registry as registry
from .._collectors import DiagnosticTraceCollector, TraceDetailLevel
from .._model import ContextBudget
from .._pipeline import Pipeline
from .._report import SelectionReport
from ..reasons import reason_to_dict as exclusion_reason_to_json
from ._errors import VectorFailure, check_keys
from ._placing import build_placer
from ._scoring import entry_table
from ._slicing import slicer_table
from ._vectors import item_from_vector

__all__ = ["build_pipeline", "run_pipeline_vector"]

_PIPELINE_KEYS = ("slicer", "placer", "deduplication", "overflow_strategy", "scorers")
_BUDGET_KEYS = ("max_tokens", "target_tokens", "output_reserve")
_DEFAULT_EPSILON = 1e-9


def build_pipeline(config: Mapping[str, Any]) -> Pipeline:
    """The pipeline a vector's ``[config]`` table describes.

    ``[[config.scorers]]`` entries are read as a composite's (a single entry is
    used alone); every other key besides ``slicer``, ``placer``,
    ``deduplication`` and ``overflow_strategy`` must be a setting of the
    slicer (``bucket_size`` ...), or
    :class:`~cupellation.conformance.UnsupportedConfigError` is raised.
    """
    entries: Sequence[Any] = config.get("scorers", ())
    if not entries:
        raise VectorFailure("[config] has no [[config.scorers]] entry")
    children = [entry_table(entry, f"config.scorers[{index}]")
                for index, entry in enumerate(entries)]
    if len(children) == 1:
        del children[0]["weight"]  # a single entry is used alone
        scorer = children[0]
    else:
        scorer = {"type": "composite", "children": children}
    slicer_config = {k: v for k, v in config.items() if k not in _PIPELINE_KEYS}
    slicer = slicer_table(config.get("slicer", "greedy"), slicer_config,
                          also_known=_PIPELINE_KEYS)
    return Pipeline(
        scorer=registry.build_scorer(scorer, path="config.scorers"),
        slicer=registry.build_slicer(slicer, path="config"),
        placer=build_placer(config.get("placer", "chronological")),
        deduplication=bool(config.get("deduplication", True)),
        overflow_strategy=config.get("overflow_strategy", "throw"),
    )


def run_pipeline_vector(doc: Mapping[str, Any]) -> None:
    """Run one parsed pipeline vector; raise :class:`VectorFailure` on any mismatch."""
    budget_table = doc["budget"]
    check_keys(budget_table, _BUDGET_KEYS, "budget", "a pipeline vector's budget")
    budget = ContextBudget(
        max_tokens=budget_table["max_tokens"],
        target_tokens=budget_table["target_tokens"],
        output_reserve=budget_table.get("output_reserve", 0),
    )
    pipeline = build_pipeline(doc.get("config", {}))
    items = [item_from_vector(table) for table in doc.get("items", ())]
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    output = pipeline.run(items, budget, collector)
    expected = [entry["content"] for entry in doc.get("expected_output", ())]
    actual = [item.content for item in output]
    if actual != expected:
        raise VectorFailure(f"output order: expected {expected}, got {actual}")
    # The same run untraced: a built-in configuration then takes the fused path,
    # which must return the very items the stage path (traced above) returned.
    untraced = pipeline.run(items, budget)
    if list(map(id, untraced)) != list(map(id, output)):
        raise VectorFailure(f"untraced run: got {[item.content for item in untraced]}, the "
                            f"traced run {actual}")
    diagnostics = doc.get("expected", {}).get("diagnostics")
    if diagnostics is not None:
        epsilon = float(doc.get("tolerance", {}).get("score_epsilon", _DEFAULT_EPSILON))
        _check_diagnostics(collector.build_report(), diagnostics, epsilon)


def _check_diagnostics(report: SelectionReport, expected: Mapping[str, Any],
                       epsilon: float) -> None:
    summary = expected.get("summary", {})
    for key in ("total_candidates", "total_tokens_considered"):
        if key in summary and getattr(report, key) != summary[key]:
            raise VectorFailure(f"{key}: expected {summary[key]}, got {getattr(report, key)}")
    if "included" in expected:
        wanted = expected["included"]
        if len(wanted) != len(report.included):
            raise VectorFailure(
                f"included: expected {len(wanted)} items, got {len(report.included)} "
                f"({[i.item.content for i in report.included]})"
            )
        for position, (want, got) in enumerate(zip(wanted, report.included, strict=True)):
            where = f"included[{position}]"
            _check_common(where, want, got.item.content, got.score, epsilon)
            if "inclusion_reason" in want and got.reason.name != want["inclusion_reason"]:
                raise VectorFailure(
                    f"{where}: reason expected {want['inclusion_reason']}, got {got.reason.name}"
                )
    if "excluded" in expected:
        wanted = expected["excluded"]
        if len(wanted) != len(report.excluded):
            raise VectorFailure(
                f"excluded: expected {len(wanted)} items, got {len(report.excluded)} "
                f"({[e.item.content for e in report.excluded]})"
            )
        for position, (want, got_item) in enumerate(zip(wanted, report.excluded, strict=True)):
            where = f"excluded[{position}]"
            _check_common(where, want, got_item.item.content, got_item.score, epsilon)
            reason = exclusion_reason_to_json(got_item.reason)
            if "exclusion_reason" in want and reason["reason"] != want["exclusion_reason"]:
                raise VectorFailure(
                    f"{where}: reason expected {want['exclusion_reason']}, got {reason['reason']}"
                )
            # Every other key of the expectation is a field of the reason variant.
            for key, value in want.items():
                if key in ("content", "score_approx", "exclusion_reason"):
                    continue
                if reason.get(key) != value:
                    raise VectorFailure(
                        f"{where}: reason field {key} expected {value!r}, got {reason.get(key)!r}"
                    )


def _check_common(where: str, want: Mapping[str, Any], content: str, score: float,
                  epsilon: float) -> None:
    if "content" in want and content != want["content"]:
        raise VectorFailure(f"{where}: expected {want['content']!r}, got {content!r}")
    if "score_approx" in want and not abs(score - float(want["score_approx"])) < epsilon:
        raise VectorFailure(
            f"{where} ({content!r}): score expected {want['score_approx']}, got {score}"
        )
