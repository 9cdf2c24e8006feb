"""A/B of issue 26's seventh pass, in one process: the chat preset's pipeline (a
composite of recency and kind) with the kind scorer's lookup by folded name and its
trusted floats, and with its lookup by ContextKind, checked, as before.

    python benchmarks/ab_kind_scorer.py [--rounds 21] [--exchanges 20 80]

**New.** ``KindScorer.score_all`` looks each kind's weight up by its ASCII-folded
name (a str's hash is cached in C; a ContextKind's is a Python method), and a kind
scorer whose weights are at most 1.0 is trusted as the rank scorers are: a small
run's composite sums its children's floats without checking them, and the run does
not check the sums.

**Old.** ``KindScorer.score_all`` rebound, for the old side's calls, to the lookup
by ContextKind; a class whose ``score_all`` is not its own is not trusted, so the
composite and the run check the scores as before the pass (the new side rebinds it
to itself, so both pay the same assignments).

The units are those ``select_messages`` makes of an agent transcript of a system
prompt, a request and N tool exchanges (``bench_chat.transcript``), run through the
chat preset's pipeline (``select_messages``' own); both sides' windows must agree.
Per-call thread CPU time, loop mode, the sides in turns (``_harness.interleave``);
medians with min-max over rounds, and of each round's new/old ratio.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from _harness import Mode, Swap, interleave, old_new_lines, swapped_call  # noqa: E402
from bench_chat import BUDGET, _request, transcript  # noqa: E402
from cupellation import ContextItem  # noqa: E402
from cupellation.chat._conversation import read_conversation  # noqa: E402
from cupellation.chat._select import _pipeline  # noqa: E402
from cupellation.scoring import KindScorer  # noqa: E402

__all__ = ["main"]

EXCHANGES = (20, 80)
_NEW = KindScorer.score_all


def _by_context_kind(self: KindScorer, items: Sequence[ContextItem], /) -> list[float]:
    """The old side: each weight looked up by the item's ContextKind."""
    get = self.weights.get
    return [get(item.kind, 0.0) for item in items]


#: KindScorer's lookup, with its old and its new form.
_SWAPS: tuple[Swap, ...] = ((KindScorer, "score_all", _by_context_kind, _NEW),)


def measure(rounds: int, exchanges: Sequence[int] = EXCHANGES
            ) -> tuple[dict[str, list[float]], list[int]]:
    """CPU seconds per call of each ``old@N`` and ``new@N`` (N units), per round, and
    the unit counts."""
    pipeline, _ = _pipeline(None)
    variants: dict[str, Callable[[], object]] = {}
    sizes = []
    for count in exchanges:
        units = list(read_conversation(_request(transcript(5000, count))).candidates)
        sizes.append(len(units))
        for side in ("old", "new"):
            variants[f"{side}@{len(units)}"] = partial(
                swapped_call, _SWAPS, side, partial(pipeline.run, units, BUDGET, None))
        if variants[f"old@{len(units)}"]() != variants[f"new@{len(units)}"]():
            raise AssertionError(f"the two sides chose different windows at {len(units)} units")
    timings = interleave(variants, rounds=rounds, mode=Mode.LOOP)
    return {name: list(timing.cpu) for name, timing in timings.items()}, sizes


def main(argv: Sequence[str] | None = None) -> int:
    """Run the A/B and print its table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=21, help="rounds (default 21)")
    parser.add_argument("--exchanges", type=int, nargs="+", default=list(EXCHANGES),
                        help="tool exchanges in the transcript (default: 20 and 80)")
    args = parser.parse_args(argv)
    cpu, sizes = measure(args.rounds, args.exchanges)
    print(f"the chat preset's untraced runs (N units), {args.rounds} rounds, per-call "
          "thread CPU time, medians (min-max)")
    print("\n".join(old_new_lines(cpu, sizes, scale=1e6, unit=" us", digits=1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
