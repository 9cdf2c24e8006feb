"""``cupellation why``: why an item was or was not selected, run by run, and what
beat it."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from .._model import ContextItem
from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..events import content_digest
from ..logs import LoggedRun, ReadStats
from ..reasons import reason_to_dict
from ._analytics import NextQuestions, add_why_options, next_lines
from ._logcmds import (
    STOP,
    estimated_counter,
    fail,
    new_console,
    read_each,
    when_text,
)
from ._logread import (
    EXIT_CODES_HELP,
    NOTHING_FOUND,
    OK,
    UsageError,
    add_log_arguments,
    reason_text,
    safe,
    stats_lines,
)
from ._runfilters import add_run_filters

__all__ = ["WHY"]

_BEATEN_SHOWN = 5


def _beaten_by(entry: ExcludedItem, report: SelectionReport) -> dict[str, Any]:
    """What took the excluded item's place, as data: the reason says what to look for
    (:meth:`~cupellation.reasons.BaseExclusionReason.rivals`)."""
    rivals = entry.reason.rivals()

    def described(items: list[IncludedItem]) -> list[dict[str, Any]]:
        return [{"content": i.item.content, "score": i.score, "tokens": i.item.tokens,
                 "reason": i.reason.name} for i in items[:_BEATEN_SHOWN]]

    if rivals.reference is not None:
        found = [i for i in report.included if i.item.content == rivals.reference]
        return {"kind": rivals.kind, "count": 1,
                "tokens": sum(i.item.tokens for i in found) if rivals.takes_room else 0,
                "label": rivals.label,
                "items": described(found) or [{"content": rivals.reference}]}
    if not rivals.higher_scored:
        return {"kind": rivals.kind, "count": 0, "tokens": 0, "items": []}
    higher = [i for i in report.included
              if i.reason.name == "Scored" and i.score >= entry.score
              and (rivals.same_kind is None or i.item.kind == rivals.same_kind)]
    higher.sort(key=lambda i: -i.score)
    return {"kind": rivals.kind, "count": len(higher),
            "tokens": sum(i.item.tokens for i in higher), "items": described(higher)}


def _matches(run: LoggedRun, content: str | None, pattern: re.Pattern[str] | None
             ) -> list[IncludedItem | ExcludedItem]:
    capture = run.started.content_capture if run.started is not None else "full"
    wanted: set[str] = set()
    if content is not None:
        wanted.add(content)
        if capture == "hash":
            wanted.add(content_digest(content))
    original = content_digest(content) if content is not None else None
    found: list[IncludedItem | ExcludedItem] = []
    entries: list[IncludedItem | ExcludedItem] = [*run.report.included, *run.report.excluded]
    for entry in entries:
        text = entry.item.content
        if (content is not None and text in wanted) or (
                pattern is not None and pattern.search(text)) or (
                original is not None and original in _trimmed_digests(entry.item)):
            found.append(entry)
    return found


def _trimmed_digests(item: ContextItem) -> list[str]:
    """The digests of the originals an item was trimmed from (its ``trimmed`` record)."""
    record = item.metadata.get("trimmed")
    if not isinstance(record, tuple | list):
        return []
    return [entry.get("original_digest") for entry in record
            if hasattr(entry, "get") and isinstance(entry.get("original_digest"), str)]


class _Why:
    """``cupellation why LOG --content TEXT | --match REGEX``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "why", help="say why an item was or was not selected, run by run",
            description="For every run that considered a matching item: whether it was "
                        "included and, if not, its reason with data and what beat it (the "
                        "higher-scored items that took the budget, the pinned item that "
                        "displaced it, or the copy that was kept), and whether it was "
                        "trimmed before selection ('trimmed from 1,450 to 800 tokens'). "
                        "--content matches the whole content (also its sha256 digest in "
                        "runs logged with hash capture, and the original of a trimmed "
                        "item); --match searches it with a regular expression. For an "
                        "excluded item of a run logged at Full detail, it also says at what "
                        "larger budget it would have been included and, per --against, "
                        "whether another policy would have (or why the run cannot be "
                        "re-run).",
            epilog=EXIT_CODES_HELP)
        add_log_arguments(parser)
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--content", metavar="TEXT", help="the item's exact content")
        group.add_argument("--match", metavar="REGEX", help="a regular expression to search")
        parser.add_argument("--since", metavar="TIME", help="only runs started at or after TIME")
        parser.add_argument("--until", metavar="TIME", help="only runs started at or before TIME")
        add_run_filters(parser)
        parser.add_argument("--format", choices=["text", "json"], default="text")
        parser.add_argument("--limit", type=int, metavar="N",
                            help="answer for at most N runs (a page; with --store the newest "
                                 "first, in a file the order read)")
        parser.add_argument("--offset", type=int, default=0, metavar="K",
                            help="skip the first K runs with a match (the next page)")
        add_why_options(parser)
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        try:
            questions = NextQuestions(args)
        except UsageError as exc:
            return fail("why", str(exc))
        pattern = None
        if args.match is not None:
            try:
                pattern = re.compile(args.match)
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                return fail("why", f"--match is not a valid regular expression: {exc}")
        if (args.limit is not None and args.limit < 1) or args.offset < 0:
            return fail("why", "--limit must be at least 1 and --offset at least 0")
        answers: list[dict[str, Any]] = []
        page = [0]  # runs with a match seen so far

        def consider(run: LoggedRun) -> object:
            found = _matches(run, args.content, pattern)
            if not found:
                return None
            page[0] += 1
            if page[0] <= args.offset:
                return None
            for entry in found:
                answer = _answer(run, entry)
                if isinstance(entry, ExcludedItem):
                    answer["next"] = questions.answer(run, entry)
                answers.append(answer)
            if args.limit is not None and page[0] >= args.offset + args.limit:
                return STOP
            return None

        stats = read_each("why", args, consider, keep_candidates=True, select_by_item=True)
        if isinstance(stats, int):
            return stats
        if args.format == "json":
            sys.stdout.write(json.dumps({"matches": answers,
                                         "lines": {"read": stats.lines,
                                                   "damaged": stats.damaged_lines},
                                         "traces": {"files": stats.trace_files,
                                                    "spans": stats.spans}},
                                        indent=2) + "\n")
        else:
            _print_why(answers, stats)
        if not answers:
            print("cupellation why: no run considered a matching item", file=sys.stderr)
            return NOTHING_FOUND
        return OK


def _answer(run: LoggedRun, entry: IncludedItem | ExcludedItem) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "run_id": run.run_id, "started_at": when_text(run.started_at) if run.started_at else None,
        "content": entry.item.content, "tokens": entry.item.tokens, "score": entry.score,
        "included": isinstance(entry, IncludedItem), "reason": reason_to_dict(entry.reason),
        "explanation": entry.reason.sentence(), "run_complete": run.is_complete,
    }
    if entry.item.original_tokens is not None:
        answer["original_tokens"] = entry.item.original_tokens
    counter = estimated_counter(run.report, run.started)
    if counter is not None:
        answer["token_estimates"] = counter
    if isinstance(entry, IncludedItem):
        answer["position"] = run.report.included.index(entry)
    else:
        answer["beaten_by"] = _beaten_by(entry, run.report)
    return answer


def trimmed_note(tokens: int, original: int | None) -> str:
    """``trimmed from 1,450 to 800 tokens`` for an item trimmed before selection."""
    if original is None or original == tokens:
        return ""
    return f"trimmed from {original:,} to {tokens:,} tokens"


def _print_why(answers: list[dict[str, Any]], stats: ReadStats) -> None:
    console = new_console()
    for answer in answers:
        where = f"run {safe(answer['run_id'])} (started {answer['started_at'] or '-'})"
        trimmed = trimmed_note(answer["tokens"], answer.get("original_tokens"))
        item = (f"{safe(answer['content'], 80)!s} [{answer['tokens']} tokens"
                f"{', ' + trimmed if trimmed else ''}, score {answer['score']:.4f}]")
        if answer["included"]:
            console.print(f"{where}: INCLUDED at position {answer['position']} as "
                          f"{answer['reason']['reason']}: {item}")
            continue
        console.print(f"{where}: EXCLUDED, {reason_text(answer['reason'])}: {item}")
        console.print(f"    {safe(answer['explanation'], 200)}")
        beaten = answer["beaten_by"]
        if "label" in beaten:
            console.print(f"    {beaten['label']}: "
                          f"{safe(str(beaten['items'][0]['content']), 80)}")
        elif beaten["count"]:
            console.print(f"    {beaten['count']} included item(s) scored at least as high "
                          f"({beaten['kind']}), taking {beaten['tokens']} tokens; the top:")
            for other in beaten["items"]:
                console.print(f"      score {other['score']:.4f}  {other['tokens']:>6} tok  "
                              f"{safe(str(other['content']), 70)}")
        for line in next_lines(answer["next"]):
            console.print(f"    {line}")
        if not answer["run_complete"]:
            console.print("    (this run's record is incomplete: see 'cupellation report')")
        if answer.get("token_estimates"):
            console.print(f"    (token counts in this run are estimates: "
                          f"{safe(answer['token_estimates'])})")
    for line in stats_lines(stats):
        console.print(line)


WHY = _Why()
