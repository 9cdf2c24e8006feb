"""A SelectionReport as one self-contained HTML page (no script, no network).

Everything taken from the report is HTML-escaped before it reaches the page,
and the page carries a Content-Security-Policy that forbids scripts and any
load from elsewhere, so item content such as ``<script>`` or an ``onerror``
attribute is shown as text and can never run.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._htmlstyle import STYLE
from ._model import ContextBudget
from ._model.wire import ITEM_FIELDS
from .exceptions import DecodeError, InvalidTypeError
from .reasons import exclusion_reason_from_dict, inclusion_reason_from_dict, reason_styles

if TYPE_CHECKING:
    from ._report import SelectionReport

__all__ = ["DEFAULT_TITLE", "render_html"]

#: The page title when none is given.
DEFAULT_TITLE = "Cupel selection report"

_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        "base-uri 'none'; form-action 'none'")
_PREVIEW = 140
_CLASS_SAFE = re.compile(r"[^A-Za-z0-9_-]")
#: What a declared badge colour may not hold (it is written inside the page's CSS).
_CSS_UNSAFE = re.compile(r"[;{}<>\\]")


def _e(value: object) -> str:
    """HTML-escape ``value`` for text or attribute context, with every invisible or
    control code point shown as a visible ``\\uXXXX`` escape, as the terminal
    output shows them: C0 and C1 controls (but tab and newline), zero-width
    characters (U+200B..U+200D, U+2060, the U+FEFF byte-order mark), bidi marks,
    embeddings, overrides and isolates, U+2028/U+2029, and everything else
    Python does not call printable. They cannot run in a page, but raw they
    could hide or reorder what a reader sees."""
    return html.escape(_visible(str(value)), quote=True)


def _visible(text: str) -> str:
    if text.isprintable():
        return text
    out = []
    for char in text:
        if char.isprintable() or char in "\t\n":
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


# -- reading the report --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """One included or excluded item, as the page needs it."""

    item: Mapping[str, Any]
    content: str
    tokens: int
    kind: str
    score: float
    reason: str
    fields: Mapping[str, Any]


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DecodeError(path, value, "must be a JSON object")
    return value


def _list(value: Any, path: str) -> Sequence[Any]:
    if not isinstance(value, list | tuple):
        raise DecodeError(path, value, "must be a JSON array")
    return value


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(path, value, "must be an integer")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DecodeError(path, value, "must be a number")
    return float(value)


def _text(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise DecodeError(path, value, "must be a string")
    return value


def _entry(raw: Any, path: str) -> _Entry:
    data = _mapping(raw, path)
    item = _mapping(data.get("item"), f"{path}.item")
    reason = _mapping(data.get("reason"), f"{path}.reason")
    return _Entry(
        item=item,
        content=_text(item.get(_KEY["content"]), f"{path}.item.content"),
        tokens=_int(item.get(_KEY["tokens"]), f"{path}.item.tokens"),
        kind=_text(item.get(_KEY["kind"], "Message"), f"{path}.item.kind"),
        score=_number(data.get("score"), f"{path}.score"),
        reason=_text(reason.get("reason"), f"{path}.reason.reason"),
        fields={k: v for k, v in reason.items() if k != "reason"},
    )


@dataclass(frozen=True, slots=True)
class _Stage:
    """One stage of the timeline."""

    stage: str
    duration_ms: float
    item_count: int


@dataclass(frozen=True, slots=True)
class _Budget:
    max_tokens: int
    target_tokens: int
    output_reserve: int
    raw: Mapping[str, Any]


def _budget(value: Mapping[str, Any] | ContextBudget | None) -> _Budget | None:
    if value is None:
        return None
    if isinstance(value, ContextBudget):
        value = value.to_dict()
    data = _mapping(value, "budget")
    max_tokens = _int(data.get("maxTokens"), "budget.maxTokens")
    target = _int(data.get("targetTokens"), "budget.targetTokens")
    reserve = _int(data.get("outputReserve", 0), "budget.outputReserve")
    for name, number in (("maxTokens", max_tokens), ("targetTokens", target),
                         ("outputReserve", reserve)):
        if number < 0:
            raise DecodeError(f"budget.{name}", number, "must be >= 0")
    return _Budget(max_tokens, target, reserve, data)


# -- pieces of the page --------------------------------------------------------


def _fmt_tokens(value: int) -> str:
    return f"{value:,}"


def _percent(part: float, whole: float) -> str:
    return f"{(100.0 * part / whole) if whole > 0 else 0.0:.3f}%"


def _reason_css() -> str:
    """A badge colour rule per known reason, each as the reason declares it (read at
    each render, so a reason registered later has its colour)."""
    return "".join(f".reason-{name} {{ background:{style}; }}"
                   for name, style in reason_styles().items()
                   if not _CLASS_SAFE.search(name) and not _CSS_UNSAFE.search(style))


def _reason_sentence(reason: str, fields: Mapping[str, Any], *, excluded: bool) -> str:
    """The reason's own sentence (a badge's tooltip); a reason whose data does not
    decode is named only."""
    envelope = {**fields, "reason": reason}
    try:
        decoded = (exclusion_reason_from_dict(envelope) if excluded
                   else inclusion_reason_from_dict(envelope))
    except DecodeError:
        return reason
    return decoded.sentence()


def _reason_badge(reason: str, fields: Mapping[str, Any], *, excluded: bool) -> str:
    # Only a known reason wears its class: an unknown name, however close to a known
    # one ("Budget Exceeded"), gets the plain badge, never another reason's colour.
    css = reason if reason in reason_styles() else "unknown"
    title = _reason_sentence(reason, fields, excluded=excluded)
    return f'<span class="badge reason-{css}" title="{_e(title)}">{_e(reason)}</span>'


def _reason_fields(fields: Mapping[str, Any]) -> str:
    if not fields:
        return ""
    parts = []
    for key, value in fields.items():
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if isinstance(value, int) and not isinstance(value, bool):
            shown = _fmt_tokens(value)
        parts.append(f'<span class="field"><span class="field-name">{_e(key)}</span> '
                     f'<span class="field-value">{_e(shown)}</span></span>')
    return '<div class="fields">' + "".join(parts) + "</div>"


def _preview(content: str) -> str:
    first = content.strip().split("\n")[0].rstrip("\r") if content.strip() else content
    return first if len(first) <= _PREVIEW and first == content else (
        first[:_PREVIEW].rstrip() + "…")


#: The wire format's JSON keys of an item's other fields, from its wire declaration (content,
#: kind and tokens have their own columns; metadata its own block).
_ITEM_FIELDS = tuple(field.key for field in ITEM_FIELDS
                     if field.name not in ("content", "kind", "tokens", "metadata"))
_KEY = {field.name: field.key for field in ITEM_FIELDS}


def _item_details(entry: _Entry) -> str:
    rows = []
    for key in _ITEM_FIELDS:
        if key in entry.item:
            value = entry.item[key]
            shown = ", ".join(map(str, value)) if key == "tags" and isinstance(
                value, list) else value
            rows.append(f"<dt>{_e(key)}</dt><dd>{_e(shown)}</dd>")
    if entry.item.get(_KEY["metadata"]):
        text = json.dumps(entry.item[_KEY["metadata"]], indent=2, ensure_ascii=False, default=str)
        rows.append(f'<dt>metadata</dt><dd><pre class="meta">{_e(text)}</pre></dd>')
    data = f'<dl class="item-data">{"".join(rows)}</dl>' if rows else ""
    return (f'<details><summary>{_e(_preview(entry.content))}</summary>'
            f'<pre class="content">{_e(entry.content)}</pre>{data}</details>')


def _entry_row(position: int, entry: _Entry, *, excluded: bool) -> str:
    reason_cell = _reason_badge(entry.reason, entry.fields, excluded=excluded) + (
        _reason_fields(entry.fields) if excluded else "")
    return (
        f'<tr data-position="{position}" data-reason="{_e(entry.reason)}" '
        f'data-tokens="{entry.tokens}" data-kind="{_e(entry.kind)}">'
        f'<td class="num">{position + 1}</td>'
        f'<td class="num">{entry.score:.3f}</td>'
        f"<td>{reason_cell}</td>"
        f'<td><span class="kind">{_e(entry.kind)}</span></td>'
        f'<td class="num">{_tokens_cell(entry)}</td>'
        f'<td class="content-cell">{_item_details(entry)}</td></tr>'
    )


def _tokens_cell(entry: _Entry) -> str:
    """The tokens, and the original size of an item trimmed before selection."""
    original = entry.item.get("originalTokens")
    if isinstance(original, int) and not isinstance(original, bool) and original != entry.tokens:
        return (f'{_fmt_tokens(entry.tokens)}<span class="trimmed" data-original-tokens='
                f'"{original}"> trimmed from {_fmt_tokens(original)}</span>')
    return _fmt_tokens(entry.tokens)


def _token_estimates(entries: Sequence[_Entry]) -> str:
    """A note (not an incomplete entry: nothing is missing) when the items' counts are
    estimates, as the chat readers record them (metadata ``chat.tokens``)."""
    counters = sorted({counter for entry in entries
                       for counter in [(entry.item.get("metadata") or {}).get("chat.tokens")]
                       if isinstance(counter, str) and counter.startswith("estimate")})
    if not counters:
        return ""
    return (f'<section id="token-estimates" class="note" data-counter="{_e(counters[0])}">'
            f"Token counts are estimates ({_e(', '.join(counters))}), not exact counts: "
            "the budget may be over or under by as much.</section>")


def _table(table_id: str, entries: Sequence[_Entry], *, excluded: bool) -> str:
    if not entries:
        return (f'<table id="{table_id}" data-count="0"><tbody><tr><td class="empty">'
                "None.</td></tr></tbody></table>")
    rows = "".join(_entry_row(k, entry, excluded=excluded) for k, entry in enumerate(entries))
    return (f'<table id="{table_id}" class="items" data-count="{len(entries)}">'
            '<colgroup><col class="c-pos"><col class="c-score"><col class="c-reason">'
            '<col class="c-kind"><col class="c-tokens"><col></colgroup><thead><tr>'
            '<th class="num">#</th><th class="num">Score</th><th>Reason</th><th>Kind</th>'
            '<th class="num">Tokens</th><th>Content</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")


def _stat(element_id: str, value: int, label: str) -> str:
    return (f'<div class="stat"><span class="stat-value" id="{element_id}" '
            f'data-count="{value}">{_fmt_tokens(value)}</span>'
            f'<span class="stat-label">{_e(label)}</span></div>')


def _segment(css: str, element_id: str, tokens: int, scale: float, label: str) -> str:
    if tokens <= 0:
        return ""
    return (f'<div class="seg {css}" id="{element_id}-bar" style="width:{_percent(tokens, scale)}"'
            f' title="{_e(label)}: {_fmt_tokens(tokens)} tokens"></div>')


def _legend(css: str, element_id: str, tokens: int, label: str) -> str:
    return (f'<li><span class="swatch {css}"></span>{_e(label)} '
            f'<strong id="{element_id}" data-tokens="{tokens}">{_fmt_tokens(tokens)}</strong>'
            "</li>")


def _budget_section(included: Sequence[_Entry], excluded: Sequence[_Entry],
                    budget: _Budget | None) -> str:
    pinned = sum(max(0, e.tokens) for e in included
                 if e.reason == "Pinned" or e.item.get(_KEY["pinned"]) is True)
    selected = sum(max(0, e.tokens) for e in included) - pinned
    if budget is None:
        left_out = sum(max(0, e.tokens) for e in excluded)
        scale = max(1, pinned + selected + left_out)
        bar = (_segment("seg-pinned", "budget-pinned", pinned, scale, "Pinned")
               + _segment("seg-selected", "budget-selected", selected, scale, "Selected")
               + _segment("seg-excluded", "budget-excluded", left_out, scale, "Left out"))
        legend = (_legend("seg-pinned", "budget-pinned", pinned, "Pinned")
                  + _legend("seg-selected", "budget-selected", selected, "Selected")
                  + _legend("seg-excluded", "budget-excluded", left_out, "Left out"))
        note = ("<p class=\"note\">No budget was given, so the bar shows every token "
                "considered. Pass the budget to see the reserve and the unused room.</p>")
        return (f'<section id="budget"><h2>Tokens</h2>{note}'
                f'<div class="bar" role="img" aria-label="tokens considered">{bar}</div>'
                f'<ul class="legend">{legend}</ul></section>')
    used = pinned + selected + budget.output_reserve
    unused = max(0, budget.max_tokens - used)
    over = max(0, used - budget.max_tokens)
    scale = max(1, budget.max_tokens, used)
    bar = (_segment("seg-pinned", "budget-pinned", pinned, scale, "Pinned")
           + _segment("seg-selected", "budget-selected", selected, scale, "Selected")
           + _segment("seg-reserved", "budget-reserved", budget.output_reserve, scale,
                      "Output reserve")
           + _segment("seg-unused", "budget-unused", unused, scale, "Unused"))
    target = (f'<div class="marker" style="left:{_percent(budget.target_tokens, scale)}" '
              f'title="targetTokens {_fmt_tokens(budget.target_tokens)}">'
              f'<span>target {_fmt_tokens(budget.target_tokens)}</span></div>')
    legend = (_legend("seg-pinned", "budget-pinned", pinned, "Pinned")
              + _legend("seg-selected", "budget-selected", selected, "Selected")
              + _legend("seg-reserved", "budget-reserved", budget.output_reserve,
                        "Output reserve")
              + _legend("seg-unused", "budget-unused", unused, "Unused"))
    extra = ""
    if over:
        extra = (f'<p class="warn" id="budget-over" data-tokens="{over}">Over the window by '
                 f"{_fmt_tokens(over)} tokens.</p>")
    facts = (f'<p class="note">Window <strong id="budget-max" data-tokens="{budget.max_tokens}">'
             f"{_fmt_tokens(budget.max_tokens)}</strong> tokens, target "
             f'<strong id="budget-target" data-tokens="{budget.target_tokens}">'
             f"{_fmt_tokens(budget.target_tokens)}</strong>{_budget_extras(budget.raw)}.</p>")
    return (f'<section id="budget"><h2>Budget</h2>{facts}'
            f'<div class="bar-wrap"><div class="bar" role="img" aria-label="budget use">'
            f"{bar}</div>{target}</div>"
            f'<ul class="legend">{legend}</ul>{extra}</section>')


def _budget_extras(raw: Mapping[str, Any]) -> str:
    """The safety margin and reserved slots of a budget, when it has them."""
    parts = []
    margin = raw.get("estimationSafetyMarginPercent")
    if isinstance(margin, int | float) and not isinstance(margin, bool) and margin:
        parts.append(f"safety margin {_e(margin)}%")
    slots = raw.get("reservedSlots")
    if isinstance(slots, Mapping) and slots:
        shown = ", ".join(f"{_e(kind)} {_e(count)}" for kind, count in slots.items())
        parts.append(f"reserved slots: {shown}")
    return "".join(f"; {part}" for part in parts)


def _timeline(events: Sequence[_Stage]) -> str:
    if not events:
        return ('<section id="timeline"><h2>Stages</h2><p class="note" data-count="0">'
                "The report has no stage events.</p></section>")
    durations = [max(0.0, e.duration_ms) for e in events]
    total = sum(durations)
    rows: list[str] = []
    offset = 0.0
    for event, duration in zip(events, durations, strict=True):
        if total > 0:
            left, width = offset / total, duration / total
        else:
            left, width = len(rows) / len(events), 1 / len(events)
        offset += duration
        rows.append(
            f'<div class="stage" data-stage="{_e(event.stage)}" '
            f'data-items="{event.item_count}">'
            f'<span class="stage-name">{_e(event.stage)}</span>'
            f'<span class="track"><span class="span" style="margin-left:{100 * left:.3f}%;'
            f'width:{max(100 * width, 0.4):.3f}%"></span></span>'
            f'<span class="stage-ms">{duration:.3f} ms</span>'
            f'<span class="stage-items">{_fmt_tokens(event.item_count)} items</span></div>'
        )
    return (f'<section id="timeline"><h2>Stages</h2><div class="stages" '
            f'data-count="{len(events)}">{"".join(rows)}</div>'
            f'<p class="note">Total {total:.3f} ms; stages run one after the other.</p>'
            "</section>")


def _kinds(included: Sequence[_Entry], excluded: Sequence[_Entry]) -> str:
    rows: dict[str, list[int]] = {}
    for entries, offset in ((included, 0), (excluded, 2)):
        for entry in entries:
            counts = rows.setdefault(entry.kind, [0, 0, 0, 0])
            counts[offset] += 1
            counts[offset + 1] += entry.tokens
    if not rows:
        return '<section id="kinds"><h2>Tokens by kind</h2><p class="note">None.</p></section>'
    widest = max(max(0, c[1]) + max(0, c[3]) for c in rows.values()) or 1
    body = []
    for kind, (n_in, t_in, n_out, t_out) in sorted(rows.items(),
                                                     key=lambda kv: -(kv[1][1] + kv[1][3])):
        body.append(
            f'<tr data-kind="{_e(kind)}" data-included-tokens="{t_in}" '
            f'data-excluded-tokens="{t_out}"><td><span class="kind">{_e(kind)}</span></td>'
            f'<td class="num">{n_in}</td><td class="num">{_fmt_tokens(t_in)}</td>'
            f'<td class="num">{n_out}</td><td class="num">{_fmt_tokens(t_out)}</td>'
            f'<td class="kind-bar"><span class="seg-selected" style="width:'
            f'{_percent(max(0, t_in), widest)}"></span><span class="seg-excluded" style="width:'
            f'{_percent(max(0, t_out), widest)}"></span></td></tr>'
        )
    return ('<section id="kinds"><h2>Tokens by kind</h2>'
            f'<table id="kinds-table" data-count="{len(rows)}"><thead><tr><th>Kind</th>'
            '<th class="num">Included</th><th class="num">Tokens</th>'
            '<th class="num">Excluded</th><th class="num">Tokens</th><th></th></tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></section>')


def _incomplete(notes: Sequence[str]) -> str:
    if not notes:
        return ""
    items = "".join(f"<li>{_e(note)}</li>" for note in notes)
    return (f'<section id="incomplete" class="alert" role="alert" data-count="{len(notes)}">'
            "<h2>This report is incomplete</h2>"
            f'<p class="cause"><strong>{_e(notes[0])}</strong></p>'
            "<p>The events it was folded from do not account for the whole run, so some "
            f"decisions may be missing ({len(notes)} problem{'s' if len(notes) > 1 else ''}, "
            f"the cause first):</p><ul>{items}</ul></section>")


def _shortfalls(report: Mapping[str, Any]) -> str:
    raw = report.get("count_requirement_shortfalls")
    if not raw:
        return ""
    rows = []
    for position, entry in enumerate(_list(raw, "count_requirement_shortfalls")):
        where = f"count_requirement_shortfalls[{position}]"
        data = _mapping(entry, where)
        rows.append(f'<li data-kind="{_e(data.get("kind"))}"><span class="kind">'
                    f'{_e(data.get("kind"))}</span>: required '
                    f'{_int(data.get("required_count"), f"{where}.required_count")}, found '
                    f'{_int(data.get("satisfied_count"), f"{where}.satisfied_count")}</li>')
    return (f'<section id="shortfalls" class="warnbox" data-count="{len(rows)}">'
            f'<h2>Count requirements not met</h2><ul>{"".join(rows)}</ul></section>')


def _overflow(report: Mapping[str, Any]) -> str:
    raw = report.get("overflow")
    if raw is None:
        return ""
    data = _mapping(raw, "overflow")
    over = _int(data.get("tokens_over_budget"), "overflow.tokens_over_budget")
    names = []
    for k, raw_item in enumerate(_list(data.get("overflowing_items", []),
                                       "overflow.overflowing_items")):
        where = f"overflow.overflowing_items[{k}]"
        content = _text(_mapping(raw_item, where).get("content"), f"{where}.content")
        names.append(f"<li>{_e(_preview(content))}</li>")
    return (f'<section id="overflow" class="warnbox" data-tokens="{over}"><h2>Overflow</h2>'
            f"<p>The selection went over the target by {_fmt_tokens(over)} tokens and was "
            f"kept (Proceed).</p><ul>{''.join(names)}</ul></section>")


def render_html(report: Mapping[str, Any] | SelectionReport, *,
                budget: Mapping[str, Any] | ContextBudget | None = None,
                title: str = DEFAULT_TITLE) -> str:
    """The report as one self-contained HTML page (a string).

    ``report`` is a SelectionReport's JSON object (``SelectionReport.to_dict()``
    or the parsed ``report.json``), or the report itself; ``budget`` the
    budget's JSON object (``maxTokens``, ``targetTokens``, ``outputReserve``
    ...) or a :class:`~cupellation.ContextBudget`, when known. The page shows
    the counts, the budget as a bar (pinned, selected, output reserve,
    unused), any ``incomplete`` notes first, the included items in placed
    order and the excluded items in the report's order with their reasons,
    a stage timeline and the tokens by kind.

    The page uses no script and loads nothing (its Content-Security-Policy
    forbids both); every value from the report is HTML-escaped. Counts sit in
    elements with stable ids and ``data-`` attributes: ``count-candidates``,
    ``count-included``, ``count-excluded``, ``count-pinned``,
    ``tokens-selected``, ``tokens-considered`` (``data-count``); the tables
    ``included-table``, ``excluded-table``, ``kinds-table`` (``data-count``,
    one ``tr[data-position]`` per item); ``budget-pinned``,
    ``budget-selected``, ``budget-reserved``, ``budget-unused``
    (``data-tokens``); ``incomplete`` (``data-count``). An item trimmed before
    selection shows its original size (``span.trimmed[data-original-tokens]``); when
    the items' counts are estimates (metadata ``chat.tokens``), ``token-estimates``
    says so (a note, not an ``incomplete`` entry: nothing is missing).

    Raises :class:`~cupellation.exceptions.DecodeError` naming the JSON path
    (``included[3].item.tokens``) and the value for a report that lacks what
    the page needs.
    """
    if not isinstance(title, str):
        raise InvalidTypeError("title", title, "a string")
    to_dict = getattr(report, "to_dict", None)
    if callable(to_dict) and not isinstance(report, Mapping):
        report = to_dict()
    data = _mapping(report, "report")
    included = [_entry(raw, f"included[{k}]")
                for k, raw in enumerate(_list(data.get("included"), "included"))]
    excluded = [_entry(raw, f"excluded[{k}]")
                for k, raw in enumerate(_list(data.get("excluded"), "excluded"))]
    events: list[_Stage] = []
    for k, raw in enumerate(_list(data.get("events"), "events")):
        event = _mapping(raw, f"events[{k}]")
        duration = _number(event.get("duration_ms"), f"events[{k}].duration_ms")
        if not math.isfinite(duration):
            raise DecodeError(f"events[{k}].duration_ms", duration, "must be finite")
        events.append(_Stage(_text(event.get("stage"), f"events[{k}].stage"), duration,
                             _int(event.get("item_count"), f"events[{k}].item_count")))
    total_candidates = _int(data.get("total_candidates"), "total_candidates")
    considered = _int(data.get("total_tokens_considered"), "total_tokens_considered")
    notes = [_text(note, f"incomplete[{k}]")
             for k, note in enumerate(_list(data.get("incomplete", []), "incomplete"))]
    plan = _budget(budget)

    pinned_count = sum(1 for e in included
                       if e.reason == "Pinned" or e.item.get(_KEY["pinned"]) is True)
    selected_tokens = sum(e.tokens for e in included)
    stats = "".join((
        _stat("count-candidates", total_candidates, "candidates"),
        _stat("count-included", len(included), "included"),
        _stat("count-excluded", len(excluded), "excluded"),
        _stat("count-pinned", pinned_count, "pinned"),
        _stat("tokens-selected", selected_tokens, "tokens selected"),
        _stat("tokens-considered", considered, "tokens considered"),
    ))
    body = "".join((
        _incomplete(notes),  # the loss first: a banner above everything else
        f'<header><h1>{_e(title)}</h1><p>{len(included)} of {total_candidates} candidates '
        f"selected, {_fmt_tokens(selected_tokens)} tokens.</p></header>",
        _token_estimates([*included, *excluded]),
        f'<section class="stats" id="summary">{stats}</section>',
        _budget_section(included, excluded, plan),
        _shortfalls(data),
        _overflow(data),
        f'<section id="included"><h2>Included, in placed order ({len(included)})</h2>'
        f'{_table("included-table", included, excluded=False)}</section>',
        f'<section id="excluded"><h2>Excluded, in the report\'s order ({len(excluded)})</h2>'
        f'{_table("excluded-table", excluded, excluded=True)}</section>',
        _timeline(events),
        _kinds(included, excluded),
        "<footer>Made by cupellation. Self-contained: no scripts, no network.</footer>",
    ))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{_e(title)}</title><style>{STYLE}{_reason_css()}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )
