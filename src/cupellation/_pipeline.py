"""The fixed six-stage pipeline (``spec/src/pipeline*``): Classify, Score,
Deduplicate, Sort, Slice, Place — emitting the event stream as it runs.

:class:`Pipeline` holds and checks the configuration and traces each run (its id,
``run_failed``); :class:`PreparedCandidates` keeps the budget-free stages' results
for dry runs. The stages themselves are ``_run.Run``'s.

:class:`Policy` (public as :class:`cupellation.policy.Policy`) is the same
configuration as a value a file can hold; it lives here because a pipeline and its
policy convert into each other (:meth:`Pipeline.policy`, :meth:`Policy.build_pipeline`,
:meth:`Pipeline.from_policy`), and :func:`configuration_table` is the one table both
write, which :meth:`Pipeline.describe` records as ``run_started.pipeline``."""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from ._attribution import Merged, Pinned, Sliced
from ._collectors import (
    NULL_COLLECTOR,
    DiagnosticTraceCollector,
    TraceCollector,
    TraceDetailLevel,
    check_collector,
)
from ._fused import fused_run
from ._model import ContextBudget, ContextItem, OverflowStrategy
from ._policytext import parse_document
from ._registry import (
    budget_from_dict,
    budget_to_dict,
    build_placer,
    build_scorer,
    build_slicer,
    check_strategy,
    check_text,
    describe_placer,
    describe_scorer,
    describe_slicer,
    find_custom,
    strategy_json,
)
from ._report import SelectionReport
from ._run import Run, candidate_sequence
from ._tables import bool_value, built, check_keys, table, text_value
from ._toml import dumps as toml_dumps
from .events import RunFailed, RunInfo
from .exceptions import (
    ConfigurationError,
    CustomStrategyError,
    DecodeError,
    InvalidTypeError,
    InvalidValueError,
    PinnedBudgetError,
)
from .placing import ChronologicalPlacer, Placer
from .scoring import Clock, Scorer
from .slicing import GreedySlice, SliceOutcome, Slicer
from .slicing._greedy import greedy_density_order, greedy_take

__all__ = ["Pipeline", "Policy", "PreparedCandidates", "configuration_table"]

_logger = logging.getLogger("cupellation")

#: The keys of a recorded policy (``run_started.pipeline``, :meth:`Pipeline.describe`),
#: in the record's order.
_RECORD_KEYS = ("scorer", "slicer", "placer", "deduplication", "overflow_strategy")
#: The record's keys whose value is a strategy (JSON text in the record).
_STRATEGY_KEYS = ("scorer", "slicer", "placer")
#: The keys of a policy file (:meth:`Policy.to_dict`), in its order.
_POLICY_KEYS = ("name", "description", "deduplication", "overflow_strategy", "scorer",
                "slicer", "placer", "budget")

_TOKENS = attrgetter("tokens")


@dataclass(frozen=True, slots=True, init=False)
class Pipeline:
    """A configured Cupel pipeline: immutable, reusable and safe to share.

    Configure it once, then call :meth:`run` per request with the candidates,
    optionally a budget (overriding ``budget``) and a collector::

        pipeline = Pipeline(scorer=RecencyScorer(), budget=ContextBudget(8000, 6000))
        window = pipeline.run(candidates)

    ``slicer`` defaults to :class:`GreedySlice`, ``placer`` to
    :class:`ChronologicalPlacer`; ``with_*`` methods return modified copies.

    .. versionchanged:: 0.4
       One form of each configuration: :meth:`policy` returns a ``Policy`` and
       :meth:`from_policy` takes one (``Pipeline.from_policy(policy) ==
       policy.build_pipeline()``).
    """

    scorer: Scorer
    slicer: Slicer
    placer: Placer
    deduplication: bool
    overflow_strategy: OverflowStrategy
    budget: ContextBudget | None
    #: describe()'s answer, made when first asked: the strategies are immutable.
    _description: Mapping[str, str | bool] | None = field(init=False, repr=False,
                                                          compare=False)

    def __init__(
        self,
        scorer: Scorer,
        slicer: Slicer | None = None,
        placer: Placer | None = None,
        *,
        deduplication: bool = True,
        overflow_strategy: OverflowStrategy | str = OverflowStrategy.THROW,
        budget: ContextBudget | None = None,
    ) -> None:
        slicer = GreedySlice() if slicer is None else slicer
        placer = ChronologicalPlacer() if placer is None else placer
        for name, strategy in (("scorer", scorer), ("slicer", slicer), ("placer", placer)):
            if isinstance(strategy, type):
                raise ConfigurationError(name, strategy,
                                         f"pass an instance: {strategy.__name__}()")
        if not callable(getattr(scorer, "score_all", None)):
            raise ConfigurationError("scorer", scorer, "must have a score_all(items) method")
        if not callable(getattr(slicer, "slice", None)):
            raise ConfigurationError("slicer", slicer, "must have a slice(scored, budget) method")
        if not callable(getattr(placer, "place", None)):
            raise ConfigurationError("placer", placer, "must have a place(items) method")
        if not isinstance(deduplication, bool):
            raise InvalidTypeError("deduplication", deduplication, "a bool")
        if budget is not None and not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget or None")
        set_ = object.__setattr__
        set_(self, "scorer", scorer)
        set_(self, "slicer", slicer)
        set_(self, "placer", placer)
        set_(self, "deduplication", deduplication)
        set_(self, "overflow_strategy", OverflowStrategy.parse(overflow_strategy))
        set_(self, "budget", budget)
        set_(self, "_description", None)

    @classmethod
    def from_policy(cls, policy: Policy | Mapping[str, Any], *,
                    budget: ContextBudget | None = None, clock: Clock | None = None
                    ) -> Pipeline:
        """The pipeline ``policy`` describes: a :class:`~cupellation.policy.Policy`,
        or a recorded one, ``run_started``'s ``pipeline`` mapping (each strategy as
        JSON text, see :meth:`describe`) or the same with each strategy as a table;
        the inverse of :meth:`policy` and :meth:`describe`.

        ``budget`` becomes the pipeline's default budget; without it, a
        :class:`~cupellation.policy.Policy`'s own budget does
        (``Pipeline.from_policy(policy) == policy.build_pipeline()``), and a record's
        none (the record carries the run's budget separately). ``clock`` is the time
        provider of decay scorers whose table has no ``reference_time`` (default: the
        wall clock): such a scorer measured ages at the time of its run, which the
        record does not fix (``run_started.started_at`` is a good choice:
        ``clock=FixedClock(started_at)``).

        Only built-in strategies can be rebuilt: a custom one (a
        :class:`~cupellation.scoring.FunctionScorer`, a user's own slicer),
        recorded as ``{"type": "custom", "repr": ...}``, raises
        :class:`~cupellation.exceptions.CustomStrategyError` naming its path
        (``pipeline.scorer.children[1]``) and its repr. Other damage raises
        :class:`~cupellation.exceptions.DecodeError` (text that is not JSON) or
        ``InvalidValueError`` / ``InvalidTypeError`` naming the path.
        """
        if isinstance(policy, Policy):
            return policy.build_pipeline(budget, clock=clock)
        data = table(policy, "pipeline")
        check_keys(data, "pipeline", _RECORD_KEYS, _RECORD_KEYS)
        return cls(
            build_scorer(_strategy_table(data, "scorer"), path="pipeline.scorer", clock=clock),
            build_slicer(_strategy_table(data, "slicer"), path="pipeline.slicer"),
            build_placer(_strategy_table(data, "placer"), path="pipeline.placer"),
            deduplication=bool_value(data["deduplication"], "pipeline.deduplication"),
            overflow_strategy=built("pipeline", lambda: OverflowStrategy.parse(
                data["overflow_strategy"])),
            budget=budget,
        )

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Rebuilt through __init__ (describe()'s cached mapping proxy cannot be
        # pickled, and is made again when asked).
        return (_rebuilt_pipeline, (self.scorer, self.slicer, self.placer, self.deduplication,
                                    self.overflow_strategy, self.budget))

    # -- configuration ------------------------------------------------------------

    def with_budget(self, budget: ContextBudget) -> Pipeline:
        """A copy with ``budget`` as the default budget."""
        return replace(self, budget=budget)

    def with_scorer(self, scorer: Scorer) -> Pipeline:
        """A copy with another scorer."""
        return replace(self, scorer=scorer)

    def with_slicer(self, slicer: Slicer) -> Pipeline:
        """A copy with another slicer."""
        return replace(self, slicer=slicer)

    def with_placer(self, placer: Placer) -> Pipeline:
        """A copy with another placer."""
        return replace(self, placer=placer)

    def with_overflow_strategy(self, strategy: OverflowStrategy | str) -> Pipeline:
        """A copy with another overflow strategy."""
        return replace(self, overflow_strategy=OverflowStrategy.parse(strategy))

    def with_deduplication(self, enabled: bool) -> Pipeline:
        """A copy with deduplication switched on or off."""
        return replace(self, deduplication=enabled)

    def describe(self) -> Mapping[str, str | bool]:
        """The configuration as ``run_started`` records it (a read-only mapping): the
        table :meth:`policy` holds, with each strategy's table as JSON text.

        ``scorer``, ``slicer`` and ``placer`` are each strategy's table
        (``to_dict()``) as compact JSON text with sorted keys, such as
        ``{"children":[{"type":"recency","weight":3.0},...],"type":"composite"}``;
        a strategy that is not a built-in is recorded as ``{"type":"custom",
        "repr":...}`` (its repr, 200 characters at most). ``deduplication`` is a
        bool and ``overflow_strategy`` the strategy's name. :meth:`from_policy`
        rebuilds the pipeline from it. Unlike :meth:`policy`, it describes any
        pipeline, custom strategies included (a run must always be recorded).
        """
        description = self._description
        if description is None:
            tables = configuration_table(self)
            description = MappingProxyType({
                key: strategy_json(tables[key]) if key in _STRATEGY_KEYS else tables[key]
                for key in _RECORD_KEYS})
            object.__setattr__(self, "_description", description)
        return description

    def policy(self) -> Policy:
        """The configuration as a :class:`~cupellation.policy.Policy`, with the
        pipeline's budget: ``pipeline.policy().build_pipeline() == pipeline``, and
        ``pipeline.policy().to_toml()`` is its policy file.

        A policy holds built-in strategies only: a pipeline with a custom one (a
        :class:`~cupellation.scoring.FunctionScorer`, a user's own slicer, even
        nested) raises :class:`~cupellation.exceptions.CustomStrategyError` naming its
        path (``scorer.children[1]``) and its repr; :meth:`describe` records any
        pipeline. A setting no policy file can write (a decay scorer's own clock
        that is neither ``utc_now`` nor a ``FixedClock``) raises
        :class:`~cupellation.exceptions.InvalidValueError` naming it.
        """
        tables = configuration_table(self)
        for key in _STRATEGY_KEYS:
            found = find_custom(tables[key], key)
            if found is not None:
                raise CustomStrategyError(*found)
        return Policy(scorer=self.scorer, slicer=self.slicer, placer=self.placer,
                      deduplication=self.deduplication,
                      overflow_strategy=self.overflow_strategy, budget=self.budget)

    # -- running -------------------------------------------------------------------

    def dry_run(
        self, candidates: Iterable[ContextItem], budget: ContextBudget | None = None, *,
        run_info: RunInfo | None = None,
    ) -> SelectionReport:
        """Run with an Item-level diagnostic collector and return only the report.

        Errors (pinned items over budget, Throw overflow) still raise.
        """
        collector = DiagnosticTraceCollector(TraceDetailLevel.ITEM)
        self.run(candidates, budget, collector, run_info=run_info)
        return collector.build_report()

    def prepare(self, candidates: Iterable[ContextItem]) -> PreparedCandidates:
        """Run Classify, Score, Deduplicate and Sort once over ``candidates``, untraced,
        and keep their results, so that :meth:`PreparedCandidates.select` can slice
        the same candidates at many budgets (budget simulation's dry runs: the
        budget changes none of those four stages' results).

        Raises what :meth:`run` raises for bad candidates or a failing scorer.
        """
        return PreparedCandidates(self, candidates)

    def run(
        self,
        candidates: Iterable[ContextItem],
        budget: ContextBudget | None = None,
        collector: TraceCollector | None = None,
        *,
        run_info: RunInfo | None = None,
    ) -> list[ContextItem]:
        """Select and order the candidates that fit ``budget``; returns the window.

        ``budget`` defaults to the pipeline's own. ``collector`` receives the
        run's events (none are built for the default null collector); ``run_info``
        is copied into the run's ``run_started``.

        Raises :class:`~cupellation.exceptions.PinnedBudgetError` when pinned
        items alone exceed ``max_tokens - output_reserve``,
        :class:`~cupellation.exceptions.BudgetOverflowError` under the Throw
        strategy, :class:`~cupellation.exceptions.ScorerError` for scores that
        are NaN, infinite or not real numbers (text, ``None``),
        :class:`~cupellation.exceptions.PipelineError` for a slicer or placer
        that returns ``None`` or items it was not given, and
        :class:`~cupellation.exceptions.InvalidTypeError` for ``candidates``
        that are not an iterable of ContextItem. A failed run still emits
        ``run_failed`` (carrying the exception object) and then re-raises its
        own exception. A collector that raises never changes the outcome: the
        failure is logged once on the ``cupellation`` logger and that collector
        gets nothing more from the run.
        """
        resolved = budget if budget is not None else self.budget
        if resolved is None:
            raise ConfigurationError("budget", None, "pass a budget to run() or to Pipeline()")
        if not isinstance(resolved, ContextBudget):
            raise InvalidTypeError("budget", resolved, "a ContextBudget")
        if collector is None:
            collector = NULL_COLLECTOR
        elif collector is not NULL_COLLECTOR:
            check_collector("collector", collector)
        items = candidate_sequence(candidates)
        level = _level_of(collector)
        if level is None:
            # Nobody listens: a built-in configuration takes the fused path (_fused),
            # which returns None for anything it does not take.
            placed = None if run_info is not None and not isinstance(run_info, RunInfo) else (
                fused_run(self, items, resolved))
            if placed is not None:
                return placed
            return Run(self, items, resolved, collector, "", None, run_info).execute()
        run_id = _new_run_id()
        run = Run(self, items, resolved, collector, run_id, level, run_info)
        start = time.perf_counter()
        try:
            return run.execute()
        except BaseException as exc:
            if run.enabled:
                run.deliver((RunFailed(
                    run_id=run_id, seq=run.next_seq(), stage=run.stage,
                    error_type=type(exc).__name__, error_text=_error_text(exc),
                    duration_ms=(time.perf_counter() - start) * 1000.0,
                    exception=exc),))
            raise  # the run's own exception, whatever the collector did


class PreparedCandidates:
    """A pipeline's Classify, Score, Deduplicate and Sort results over fixed
    candidates (:meth:`Pipeline.prepare`): the part of a run that no budget changes.

    :meth:`select` then runs Slice and the Place stage's overflow handling at a
    given budget, untraced: the items a run at that budget includes, exactly as
    :meth:`Pipeline.run` would (the same stage code), before placement orders
    them. :meth:`run` also places them. ``dry_runs`` counts the calls of either.
    """

    __slots__ = ("_greedy_order", "_pinned_idx", "_pinned_items", "_pinned_tokens", "_ranked",
                 "candidates", "dry_runs", "pipeline")

    def __init__(self, pipeline: Pipeline, candidates: Iterable[ContextItem]) -> None:
        if not isinstance(pipeline, Pipeline):
            raise InvalidTypeError("pipeline", pipeline, "a Pipeline")
        items = candidate_sequence(candidates)
        self.pipeline = pipeline
        self.candidates = items
        self.dry_runs = 0
        run = Run(pipeline, items, ContextBudget(0, 0), NULL_COLLECTOR, "", None)
        pinned_items, pinned_idx, scoreable, scoreable_idx = run.classify()
        scores = run.score_stage(scoreable, scoreable_idx)
        survivors = run.deduplicate_stage(scoreable, scoreable_idx, scores)
        self._ranked = run.sort_stage(scoreable, scoreable_idx, scores, survivors)
        self._pinned_items = pinned_items
        self._pinned_idx = pinned_idx
        self._pinned_tokens: int = sum(map(_TOKENS, pinned_items))
        # GreedySlice's visiting order depends on the scores, not the budget: made
        # once, each dry run is only its take loop (the same functions it runs).
        self._greedy_order: list[int] | None = None
        if type(pipeline.slicer) is GreedySlice and self._ranked.items:
            self._greedy_order = greedy_density_order(self._ranked.tokens,
                                                      self._ranked.scores)

    @property
    def ranked(self) -> list[ContextItem]:
        """The scoreable candidates that survived deduplication, in score order."""
        return list(self._ranked.items)

    @property
    def pinned(self) -> list[ContextItem]:
        """The pinned candidates, in candidate order."""
        return list(self._pinned_items)

    def select(self, budget: ContextBudget) -> list[ContextItem]:
        """The items a run at ``budget`` includes: pinned ones first, then the sliced
        ones in score order (Place's input, after its overflow handling).

        Raises :class:`~cupellation.exceptions.PinnedBudgetError` and
        :class:`~cupellation.exceptions.BudgetOverflowError` as :meth:`Pipeline.run`
        does at that budget.
        """
        return self._merged(budget)[1].items

    def run(self, budget: ContextBudget) -> list[ContextItem]:
        """The window a run at ``budget`` returns: :meth:`select`'s items, placed."""
        run, merged = self._merged(budget)
        return run.place(merged)

    def _merged(self, budget: ContextBudget) -> tuple[Run, Merged]:
        if not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget")
        self.dry_runs += 1
        available = budget.max_tokens - budget.output_reserve
        if self._pinned_tokens > available:
            raise PinnedBudgetError(self._pinned_tokens, available)
        run = Run(self.pipeline, self.candidates, budget, NULL_COLLECTOR, "", None)
        pinned = Pinned(self._pinned_items, self._pinned_idx, self._pinned_tokens, budget)
        ranked = self._ranked
        if self._greedy_order is None:
            sliced = run.slice_stage(ranked, pinned)
        else:
            effective = budget.effective(pinned.tokens)
            target = effective.target_tokens
            chosen = greedy_take(self._greedy_order, ranked.tokens, target) if target > 0 else []
            chosen.sort()
            items, tokens = ranked.items, ranked.tokens
            sliced = Sliced(SliceOutcome(tuple([items[k] for k in chosen])), chosen,
                            sum([tokens[k] for k in chosen]), effective)
        merged = run.merge(ranked, sliced, pinned)
        if merged.tokens > budget.target_tokens:
            merged = run.overflow(merged, pinned)
        return run, merged


_run_numbers = itertools.count()
_run_prefix = os.urandom(8).hex()


def _reset_run_ids_after_fork() -> None:
    global _run_numbers, _run_prefix  # noqa: PLW0603 - a forked child must not repeat ids
    _run_numbers = itertools.count()
    _run_prefix = os.urandom(8).hex()


os.register_at_fork(after_in_child=_reset_run_ids_after_fork)


def _new_run_id() -> str:
    """32 hex digits: a random per-process prefix and a counter. As unique as a
    UUID4 across processes and runs, at a tenth of its cost."""
    return f"{_run_prefix}{next(_run_numbers):016x}"


def _level_of(collector: TraceCollector) -> TraceDetailLevel | None:
    """The level a collector records at, or None when it is disabled. A collector
    whose ``is_enabled`` or ``detail_level`` raises is logged and treated as
    disabled: the run goes on untraced."""
    if collector is NULL_COLLECTOR:
        return None
    try:
        if not collector.is_enabled:
            return None
        return TraceDetailLevel.parse(collector.detail_level)
    except Exception:
        _logger.exception("cupellation: collector %r failed to say whether and how much it "
                          "records; the run goes on without it", collector)
        return None


def _error_text(exc: BaseException) -> str:
    """``str(exc)`` as text every sink can write: a lone surrogate (a file name
    decoded with surrogateescape, say) becomes its escape, and an exception whose
    ``__str__`` itself raises is named instead of hiding the run's own error."""
    try:
        text = str(exc)
    except Exception:
        return f"<{type(exc).__name__} whose str() raised>"
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def configuration_table(config: Pipeline | Policy) -> dict[str, Any]:
    """The one table of a configuration, a pipeline's or a policy's: ``deduplication``,
    ``overflow_strategy`` and the ``scorer``, ``slicer`` and ``placer`` tables (a
    custom strategy as ``{"type": "custom", "repr": ...}``), in a policy file's
    order. :meth:`Policy.to_dict` is it with the name, description and budget;
    :meth:`Pipeline.describe` is it with each strategy as JSON text."""
    return {
        "deduplication": config.deduplication,
        "overflow_strategy": config.overflow_strategy.value,
        "scorer": describe_scorer(config.scorer),
        "slicer": describe_slicer(config.slicer),
        "placer": describe_placer(config.placer),
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A declarative pipeline configuration: which scorer, slicer and placer,
    whether to deduplicate, what to do on overflow, and optionally a budget.

    ``scorer``, ``slicer`` and ``placer`` are built-in strategies
    (:class:`~cupellation.RecencyScorer`, a
    :class:`~cupellation.CompositeScorer` of them,
    :class:`~cupellation.GreedySlice`, :class:`~cupellation.UShapedPlacer`
    ...): immutable values that compare by value. ``overflow_strategy``
    accepts a name in any case. Policies compare by value, convert losslessly
    to a table (:meth:`to_dict`), TOML (:meth:`to_toml`) and JSON
    (:meth:`to_json`), and build a :class:`~cupellation.Pipeline` with
    :meth:`build_pipeline` (:meth:`Pipeline.from_policy` gives the same
    pipeline; :meth:`Pipeline.policy` the policy back).

    A custom strategy (a :class:`~cupellation.FunctionScorer`, a user's own
    slicer), even nested, is refused with
    :class:`~cupellation.exceptions.InvalidTypeError` naming its path
    (``scorer.children[1]``): a policy is what a file can hold. Other invalid
    values raise :class:`~cupellation.exceptions.InvalidValueError` (or its
    subclass ``ConfigurationError``) naming the field.
    """

    scorer: Scorer
    slicer: Slicer = field(default_factory=GreedySlice)
    placer: Placer = field(default_factory=ChronologicalPlacer)
    deduplication: bool = True
    overflow_strategy: OverflowStrategy = OverflowStrategy.THROW
    budget: ContextBudget | None = None
    name: str | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        check_strategy("scorer", self.scorer, describe_scorer(self.scorer))
        check_strategy("slicer", self.slicer, describe_slicer(self.slicer))
        check_strategy("placer", self.placer, describe_placer(self.placer))
        if not isinstance(self.deduplication, bool):
            raise InvalidTypeError("deduplication", self.deduplication, "a bool")
        object.__setattr__(self, "overflow_strategy",
                           OverflowStrategy.parse(self.overflow_strategy))
        if self.budget is not None and not isinstance(self.budget, ContextBudget):
            raise InvalidTypeError("budget", self.budget, "a ContextBudget or None")
        for name in ("name", "description"):
            text = getattr(self, name)
            if text is not None and not isinstance(text, str):
                raise InvalidTypeError(name, text, "a string or None")
        if self.name is not None and not self.name.strip():
            raise InvalidValueError("name", self.name, "must not be empty")
        check_text(self.to_dict(), "")

    # -- conversion ---------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The policy as JSON-native data (the shape of a policy file).

        ``name``, ``description`` and ``budget`` appear only when set; every
        other setting is written out, defaults included.
        """
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out.update(configuration_table(self))
        if self.budget is not None:
            out["budget"] = budget_to_dict(self.budget)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """The policy a table describes (the inverse of :meth:`to_dict`).

        ``scorer`` is required; ``slicer`` defaults to greedy, ``placer`` to
        chronological, ``deduplication`` to true and ``overflow_strategy`` to
        ``"Throw"``. Unknown keys are refused with a suggestion; every error
        names its path (``scorer.children[1].weight``) and value.
        """
        root = table(data, "")
        check_keys(root, "", _POLICY_KEYS, ("scorer",))
        name = root.get("name")
        if name is not None:
            name = text_value(name, "name")
        description = root.get("description")
        if description is not None:
            description = text_value(description, "description")
        overflow = root.get("overflow_strategy", OverflowStrategy.THROW.value)
        if not isinstance(overflow, str):
            raise InvalidTypeError("overflow_strategy", overflow,
                                   "one of 'Throw', 'Truncate', 'Proceed'")
        return cls(
            scorer=build_scorer(root["scorer"], path="scorer"),
            slicer=build_slicer(root["slicer"], path="slicer") if "slicer" in root
            else GreedySlice(),
            placer=build_placer(root["placer"], path="placer") if "placer" in root
            else ChronologicalPlacer(),
            deduplication=bool_value(root.get("deduplication", True), "deduplication"),
            overflow_strategy=OverflowStrategy.parse(overflow),
            budget=budget_from_dict(root["budget"], "budget") if "budget" in root else None,
            name=name, description=description)

    @classmethod
    def from_json(cls, text: str) -> Policy:
        """The policy in JSON text (see :func:`~cupellation.policy.load_policy`)."""
        return cls.from_dict(parse_document(text, "json", "<policy>"))

    @classmethod
    def from_toml(cls, text: str) -> Policy:
        """The policy in TOML text (see :func:`~cupellation.policy.load_policy`)."""
        return cls.from_dict(parse_document(text, "toml", "<policy>"))

    def to_json(self, *, indent: int | None = 2) -> str:
        """The policy as JSON text (:meth:`to_dict`), ending in a newline."""
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False) + "\n"

    def to_toml(self) -> str:
        """The policy as TOML text (:meth:`to_dict`); ``load_policy`` reads it back equal."""
        return toml_dumps(self.to_dict())

    # -- building -----------------------------------------------------------------

    def build_pipeline(self, budget: ContextBudget | None = None, *,
                       clock: Clock | None = None) -> Pipeline:
        """A :class:`~cupellation.Pipeline` configured as this policy says (what
        :meth:`Pipeline.from_policy` of it gives).

        ``budget`` overrides the policy's own budget (either may be ``None``:
        the pipeline then needs a budget per run). ``clock`` is the wall clock
        of decay scorers without a fixed ``reference_time`` (default:
        :func:`~cupellation.scoring.utc_now`).
        """
        if budget is not None and not isinstance(budget, ContextBudget):
            raise InvalidTypeError("budget", budget, "a ContextBudget or None")
        if clock is not None and not callable(clock):
            raise InvalidTypeError("clock", clock, "a zero-argument callable or None")
        scorer = self.scorer
        if clock is not None:
            scorer = build_scorer(describe_scorer(scorer), clock=clock)
        return Pipeline(
            scorer=scorer,
            slicer=self.slicer,
            placer=self.placer,
            deduplication=self.deduplication,
            overflow_strategy=self.overflow_strategy,
            budget=self.budget if budget is None else budget,
        )

    def with_budget(self, budget: ContextBudget | None) -> Policy:
        """A copy with another budget (``None`` removes it)."""
        return replace(self, budget=budget)


def _rebuilt_pipeline(scorer: Scorer, slicer: Slicer, placer: Placer, deduplication: bool,
                      overflow_strategy: OverflowStrategy, budget: ContextBudget | None
                      ) -> Pipeline:
    """A pickled or copied :class:`Pipeline`, made again."""
    return Pipeline(scorer, slicer, placer, deduplication=deduplication,
                    overflow_strategy=overflow_strategy, budget=budget)


def _strategy_table(data: Mapping[str, Any], key: str) -> Any:
    """A recorded strategy: its table, or the JSON text of it (``run_started``'s form)."""
    value = data[key]
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise DecodeError(f"pipeline.{key}", value,
                          f"is not the JSON text of a strategy table ({exc.msg}); runs "
                          "recorded before cupellation 0.3.0 carry a repr, which cannot be "
                          "rebuilt") from None

