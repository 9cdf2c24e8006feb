"""Choosing runs in SQL: the filters of ``audit``, ``report``, ``why``, ``replay`` and
``diff``, bound as query parameters (never formatted into the SQL text).

The database narrows; the fold decides. Every filter here is a superset of what the
file reader keeps, so the runs it returns, read through the same reader with the
same options, give the file reader's answer: a regular expression is narrowed by a
literal it requires (Python's and RE2's syntax and semantics differ, so the pattern
itself never runs in SQL), and the run's time window by ``Timestamp``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from ..events import content_digest
from ..exceptions import InvalidValueError
from ._accel import INDEXED_READ, TRIMMED_DIGESTS

__all__ = ["EARLIEST_STORED", "LATEST_STORED", "RunQuery", "required_literal", "run_selection",
           "stored_window"]

_SPECIAL: Final = frozenset("\\.^$*+?{}[]()|")
_QUANTIFIERS: Final = frozenset("*?{")
#: A repetition count (``{2}``, ``{1,3}``, ``{,4}``): skipped whole, never literal.
_BRACE: Final = re.compile(r"\{[0-9]*,?[0-9]*\}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs to read from a store. Every field is optional; given ones must all
    hold. ``since``/``until`` bound the run's start (as the file reader does);
    ``services`` the Collector's ``ServiceName``; ``run_id``, ``session_id``,
    ``user_id`` and ``conversation_id`` are exact; ``reason`` an exclusion reason's
    name and ``kind`` an item kind the run decided; ``content`` an item's exact
    content (or its digest, or a trimmed item's original); ``match`` a Python
    regular expression searched in item content; ``strategy`` text found in the
    run's pipeline description (``greedy``, ``KnapsackSlice``: its policy)."""

    since: datetime | None = None
    until: datetime | None = None
    services: tuple[str, ...] = ()
    run_id: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    conversation_id: str | None = None
    reason: str | None = None
    kind: str | None = None
    content: str | None = None
    match: str | None = None
    strategy: str | None = None


#: The span of ClickHouse's ``DateTime64(9)``, the Collector's ``Timestamp``: from
#: 1900-01-01 to 2262-04-11 23:47:16.854775807 UTC (the last whole microsecond here).
EARLIEST_STORED: Final = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_STORED: Final = datetime(2262, 4, 11, 23, 47, 16, 854775, tzinfo=UTC)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def stored_window(since: datetime | None, until: datetime | None
                  ) -> tuple[datetime | None, datetime | None, bool]:
    """``(since, until, empty)``: the bounds as the store can take them. ClickHouse
    refuses to bind a time outside ``DateTime64(9)``'s span (``--until 9999-01-01``
    would be an overflow error), and no stored row lies outside it, so a bound
    beyond the span on its open side is no bound (``since`` before 1900, ``until``
    after 2262) and one beyond it on the other side selects nothing (``empty``): the
    same answer as the file reader's, never an error."""
    since = None if since is None else _aware(since)
    until = None if until is None else _aware(until)
    empty = ((since is not None and since > LATEST_STORED)
             or (until is not None and until < EARLIEST_STORED))
    if empty or (since is not None and since <= EARLIEST_STORED):
        since = None
    if empty or (until is not None and until > LATEST_STORED):
        until = None
    return since, until, empty


def required_literal(pattern: str) -> str | None:
    """The longest text every match of ``pattern`` contains, found without parsing the
    whole syntax: literal characters outside groups, classes and alternations, not
    followed by a quantifier. None when the pattern has a top-level ``|``, an inline
    flag, or no literal (then nothing is pushed into SQL)."""
    if "(?" in pattern or _has_alternation(pattern):
        return None
    best, run, depth, index = "", "", 0, 0
    while index < len(pattern):
        char = pattern[index]
        nxt = pattern[index + 1] if index + 1 < len(pattern) else ""
        piece: str | None = None
        step = 1
        if char == "\\":
            step = 2
            piece = nxt if nxt and not nxt.isalnum() else None
        elif char == "[":
            step = _class_end(pattern, index) - index
        elif char == "{":
            brace = _BRACE.match(pattern, index)
            step = len(brace.group()) if brace else 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char not in _SPECIAL:
            piece = char
        following = pattern[index + step] if index + step < len(pattern) else ""
        if piece is not None and depth == 0 and following not in _QUANTIFIERS:
            run += piece
        else:
            best = max(best, run, key=len)
            run = ""
        index += step
    best = max(best, run, key=len)
    return best or None


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class that starts at ``start``."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


def _has_alternation(pattern: str) -> bool:
    index = 0
    while index < len(pattern):
        if pattern[index] == "\\":
            index += 2
            continue
        if pattern[index] == "[":
            index = _class_end(pattern, index)
            continue
        if pattern[index] == "|":
            return True
        index += 1
    return False


def _attr(key: str) -> str:
    return f"LogAttributes['{key}']"


def run_selection(query: RunQuery, logs: str) -> tuple[str, dict[str, Any]]:
    """The SQL (and its parameters) of the runs ``query`` may keep: ``(run_id, first
    Timestamp)``, newest first."""
    where = [f"{_attr('run_id')} != ''"]
    having: list[str] = []
    params: dict[str, Any] = {}
    since, until, empty = stored_window(query.since, query.until)
    if empty:
        where.append("0")
    if since is not None:
        where.append("Timestamp >= {since:DateTime64(9, 'UTC')}")
        params["since"] = since
    if until is not None:
        params["until"] = until
    if query.services:
        where.append("ServiceName IN {services:Array(String)}")
        params["services"] = list(query.services)
    if query.run_id is not None:
        where.append(f"{_attr('run_id')} = {{run_id:String}}")
        params["run_id"] = query.run_id
    _run_filters(query, having, params)
    # The runs holding a matching item, found by the content indexes (bloom filters
    # on item.content and on the digests in item.metadata) before the runs are
    # grouped: each is exact, so no HAVING re-checks it (a HAVING would read the
    # rows of every run found instead of the runs projection). Each index answers
    # its own SELECT of a UNION: one WHERE joining the two conditions with OR would
    # skip nothing (each index sees the other's condition as unknown, and "x OR
    # unknown" keeps every granule).
    where.extend(f"{_attr('run_id')} IN (" + " UNION ALL ".join(
        f"SELECT {_attr('run_id')} FROM {logs} WHERE {rows}" for rows in alternatives) + ")"
        for alternatives in _item_rows(query, params))
    if until is not None:
        having.append("min(Timestamp) <= {until:DateTime64(9, 'UTC')}")
    # With no other row filter, the runs projection (one row per run id, with its
    # first Timestamp) answers this without reading a row's attributes.
    sql = (f"SELECT {_attr('run_id')} AS run, min(Timestamp) AS at FROM {logs} "
           f"WHERE {' AND '.join(where)} GROUP BY run"
           + (f" HAVING {' AND '.join(having)}" if having else "")
           + " ORDER BY at DESC, run" + INDEXED_READ)
    return sql, params


def _run_filters(query: RunQuery, having: list[str], params: dict[str, Any]) -> None:
    """The filters checked on a run's rows as a whole (HAVING)."""
    started = f"{_attr('type')} = 'run_started'"
    for name, key in (("session_id", "session_id"), ("user_id", "user_id"),
                      ("conversation_id", "conversation_id")):
        value = getattr(query, name)
        if value is not None:
            having.append(f"countIf({started} AND {_attr(key)} = {{{name}:String}}) > 0")
            params[name] = value
    if query.reason is not None:
        having.append(f"countIf({_attr('type')} = 'item_excluded' AND "
                      f"{_attr('reason.name')} = {{reason:String}}) > 0")
        params["reason"] = query.reason
    if query.kind is not None:
        having.append(f"countIf({_attr('item.kind')} = {{kind:String}}) > 0")
        params["kind"] = query.kind
    if query.strategy is not None:
        having.append(f"countIf({started} AND arrayExists((k, v) -> startsWith(k, 'pipeline.') "
                      "AND positionCaseInsensitiveUTF8(v, {strategy:String}) > 0, "
                      "mapKeys(LogAttributes), mapValues(LogAttributes))) > 0")
        params["strategy"] = query.strategy


def like_escaped(text: str) -> str:
    """``text`` as a LIKE pattern that matches it anywhere."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _item_rows(query: RunQuery, params: dict[str, Any]) -> list[tuple[str, ...]]:
    """Row conditions each run kept by the content filters has a row for (one entry
    per filter, each a tuple of alternatives, any of which may hold): every
    alternative is one condition a data-skipping index serves, and together they are
    exact — ``IN`` on the content's bloom filter; ``has`` on the digests the
    metadata holds (a digest found anywhere in the metadata is one of them); ``LIKE``
    with the escaped literal, which matches where ``position`` finds it (and which
    the text index on the content answers for the literal's whole words)."""
    found: list[tuple[str, ...]] = []
    if query.content is not None:
        params["content"] = query.content
        params["digest"] = content_digest(query.content)
        found.append((f"{_attr('item.content')} IN ({{content:String}}, {{digest:String}})",
                      f"has({TRIMMED_DIGESTS}, {{digest:String}})"))
    if query.match is not None:
        literal = required_literal(query.match)
        if literal is not None:
            params["literal_like"] = like_escaped(literal)
            found.append((f"{_attr('item.content')} LIKE {{literal_like:String}}",))
    return found


def check_page(limit: int | None, offset: int) -> None:
    """Refuse a negative page."""
    if limit is not None and (type(limit) is not int or limit < 0):
        raise InvalidValueError("limit", limit, "must be a non-negative integer or None")
    if type(offset) is not int or offset < 0:
        raise InvalidValueError("offset", offset, "must be a non-negative integer")


def batches(items: Sequence[str], size: int) -> list[list[str]]:
    """``items`` in lists of at most ``size``."""
    return [list(items[k:k + size]) for k in range(0, len(items), size)]
