"""``cupellation conformance PATH...``: run conformance vector files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..conformance import collect_vector_files, run_vector_file

__all__ = ["add_parser", "run"]

NAME = "conformance"


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``conformance`` sub-parser."""
    parser = subparsers.add_parser(
        NAME,
        help="run Cupel conformance vectors",
        description=(
            "Run Cupel conformance vector files (TOML). Each PATH is a .toml file or a "
            "folder searched recursively for *.toml. Prints one line per failing vector, "
            "then 'N passed, M failed'. Exit status 0 only when every vector passed."
        ),
        epilog="exit status: 0 every vector passed; 1 a vector failed; 2 bad usage or a "
               "path with no vector file (one line on standard error); 130 interrupted; 141 "
               "standard output closed early.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", type=Path,
                        help="a vector file or a folder of them")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="also print a line for each passing vector")
    return parser


def run(args: argparse.Namespace, /) -> int:
    """Run the vectors under ``args.paths``; 0 when all passed, 1 on a failure, 2 on an error."""
    prefix = f"cupellation {NAME}"
    paths: list[Path] = args.paths
    try:
        files = collect_vector_files(paths)
    except FileNotFoundError as exc:
        print(f"{prefix}: error: no such file or directory: {exc.filename}", file=sys.stderr)
        return 2
    if not files:
        listed = ", ".join(str(path) for path in paths)
        print(f"{prefix}: error: no .toml vector files found in: {listed}", file=sys.stderr)
        return 2
    passed = failed = 0
    for path in files:
        try:
            result = run_vector_file(path)
        except ModuleNotFoundError as exc:  # tomli missing: the message says what to install
            print(f"{prefix}: error: {exc}", file=sys.stderr)
            return 2
        if result.passed:
            passed += 1
            if args.verbose:
                print(f"PASS {result.path}")
        else:
            failed += 1
            print(f"FAIL {result.path}: {result.reason}")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
