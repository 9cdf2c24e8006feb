"""Placers: the final ordering of the selected items (``spec/src/placers.md``).

The built-in placers are also importable from :mod:`cupellation`; import this
module for :class:`Placer` when you write a placer of your own.

- :class:`ChronologicalPlacer` — oldest first by timestamp, untimestamped last.
- :class:`UShapedPlacer` — highest scores at both edges, lowest in the middle.

Any object with a ``place(items, /)`` method satisfies :class:`Placer`; its
input is a sequence of :class:`~cupellation.ScoredItem` (an item and its score).

The built-in placers have a table form, the ``placer`` of a policy file and of
``run_started``'s record: ``{"type": "chronological"}``, ``{"type": "u_shaped"}``
(``to_dict()`` / ``from_dict(table)``). Adding one: its module (with
``type_name``, ``settings``, ``to_dict``/``from_dict`` and
``@PLACERS.register``), its export here, its test, and ``cupellation.policy``'s doc.
"""

from __future__ import annotations

from ._chronological import ChronologicalPlacer
from ._protocol import Placer
from ._u_shaped import UShapedPlacer

__all__ = ["ChronologicalPlacer", "Placer", "UShapedPlacer"]
