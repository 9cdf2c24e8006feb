"""The auditor's next questions: ``why``'s budget and ``--against`` lines,
``cupellation replay LOG... --policy B`` (logged runs under another policy) and
``cupellation diff A B`` (two reports, or two logged runs)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._pipeline import PreparedCandidates
from .._report import ExcludedItem, IncludedItem, SelectionReport
from ..analytics import (
    ReplayableRun,
    ReplaySummary,
    against_report,
    answer_against,
    answer_min_budget,
    diff_reports,
    replayable,
)
from ..exceptions import CupelError, RunNotReplayableError
from ..logs import LoggedRun
from ..policy import Policy
from ._common import CliError, describe
from ._config import resolve_policy
from ._logread import (
    NOTHING_FOUND,
    OK,
    READ_ERRORS,
    USAGE,
    UsageError,
    add_log_arguments,
    open_reader,
    read_failure,
    reason_text,
    safe,
    stats_lines,
    unreadable_sources,
)
from ._runfilters import add_run_filters, narrowed_by

__all__ = ["DIFF", "NEXT_LIMIT", "REPLAY", "NextQuestions", "add_why_options",
           "labelled_policies", "next_lines"]


def _nonnegative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be within [0, 2**63): {text}")
    return value


def _is_file(spec: str) -> bool:
    try:
        return Path(spec).suffix.lower() in (".toml", ".json") or Path(spec).is_file()
    except (OSError, ValueError):
        return False


def labelled_policies(specs: list[str] | None, option: str) -> list[tuple[str, Policy]]:
    """The policies ``--against``/``--policy`` name, each with its label (``preset
    chat``, ``policy file my.toml``); bad ones raise UsageError (one line)."""
    out: list[tuple[str, Policy]] = []
    for spec in specs or []:
        try:
            policy = resolve_policy(spec, option)
        except CliError as exc:
            raise UsageError(exc.message) from None
        label = (f"policy file {spec}" if _is_file(spec)
                 else f"preset {policy.name or spec}")
        out.append((label, policy))
    return out


# -- why: the next question ---------------------------------------------------------------


#: How many excluded matches ``why`` works the next question out for (each is a
#: budget search and a dry run per --against policy).
NEXT_LIMIT = 200


def add_why_options(parser: argparse.ArgumentParser) -> None:
    """``why``'s next-question options."""
    parser.add_argument("--against", action="append", metavar="PRESET|FILE",
                        help="for an excluded item, also say whether this preset or policy "
                             "file would have included it (at the run's budget and start "
                             "time; repeatable)")
    parser.add_argument("--budget-ceiling", type=_nonnegative, metavar="N",
                        help="the largest budget (max_tokens) the budget line tries "
                             "(default: the first doubling of the run's max_tokens at which "
                             "every candidate could fit)")


class NextQuestions:
    """For excluded items of logged runs: the budget that would have kept them and,
    per ``--against`` policy, whether it would have."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.against = labelled_policies(args.against, "--against")
        self.ceiling: int | None = args.budget_ceiling
        self._run_id: str | None = None
        self._run: ReplayableRun | RunNotReplayableError | None = None
        self._prepared: PreparedCandidates | None = None
        self._reports: dict[str, SelectionReport | Exception] = {}
        self._used: set[int] = set()
        #: How many excluded matches got their next-question lines (the rest: a note).
        self.answered = 0

    def _replayable(self, run: LoggedRun) -> ReplayableRun | RunNotReplayableError:
        if self._run_id != run.run_id or self._run is None:
            self._run_id = run.run_id
            self._used = set()
            self._prepared = None
            self._reports = {}
            try:
                self._run = replayable(run)
            except RunNotReplayableError as exc:
                self._run = exc
        return self._run

    def answer(self, run: LoggedRun, entry: IncludedItem | ExcludedItem) -> dict[str, Any]:
        """The next-question data of one matched, excluded entry (past
        :data:`NEXT_LIMIT` of them, a note that they were not worked out)."""
        if self.answered >= NEXT_LIMIT:
            return {"rerun": {"possible": False, "cause": "limit",
                              "explanation": f"next-question lines are worked out for the "
                                             f"first {NEXT_LIMIT} excluded matches; narrow "
                                             "--match or use --content"}}
        self.answered += 1
        found = self._replayable(run)
        if isinstance(found, RunNotReplayableError):
            return {"rerun": {"possible": False, "cause": found.cause,
                              "explanation": found.explanation}}
        index = self._index(found, entry)
        if index is None:
            return {"rerun": {"possible": False, "cause": "missing_events",
                              "explanation": "the item has no item event of its own"}}
        out: dict[str, Any] = {"rerun": {"possible": True}, "candidate_index": index}
        try:
            if self._prepared is None:
                self._prepared = found.logged_pipeline().prepare(found.candidates)
            out["min_budget"] = answer_min_budget(found, index, self.ceiling,
                                                  prepared=self._prepared,
                                                  reason=entry.reason if isinstance(
                                                      entry, ExcludedItem) else None
                                                  ).to_dict()
        except RunNotReplayableError as exc:
            return {"rerun": {"possible": False, "cause": exc.cause,
                              "explanation": exc.explanation}}
        for label, policy in self.against:
            if label not in self._reports:
                self._reports[label] = against_report(found, policy)
        out["against"] = [answer_against(found, index, label, policy,
                                         report=self._reports[label]).to_dict()
                          for label, policy in self.against]
        return out

    def _index(self, run: ReplayableRun, entry: IncludedItem | ExcludedItem) -> int | None:
        """The candidate index of a report entry: the first candidate equal to its item,
        with the same logged outcome, not already matched."""
        name = "Included" if isinstance(entry, IncludedItem) else entry.reason.name
        item = entry.item
        for k, candidate in enumerate(run.candidates):
            if k not in self._used and run.logged_reasons[k] == name and candidate == item:
                self._used.add(k)
                return k
        return None


def next_lines(data: Mapping[str, Any]) -> list[str]:
    """``why``'s next-question lines for one answer's ``next`` data."""
    rerun = data["rerun"]
    if not rerun["possible"] and rerun["cause"] == "limit":
        return [f"({safe(rerun['explanation'], 300)})"]
    if not rerun["possible"]:
        return [f"cannot re-run this run ({rerun['cause']}): {safe(rerun['explanation'], 300)}"]
    lines = []
    budget = data["min_budget"]
    if budget["budget"] is not None:
        lines.append(f"would have been included at a budget of {budget['budget']} tokens "
                     f"({budget['increase']:+d})")
    else:
        lines.append(safe(budget["explanation"], 400))
    for answer in data["against"]:
        where = f"under {safe(answer['label'])}"
        if answer["error"] is not None:
            lines.append(f"{where}: the run fails ({safe(answer['error'], 200)})")
        elif answer["included"]:
            lines.append(f"{where}: included")
        else:
            reason = answer["reason"] or {"reason": "?"}
            lines.append(f"{where}: excluded ({reason_text(reason)})")
    return lines


# -- replay -----------------------------------------------------------------------------

_REPLAY_EXIT = (
    "exit status: 0 success (whether or not selections changed); 1 no run found in the "
    "logs or time window; 2 bad usage, a bad policy, or input that cannot be read whole "
    "(one line on standard error); 3 some runs could not be replayed (not logged at Full "
    "detail, content dropped, a custom strategy, events missing) or failed under the "
    "policy: the summary is printed and says which; 130 interrupted; 141 standard output "
    "closed early.")


class _Replay:
    """``cupellation replay LOG... --policy B``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "replay", help="re-run logged runs under another policy and summarise the change",
            description="Re-run every logged run's candidates under --policy (a preset or "
                        "policy file), at the run's own budget and with its start time as the "
                        "clock of decay scorers, and summarise what would change: the runs "
                        "whose selection changed, items gained and lost by kind and by "
                        "reason, the shift in budget utilization (over max_tokens) and target "
                        "utilization (over target_tokens), and with --match the runs where a "
                        "matching item flips. Runs need Full detail and full or hash content "
                        "capture. (To send logged runs to a trace backend, see 'cupellation "
                        "export'.)",
            epilog=_REPLAY_EXIT)
        add_log_arguments(parser)
        parser.add_argument("--policy", required=True, metavar="PRESET|FILE",
                            help="the policy to replay the runs under")
        parser.add_argument("--match", metavar="REGEX",
                            help="list the runs where an item whose content matches flips")
        parser.add_argument("--since", metavar="TIME", help="only runs started at or after TIME")
        parser.add_argument("--until", metavar="TIME", help="only runs started at or before TIME")
        add_run_filters(parser, policy=False)
        parser.add_argument("--format", choices=["text", "json"], default="text")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        try:
            pattern = re.compile(args.match) if args.match is not None else None
        except (re.error, OverflowError, RecursionError, ValueError) as exc:
            return _fail("replay", f"--match is not a valid regular expression: {exc}")
        try:
            ((label, policy),) = labelled_policies([args.policy], "--policy")
        except UsageError as exc:
            return _fail("replay", str(exc))
        summary = ReplaySummary(policy, label, pattern)
        reader = None
        try:
            with open_reader(args, since=args.since, until=args.until,
                             keep_candidates=True) as reader:
                for run in reader:
                    summary.add(run)
                stats = reader.stats
        except UsageError as exc:
            return _fail("replay", str(exc))
        except CupelError as exc:
            return _fail("replay", describe(exc))
        except READ_ERRORS as exc:
            return _fail("replay", read_failure(exc, reader.stats if reader else None))
        broken = unreadable_sources(stats)
        if broken is not None:
            return _fail("replay", broken)
        data = summary.to_dict()
        data["lines"] = {"read": stats.lines, "damaged": stats.damaged_lines}
        data["traces"] = {"files": stats.trace_files, "spans": stats.spans}
        if args.format == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_replay(data)
            for line in stats_lines(stats):
                print(line)
        if summary.runs == 0:
            print(f"cupellation replay: no runs found{narrowed_by(args)}", file=sys.stderr)
            return NOTHING_FOUND
        skipped = data["runs"]["not_replayable"] + data["runs"]["failed"]
        if skipped:
            print(f"cupellation replay: {skipped} of {summary.runs} run(s) could not be "
                  "replayed (see the summary)", file=sys.stderr)
            return 3
        return OK


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _shift(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:+.1f} points"


def _print_replay(data: dict[str, Any]) -> None:
    runs, items = data["runs"], data["items"]
    print(f"Replayed under {safe(data['policy'])}: {runs['replayed']} of {runs['read']} runs "
          f"({runs['changed']} changed, {runs['unchanged']} unchanged; "
          f"{runs['not_replayable']} not replayable, {runs['failed']} failed)")
    for row in data["not_replayable"]:
        print(f"  not replayable, {row['name']}: {row['count']}")
    for failure in data["failures"][:5]:
        print(f"  failed: run {safe(failure['run_id'])}: {safe(failure['error'], 200)}")
    if data["changed_runs"]:
        shown = ", ".join(safe(run_id) for run_id in data["changed_runs"][:10])
        more = runs["changed"] - min(10, len(data["changed_runs"]))
        print(f"Runs changed: {shown}{f' (and {more} more)' if more > 0 else ''}")
    print(f"Items gained: {items['gained']} ({items['gained_tokens']} tokens); lost: "
          f"{items['lost']} ({items['lost_tokens']} tokens)")
    for title, key in (("gained by kind", "gained_by_kind"), ("lost by kind", "lost_by_kind"),
                       ("gained, by their logged reason", "gained_by_logged_reason"),
                       ("lost, by their reason under the policy", "lost_by_replayed_reason")):
        if items[key]:
            print(f"  {title}: " + ", ".join(f"{safe(row['name'])} {row['count']}"
                                            for row in items[key]))
    for name, key in (("Budget utilization (over max_tokens)", "budget_utilization"),
                      ("Target utilization (over target_tokens)", "target_utilization")):
        util = data[key]
        print(f"{name}: {_pct(util['before'])} -> {_pct(util['after'])} "
              f"({_shift(util['shift'])})")
    match = data.get("match")
    if match is not None:
        print(f"Items matching {safe(match['pattern'])!s} flip in {match['runs']} run(s) "
              f"({match['flips']} flip(s))")
        for flip in match["listed"][:20]:
            print(f"  run {safe(flip['run_id'])}: {flip['change']} "
                  f"({safe(str(flip['logged']))} -> {safe(str(flip['replayed']))}): "
                  f"{safe(flip['content'], 80)}")


# -- diff ---------------------------------------------------------------------------------

_DIFF_EXIT = (
    "exit status: 0 the two are the same selection; 1 they differ (or, with --log, a run "
    "id is not in the logs); 2 bad usage or input that cannot be read (one line on "
    "standard error); 130 interrupted; 141 standard output closed early.")


class _Diff:
    """``cupellation diff A B [--log LOG...]``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "diff", help="compare two reports, or two logged runs",
            description="Compare two selections, items matched by content: the items B "
                        "included that A excluded (gained), the reverse (lost), and items "
                        "excluded by both for different reasons. A and B are report files "
                        "(the JSON of 'select --report' or 'report --format json'), or, "
                        "with --log, two run ids in those logs.",
            epilog=_DIFF_EXIT)
        parser.add_argument("a", metavar="A", help="a report file ('-': standard input), or "
                                                   "with --log a run id")
        parser.add_argument("b", metavar="B", help="a report file, or with --log a run id")
        parser.add_argument("--log", action="append", metavar="LOG",
                            help="read A and B as run ids in this log (repeatable)")
        parser.add_argument("--no-rotated", action="store_true",
                            help="with --log: read only the files named")
        parser.add_argument("--store", metavar="URL",
                            help="read A and B as run ids in this fleet store (chdb:///dir "
                                 "or http(s)://host:8123/database)")
        parser.add_argument("--format", choices=["text", "json"], default="text")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        if args.log and args.store:
            return _fail("diff", "give --log or --store, not both")
        if not args.log and not args.store and args.a == args.b == "-":
            return _fail("diff", "standard input ('-') can be read once")
        try:
            if args.log or args.store:
                reports = _runs_from_logs(args)
                if isinstance(reports, int):
                    return reports
                a, b = reports
            else:
                a, b = _report_file(args.a), _report_file(args.b)
        except UsageError as exc:
            return _fail("diff", str(exc))
        diff = diff_reports(a, b)
        data = diff.to_dict()
        if args.format == "json":
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
        else:
            _print_diff(data, args.a, args.b)
        return 1 if diff.changed else OK


def _report_file(path: str) -> SelectionReport:
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return SelectionReport.from_json(data)
    except CupelError as exc:
        raise UsageError(f"{path}: not a report: {describe(exc)}") from None


def _runs_from_logs(args: argparse.Namespace) -> tuple[SelectionReport, SelectionReport] | int:
    wanted = {args.a: None, args.b: None}
    found: dict[str, SelectionReport] = {}
    namespace = argparse.Namespace(logs=args.log or [], no_rotated=args.no_rotated,
                                   no_progress=True, store=args.store)
    options = {"run_ids": list(wanted)} if args.store else {}
    reader = None
    try:
        with open_reader(namespace, **options) as reader:
            for run in reader:
                if run.run_id in wanted and run.run_id not in found:
                    found[run.run_id] = run.report
            stats = reader.stats
    except CupelError as exc:
        return _fail("diff", describe(exc))
    except READ_ERRORS as exc:
        return _fail("diff", read_failure(exc, reader.stats if reader else None))
    broken = unreadable_sources(stats)
    if broken is not None:
        return _fail("diff", broken)
    missing = [run_id for run_id in wanted if run_id not in found]
    if missing:
        print(f"cupellation diff: run {safe(missing[0])} is not in the logs", file=sys.stderr)
        return NOTHING_FOUND
    return found[args.a], found[args.b]


def _print_diff(data: dict[str, Any], a: str, b: str) -> None:
    tokens, counts = data["included_tokens"], data["included_count"]
    print(f"A {safe(a)}: {counts['a']} included ({tokens['a']} tokens); "
          f"B {safe(b)}: {counts['b']} included ({tokens['b']} tokens); "
          f"{data['kept']} included by both")
    for title, key in (("Gained (included by B, excluded by A)", "gained"),
                       ("Lost (included by A, excluded by B)", "lost")):
        rows = data[key]
        print(f"{title}: {len(rows)}")
        for row in rows[:50]:
            print(f"  {row['tokens']:>6} tok  {safe(row['kind'], 20)}  "
                  f"{safe(row['reason']['reason'])}  {safe(row['content'], 80)}")
    if data["reason_changed"]:
        print(f"Excluded by both, for other reasons: {len(data['reason_changed'])}")
        for row in data["reason_changed"][:50]:
            print(f"  {safe(row['a']['reason'])} -> {safe(row['b']['reason'])}  "
                  f"{safe(row['content'], 80)}")
    for side in ("a", "b"):
        only = data[f"only_in_{side}"]
        if only:
            print(f"Only in {side.upper()}: {len(only)} item(s)")
        if data["incomplete"][side]:
            print(f"{side.upper()} is incomplete: {safe(data['incomplete'][side][0], 200)}")
    if not data["changed"]:
        print("The same selection.")


def _fail(command: str, message: str) -> int:
    print(f"cupellation {command}: error: {safe(message)}", file=sys.stderr)
    return USAGE


REPLAY = _Replay()
DIFF = _Diff()
