"""The spans' ``input.value`` / ``output.value``: what LLM trace tools (Phoenix,
Langfuse, MLflow) show in their input and output panes, read by exact key.

Each holds at most ``cap`` UTF-8 bytes (2,048 by default, Tempo's
``max_attribute_bytes``: these keys cannot be split). The root span's two values are
``text/plain``: a line in words, a blank line, then the JSON document indented, because
trace lists (Phoenix's, MLflow's) show the first characters of the root's value: so
they read ``kept 16 of 22, dropped 6: 4 budget, 1 negative tokens, 1 duplicate``, not
``{"summary":"kept…``, and the pane below shows the document one field a line.
:func:`value_document` splits such a value back into its line and its document. A
stage span's values are compact JSON (``application/json``) that start with a
``summary`` in words. The root's input holds the budget and the candidates' count and
tokens; its output the outcome, the kept and dropped counts and tokens and every
exclusion reason's count in full, then the dropped items (the largest first) and the
kept ones (by score). A stage span's input holds the items it was given; its output
the counts in and out and the duration, and from StageAndExclusions up the stage's
decisions by reason and its dropped items, the largest first. Every list says how many
it shows ``of`` how many, and ``more`` names the command that reads the whole trace
back. Numbers are rounded to 3 decimals; the columns keep every digit. Items show
candidate index, kind, tokens, score, reason and its numbers; content per the capture
policy: none under ``none``, the digest under ``hash``, at most 160 characters under
``full``.

The application's ``session.id``, ``user.id`` and ``gen_ai.conversation.id`` go on
the root from the run's :class:`~cupellation.RunInfo`, or else from the
OpenTelemetry context keys ``session.id`` / ``user.id`` that OpenInference's
``using_session`` / ``using_user`` helpers set.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from opentelemetry import context as otel_context

from ..events import ContentCapture, ItemEventBatch, RunStarted, content_digest
from ..reasons import KNOWN_EXCLUSION_REASONS, reason_fields, reason_word
from ._names import STAGE_DURATION, STAGE_IN, STAGE_NAME, STAGE_OUT

__all__ = [
    "DEFAULT_VALUE_CAP",
    "INPUT_MIME",
    "JSON_MIME",
    "INPUT_VALUE",
    "OUTPUT_MIME",
    "OUTPUT_VALUE",
    "TEXT_MIME",
    "identity_attributes",
    "input_value",
    "more_hint",
    "outcome_words",
    "output_value",
    "reason_counts",
    "shown_items",
    "stage_input_value",
    "stage_output_from",
    "stage_output_value",
    "value_document",
]

INPUT_VALUE: Final = "input.value"
INPUT_MIME: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME: Final = "output.mime_type"
JSON_MIME: Final = "application/json"
#: The root's values: a line in words, a blank line, the JSON document indented.
TEXT_MIME: Final = "text/plain"
#: The default cap on each value, in UTF-8 bytes.
DEFAULT_VALUE_CAP: Final = 2048
#: Content shown per item under ``full`` capture, in characters.
_CONTENT_CHARS: Final = 160
#: Items considered for each list (the first by score, or by tokens for dropped ones).
_CONSIDERED: Final = 64
#: Up to this many items a batch is ranked by a full sort, past it by a bounded heap.
_SORT_ALL: Final = 2048
#: Decimals of a score (or any other fractional number) shown in a summary; the
#: columns keep every digit.
_DECIMALS: Final = 3

_encode = msgspec.json.Encoder().encode
_KNOWN: Final = frozenset(KNOWN_EXCLUSION_REASONS.values())
def identity_attributes(started: RunStarted) -> dict[str, str]:
    """``session.id``, ``user.id`` and ``gen_ai.conversation.id`` from the run's
    information, else from the context keys OpenInference's helpers set."""
    out: dict[str, str] = {}
    session = started.session_id or otel_context.get_value("session.id")
    user = started.user_id or otel_context.get_value("user.id")
    if isinstance(session, str) and session:
        out["session.id"] = session
    if isinstance(user, str) and user:
        out["user.id"] = user
    if started.conversation_id:
        out["gen_ai.conversation.id"] = started.conversation_id
    return out


def _worded(words: str, document: Mapping[str, Any]) -> str:
    """A root value: the line in words, a blank line, the document indented."""
    return words + "\n\n" + msgspec.json.format(_encode(document), indent=1).decode("utf-8")


class _Sizes:
    """The UTF-8 size of a value's document as written, whole and (for
    :func:`shown_items`) once one more item is appended to a list.

    Compact JSON (a stage span's value) by default; with ``words``, :func:`_worded`'s
    text (the root's values: the words, a blank line, the document indented by one
    space a level)."""

    __slots__ = ("_head",)

    def __init__(self, words: str | None = None) -> None:
        self._head = None if words is None else len(words.encode("utf-8")) + 2

    def whole(self, document: Mapping[str, Any]) -> int:
        """The size of ``document`` written out."""
        if self._head is None:
            return len(_encode(document))
        return self._head + len(msgspec.json.format(_encode(document), indent=1))

    def grown(self, size: int, item: Mapping[str, Any], shown: int) -> int:
        """The size of a document of ``size`` bytes once ``item`` is appended to the
        ``items`` of a list block that shows ``shown`` (at least one) items, its count
        going to ``shown + 1``: a comma and the item (indented: a newline and the
        item's lines each three levels deeper, the list sitting at document -> block
        -> ``items``), and the digits the count gains. Exact, so the items shown are
        those that measuring the whole document after each item chose (tests hold the
        two equal), at one small encode per item instead of the whole document's."""
        text = _encode(item)
        digits = len(str(shown + 1)) - len(str(shown))
        if self._head is None:
            return size + len(text) + 1 + digits
        text = msgspec.json.format(text, indent=1)
        return size + 2 + len(text) + _LIST_DEPTH * (text.count(b"\n") + 1) + digits


#: The indentation level of a list block's items in a root value's document.
_LIST_DEPTH: Final = 3
_COMPACT: Final = _Sizes()


def value_document(value: str) -> tuple[str | None, Any]:
    """A root value's line in words and its JSON document (a stage span's value, which
    is JSON alone, gives no line): the inverse of how the values are written."""
    if value.startswith("{"):
        return None, msgspec.json.decode(value)
    words, _, document = value.partition("\n\n")
    return words, msgspec.json.decode(document)


def input_value(started: RunStarted) -> str:
    """The run's input (``text/plain``): a line in words, then its budget and
    candidates as indented JSON."""
    budget = started.budget
    return _worded(
        (f"{started.candidate_count:,} candidates, "
         f"{started.candidate_tokens:,} tokens; target {budget.target_tokens:,} "
         f"of max {budget.max_tokens:,}"), {
        "budget": {"max_tokens": budget.max_tokens, "target_tokens": budget.target_tokens,
                   "output_reserve": budget.output_reserve},
        "candidates": {"count": started.candidate_count, "tokens": started.candidate_tokens},
        "tier": started.detail_level,
    })


def _shown_number(value: Any) -> Any:
    """A float rounded for people (a bool or an int as it is)."""
    if type(value) is float and math.isfinite(value):
        return round(value, _DECIMALS)
    return value


def _item(index: int, item: Any, score: float, reason: Any,
          capture: ContentCapture) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "kind": item.kind.value, "tokens": item.tokens,
                           "score": _shown_number(score), "reason": reason.name}
    if item.original_tokens is not None:  # trimmed: what it counted before
        out["original_tokens"] = item.original_tokens
    fields = reason_fields(reason)
    if fields:
        # (BudgetExceeded's item_tokens repeats the item's tokens: shown once.)
        out.update({k: _shown_number(v) for k, v in fields.items()
                    if k not in out and not (k == "item_tokens" and v == item.tokens)})
    if capture is ContentCapture.FULL:
        content = item.content
        out["content"] = (content if len(content) <= _CONTENT_CHARS
                          else content[:_CONTENT_CHARS] + "…")
    elif capture is ContentCapture.HASH:
        out["content"] = content_digest(item.content)
    return out


def _top(batches: Sequence[ItemEventBatch], by_tokens: bool,
         tokens: Mapping[int, Sequence[int]] | None = None) -> list[tuple[Any, ...]]:
    """(key, -order, batch, position) of the first items: by score, or (dropped items,
    the largest loss first) by tokens; ties in the order the items came, NaN scores
    never shown. Each batch's own arrays are ranked with a C-level key and a bounded
    heap, so a large run costs one pass over its tokens, not a sort. ``tokens`` holds a
    batch's tokens column where the projection already built it (by ``id(batch)``)."""
    out: list[tuple[Any, ...]] = []
    order = 0
    for b, batch in enumerate(batches):
        scores = batch.scores
        keys: Sequence[Any] = scores
        if by_tokens:
            built = None if tokens is None else tokens.get(id(batch))
            keys = built if built is not None else [item.tokens for item in batch.items]
        wanted = _CONSIDERED
        nan = any(map(math.isnan, scores))
        if nan:
            wanted = len(scores)  # (rare) rank all, then leave the NaN ones out
        if len(scores) <= _SORT_ALL:
            # The same list nlargest gives (its documented equivalent), sorted in C:
            # twice as fast below a few thousand items, slower past them.
            ranked = sorted(range(len(scores)), key=keys.__getitem__, reverse=True)[:wanted]
        else:
            ranked = heapq.nlargest(wanted, range(len(scores)), key=keys.__getitem__)
        if nan:
            ranked = [k for k in ranked if not math.isnan(scores[k])][:_CONSIDERED]
        out.extend((keys[k], -(order + k), b, k) for k in ranked)
        order += len(scores)
    out.sort(reverse=True)
    return out[:_CONSIDERED]


def reason_counts(dropped: Iterable[ItemEventBatch]) -> dict[str, int]:
    """How many dropped items each reason names, the most frequent first."""
    reasons: Counter[str] = Counter()
    for batch in dropped:
        for kind, count in Counter(map(type, batch.reasons)).items():
            if kind in _KNOWN:
                reasons[kind.__name__] += count  # a known variant is named by its class
            else:
                reasons.update(r.name for r in batch.reasons if type(r) is kind)
    return dict(reasons.most_common())


def outcome_words(kept: int | None, dropped: int | None, reasons: dict[str, int]) -> str:
    """The outcome in words, for the first characters a trace list shows:
    ``"kept 16 of 22, dropped 6: 4 budget, 1 negative tokens, 1 duplicate"``."""
    if kept is None or dropped is None:
        return "no counts"
    text = f"kept {kept:,} of {kept + dropped:,}, dropped {dropped:,}"
    if reasons:
        text += ": " + ", ".join(f"{count:,} {reason_word(name)}"
                                 for name, count in reasons.items())
    return text


def more_hint(trace_id: str | None) -> str:
    """How to see every item of the run: the command that reads the trace back."""
    trace = trace_id or "TRACE_ID"
    return ("every item and its reason: cupellation report --from "
            f"phoenix|mlflow|jaeger|tempo URL --trace {trace}")


def shown_items(document: dict[str, Any], lists: Sequence[tuple[str, Sequence[ItemEventBatch],
                                                                int | None, bool]],
                capture: ContentCapture, cap: int,
                tokens: Mapping[int, Sequence[int]] | None = None,
                sizes: _Sizes = _COMPACT) -> None:
    """Fill each list of ``document`` (``{"shown": n, "of": total, "items": [...]}``)
    with its first items while the document as written (``sizes``: compact JSON
    unless told) stays within ``cap`` bytes. ``lists`` holds (key, batches, total,
    by_tokens), the most wanted first: the first list may take two thirds of the
    room, the others share the rest, then what is left goes to each in turn (so the
    first list never crowds the others out)."""
    for key, batches, total, _ in lists:
        held = sum(len(batch) for batch in batches)
        document[key] = {"shown": 0, "of": held if total is None else total, "items": []}
    size = sizes.whole(document)
    room = max(cap - size, 0)
    queues = [(document[key], batches, _top(batches, by_tokens, tokens))
              for key, batches, _, by_tokens in lists]
    shares = [2 / 3] + [1 / 3 / max(len(lists) - 1, 1)] * (len(lists) - 1)
    if len(lists) == 1:
        shares = [1.0]
    for last in (False, True):
        for (block, batches, top), portion in zip(queues, shares, strict=True):
            bound = min(cap if last else size + int(room * portion), cap)
            items = block["items"]
            shown = block["shown"]
            while shown < len(top):
                _, _, b, k = top[shown]
                batch = batches[b]
                item = _item(batch.candidate_indices[k], batch.items[k], batch.scores[k],
                             batch.reasons[k], capture)
                if items:
                    grown = sizes.grown(size, item, shown)
                    if grown > bound:
                        break
                    items.append(item)
                else:
                    # (A list's first item, measured whole: the empty list's brackets
                    # open up.)
                    items.append(item)
                    block["shown"] = shown + 1
                    grown = sizes.whole(document)
                    if grown > bound:
                        items.pop()
                        block["shown"] = shown
                        break
                shown += 1
                block["shown"] = shown
                size = grown


def output_value(*, outcome: str, included_count: int | None, included_tokens: int | None,
                 excluded_count: int | None, kept: Sequence[ItemEventBatch],
                 dropped: Sequence[ItemEventBatch], capture: ContentCapture,
                 cap: int, trace_id: str | None = None,
                 tokens: Mapping[int, Sequence[int]] | None = None) -> str:
    """The run's output (``text/plain``): the outcome in words on the first line, then
    as indented JSON the counts and reasons in full, the dropped items (the largest
    first) and the kept ones (by score) while the whole stays within ``cap`` bytes,
    each list saying how many it shows of how many, and the command that shows the
    rest."""
    reasons = reason_counts(dropped)
    words = outcome_words(included_count, excluded_count, reasons)
    if outcome != "completed":
        words = f"{outcome}: {words}"
    document: dict[str, Any] = {
        "outcome": outcome,
        "kept": {"count": included_count, "tokens": included_tokens},
        "dropped": {"count": excluded_count, "reasons": reasons}}
    lists = [("dropped_items", dropped, excluded_count, True),
             ("kept_items", kept, included_count, False)]
    document["more"] = more_hint(trace_id)
    shown_items(document, lists, capture, cap, tokens, _Sizes(words))
    document["more"] = document.pop("more")  # last: after the lists it completes
    text = _worded(words, document)
    return text if len(text.encode("utf-8")) <= cap else _worded(
        words[:cap // 2], {"outcome": outcome, "note": "counts exceed the output.value cap"})


def stage_input_value(stage: str, items_in: int) -> str:
    """A stage span's input: how many items the stage was given."""
    return _encode({"summary": f"{stage}: {items_in:,} items in", "stage": stage,
                    "in": items_in}).decode("utf-8")


def stage_output_value(*, stage: str, items_in: int | None, items_out: int | None,
                       duration_ms: float | None, dropped: Sequence[ItemEventBatch] | None,
                       capture: ContentCapture, cap: int, trace_id: str | None,
                       tokens: Mapping[int, Sequence[int]] | None = None) -> str:
    """A stage span's output. ``dropped`` None (the StageOnly tier, which knows only the
    counts): the counts in and out. Otherwise also the stage's decisions by reason and
    its dropped items, the largest first, while the JSON stays within ``cap`` bytes,
    saying how many it shows of how many and the command that shows the rest."""
    words = f"{stage}: {items_in:,} in, {items_out:,} out" if (
        items_in is not None and items_out is not None) else f"{stage}: not completed"
    document: dict[str, Any] = {"summary": words, "stage": stage, "in": items_in,
                                "out": items_out}
    if duration_ms is not None:
        document["duration_ms"] = _shown_number(duration_ms)
    held: Sequence[ItemEventBatch] = dropped or ()
    reasons = reason_counts(held)
    count = sum(reasons.values())
    if count:  # (a stage that dropped nothing has nothing to list)
        document["summary"] = words + f"; dropped {count:,}: " + ", ".join(
            f"{n:,} {reason_word(name)}" for name, n in reasons.items())
        document["dropped"] = {"count": count, "reasons": reasons}
        document["more"] = more_hint(trace_id)
        shown_items(document, [("dropped_items", held, count, True)], capture, cap, tokens)
        document["more"] = document.pop("more")
    text = _encode(document).decode("utf-8")
    return text if len(text.encode("utf-8")) <= cap else _encode(
        {"summary": words, "note": "counts exceed the output.value cap"}).decode("utf-8")


def stage_output_from(written: Mapping[str, Any], completion: Mapping[str, Any] | None, *,
                      dropped: Sequence[ItemEventBatch] | None, capture: ContentCapture,
                      cap: int, trace_id: str | None,
                      tokens: Mapping[int, Sequence[int]] | None = None) -> str:
    """:func:`stage_output_value` from a stage span's attributes as written when it
    started (``written``) and as its ``stage_completed`` event carries them
    (``completion``; None when the stage never completed): a value of the wrong type
    is left out rather than shown."""
    done = completion or {}
    duration = done.get(STAGE_DURATION)
    items_in, items_out = done.get(STAGE_IN, written.get(STAGE_IN)), done.get(STAGE_OUT)
    return stage_output_value(
        stage=str(written.get(STAGE_NAME, "")),
        items_in=items_in if type(items_in) is int else None,
        items_out=items_out if type(items_out) is int else None,
        duration_ms=duration if type(duration) is float else None,
        dropped=dropped, capture=capture, cap=cap, trace_id=trace_id, tokens=tokens)
