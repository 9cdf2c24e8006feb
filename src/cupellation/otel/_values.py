"""The root span's ``input.value`` / ``output.value``: what LLM trace tools (Phoenix,
Langfuse, MLflow) show in their input and output panes, read by exact key.

Both are compact JSON (``input.mime_type`` / ``output.mime_type`` =
``application/json``) of at most ``cap`` UTF-8 bytes (2,048 by default, Tempo's
``max_attribute_bytes``: these keys cannot be split). The input holds the budget
and the candidates' count and tokens. The output holds the outcome, the kept and
dropped counts and tokens and every exclusion reason's count in full, then the
first kept and dropped items by score (candidate index, kind, tokens, score,
reason and its numbers; content per the capture policy: none under ``none``, the
digest under ``hash``, at most 160 characters under ``full``) while they fit.

The application's ``session.id``, ``user.id`` and ``gen_ai.conversation.id`` go on
the root from the run's :class:`~cupellation.RunInfo`, or else from the
OpenTelemetry context keys ``session.id`` / ``user.id`` that OpenInference's
``using_session`` / ``using_user`` helpers set.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

import msgspec
from opentelemetry import context as otel_context

from ..events import ContentCapture, ItemEventBatch, RunStarted, content_digest
from ..reasons import KNOWN_EXCLUSION_REASONS, reason_fields

__all__ = [
    "DEFAULT_VALUE_CAP",
    "INPUT_MIME",
    "JSON_MIME",
    "INPUT_VALUE",
    "OUTPUT_MIME",
    "OUTPUT_VALUE",
    "identity_attributes",
    "input_value",
    "output_value",
]

INPUT_VALUE: Final = "input.value"
INPUT_MIME: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME: Final = "output.mime_type"
JSON_MIME: Final = "application/json"
#: The default cap on each value, in UTF-8 bytes.
DEFAULT_VALUE_CAP: Final = 2048
#: Content shown per item under ``full`` capture, in characters.
_CONTENT_CHARS: Final = 160
#: Items considered for each list (the first by score).
_CONSIDERED: Final = 64

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


def input_value(started: RunStarted) -> str:
    """The run's input: its budget and candidates."""
    budget = started.budget
    return _encode({
        "budget": {"max_tokens": budget.max_tokens, "target_tokens": budget.target_tokens,
                   "output_reserve": budget.output_reserve},
        "candidates": {"count": started.candidate_count, "tokens": started.candidate_tokens},
        "tier": started.detail_level,
    }).decode("utf-8")


def _item(index: int, item: Any, score: float, reason: Any,
          capture: ContentCapture) -> dict[str, Any]:
    out: dict[str, Any] = {"index": index, "kind": item.kind.value, "tokens": item.tokens,
                           "score": score, "reason": reason.name}
    if item.original_tokens is not None:  # trimmed: what it counted before
        out["original_tokens"] = item.original_tokens
    fields = reason_fields(reason)
    if fields:
        out.update({k: v for k, v in fields.items() if k not in out})
    if capture is ContentCapture.FULL:
        content = item.content
        out["content"] = (content if len(content) <= _CONTENT_CHARS
                          else content[:_CONTENT_CHARS] + "…")
    elif capture is ContentCapture.HASH:
        out["content"] = content_digest(item.content)
    return out


def _top(batches: Sequence[ItemEventBatch]) -> list[tuple[float, int, int, int]]:
    """(score, -order, batch, position) of the first items by score (ties in the
    order the items came; NaN scores never shown)."""
    out: list[tuple[float, int, int, int]] = []
    order = 0
    for b, batch in enumerate(batches):
        scores = batch.scores
        ranked = sorted(range(len(scores)), key=scores.__getitem__, reverse=True)
        if any(map(math.isnan, scores)):
            ranked = [k for k in ranked if not math.isnan(scores[k])]
        out.extend((scores[k], -(order + k), b, k) for k in ranked[:_CONSIDERED])
        order += len(scores)
    out.sort(reverse=True)
    return out[:_CONSIDERED]


def output_value(*, outcome: str, included_count: int | None, included_tokens: int | None,
                 excluded_count: int | None, kept: Sequence[ItemEventBatch],
                 dropped: Sequence[ItemEventBatch], capture: ContentCapture,
                 cap: int) -> str:
    """The run's output: counts and reasons in full, then the first kept and dropped
    items by score while the JSON stays within ``cap`` bytes."""
    reasons: Counter[str] = Counter()
    for batch in dropped:
        for kind, count in Counter(map(type, batch.reasons)).items():
            if kind in _KNOWN:
                reasons[kind.__name__] += count  # a known variant is named by its class
            else:
                reasons.update(r.name for r in batch.reasons if type(r) is kind)
    document: dict[str, Any] = {
        "outcome": outcome,
        "kept": {"count": included_count, "tokens": included_tokens},
        "dropped": {"count": excluded_count, "reasons": dict(reasons.most_common())},
        "kept_items": [], "dropped_items": []}
    size = len(_encode(document))
    queues = []
    for key, batches in (("kept_items", kept), ("dropped_items", dropped)):
        top = _top(batches)
        queues.append((key, batches, top))
    shown = {"kept_items": 0, "dropped_items": 0}
    progress = True
    while progress:
        progress = False
        for key, batches, top in queues:
            if shown[key] >= len(top):
                continue
            score, _, b, k = top[shown[key]]
            batch = batches[b]
            entry = _item(batch.candidate_indices[k], batch.items[k], score,
                          batch.reasons[k], capture)
            extra = len(_encode(entry)) + (1 if shown[key] else 0)
            if size + extra > cap:
                continue
            document[key].append(entry)
            size += extra
            shown[key] += 1
            progress = True
    text = _encode(document).decode("utf-8")
    return text if len(text.encode("utf-8")) <= cap else _encode(
        {"outcome": outcome, "note": "counts exceed the output.value cap"}).decode("utf-8")
