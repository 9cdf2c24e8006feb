"""Fuzz the log reader with generated inputs; it must never raise and must account
for every line.

    python benchmarks/fuzz_log_reader.py [--inputs 1000000] [--seed 1] [--quick]

Each input is a small log (1-8 lines) read by ``read_runs`` from memory. The
lines are drawn from: valid records of real runs; records cut at a random
byte; records with one byte changed or a field's value replaced (wrong type,
null, huge or negative numbers, empty strings); records of a future schema;
records in shipper envelopes; valid JSON of the wrong shape; other programs'
log lines; arbitrary bytes (invalid UTF-8 included). One input in sixteen is
gzipped, and half of those are cut short. Checked for every input: no
exception escapes, and ``stats.lines == stats.accounted``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import environment, make_items  # noqa: E402
from cupellation import (  # noqa: E402
    ContextBudget,
    DiagnosticTraceCollector,
    Pipeline,
    PriorityScorer,
    TraceDetailLevel,
)
from cupellation.events import event_to_json  # noqa: E402
from cupellation.logs import read_runs  # noqa: E402

__all__ = ["main"]

_OTHER = [b'{"level":"info","msg":"GET /health 200"}', b"Traceback (most recent call last):",
          b"2024-05-01 INFO started", b"[]", b"null", b"42", b'"text"', b"{}",
          b'{"schema":2}', b'{"type":"item_excluded","run_id":1}', b"\xff\xfe\x00",
          b'{"log":"{\\"schema\\":2"}', b'{"message":{"schema":2,"type":"x","run_id":"r",'
          b'"seq":0}}']
_VALUES = [b"null", b'""', b"-1", b"1e999", b"9223372036854775808", b"true", b"[]", b"{}",
           b'"x"', b"1.5", b'"\\ud800"', b"0"]


def _records() -> list[bytes]:
    items = make_items(40, 7, pinned_index=3)
    collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    Pipeline(scorer=PriorityScorer()).run(items, ContextBudget(4000, 1500), collector)
    return [event_to_json(event).encode() for event in collector.events]


def _line(rng: random.Random, records: list[bytes]) -> bytes:
    record = rng.choice(records)
    choice = rng.randrange(10)
    if choice == 0:
        return record
    if choice == 1:
        return record[: rng.randrange(len(record))]
    if choice == 2:
        data = bytearray(record)
        data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if choice == 3:
        parts = record.split(b":")
        k = rng.randrange(1, len(parts))
        rest = parts[k].split(b",", 1)
        parts[k] = rng.choice(_VALUES) + (b"," + rest[1] if len(rest) > 1 else b"}")
        return b":".join(parts)
    if choice == 4:
        return record.replace(b'"schema":2', b'"schema":%d' % rng.randint(3, 99))
    if choice == 5:
        key = rng.choice(["log", "record", "message", "data"])
        inner = json.loads(record)
        wrapped = {key: inner if rng.random() < 0.5 else json.dumps(inner)}
        return json.dumps(wrapped).encode()
    if choice == 6:
        return rng.choice(_OTHER)
    if choice == 7:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(60)))
    if choice == 8:
        return json.dumps(rng.choice([[1, 2], {"a": {"b": []}}, "s", 3.5, None])).encode()
    return b"prefix " + record


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fuzzer; print the counts; exit 1 on the first failure."""
    parser = argparse.ArgumentParser(description="Fuzz read_runs.")
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="10,000 inputs")
    args = parser.parse_args(argv)
    total = 10_000 if args.quick else args.inputs
    rng = random.Random(args.seed)
    records = _records()
    lines = damaged = other = found = 0
    start = time.perf_counter()
    for number in range(total):
        data = b"\n".join(_line(rng, records) for _ in range(rng.randint(1, 8)))
        if rng.random() < 1 / 16:
            data = gzip.compress(data)
            if rng.random() < 0.5:
                data = data[: rng.randrange(2, len(data))]
        try:
            reader = read_runs(io.BytesIO(data))
            found += sum(1 for _ in reader)
        except Exception as exc:  # the failure this script exists to find
            print(f"input {number} raised {type(exc).__name__}: {exc}\n{data!r}")
            return 1
        stats = reader.stats
        if stats.lines != stats.accounted:
            print(f"input {number}: {stats.lines} lines, {stats.accounted} accounted\n{data!r}")
            return 1
        lines += stats.lines
        damaged += stats.damaged_lines
        other += stats.other_lines
    elapsed = time.perf_counter() - start
    print(f"{total} inputs, {lines} lines ({damaged} damaged, {other} other), {found} runs "
          f"yielded, in {elapsed:.1f} s ({total / elapsed:,.0f} inputs/s); no exception, "
          f"every line accounted for")
    print(json.dumps({"environment": environment()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
