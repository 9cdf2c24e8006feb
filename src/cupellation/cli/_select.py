"""``cupellation select`` and ``cupellation demo``: run the pipeline on candidates
from a file (or the bundled demo data), print why each one was or was not
chosen, and write the report and the event stream."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from .._collectors import DiagnosticTraceCollector, FanOutCollector, TraceDetailLevel
from .._model import ContextBudget, ContextItem
from .._pipeline import Pipeline
from .._report import SelectionReport
from ..conformance._placing import build_placer
from ..conformance._scoring import build_scorer
from ..conformance._slicing import build_slicer
from ..events import event_to_json
from ..exceptions import CupelError, DecodeError
from ..logs import AuditLog
from ..reasons import reason_to_dict
from ..scoring import CompositeScorer, Scorer

__all__ = ["add_demo_parser", "add_parser", "load_candidates", "run", "run_demo"]

_DEMO_SCORERS = ("recency:2", "priority:2", "kind:1", "reflexive:1")


def _add_pipeline_options(parser: argparse.ArgumentParser, *, demo: bool) -> None:
    parser.add_argument("--max-tokens", type=int, default=1024 if demo else None,
                        required=not demo, help="the model's context window (maxTokens)")
    parser.add_argument("--target-tokens", type=int, default=400 if demo else None,
                        required=not demo, help="the soft goal for the selection (targetTokens)")
    parser.add_argument("--output-reserve", type=int, default=256 if demo else 0,
                        help="tokens kept free for the model's answer (outputReserve)")
    parser.add_argument("--scorer", action="append", metavar="NAME[:WEIGHT]",
                        help="a scorer and its weight, repeatable (recency, priority, kind, tag, "
                             "frequency, reflexive, ...); several make a CompositeScorer")
    parser.add_argument("--slicer", default="greedy",
                        help="greedy (default), knapsack, ...")
    parser.add_argument("--placer", default="u-shaped" if demo else "chronological",
                        help="chronological or u-shaped")
    parser.add_argument("--overflow", default="throw", choices=["throw", "truncate", "proceed"],
                        help="what to do when the selection exceeds the target")
    parser.add_argument("--no-dedup", action="store_true", help="keep duplicate contents")
    parser.add_argument("--out", type=Path, default=Path("out") if demo else None,
                        help="folder for report.json and events.jsonl")
    parser.add_argument("--quiet", action="store_true", help="do not print the summary")
    parser.add_argument("--audit-log", type=Path, default=None, metavar="FILE",
                        help="also append the run's events to FILE as JSON lines (the audit "
                             "log that 'cupellation audit', 'report' and 'why' read); content "
                             "capture follows CUPELLATION_CAPTURE_CONTENT (default full)")


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``select`` sub-parser."""
    parser = subparsers.add_parser(
        "select", help="select context items from a JSON or JSONL file",
        description="Run the Cupel pipeline on candidates (a JSON array or JSON Lines of "
                    "ContextItem objects) and explain every decision.",
    )
    parser.add_argument("candidates", type=Path, help="the candidates file")
    _add_pipeline_options(parser, demo=False)
    return parser


def add_demo_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``demo`` sub-parser."""
    parser = subparsers.add_parser(
        "demo", help="run the pipeline on the bundled support-agent conversation",
        description="Select context for a bundled support-agent conversation, print the "
                    "decisions, and write out/report.json and out/events.jsonl.",
    )
    _add_pipeline_options(parser, demo=True)
    return parser


def load_candidates(path: Path) -> list[ContextItem]:
    """Candidates from a JSON array or a JSON Lines file of ContextItem objects.

    Raises :class:`~cupellation.exceptions.DecodeError` naming the line (JSON
    Lines) or the array index and the offending field.
    """
    text = path.read_text(encoding="utf-8")
    return _parse_candidates(text, str(path))


def _parse_candidates(text: str, where: str) -> list[ContextItem]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DecodeError(where, exc.msg, "is not valid JSON", line=exc.lineno) from None
        items = []
        for index, row in enumerate(rows):
            try:
                items.append(ContextItem.from_dict(row))
            except DecodeError as exc:
                raise DecodeError(f"[{index}].{exc.field}", exc.value, exc.problem) from None
        return items
    items = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(ContextItem.from_dict(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DecodeError(where, line[:60], f"is not valid JSON ({exc.msg})",
                              line=number) from None
        except DecodeError as exc:
            raise DecodeError(exc.field, exc.value, exc.problem, line=number) from None
    return items


def _build_scorer(specs: Sequence[str]) -> Scorer:
    children: list[tuple[Scorer, float]] = []
    for spec in specs:
        name, _, weight = spec.partition(":")
        try:
            value = float(weight) if weight else 1.0
        except ValueError:
            raise CupelError(f"--scorer {spec!r}: the weight must be a number") from None
        children.append((build_scorer(name.strip(), {}), value))
    return children[0][0] if len(children) == 1 else CompositeScorer(children)


def _build_pipeline(args: argparse.Namespace, default_scorers: Sequence[str]) -> Pipeline:
    return Pipeline(
        scorer=_build_scorer(args.scorer or default_scorers),
        slicer=build_slicer(args.slicer, {}),
        placer=build_placer(args.placer),
        deduplication=not args.no_dedup,
        overflow_strategy=args.overflow,
    )


def _reason_detail(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in fields.items() if k != "reason")


def print_summary(report: SelectionReport, budget: ContextBudget, stream: TextIO) -> None:
    """A human-readable account of the report: what went in, what stayed out and why."""
    used = sum(entry.item.tokens for entry in report.included)
    stream.write(f"Selected {len(report.included)} of {report.total_candidates} candidates: "
                 f"{used} tokens (target {budget.target_tokens}, max {budget.max_tokens}, "
                 f"output reserve {budget.output_reserve})\n\n")
    stream.write("Included, in placed order:\n")
    for position, included in enumerate(report.included):
        stream.write(f"  {position:>2}. [{included.reason.name:<9}] score {included.score:5.3f} "
                     f"{included.item.tokens:>5} tok  {_clip(included.item.content)}\n")
    stream.write("\nExcluded, highest score first:\n")
    for excluded in report.excluded:
        wire = reason_to_dict(excluded.reason)
        stream.write(f"  [{wire['reason']}] score {excluded.score:5.3f} "
                     f"{excluded.item.tokens:>5} tok  {_clip(excluded.item.content)}\n"
                     f"      {_reason_detail(wire)}\n")
    stream.write("\nStages:\n")
    for event in report.events:
        stream.write(f"  {event.stage!s:<12} {event.duration_ms:8.3f} ms  "
                     f"{event.item_count} items\n")


def _clip(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _execute(args: argparse.Namespace, candidates: list[ContextItem],
             default_scorers: Sequence[str]) -> int:
    budget = ContextBudget(args.max_tokens, args.target_tokens, args.output_reserve)
    pipeline = _build_pipeline(args, default_scorers)
    collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
    audit = None
    if args.audit_log is not None:
        try:
            audit = AuditLog(args.audit_log)
        except OSError as exc:
            print(f"cupellation: error: cannot open the audit log {args.audit_log}: "
                  f"{exc.strerror}", file=sys.stderr)
            return 2
    status = 0
    try:
        pipeline.run(candidates, budget,
                     collector if audit is None else FanOutCollector(collector, audit))
    except CupelError as exc:
        print(f"cupellation: the run failed: {exc}", file=sys.stderr)
        status = 1
    finally:
        if audit is not None:
            audit.close()
    report = collector.build_report()
    if not args.quiet and status == 0:
        print_summary(report, budget, sys.stdout)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.json").write_text(
            report.to_json(indent=2) + "\n", encoding="utf-8")
        with (args.out / "events.jsonl").open("w", encoding="utf-8") as handle:
            for event in collector.events:
                handle.write(event_to_json(event) + "\n")
        if not args.quiet:
            print(f"\nWrote {args.out / 'report.json'} and {args.out / 'events.jsonl'} "
                  f"({len(collector.events)} events)")
    return status


def run(args: argparse.Namespace, /) -> int:
    """Run ``select``: 0 on success, 1 when the run failed, 2 for unreadable input."""
    try:
        candidates = load_candidates(args.candidates)
        return _execute(args, candidates, ("recency",))
    except OSError as exc:
        print(f"cupellation select: error: cannot read {args.candidates}: {exc.strerror}",
              file=sys.stderr)
        return 2
    except CupelError as exc:
        print(f"cupellation select: error: {exc}", file=sys.stderr)
        return 2


def run_demo(args: argparse.Namespace, /) -> int:
    """Run ``demo`` on the bundled data."""
    data = resources.files("cupellation").joinpath("_data/demo_candidates.json")
    try:
        candidates = _parse_candidates(data.read_text(encoding="utf-8"), "demo_candidates.json")
        return _execute(args, candidates, _DEMO_SCORERS)
    except OSError as exc:
        print(f"cupellation demo: error: cannot write {exc.filename}: {exc.strerror}",
              file=sys.stderr)
        return 2
    except CupelError as exc:
        print(f"cupellation demo: error: {exc}", file=sys.stderr)
        return 2
