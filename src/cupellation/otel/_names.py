"""Span, event and attribute names, and the mapping between the event stream's flat
form and span attributes.

The mapping is a thin adapter over :func:`cupellation.events.event_to_dict`: a
flat key ``k`` of an event becomes the attribute ``<namespace>.k``, except for
the few keys a small rename table sends to the OpenTelemetry chapter's names
(``budget.max_tokens`` -> ``cupel.budget.max_tokens``, ``detail_level`` ->
``cupel.verbosity``, ``items_in`` -> ``cupel.stage.item_count_in``, ...). Every
``*_attributes`` function here has a ``*_flat`` inverse; the decoder uses only
those, so whatever the encoder writes it reads back.

Carriers:

- the root span ``cupel.pipeline`` holds ``run_started`` and the run's end
  (``run_completed`` or ``run_failed``) under ``cupel.run.*`` (plus
  ``cupel.budget.*``, ``cupel.verbosity``, ``cupel.schema``);
- a stage span ``cupel.stage.<stage>`` holds its ``stage_started`` and
  ``stage_completed`` under ``cupel.stage.*``; a stage without a span (Sort)
  is one root span event named ``cupel.stage.<stage>`` with the same attributes;
- item decisions are span events (the events layout): ``cupel.exclusion`` on the
  span of the stage that made the decision, ``cupel.item.included`` on the root
  after Place; the columns layout (:mod:`._columns`) writes the same attributes as
  columns on the same spans;
- ``overflow`` and ``count_shortfall`` are span events ``cupel.overflow`` and
  ``cupel.count_shortfall`` (``cupel.event`` for a type this version does not
  know) on the span of the stage they happened in.

Every span also carries ``cupel.run.id``, and ``cupel.check.attribute_count`` and
``cupel.check.text_length`` (how many ``cupel.*`` attributes, and how many
characters of string values, cupellation wrote on the span and its events) so a
decoder can tell attributes that were dropped or truncated on the way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from ..events import EVENT_SCHEMA_VERSION, PipelineStage
from ..events._flat import flat_keys
from ..reasons import KNOWN_EXCLUSION_REASONS

# -- names ------------------------------------------------------------------------

__all__ = [
    "ALL_STAGES",
    "BACKEND_ATTRIBUTES",
    "CHECK_COUNT",
    "CHECK_TEXT",
    "EVENT_TYPES",
    "EXCLUSION_ATTRIBUTES",
    "EXCLUSION_COUNT",
    "EXCLUSION_EVENT",
    "INCLUDED_ATTRIBUTES",
    "INCLUDED_EVENT",
    "LIST_ATTRIBUTES",
    "OTHER_ATTRIBUTES",
    "OTHER_EVENT",
    "OUTCOME",
    "ROOT_ATTRIBUTES",
    "ROOT_SPAN",
    "RUN_ID",
    "SCOPE_NAME",
    "SPAN_STAGES",
    "STAGE_ATTRIBUTES",
    "STAGE_DURATION",
    "STAGE_END_SEQ",
    "STAGE_EXACT",
    "STAGE_IN",
    "STAGE_NAME",
    "STAGE_OUT",
    "STAGE_PREFIX",
    "STAGE_START_SEQ",
    "UTILIZATION",
    "check_totals",
    "exclusion_attributes",
    "exclusion_flat",
    "exclusion_head",
    "exclusion_key",
    "included_attributes",
    "included_flat",
    "included_head",
    "included_key",
    "list_value",
    "other_attributes",
    "other_event_name",
    "other_flat",
    "reason_field_attribute",
    "run_attributes",
    "run_flat",
    "share_item_fields",
    "shares_item_field",
    "stage_attributes",
    "stage_flat",
    "stage_from_label",
    "stage_label",
    "stage_span_name",
]

SCOPE_NAME: Final = "cupellation"
ROOT_SPAN: Final = "cupel.pipeline"
STAGE_PREFIX: Final = "cupel.stage."
EXCLUSION_EVENT: Final = "cupel.exclusion"
INCLUDED_EVENT: Final = "cupel.item.included"
OTHER_EVENT: Final = "cupel.event"
#: Span events of the other event types, by type.
EVENT_NAMES: Final[Mapping[str, str]] = {
    "overflow": "cupel.overflow",
    "count_shortfall": "cupel.count_shortfall",
}
EVENT_TYPES: Final[Mapping[str, str]] = {name: t for t, name in EVENT_NAMES.items()}

#: The chapter's five stages, in order: each gets a span. Sort does not.
SPAN_STAGES: Final = (PipelineStage.CLASSIFY, PipelineStage.SCORE, PipelineStage.DEDUPLICATE,
                      PipelineStage.SLICE, PipelineStage.PLACE)
#: Every stage in pipeline order (to tell which spans a failed run should have).
ALL_STAGES: Final = (PipelineStage.CLASSIFY, PipelineStage.SCORE, PipelineStage.DEDUPLICATE,
                     PipelineStage.SORT, PipelineStage.SLICE, PipelineStage.PLACE)

RUN_ID: Final = "cupel.run.id"
SCHEMA: Final = "cupel.schema"
VERBOSITY: Final = "cupel.verbosity"
OUTCOME: Final = "cupel.run.outcome"
RUN_START_SEQ: Final = "cupel.run.start_seq"
RUN_END_SEQ: Final = "cupel.run.end_seq"
STAGE_NAME: Final = "cupel.stage.name"
#: A stage name lowercasing would not give back (one this version does not know).
STAGE_EXACT: Final = "cupel.stage.exact_name"
STAGE_IN: Final = "cupel.stage.item_count_in"
STAGE_OUT: Final = "cupel.stage.item_count_out"
STAGE_START_SEQ: Final = "cupel.stage.start_seq"
STAGE_END_SEQ: Final = "cupel.stage.end_seq"
STAGE_DURATION: Final = "cupel.stage.duration_ms"
EXCLUSION_COUNT: Final = "cupel.exclusion.count"
UTILIZATION: Final = "cupel.budget.utilization"
CHECK_COUNT: Final = "cupel.check.attribute_count"
CHECK_TEXT: Final = "cupel.check.text_length"

GEN_AI_OPERATION: Final = "gen_ai.operation.name"
GEN_AI_OPERATION_VALUE: Final = "select_context"
OPENINFERENCE_KIND: Final = "openinference.span.kind"
OPENINFERENCE_KIND_VALUE: Final = "CHAIN"
#: Attributes on every span for backends that look for them (not decoded).
BACKEND_ATTRIBUTES: Final[Mapping[str, str]] = {
    GEN_AI_OPERATION: GEN_AI_OPERATION_VALUE,
    OPENINFERENCE_KIND: OPENINFERENCE_KIND_VALUE,
}

#: Attributes derived from others, for people and dashboards: the decoder skips them.
DERIVED: Final = frozenset({EXCLUSION_COUNT, UTILIZATION, CHECK_COUNT, CHECK_TEXT})

#: Attributes whose value is a list: a backend without list values (Jaeger) turns them
#: into JSON text, which the readers turn back.
LIST_ATTRIBUTES: Final = frozenset({"cupel.item.tags", "cupel.overflow.item_indices"})

_ENVELOPE = frozenset({"schema", "type", "run_id", "seq"})

# -- stages -------------------------------------------------------------------------

_STAGE_BY_LABEL = {stage.value.lower(): stage.value for stage in PipelineStage}


def stage_label(stage: PipelineStage | str) -> str:
    """A stage as the chapter writes it: lowercase (``"slice"``)."""
    return (stage.value if isinstance(stage, PipelineStage) else stage).lower()


def stage_from_label(label: str) -> str:
    """The flat form's stage name for a lowercase label (``"slice"`` -> ``"Slice"``);
    a label this version does not know is kept as it is."""
    return _STAGE_BY_LABEL.get(label, label)


def stage_span_name(stage: PipelineStage | str) -> str:
    """``cupel.stage.<stage>``: a stage span's name, or a spanless stage's root event."""
    return STAGE_PREFIX + stage_label(stage)


# -- the root span: run_started and the run's end ------------------------------------


def run_attributes(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The root span attributes of ``run_started``, ``run_completed`` or ``run_failed``."""
    kind = flat["type"]
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key == "type":
            if kind != "run_started":
                out[OUTCOME] = "completed" if kind == "run_completed" else "failed"
        elif key == "schema":
            out[SCHEMA] = value
        elif key == "run_id":
            out[RUN_ID] = value
        elif key == "seq":
            out[RUN_START_SEQ if kind == "run_started" else RUN_END_SEQ] = value
        elif key == "detail_level":
            out[VERBOSITY] = value
        elif key.startswith("budget."):
            out["cupel." + key] = value
        else:
            out["cupel.run." + key] = value
    return out


def run_flat(attributes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The flat ``run_started`` and run end found in a root span's attributes (either
    may be absent: a missing seq or outcome means the event was not recorded)."""
    common: dict[str, Any] = {}
    start_seq = end_seq = outcome = None
    for name, value in attributes.items():
        if name in DERIVED:
            continue
        if name == SCHEMA:
            common["schema"] = value
        elif name == RUN_ID:
            common["run_id"] = value
        elif name == VERBOSITY:
            common["detail_level"] = value
        elif name == RUN_START_SEQ:
            start_seq = value
        elif name == RUN_END_SEQ:
            end_seq = value
        elif name == OUTCOME:
            outcome = value
        elif name.startswith("cupel.budget."):
            common[name[6:]] = value
        elif name.startswith("cupel.run."):
            common[name[10:]] = value
    found = []
    if start_seq is not None:
        found.append({**common, "type": "run_started", "seq": start_seq})
    if outcome is not None:
        kind = {"completed": "run_completed", "failed": "run_failed"}.get(
            outcome if isinstance(outcome, str) else "")
        found.append({**common, "type": kind if kind is not None else f"run_{outcome}",
                      "seq": end_seq})
    return found


# -- stage spans: stage_started and stage_completed ----------------------------------


def stage_attributes(flat: Mapping[str, Any]) -> dict[str, Any]:
    """The stage span attributes of ``stage_started`` or ``stage_completed``."""
    started = flat["type"] == "stage_started"
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key in ("type", "schema"):
            continue
        if key == "run_id":
            out[RUN_ID] = value
        elif key == "seq":
            out[STAGE_START_SEQ if started else STAGE_END_SEQ] = value
        elif key == "stage":
            out[STAGE_NAME] = stage_label(value)
            if stage_from_label(out[STAGE_NAME]) != value:  # not invertible: keep it as is
                out[STAGE_EXACT] = value
        elif key == "items_in":
            out[STAGE_IN] = value
        elif key == "items_out":
            out[STAGE_OUT] = value
        else:
            out["cupel.stage." + key] = value
    return out


def stage_flat(attributes: Mapping[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The flat ``stage_started`` and ``stage_completed`` found on a stage span (or a
    spanless stage's root event) of run ``run_id``."""
    common: dict[str, Any] = {"schema": EVENT_SCHEMA_VERSION, "run_id": run_id}
    start_seq = end_seq = None
    for name, value in attributes.items():
        if name in DERIVED or name == RUN_ID:
            continue
        if name == STAGE_START_SEQ:
            start_seq = value
        elif name == STAGE_END_SEQ:
            end_seq = value
        elif name == STAGE_NAME:
            common.setdefault("stage", stage_from_label(value) if isinstance(value, str)
                              else value)
        elif name == STAGE_EXACT:
            common["stage"] = value
        elif name == STAGE_IN:
            common["items_in"] = value
        elif name == STAGE_OUT:
            common["items_out"] = value
        elif name.startswith("cupel.stage."):
            common[name[12:]] = value
    found = []
    if start_seq is not None:
        found.append({**common, "type": "stage_started", "seq": start_seq})
    if end_seq is not None:
        found.append({**common, "type": "stage_completed", "seq": end_seq})
    return found


# -- item events -----------------------------------------------------------------------

#: Names in the ``cupel.exclusion.`` namespace that are not reason fields: a reason
#: field of one of these names goes under ``cupel.exclusion.reason.<field>``.
_EXCLUSION_OWN = frozenset({"reason", "item_kind", "item_tokens", "candidate_index", "score",
                            "seq", "stage", "count"})
#: Reason fields that repeat an item field: written once, as the item's, when a known
#: reason declares the field and the values agree (BudgetExceeded.item_tokens).
_SHARED = {"item_tokens": "item.tokens"}
_KNOWN_REASON_FIELDS: dict[str, frozenset[str]] = {
    name: frozenset(cls.__struct_fields__) for name, cls in KNOWN_EXCLUSION_REASONS.items()}
_EXCLUSION_RENAMES = {
    "reason.name": "cupel.exclusion.reason",
    "item.kind": "cupel.exclusion.item_kind",
    "item.tokens": "cupel.exclusion.item_tokens",
    "candidate_index": "cupel.exclusion.candidate_index",
    "score": "cupel.exclusion.score",
    "seq": "cupel.exclusion.seq",
    "stage": "cupel.exclusion.stage",
}
_EXCLUSION_BACK = {name: key for key, name in _EXCLUSION_RENAMES.items()}


def reason_field_attribute(field: str) -> str:
    """Where an exclusion reason's field goes (``available_tokens`` ->
    ``cupel.exclusion.available_tokens``)."""
    if field in _EXCLUSION_OWN or field.startswith("reason."):
        return "cupel.exclusion.reason." + field
    return "cupel.exclusion." + field


def shares_item_field(reason_name: str, field: str) -> bool:
    """True when ``field`` of a known reason is written once with the item's value."""
    return field in _SHARED and field in _KNOWN_REASON_FIELDS.get(reason_name, ())


def exclusion_attributes(flat: Mapping[str, Any], carrier_stage: str | None,
                         keep_content: bool) -> dict[str, Any]:
    """A ``cupel.exclusion`` event's attributes from an ``item_excluded`` flat mapping.

    ``carrier_stage`` is the flat stage name of the span the event goes on (the
    stage is written only when it differs); ``keep_content`` is False under
    ``none`` capture, whose placeholder content is left out (the decoder makes it
    again from the candidate index).
    """
    out: dict[str, Any] = {}
    reason_name = flat.get("reason.name", "")
    for key, value in flat.items():
        if key in _ENVELOPE and key != "seq":
            continue
        renamed = _EXCLUSION_RENAMES.get(key)
        if renamed is not None:
            if key != "stage" or value != carrier_stage:
                out[renamed] = value
        elif key.startswith("item."):
            if key != "item.content" or keep_content:
                out["cupel." + key] = value
        elif key.startswith("reason."):
            field = key[7:]
            if shares_item_field(reason_name, field) and flat.get(_SHARED[field]) == value:
                continue
            out[reason_field_attribute(field)] = value
        else:
            out["cupel.exclusion." + key] = value  # pragma: no cover - no such key today
    return out


def exclusion_key(name: str) -> str | None:
    """The flat key an attribute of a ``cupel.exclusion`` event decodes to (None: it
    holds no field of the event)."""
    key = _EXCLUSION_BACK.get(name)
    if key is not None:
        return key
    if name.startswith("cupel.exclusion.reason."):
        return "reason." + name[23:]
    if name.startswith("cupel.exclusion."):
        return None if name in DERIVED else "reason." + name[16:]
    if name.startswith("cupel.item."):
        return name[6:]
    return None


def exclusion_head(run_id: str, carrier_stage: str | None) -> dict[str, Any]:
    """The members of a flat ``item_excluded`` that no attribute carries."""
    flat: dict[str, Any] = {"schema": EVENT_SCHEMA_VERSION, "type": "item_excluded",
                            "run_id": run_id}
    if carrier_stage is not None:
        flat["stage"] = carrier_stage
    return flat


def share_item_fields(flat: dict[str, Any]) -> dict[str, Any]:
    """Fill the reason fields the encoder left out because they equal the item's."""
    reason_name = flat.get("reason.name")
    if isinstance(reason_name, str):
        for field, item_key in _SHARED.items():
            if (shares_item_field(reason_name, field) and "reason." + field not in flat
                    and item_key in flat):
                flat["reason." + field] = flat[item_key]
    return flat


def exclusion_flat(attributes: Mapping[str, Any], run_id: str,
                   carrier_stage: str | None) -> dict[str, Any]:
    """The flat ``item_excluded`` of a ``cupel.exclusion`` event (content may be
    missing: see :func:`exclusion_attributes`)."""
    flat = exclusion_head(run_id, carrier_stage)
    for name, value in attributes.items():
        key = exclusion_key(name)
        if key is not None:
            flat[key] = value
    return share_item_fields(flat)


_INCLUDED_OWN = ("candidate_index", "position", "score", "seq")


def included_attributes(flat: Mapping[str, Any], keep_content: bool) -> dict[str, Any]:
    """A ``cupel.item.included`` event's attributes from an ``item_included`` flat mapping."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if key in _ENVELOPE and key != "seq":
            continue
        if key == "reason.name":
            out["cupel.item.reason"] = value
        elif key.startswith("item."):
            if key != "item.content" or keep_content:
                out["cupel." + key] = value
        elif key.startswith("reason."):
            out["cupel.item." + key] = value
        else:
            out["cupel.item." + key] = value
    return out


def included_key(name: str) -> str | None:
    """The flat key an attribute of a ``cupel.item.included`` event decodes to (None: it
    holds no field of the event)."""
    if not name.startswith("cupel.item."):
        return None
    rest = name[11:]
    if rest == "reason":
        return "reason.name"
    if rest.startswith("reason.") or rest in _INCLUDED_OWN:
        return rest
    return "item." + rest


def included_head(run_id: str) -> dict[str, Any]:
    """The members of a flat ``item_included`` that no attribute carries."""
    return {"schema": EVENT_SCHEMA_VERSION, "type": "item_included", "run_id": run_id}


def included_flat(attributes: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The flat ``item_included`` of a ``cupel.item.included`` event."""
    flat = included_head(run_id)
    for name, value in attributes.items():
        key = included_key(name)
        if key is not None:
            flat[key] = value
    return flat


# -- other events ----------------------------------------------------------------------


def other_event_name(event_type: str) -> str:
    """The span event name of an overflow, a count shortfall or an unknown event."""
    return EVENT_NAMES.get(event_type, OTHER_EVENT)


def other_attributes(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes of a ``cupel.overflow``, ``cupel.count_shortfall`` or ``cupel.event``."""
    kind = flat["type"]
    prefix = other_event_name(kind) + "."
    out: dict[str, Any] = {}
    if kind not in EVENT_NAMES:
        out[prefix + "type"] = kind
    for key, value in flat.items():
        if key in _ENVELOPE and key != "seq":
            continue
        out[prefix + key] = value
    return out


def other_flat(name: str, attributes: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """The flat event of a ``cupel.overflow``, ``cupel.count_shortfall`` or ``cupel.event``."""
    prefix = name + "."
    flat: dict[str, Any] = {"schema": EVENT_SCHEMA_VERSION, "run_id": run_id}
    kind = EVENT_TYPES.get(name)
    if kind is not None:
        flat["type"] = kind
    for attribute, value in attributes.items():
        if attribute.startswith(prefix):
            flat[attribute[len(prefix):]] = value
    return flat


# -- integrity checks --------------------------------------------------------------------


def check_totals(attributes: Mapping[str, Any]) -> tuple[int, int]:
    """How many ``cupel.*`` attributes (the checks themselves aside) and how many
    characters of string values (list elements included) ``attributes`` holds."""
    count = length = 0
    for name, value in attributes.items():
        if not name.startswith("cupel.") or name in (CHECK_COUNT, CHECK_TEXT):
            continue
        count += 1
        if type(value) is str:
            length += len(value)
        elif isinstance(value, list | tuple):
            length += sum(len(v) for v in value if type(v) is str)
    return count, length


def list_value(value: Any) -> Any:
    """A list attribute that arrived as JSON text (Jaeger) as the list it was."""
    if isinstance(value, str) and value.startswith("["):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        if isinstance(parsed, list):
            return parsed
    return value


# -- what the encoder may write (every other cupel.* attribute is flagged) ----------------


def _written(mapper: Any, *event_types: str) -> frozenset[str]:
    """The attribute names ``mapper`` gives the flat keys of ``event_types`` (every
    key the declarations allow, with placeholder values)."""
    names: set[str] = set()
    for event_type in event_types:
        flat: dict[str, Any] = dict.fromkeys(sorted(flat_keys(event_type) or ()), "")
        flat["type"] = event_type
        if "stage" in flat:
            flat["stage"] = "Slice"
        names.update(mapper(flat))
    return frozenset(names)


_CHECKS: Final = frozenset({CHECK_COUNT, CHECK_TEXT})
#: The cupel.* attributes of the root span, a stage span (or a spanless stage's root
#: event), and each kind of span event.
ROOT_ATTRIBUTES: Final = _written(run_attributes, "run_started", "run_completed",
                                  "run_failed") | {UTILIZATION} | _CHECKS
STAGE_ATTRIBUTES: Final = _written(stage_attributes, "stage_started", "stage_completed") | {
    STAGE_EXACT, EXCLUSION_COUNT} | _CHECKS
EXCLUSION_ATTRIBUTES: Final = (
    _written(lambda flat: exclusion_attributes(flat, None, True), "item_excluded")
    | {"cupel.exclusion.stage"})
INCLUDED_ATTRIBUTES: Final = _written(lambda flat: included_attributes(flat, True),
                                      "item_included")
OTHER_ATTRIBUTES: Final[Mapping[str, frozenset[str]]] = {
    name: _written(other_attributes, event_type) for event_type, name in EVENT_NAMES.items()}
