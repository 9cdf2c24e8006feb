"""The ``cupellation`` command's entry point (``[project.scripts]``).

Importing :mod:`cupellation.cli` loads the whole library, which takes a moment;
Ctrl-C during that moment would otherwise end the command with a
``KeyboardInterrupt`` traceback. This module imports nothing but ``sys`` until
it is inside the ``try``, so an interrupt at start-up is the same one line and
exit status 130 as an interrupt later.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

#: 128 + SIGINT, as :mod:`cupellation.cli` returns for Ctrl-C.
_INTERRUPTED = 130


def main() -> int:
    """Import the command line interface, then run it on ``sys.argv[1:]``."""
    try:
        from cupellation.cli import main as run  # noqa: PLC0415 - the point of this module
    except KeyboardInterrupt:
        stream = sys.stderr
        if stream is not None:
            try:
                stream.write("cupellation: interrupted\n")
                stream.flush()
            except (OSError, ValueError):
                pass
        return _INTERRUPTED
    return run()
