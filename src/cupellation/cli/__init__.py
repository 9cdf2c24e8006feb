"""The ``cupellation`` command-line interface (also ``python -m cupellation.cli``).

``demo`` (the bundled example, writing its report, events, HTML page and trace),
``select`` (a policy run on items or a chat transcript), ``presets``, ``policy
show|check``, ``report`` / ``audit`` / ``why`` (past runs from logs or trace files)
and ``conformance``. ``cupellation --help`` and ``cupellation COMMAND --help`` say
the rest, exit statuses included. :func:`main` returns the exit status and never
lets an exception out for anything a user can give.
"""

from __future__ import annotations

from ._app import SUBCOMMANDS, Subcommand, build_parser, main

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]
