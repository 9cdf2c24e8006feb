"""``cupellation simulate`` (a budget sweep: what is kept at each budget) and
``cupellation sensitivity`` (policies side by side: what swings between kept and
dropped), over items files, chat files and files of runs (issue 24)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._model import ContextBudget, ContextItem
from .._report import SelectionReport
from ..analytics import (
    ReplayableRun,
    budget_sweep,
    message_budget_sweep,
    message_policy_sensitivity,
    policy_sensitivity_from_pipelines,
    replayable,
)
from ..chat import MESSAGE_COUNT_KEY, MessageSelection
from ..chat._conversation import MESSAGE_START_KEY
from ..exceptions import PipelineError, RunNotReplayableError
from ..policy import Policy, get_preset
from ._analytics import labelled_policies
from ._common import CliError, safe
from ._config import add_budget_options, resolve_budget
from ._logread import NOTHING_FOUND, OK, UsageError
from ._runfilters import narrowed_by
from ._simsource import Source, add_source_arguments, chat_options, read_source, runs_of

__all__ = ["MAX_BUDGETS", "SENSITIVITY", "SIMULATE"]

#: The most budgets one sweep tries.
MAX_BUDGETS = 200
#: Exit status when some runs could not be re-run (the data was not whole).
NOT_WHOLE = 3
_SHOWN = 20

_EXIT = ("exit status: 0 success; 1 nothing found (no run in the file, or none "
         "matching --run and the filters); 2 bad usage or input (one line on standard "
         "error); 3 some runs could not be re-run (not logged at Full detail, content "
         "dropped, events missing) or their selection failed under a policy: the others "
         "are printed, and so is why; "
         "130 interrupted; 141 standard output closed early.")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value < 2**62:
        raise argparse.ArgumentTypeError(f"must be within [0, 2**62): {text}")
    return value


def _budget_list(text: str) -> list[int]:
    return [_count(part.strip()) for part in text.split(",")]


def _budgets(args: argparse.Namespace) -> list[int]:
    ranged = (args.start, args.stop, args.step)
    if args.budgets is not None:
        if any(value is not None for value in ranged):
            raise CliError("give --budgets or --from/--to/--step, not both")
        budgets: list[int] = args.budgets
    elif None in ranged:
        raise CliError("give the budgets: --budgets 500,1000,2000, or --from N --to N "
                       "--step N")
    else:
        start, stop, step = ranged
        if step == 0 or stop < start:
            raise CliError(f"--from {start} --to {stop} --step {step}: needs a step above 0 "
                           "and --to at or above --from")
        count = (stop - start) // step + 1
        if count > MAX_BUDGETS:
            raise CliError(f"--from/--to/--step give {count} budgets; at most {MAX_BUDGETS}")
        budgets = list(range(start, stop + 1, step))
    if len(budgets) > MAX_BUDGETS:
        raise CliError(f"--budgets gives {len(budgets)} budgets; at most {MAX_BUDGETS}")
    return budgets


def _label(item: ContextItem) -> dict[str, Any]:
    """How a report entry names what it stands for: the messages of a chat unit, the
    content of an item."""
    start = item.metadata.get(MESSAGE_START_KEY)
    if isinstance(start, int):
        count = item.metadata.get(MESSAGE_COUNT_KEY, 1)
        return {"messages": list(range(start, start + (count if isinstance(count, int)
                                                       else 1)))}
    return {"content": item.content}


def _where(entry: Mapping[str, Any]) -> str:
    indices = entry.get("messages")
    if indices is None:
        return safe(str(entry["content"]), 60)
    if not indices:
        return "system"
    last = f"-{indices[-1]}" if len(indices) > 1 else ""
    return f"messages[{indices[0]}{last}]"


def _dropped(report: SelectionReport) -> list[dict[str, Any]]:
    return [{**_label(entry.item), "kind": entry.item.kind.value, "tokens": entry.item.tokens,
             "reason": entry.reason.name} for entry in report.excluded]


def _point(budget: ContextBudget, report: SelectionReport | None, failure: str | None,
           chat: MessageSelection[Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"max_tokens": budget.max_tokens,
                           "target_tokens": budget.target_tokens, "failure": failure}
    if report is None:
        return {**row, "kept": 0, "tokens": 0, "dropped": []}
    if chat is not None:
        return {**row, "kept": len(chat.kept), "tokens": chat.tokens,
                "dropped_messages": list(chat.dropped), "dropped": _dropped(report)}
    return {**row, "kept": len(report.included),
            "tokens": sum(entry.item.tokens for entry in report.included),
            "dropped": _dropped(report)}


# -- reading and policies -----------------------------------------------------------------


def _policy(args: argparse.Namespace) -> tuple[str, Policy] | None:
    if args.policy is None:
        return None
    try:
        ((label, policy),) = labelled_policies([args.policy], "--policy")
    except UsageError as exc:
        raise CliError(str(exc)) from None
    return label, policy


def _base_budget(policy: Policy | None, args: argparse.Namespace) -> ContextBudget | None:
    """The budget whose target ratio each budget of the sweep keeps: the flags over the
    policy's; None when neither gives one (each budget its own target)."""
    given = (args.max_tokens, args.target_tokens, args.output_reserve)
    if all(value is None for value in given) and (policy is None or policy.budget is None):
        return None
    return resolve_budget(policy or get_preset("chat"), args)


def _run_budget(run: ReplayableRun, args: argparse.Namespace) -> ContextBudget:
    """The run's budget with the fields the budget flags give replaced."""
    budget = run.budget
    if all(value is None for value in (args.max_tokens, args.target_tokens,
                                       args.output_reserve)):
        return budget
    return resolve_budget(get_preset("chat"), args, fallback=budget)


def _each_run(args: argparse.Namespace, source: Source, command: str,
              work: Callable[[ReplayableRun], dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """``work`` on each run of a file of runs; the JSON data and the exit status."""
    done: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    with runs_of(args, source, command) as runs:
        for run in runs:
            try:
                rerun = replayable(run)
                done.append({"run_id": run.run_id, **work(rerun)})
            except RunNotReplayableError as exc:
                skipped.append({"run_id": run.run_id, "cause": exc.cause,
                                "explanation": exc.explanation})
            except PipelineError as exc:  # a policy's selection fails on this run
                skipped.append({"run_id": run.run_id, "cause": "failed",
                                "explanation": str(exc)})
    data = {"input": "runs", "source": source.shown, "runs": done, "not_replayable": skipped}
    if not done and not skipped:
        return data, NOTHING_FOUND
    return data, NOT_WHOLE if skipped else OK


def _emit(args: argparse.Namespace, data: dict[str, Any], status: int, command: str,
          printer: Callable[[dict[str, Any]], None]) -> int:
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        for part in data.get("runs", [data]):
            printer(part)
        for row in data.get("not_replayable", []):
            print(f"run {safe(row['run_id'])}: cannot re-run it ({safe(row['cause'])}): "
                  f"{safe(row['explanation'], 200)}")
    if status == NOTHING_FOUND:
        print(f"cupellation {command}: no runs found{narrowed_by(args)}", file=sys.stderr)
    elif status == NOT_WHOLE:
        print(f"cupellation {command}: {len(data['not_replayable'])} run(s) could not be "
              "re-run (see the output)", file=sys.stderr)
    return status


def _common_options(parser: argparse.ArgumentParser) -> None:
    add_source_arguments(parser)
    add_budget_options(parser, defaults="a file of runs uses each run's own")
    parser.add_argument("--format", choices=["text", "json"], default="text")


# -- simulate -------------------------------------------------------------------------------


class _Simulate:
    """``cupellation simulate FILE --budgets 500,1000,2000``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "simulate", help="a budget sweep: what is kept at each budget",
            description="Run the selection at each budget (max_tokens; target_tokens keeps "
                        "its ratio to it, as in find_min_budget_for) and say what is kept: "
                        "counts, tokens, and what is dropped and why. FILE holds items "
                        "(select's input), chat messages (OpenAI Chat or Responses, "
                        "Anthropic, LangChain: selected as select_messages selects them, "
                        "each tool exchange kept or dropped whole) or logged runs (each "
                        "run's candidates re-run under its own policy, or --policy).",
            epilog=_EXIT)
        _common_options(parser)
        parser.add_argument("--policy", metavar="PRESET|FILE",
                            help="the policy (default: chat; for runs, each run's own)")
        sweep = parser.add_argument_group("budgets")
        sweep.add_argument("--budgets", type=_budget_list, metavar="N,N,...",
                           help="the budgets to try (max_tokens), e.g. 500,1000,2000")
        sweep.add_argument("--from", dest="start", type=_count, metavar="N")
        sweep.add_argument("--to", dest="stop", type=_count, metavar="N")
        sweep.add_argument("--step", type=_count, metavar="N",
                           help=f"budgets from N to N in steps (at most {MAX_BUDGETS})")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        budgets = _budgets(args)
        named = _policy(args)
        source = read_source(args)
        if source.kind == "runs":
            def work(run: ReplayableRun) -> dict[str, Any]:
                pipeline = run.logged_pipeline() if named is None else run.pipeline_for(
                    named[1])
                points = budget_sweep(pipeline, run.candidates, budgets,
                                      budget=_run_budget(run, args))
                return {"policy": "logged" if named is None else named[0],
                        "points": [_point(p.budget, p.report, p.failure, None)
                                   for p in points]}
            data, status = _each_run(args, source, "simulate", work)
            return _emit(args, data, status, "simulate", _print_sweep)
        label, policy = named or ("preset chat", None)
        base = _base_budget(policy, args)
        if source.kind == "chat":
            options = chat_options(args).replace(policy=policy or "chat", budget=base)
            sweep = message_budget_sweep(source.document, budgets, options)
            points = [_point(p.budget, p.selection.report if p.selection else None,
                             p.failure, p.selection) for p in sweep]
        else:
            if not source.items:
                print(f"cupellation simulate: {safe(source.shown)} holds no items",
                      file=sys.stderr)
                return NOTHING_FOUND
            pipeline = (policy or get_preset("chat")).build_pipeline()
            points = [_point(p.budget, p.report, p.failure, None)
                      for p in budget_sweep(pipeline, source.items, budgets, budget=base)]
        data = {"input": source.kind, "source": source.shown, "policy": label,
                "points": points}
        return _emit(args, data, OK, "simulate", _print_sweep)


def _print_sweep(data: dict[str, Any]) -> None:
    title = f"run {safe(data['run_id'])}" if "run_id" in data else safe(data["source"])
    print(f"Budget sweep of {title} ({data.get('input', 'logged run')}, policy "
          f"{safe(data['policy'])}):")
    print(f"  {'max_tokens':>10}  {'target':>8}  {'kept':>5}  {'tokens':>8}  {'dropped':>7}")
    for point in data["points"]:
        if point["failure"] is not None:
            print(f"  {point['max_tokens']:>10}  {point['target_tokens']:>8}  failed: "
                  f"{safe(point['failure'], 160)}")
            continue
        print(f"  {point['max_tokens']:>10}  {point['target_tokens']:>8}  "
              f"{point['kept']:>5}  {point['tokens']:>8}  {len(point['dropped']):>7}")
    for point in data["points"]:
        if point["dropped"]:
            print(f"Dropped at {point['max_tokens']}:")
            for entry in point["dropped"][:_SHOWN]:
                print(f"  {_where(entry)}  {safe(entry['kind'], 20)}  {entry['tokens']} tok  "
                      f"{safe(entry['reason'])}")
            if len(point["dropped"]) > _SHOWN:
                print(f"  ... and {len(point['dropped']) - _SHOWN} more (--format json)")


# -- sensitivity ----------------------------------------------------------------------------


def _variant_rows(reports: Sequence[tuple[str, SelectionReport]],
                  chats: Sequence[MessageSelection[Any]] | None) -> list[dict[str, Any]]:
    rows = []
    for k, (label, report) in enumerate(reports):
        if chats is not None:
            rows.append({"label": label, "kept": len(chats[k].kept), "tokens": chats[k].tokens})
        else:
            rows.append({"label": label, "kept": len(report.included),
                         "tokens": sum(entry.item.tokens for entry in report.included)})
    return rows


def _reasons(report: SelectionReport) -> dict[str, str]:
    """Each excluded entry's reason, by the key its swing row has (messages or content)."""
    return {json.dumps(_label(entry.item)): entry.reason.name for entry in report.excluded}


def _swing(key: dict[str, Any], statuses: Sequence[tuple[str, Any]],
           reasons: Sequence[dict[str, str]], extra: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(key)
    return {**key, **extra, "statuses": [
        {"label": label, "status": status.value,
         "reason": None if status.value == "Included" else reasons[k].get(text)}
        for k, (label, status) in enumerate(statuses)]}


class _Sensitivity:
    """``cupellation sensitivity FILE --policy A --policy B``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "sensitivity", help="policies side by side: what swings between kept and dropped",
            description="Run two or more policies over the same input at one budget and "
                        "list what they disagree on: the items (matched by content, as the "
                        "specification's policy sensitivity does) or, for chat messages, "
                        "the units select_messages selects (a message, or a tool exchange "
                        "whole), kept by some policies and dropped by others, with the "
                        "reason. Items and chat files need --max-tokens; a file of runs "
                        "uses each run's budget (the budget flags override it).",
            epilog=_EXIT)
        _common_options(parser)
        parser.add_argument("--policy", action="append", metavar="PRESET|FILE",
                            help="a policy to compare (at least two)")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        try:
            policies = labelled_policies(args.policy, "--policy")
        except UsageError as exc:
            raise CliError(str(exc)) from None
        if len(policies) < 2:
            raise CliError("give at least two policies: --policy A --policy B")
        if len({label for label, _ in policies}) < len(policies):
            raise CliError("a --policy is given twice")
        source = read_source(args)
        if source.kind == "runs":
            def work(run: ReplayableRun) -> dict[str, Any]:
                budget = _run_budget(run, args)
                found = policy_sensitivity_from_pipelines(run.candidates, budget, [
                    (label, run.pipeline_for(policy)) for label, policy in policies])
                return _item_swings(found.variants, found.diffs, budget)
            data, status = _each_run(args, source, "sensitivity", work)
            return _emit(args, data, status, "sensitivity", _print_swings)
        if args.max_tokens is None:
            raise CliError("give the budget to compare the policies at: --max-tokens N "
                           "(--target-tokens defaults to it)")
        budget = resolve_budget(get_preset("chat"), args)
        if source.kind == "chat":
            options = chat_options(args).replace(budget=budget)
            found_chat = message_policy_sensitivity(
                source.document, [(label, policy) for label, policy in policies], options)
            reports = [(label, chosen.report) for label, chosen in found_chat.variants]
            reasons = [_reasons(report) for _, report in reports]
            swings = [_swing({"messages": list(s.unit.indices)}, s.statuses, reasons,
                             {"kind": s.unit.kind, "tokens": s.unit.tokens})
                      for s in found_chat.diffs]
            data = {"input": "chat", "source": source.shown, **_budget_data(budget),
                    "policies": _variant_rows(reports, [c for _, c in found_chat.variants]),
                    "swings": swings}
        else:
            found = policy_sensitivity_from_pipelines(source.items, budget, [
                (label, policy.build_pipeline(budget)) for label, policy in policies])
            data = {"input": "items", "source": source.shown,
                    **_item_swings(found.variants, found.diffs, budget)}
        return _emit(args, data, OK, "sensitivity", _print_swings)


def _budget_data(budget: ContextBudget) -> dict[str, Any]:
    return {"max_tokens": budget.max_tokens, "target_tokens": budget.target_tokens}


def _item_swings(variants: Sequence[tuple[str, SelectionReport]], diffs: Sequence[Any],
                 budget: ContextBudget) -> dict[str, Any]:
    reasons = [_reasons(report) for _, report in variants]
    return {**_budget_data(budget), "policies": _variant_rows(variants, None),
            "swings": [_swing({"content": d.content}, d.statuses, reasons, {})
                       for d in diffs]}


def _print_swings(data: dict[str, Any]) -> None:
    title = f"run {safe(data['run_id'])}" if "run_id" in data else safe(data["source"])
    print(f"Policies side by side on {title} (max_tokens {data['max_tokens']}, target "
          f"{data['target_tokens']}):")
    width = max(len(safe(row["label"], 40)) for row in data["policies"])
    for row in data["policies"]:
        print(f"  {safe(row['label'], 40):<{width}}  kept {row['kept']:>5}  "
              f"{row['tokens']:>8} tok")
    print(f"Swinging between kept and dropped: {len(data['swings'])}")
    for swing in data["swings"][:_SHOWN * 2]:
        verdicts = "; ".join(
            f"{safe(s['label'], 40)}: " + ("kept" if s["status"] == "Included"
                                            else f"dropped ({safe(str(s['reason']))})")
            for s in swing["statuses"])
        print(f"  {_where(swing)}  {verdicts}")
    if len(data["swings"]) > _SHOWN * 2:
        print(f"  ... and {len(data['swings']) - _SHOWN * 2} more (--format json)")


SIMULATE = _Simulate()
SENSITIVITY = _Sensitivity()
