"""The ``cupellation`` command: argument parsing and subcommand dispatch."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Protocol

from .. import __version__
from . import _conformance, _demo, _logcmds, _select

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]

PROG = "cupellation"


class Subcommand(Protocol):
    """What a subcommand module provides (modules satisfy this protocol)."""

    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
    ) -> argparse.ArgumentParser:
        """Add this subcommand's parser to ``subparsers`` and return it."""
        ...

    def run(self, args: argparse.Namespace, /) -> int:
        """Run the subcommand with the parsed ``args``; return the exit status."""
        ...


#: Subcommand name -> module. To add a subcommand, write a module with
#: ``add_parser(subparsers)`` (which calls ``subparsers.add_parser(<name>, ...)``
#: with the same name as its key here) and ``run(args) -> int``, and register it.
SUBCOMMANDS: dict[str, Subcommand] = {
    "audit": _logcmds.AUDIT,
    "conformance": _conformance,
    "demo": _demo,
    "report": _logcmds.REPORT,
    "select": _select,
    "why": _logcmds.WHY,
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, with one sub-parser per entry of :data:`SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context selection for LLMs, following the Cupel specification.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in SUBCOMMANDS.values():
        module.add_parser(subparsers).set_defaults(_cupellation_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version and usage errors
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print(f"{PROG}: error: a command is required ({', '.join(SUBCOMMANDS)})",
              file=sys.stderr)
        return 2
    status: int = args._cupellation_run(args)
    return status
