"""Which pipeline to run: a policy (a file or a preset name), the budget flags that
override its budget, and the shorthand flags (``--scorer`` ...) that override
its parts."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from .._model import ContextBudget, OverflowStrategy
from .._registry import needs_settings, standalone_types
from ..exceptions import CupelError
from ..policy import PRESET_NAMES, Policy, get_preset
from ._common import CliError, describe, read_input, safe

__all__ = [
    "DEFAULT_PRESET",
    "add_budget_options",
    "add_policy_options",
    "apply_overrides",
    "describe_placer",
    "describe_scorer",
    "describe_slicer",
    "resolve_budget",
    "resolve_policy",
]

#: The preset ``select`` uses without ``--policy``.
DEFAULT_PRESET = "Chat"

_SUFFIXES = {".toml": "toml", ".json": "json"}
_POLICY_HINT = ("describe it in a policy file: 'cupellation policy show chat > my.toml', "
                "edit [scorer] or [slicer], then --policy my.toml")


def _names_a_file(spec: str) -> bool:
    path = Path(spec)
    return (path.suffix.lower() in _SUFFIXES or "/" in spec or "\\" in spec
            or path.is_file())


def resolve_policy(spec: str, option: str = "--policy") -> Policy:
    """The policy ``spec`` names: a TOML or JSON file, or a preset name (any case).

    Raises :class:`CliError` naming the file, the line or the path inside the
    policy (``scorer.children[1].weight``) and the problem.
    """
    if spec == "-":
        raise CliError(f"{option} takes a file or a preset name, not '-' (standard input "
                       "is for the items)")
    if not _names_a_file(spec):
        try:
            return get_preset(spec)
        except CupelError:
            close = [name for name in PRESET_NAMES
                     if name.lower().startswith(spec.lower()[:3])] if spec else []
            hint = f"; did you mean {close[0]}?" if close else ""
            raise CliError(f"{option} {safe(spec)}: no such file, and not a preset{hint} "
                           f"(presets: {', '.join(PRESET_NAMES)}; see 'cupellation "
                           "presets')") from None
    text, shown = read_input(spec, what="policy file")
    fmt = _SUFFIXES.get(Path(spec).suffix.lower())
    if fmt is None:
        fmt = "json" if text.lstrip().startswith("{") else "toml"
    try:
        return Policy.from_json(text) if fmt == "json" else Policy.from_toml(text)
    except RecursionError:
        raise CliError(f"{safe(shown)}: nested too deeply to read") from None
    except (CupelError, ValueError, TypeError) as exc:
        field = getattr(exc, "field", None)
        if isinstance(field, str) and field.startswith("<policy>"):
            # A syntax error: the parser names the document, not the file.
            problem = getattr(exc, "problem", str(exc))
            rest = field.removeprefix("<policy>").removeprefix(": ")
            line = getattr(exc, "line", None)
            where = f"{safe(shown)}:{line}" if line else safe(shown)
            raise CliError(f"{where}: {safe(rest) + ': ' if rest else ''}"
                           f"{safe(problem, 300)}") from None
        raise CliError(describe(exc, source=shown)) from None


def add_budget_options(parser: argparse.ArgumentParser, *, defaults: str) -> None:
    """``--max-tokens``, ``--target-tokens``, ``--output-reserve``."""
    group = parser.add_argument_group(
        "budget", f"Each overrides that part of the policy's [budget];\n{defaults}.")
    group.add_argument("--max-tokens", type=int, metavar="N",
                       help="the model's context window (maxTokens)")
    group.add_argument("--target-tokens", type=int, metavar="N",
                       help="the soft goal for the selection (targetTokens)")
    group.add_argument("--output-reserve", type=int, metavar="N",
                       help="tokens kept free for the model's answer (outputReserve)")


def add_policy_options(parser: argparse.ArgumentParser, *, default_help: str) -> None:
    """``--policy`` and the flags that override parts of it."""
    parser.add_argument("--policy", metavar="POLICY",
                        help="a policy file (TOML or JSON, as 'cupellation policy show' "
                             "prints) or a preset name ('cupellation presets' lists them); "
                             + default_help)
    # The names come from the strategy registry, read when the parser is built, so
    # a strategy registered by its own module is a flag's choice with no edit here.
    settings = [*needs_settings("scorer"), *needs_settings("slicer")]
    group = parser.add_argument_group(
        "shorthand", "Each replaces that part of the policy. Strategies that need "
                     f"settings\n({', '.join(settings)}) are\nwritten in a policy file.")
    group.add_argument("--scorer", action="append", metavar="NAME[:WEIGHT]",
                       help="a scorer and its weight, repeatable (several make a composite): "
                            + ", ".join(standalone_types("scorer")))
    group.add_argument("--slicer", metavar="NAME",
                       help="one of: " + ", ".join(standalone_types("slicer")))
    group.add_argument("--placer", metavar="NAME",
                       help="one of: " + ", ".join(standalone_types("placer")))
    group.add_argument("--overflow", choices=["throw", "truncate", "proceed"],
                       type=str.lower, help="what to do when the selection exceeds the target")
    group.add_argument("--no-dedup", action="store_true", help="keep duplicate contents")


def _scorer_table(specs: list[str]) -> dict[str, Any]:
    children: list[dict[str, Any]] = []
    for spec in specs:
        name, _, weight = spec.partition(":")
        key = name.strip().lower().replace("-", "_")
        flag_scorers = standalone_types("scorer")
        if key not in flag_scorers:
            if key in needs_settings("scorer"):
                raise CliError(f"--scorer {safe(spec)}: {key} needs settings; {_POLICY_HINT}")
            raise CliError(f"--scorer {safe(spec)}: not a scorer a flag can name (one of: "
                           f"{', '.join(flag_scorers)}; others: {_POLICY_HINT})")
        try:
            value = float(weight) if weight.strip() else 1.0
        except ValueError:
            raise CliError(f"--scorer {safe(spec)}: the weight must be a number") from None
        children.append({"type": key, "weight": value})
    if len(children) == 1:
        return {"type": children[0]["type"]}
    return {"type": "composite", "children": children}


def apply_overrides(policy: Policy, args: argparse.Namespace) -> Policy:
    """``policy`` with the parts the shorthand flags name replaced."""
    changes: dict[str, Any] = {}
    table: dict[str, Any] = {"scorer": {"type": "recency"}}
    if args.scorer:
        table["scorer"] = _scorer_table(args.scorer)
    if args.slicer is not None:
        key = args.slicer.strip().lower().replace("-", "_")
        flag_slicers = standalone_types("slicer")
        if key not in flag_slicers:
            raise CliError(f"--slicer {safe(args.slicer)}: one of {', '.join(flag_slicers)} "
                           f"(quota slicers need settings; {_POLICY_HINT})")
        table["slicer"] = {"type": key}
    if args.placer is not None:
        table["placer"] = {"type": args.placer.strip().lower().replace("-", "_")}
    try:
        parsed = Policy.from_dict(table)
    except (CupelError, ValueError, TypeError) as exc:
        raise CliError(describe(exc, source="--placer" if args.placer else "--scorer")) \
            from None
    if args.scorer:
        changes["scorer"] = parsed.scorer
    if args.slicer is not None:
        changes["slicer"] = parsed.slicer
    if args.placer is not None:
        changes["placer"] = parsed.placer
    if args.overflow is not None:
        changes["overflow_strategy"] = OverflowStrategy.parse(args.overflow)
    if args.no_dedup:
        changes["deduplication"] = False
    return dataclasses.replace(policy, **changes) if changes else policy


_BUDGET_FLAGS = {"max_tokens": "--max-tokens", "target_tokens": "--target-tokens",
                 "output_reserve": "--output-reserve"}


def resolve_budget(policy: Policy, args: argparse.Namespace,
                   fallback: ContextBudget | None = None) -> ContextBudget:
    """The budget flags over the policy's budget (over ``fallback``)."""
    base = policy.budget or fallback
    max_tokens = args.max_tokens if args.max_tokens is not None else (
        base.max_tokens if base else None)
    target = args.target_tokens if args.target_tokens is not None else (
        base.target_tokens if base else None)
    if args.target_tokens is None and args.max_tokens is not None and (
            target is None or target > args.max_tokens):
        # As the library: the target defaults to the window given (a policy's own
        # target is kept while it fits the --max-tokens given).
        target = args.max_tokens
    reserve = args.output_reserve if args.output_reserve is not None else (
        base.output_reserve if base else 0)
    if max_tokens is None or target is None:
        missing = " and ".join(flag for flag, value in (("--max-tokens", max_tokens),
                                                         ("--target-tokens", target))
                               if value is None)
        missing = "--max-tokens (--target-tokens defaults to it)" if max_tokens is None \
            else missing
        name = f"the policy {policy.name}" if policy.name else "the policy"
        raise CliError(f"no budget: give {missing} ({name} has no [budget]; a policy file "
                       "can hold one: 'cupellation policy show chat --max-tokens 8000 "
                       "--target-tokens 6000 > my.toml')")
    try:
        return ContextBudget(
            max_tokens=max_tokens, target_tokens=target, output_reserve=reserve,
            reserved_slots=None if base is None else dict(base.reserved_slots),
            estimation_safety_margin_percent=(
                0.0 if base is None else base.estimation_safety_margin_percent))
    except (CupelError, ValueError, TypeError) as exc:
        field = getattr(exc, "field", "")
        flag = _BUDGET_FLAGS.get(field.split(".")[-1] if isinstance(field, str) else "")
        problem = getattr(exc, "problem", str(exc))
        raise CliError(f"{flag or 'budget'}: {safe(problem, 300)}") from None


# -- descriptions -------------------------------------------------------------------


def _number(value: float) -> str:
    return f"{value:g}"


def describe_scorer(table: dict[str, Any]) -> str:
    """``recency x3, kind x1`` for a composite; the type for the others."""
    kind = str(table.get("type", "?"))
    if kind == "composite":
        return ", ".join(f"{describe_scorer(child)} x{_number(float(child.get('weight', 1)))}"
                         for child in table.get("children", ()))
    if kind == "scaled":
        return f"scaled({describe_scorer(table.get('inner', {}))})"
    return kind


def describe_slicer(table: dict[str, Any]) -> str:
    """``greedy``, ``knapsack(bucket_size=100)``, ..."""
    kind = str(table.get("type", "?"))
    settings = ", ".join(f"{k}={v}" for k, v in table.items()
                         if k not in ("type", "inner", "entries", "quotas"))
    return f"{kind}({settings})" if settings else kind


def describe_placer(table: dict[str, Any]) -> str:
    """``chronological`` or ``u_shaped``."""
    return str(table.get("type", "?"))
