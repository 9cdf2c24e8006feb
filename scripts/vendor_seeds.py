"""Vendor the JSON examples of the mission documents (the "seeds") as test fixtures.

    python scripts/vendor_seeds.py SEEDS DEST           # regenerate DEST's *.json
    python scripts/vendor_seeds.py --check SEEDS DEST   # only verify DEST, write nothing

SEEDS is the folder of seed documents (plain text, one per chapter, named by a hash;
each is recognised by its first line: "SelectionReport", "Exclusion Reasons",
"ContextItem"); DEST is ``tests/data/seeds``.

Every JSON example (the object after a line with "JSON example") is copied as its own
file, its text exactly as the seed gives it, under the name FIXTURES lists in order;
a seed with a different number of examples is an error, so a changed seed cannot be
vendored under the wrong names. The ContextItem document has no JSON example of its
own, so ``context_items.json`` gathers the ``item`` objects of the SelectionReport
document's examples, in the order they appear there.

Exit status: 0 when every fixture checks, 1 when one does not (each named on stderr),
2 for a bad command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["FIXTURES", "json_examples", "vendor"]

#: The fixture files each seed's JSON examples become, in the order of the examples.
FIXTURES: dict[str, tuple[str, ...]] = {
    "SelectionReport": (
        "selection_report_complete.json",
        "included_item_scored.json",
        "excluded_item_budget_exceeded.json",
        "excluded_item_deduplicated.json",
    ),
    "Exclusion Reasons": (
        "exclusion_reason_budget_exceeded.json",
        "exclusion_reason_deduplicated.json",
        "exclusion_reason_negative_tokens.json",
        "exclusion_reason_scored_too_low.json",
        "exclusion_reason_quota_cap_exceeded.json",
        "exclusion_reason_quota_require_displaced.json",
        "exclusion_reason_filtered.json",
        "inclusion_reason_scored.json",
    ),
    "ContextItem": (),
}

#: Built from the SelectionReport seed's examples (see the module's docstring).
CONTEXT_ITEMS = "context_items.json"


def _object_end(text: str, start: int) -> int:
    """The index just past the JSON object that opens at ``text[start]``."""
    depth, in_string, escaped = 0, False, False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    raise ValueError(f"the JSON object at offset {start} does not close")


def json_examples(text: str) -> list[str]:
    """The text of every JSON object that follows a line holding "JSON example"."""
    examples: list[str] = []
    position = 0
    while (marker := text.find("JSON example", position)) != -1:
        start = text.index("{", text.index("\n", marker))
        end = _object_end(text, start)
        examples.append(text[start:end])
        position = end
    return examples


def _context_items(report_examples: list[str]) -> str:
    items: list[Any] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if "item" in value:
                items.append(value["item"])
            for child in value.values():
                collect(child)
        elif isinstance(value, list):
            for child in value:
                collect(child)

    for example in report_examples:
        collect(json.loads(example))
    return json.dumps(items, indent=2, ensure_ascii=False)


def _wanted(seeds: Path) -> tuple[dict[str, str], list[str]]:
    """The fixtures' texts by file name, and the problems met making them."""
    wanted: dict[str, str] = {}
    problems: list[str] = []
    seen: set[str] = set()
    for seed in sorted(seeds.glob("*.txt")):
        text = seed.read_text(encoding="utf-8")
        title = text.split("\n", 1)[0].strip()
        if title not in FIXTURES:
            problems.append(f"{seed}: an unknown seed (first line {title!r})")
            continue
        seen.add(title)
        examples = json_examples(text)
        names = FIXTURES[title]
        if len(examples) != len(names):
            problems.append(f"{seed}: {len(examples)} JSON examples, expected {len(names)}")
            continue
        for name, example in zip(names, examples, strict=True):
            json.loads(example)  # each one is valid JSON, or this raises
            wanted[name] = example + "\n"
        if title == "SelectionReport":
            wanted[CONTEXT_ITEMS] = _context_items(examples) + "\n"
    problems.extend(f"{seeds}: no seed titled {title!r}" for title in FIXTURES
                    if title not in seen)
    return wanted, problems


def vendor(seeds: Path, dest: Path, *, check_only: bool) -> list[str]:
    """Write (or, with ``check_only``, compare) the fixtures; the problems found."""
    wanted, problems = _wanted(seeds)
    if problems:
        return problems
    for path in sorted(dest.glob("*.json")):
        if path.name not in wanted:
            if check_only:
                problems.append(f"{path}: not made from {seeds}")
            else:
                path.unlink()
    for name, text in wanted.items():
        target = dest / name
        if check_only:
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                problems.append(f"{target}: differs from its seed's example")
        else:
            dest.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="verify DEST against SEEDS and write nothing")
    parser.add_argument("seeds", type=Path, metavar="SEEDS")
    parser.add_argument("dest", type=Path, metavar="DEST")
    args = parser.parse_args(argv)
    problems = vendor(args.seeds, args.dest, check_only=args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"{sum(map(len, FIXTURES.values())) + 1} fixtures "
              f"{'checked' if args.check else 'vendored'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
