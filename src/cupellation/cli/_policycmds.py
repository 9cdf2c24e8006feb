"""``cupellation presets`` and ``cupellation policy show|check``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..policy import Policy, presets
from ._common import OK, CliError, console, safe
from ._config import (
    add_budget_options,
    describe_placer,
    describe_scorer,
    describe_slicer,
    resolve_policy,
)

__all__ = ["POLICY", "PRESETS"]


def _row(name: str, policy: Policy) -> dict[str, str]:
    table = policy.to_dict()
    return {"name": name, "description": policy.description or "",
            "scorers": describe_scorer(table["scorer"]),
            "slicer": describe_slicer(table["slicer"]),
            "placer": describe_placer(table["placer"])}


class _Presets:
    """``cupellation presets``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "presets", help="list the named policies (--policy NAME)",
            description="List the seven presets: name, description, scorers with their "
                        "relative weights, slicer and placer. Every preset deduplicates, "
                        "throws on overflow and has no budget. A table on a terminal; "
                        "tab-separated lines (with a header) in a pipe. 'cupellation "
                        "policy show NAME' prints one as a policy file.",
            epilog="exit status: 0 success; 2 bad usage (one line on standard error); 141 "
                   "standard output closed early.")
        parser.add_argument("--format", choices=["text", "json"], default="text",
                            help="text (default) or a JSON array of objects")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        rows = [_row(name, policy) for name, policy in presets().items()]
        if args.format == "json":
            sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
            return OK
        if not sys.stdout.isatty():
            columns = ("name", "description", "scorers", "slicer", "placer")
            sys.stdout.write("\t".join(columns) + "\n")
            for row in rows:
                sys.stdout.write("\t".join(safe(row[c]).replace("\t", " ")
                                           for c in columns) + "\n")
            return OK
        from rich.table import Table  # noqa: PLC0415 - rich is the cli extra's

        table = Table(title="Presets (cupellation select --policy NAME)", title_justify="left")
        for column in ("name", "description", "scorers", "slicer", "placer"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(safe(row[c]) for c in ("name", "description", "scorers",
                                                    "slicer", "placer")))
        console().print(table)
        return OK


class _PolicyCommand:
    """``cupellation policy show NAME|FILE`` and ``cupellation policy check FILE...``."""

    def add_parser(self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
                   ) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(
            "policy", help="print a preset or policy file as a policy file, or check one",
            description="'policy show' prints a preset or a policy file exactly as "
                        "Policy.to_toml() or to_json() writes it, which reads back to the "
                        "same policy: 'cupellation policy show chat > my.toml', edit, then "
                        "'cupellation select ITEMS --policy my.toml'. 'policy check' reads "
                        "policy files and says what each describes, or what is wrong and "
                        "where (file, line, path such as scorer.children[1].weight).",
            epilog="exit status: 0 success; 2 a policy that is not valid (one line naming "
                   "the file, the line or the path, and the problem), or bad usage; 130 "
                   "interrupted; 141 standard output closed early.")
        actions = parser.add_subparsers(dest="policy_command", metavar="ACTION")
        show = actions.add_parser(
            "show", help="print a policy (a preset name or a file)",
            description="Print the policy NAME (a preset) or FILE (TOML or JSON) as a "
                        "policy file; the budget flags add or change its [budget].")
        show.add_argument("policy", metavar="NAME|FILE")
        show.add_argument("--format", choices=["toml", "json"], default="toml",
                          help="toml (default) or json")
        add_budget_options(show, defaults="without them the policy keeps its own (presets "
                                          "have none)")
        check = actions.add_parser(
            "check", help="validate policy files",
            description="Read each policy file (or preset name) and print one line per "
                        "policy: its name, scorers, slicer, placer and budget. Exit 2 at the "
                        "first that is not valid, with one line naming the problem.")
        check.add_argument("policies", nargs="+", metavar="FILE")
        return parser

    def run(self, args: argparse.Namespace, /) -> int:
        if args.policy_command == "show":
            return self._show(args)
        if args.policy_command == "check":
            return self._check(args)
        raise CliError("policy: an action is required: show or check (see "
                       "'cupellation policy --help')")

    def _show(self, args: argparse.Namespace) -> int:
        policy = resolve_policy(args.policy, "policy show")
        if any(v is not None for v in (args.max_tokens, args.target_tokens,
                                       args.output_reserve)):
            from ._config import resolve_budget  # noqa: PLC0415

            policy = policy.with_budget(resolve_budget(policy, args))
        text = policy.to_json() if args.format == "json" else policy.to_toml()
        sys.stdout.write(text)
        return OK

    def _check(self, args: argparse.Namespace) -> int:
        for spec in args.policies:
            policy = resolve_policy(spec, "policy check")
            row: dict[str, Any] = _row(policy.name or "-", policy)
            budget = policy.budget
            where = (f"budget max {budget.max_tokens}, target {budget.target_tokens}, "
                     f"reserve {budget.output_reserve}" if budget else "no budget")
            print(f"{safe(spec)}: ok: {safe(row['name'])}: scorers {safe(row['scorers'])}; "
                  f"slicer {safe(row['slicer'])}; placer {row['placer']}; "
                  f"overflow {policy.overflow_strategy.value}; {where}")
        return OK


PRESETS = _Presets()
POLICY = _PolicyCommand()
