"""An attacker without the digest key, editing stored runs: one home for the moves the
keyed-digest tests and the mutation campaign (benchmarks/mutation_campaign.py) make.

Each move first changes one item decision's score in a run (a report that still
looks whole, but is not the run that was written), then covers the change the way
someone who can edit the file but does not hold the key would:

- ``strip``: the run's end line loses its ``digest`` member;
- ``plain``: the digest is replaced with the plain ``sha256:`` the attacker
  recomputes over the run's lines as they now are (what a reader without a key
  accepts as verified);
- ``schema 2``: every line of the run is rewritten as schema 2, from before run
  digests, without the member.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Final

__all__ = ["MOVES", "run_ids", "tamper_lines"]

MOVES: Final = ("strip", "plain", "schema 2")
_SCORE: Final = re.compile(rb'"score":\s*(-?[0-9][0-9.eE+-]*)')
_ENDS: Final = ("run_completed", "run_failed")


def run_ids(data: bytes) -> list[str]:
    """The run ids of a JSON-lines event file or audit log, in the order first seen."""
    seen: dict[str, None] = {}
    for line in data.split(b"\n"):
        if line.strip():
            seen.setdefault(json.loads(line)["run_id"], None)
    return list(seen)


def _canonical(record: dict[str, Any]) -> bytes:
    """A record's line as the sinks write it (member order kept)."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def tamper_lines(data: bytes, move: str, run_id: str | None = None) -> bytes:
    """``data`` (JSON lines of runs) with one item score of ``run_id`` (default: the
    first run) changed and covered by ``move`` (see the module's note). Raises
    ValueError when the run has no item line or no end line to cover."""
    if move not in MOVES:
        raise ValueError(f"unknown move {move!r}")
    lines = data.split(b"\n")
    wanted = run_id if run_id is not None else run_ids(data)[0]
    own = [k for k, line in enumerate(lines)
           if line.strip() and json.loads(line)["run_id"] == wanted]
    item = next((k for k in own if _SCORE.search(lines[k])
                 and json.loads(lines[k])["type"] in ("item_included", "item_excluded")), None)
    end = next((k for k in own if json.loads(lines[k])["type"] in _ENDS), None)
    if item is None or end is None:
        raise ValueError(f"run {wanted} has no item line or no end line")
    old = _SCORE.search(lines[item])
    assert old is not None
    new = b"0.123" if old.group(1) != b"0.123" else b"0.321"
    lines[item] = lines[item][:old.start(1)] + new + lines[item][old.end(1):]
    if move == "schema 2":
        for k in own:
            record = json.loads(lines[k])
            record["schema"] = 2
            record.pop("digest", None)
            lines[k] = _canonical(record)[:-1]
        return b"\n".join(lines)
    record = json.loads(lines[end])
    record.pop("digest", None)
    if move == "plain":
        hashed = hashlib.sha256()
        for k in own:
            hashed.update(_canonical(record) if k == end else lines[k] + b"\n")
        record["digest"] = "sha256:" + hashed.hexdigest()
    lines[end] = _canonical(record)[:-1]
    return b"\n".join(lines)
