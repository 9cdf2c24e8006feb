"""``cupellation demo``: the pipeline on the bundled support-agent conversation."""

from __future__ import annotations

from ._select import add_demo_parser as add_parser
from ._select import run_demo as run

__all__ = ["add_parser", "run"]
