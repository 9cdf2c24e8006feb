"""Vendor the Cupel specification's required conformance vectors as test data.

    python scripts/vendor_spec.py SRC DEST           # regenerate DEST from SRC
    python scripts/vendor_spec.py --check SRC DEST   # only verify DEST, write nothing

SRC is a ``conformance/required`` folder of wollax/cupel (one sub-folder per stage:
scoring, slicing, placing, pipeline); DEST is ``tests/data/conformance/required``.

Each vector is copied with its TOML comments removed (full-line and trailing; a ``#``
inside a string is data and stays): we keep the data — inputs and expectations — and
leave upstream's explanatory walk-throughs upstream. The proof that stripping changed
no data: every stripped file is parsed with tomli (the vectors are TOML 1.1, which the
standard library's ``tomllib`` rejects) and must give exactly the value its source
gives, compared type by type (so ``1``, ``1.0`` and ``true`` stay distinct).

Regenerating replaces DEST's ``*.toml`` files (stale ones are removed) and leaves every
other file there (README.md, LICENSE) alone. Exit status: 0 when every file checks, 1
when one does not (each named on stderr), 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tomli

__all__ = ["same_value", "strip_toml_comments", "vendor"]

_BASIC_ML = '"""'
_LITERAL_ML = "'''"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Line:
    """One output line, and whether it begins inside a multi-line string (then it is
    string content: it is never dropped or merged with its neighbours)."""

    text: str
    in_string: bool


def _scan_string_end(line: str, start: int, delimiter: str) -> int | None:
    """The index just past the closing ``delimiter`` of a string whose content starts
    at ``start`` in ``line``, or None when the string does not close on this line.
    Backslash escapes apply to basic strings (``"`` delimiters) only."""
    escapes = delimiter.startswith('"')
    i = start
    while i < len(line):
        if escapes and line[i] == "\\":
            i += 2
            continue
        if line.startswith(delimiter, i):
            end = i + len(delimiter)
            if len(delimiter) == 3:
                # A multi-line string may end with up to two quotes of its own
                # content right before the delimiter: '''a''''' is "a''".
                while end < len(line) and end - i < 5 and line[end] == delimiter[0]:
                    end += 1
            return end
        i += 1
    return None


def _strip_line(line: str, open_delimiter: str | None) -> tuple[str, bool, str | None]:
    """``line`` without its comment, whether it had one, and the multi-line string
    delimiter still open at its end (None when the line ends outside strings)."""
    i = 0
    if open_delimiter is not None:
        end = _scan_string_end(line, 0, open_delimiter)
        if end is None:
            return line, False, open_delimiter
        i = end
    while i < len(line):
        char = line[i]
        if char == "#":
            return line[:i].rstrip(), True, None
        if char in "\"'":
            delimiter = char * 3 if line.startswith(char * 3, i) else char
            end = _scan_string_end(line, i + len(delimiter), delimiter)
            if end is None:
                if len(delimiter) == 3:
                    return line, False, delimiter
                raise ValueError(f"unterminated string in line {line!r}")
            i = end
            continue
        i += 1
    return line, False, None


def _lines(text: str) -> Iterator[_Line]:
    open_delimiter: str | None = None
    for raw in text.splitlines():
        in_string = open_delimiter is not None
        stripped, had_comment, open_delimiter = _strip_line(raw, open_delimiter)
        if had_comment and not stripped.strip() and not in_string:
            continue  # a full-line comment: the line goes with it
        yield _Line(text=stripped, in_string=in_string)
    if open_delimiter is not None:
        raise ValueError("the text ends inside a multi-line string")


def strip_toml_comments(text: str) -> str:
    """``text`` (a TOML document) without comments. Lines that held only a comment are
    removed; runs of blank lines left behind become one, and the document starts with
    its first non-blank line and ends with one newline. Multi-line strings are kept
    byte for byte."""
    kept: list[str] = []
    previous_blank = True  # drops leading blank lines
    for line in _lines(text):
        blank = not line.text.strip() and not line.in_string
        if blank and previous_blank:
            continue
        kept.append("" if blank else line.text)
        previous_blank = blank
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept) + "\n"


def same_value(left: object, right: object) -> bool:
    """Whether two parsed TOML values are the same: same types all the way down (``1``,
    ``1.0`` and ``True`` differ), same keys, same order of array elements, NaN equal to
    NaN, and date-times equal with the same time zone."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same_value(left[k], right[k]) for k in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same_value, left, right))
    if isinstance(left, float) and isinstance(right, float):
        return (math.isnan(left) and math.isnan(right)) or (
            left == right and math.copysign(1.0, left) == math.copysign(1.0, right))
    if isinstance(left, datetime.datetime) and isinstance(right, datetime.datetime):
        return left == right and left.tzinfo == right.tzinfo
    return left == right


def _vector_files(root: Path) -> dict[str, Path]:
    """The ``*.toml`` files one folder level under ``root``, by ``stage/name``."""
    return {f"{path.parent.name}/{path.name}": path for path in sorted(root.glob("*/*.toml"))}


def vendor(source: Path, dest: Path, *, check_only: bool) -> list[str]:
    """Strip every vector of ``source`` into ``dest`` (or, with ``check_only``, compare
    them to what is there). The problems found, one line each; empty when all is well."""
    problems: list[str] = []
    sources = _vector_files(source)
    if not sources:
        return [f"{source}: no */*.toml vectors in this folder"]
    for name, path in _vector_files(dest).items():
        if name not in sources:
            if check_only:
                problems.append(f"{path}: not in {source}")
            else:
                path.unlink()
    for name, path in sources.items():
        original = path.read_text(encoding="utf-8")
        try:
            stripped = strip_toml_comments(original)
            same = same_value(tomli.loads(original), tomli.loads(stripped))
        except (ValueError, tomli.TOMLDecodeError) as error:
            problems.append(f"{path}: {error}")
            continue
        if not same:
            problems.append(f"{path}: stripping its comments changed its data")
            continue
        target = dest / name
        if check_only:
            if not target.is_file() or target.read_text(encoding="utf-8") != stripped:
                problems.append(f"{target}: differs from {path} without comments")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(stripped, encoding="utf-8")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="verify DEST against SRC and write nothing")
    parser.add_argument("source", type=Path, metavar="SRC")
    parser.add_argument("dest", type=Path, metavar="DEST")
    args = parser.parse_args(argv)
    problems = vendor(args.source, args.dest, check_only=args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    count = len(_vector_files(args.source))
    if not problems:
        verb = "checked" if args.check else "vendored"
        print(f"{count} vectors {verb}: each parses to the same data as its source")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
