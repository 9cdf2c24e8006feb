"""The ``cupellation`` command-line interface.

``cupellation conformance PATH...`` runs conformance vectors; ``cupellation
--version`` prints the version. Also runnable as ``python -m cupellation.cli``.
"""

from __future__ import annotations

from ._app import SUBCOMMANDS, Subcommand, build_parser, main

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]
