"""How the user reached the command, for the hints it prints (``Next: …``), and the
``cli`` extra checked before a command writes anything."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys

from ._common import CliError

__all__ = ["CLI_EXTRA_HINT", "invoked_as", "require_cli_extra"]

CLI_EXTRA_HINT = ("this command prints tables, which needs the cli extra: pip install "
                  "'cupellation[cli]' (in a checkout: pip install -e '.[cli]')")


def invoked_as() -> str:
    """The command as the user can type it again: ``cupellation`` when that name on the
    PATH is this program, else the path it was started by (``.venv/bin/cupellation``)
    or ``python -m cupellation.cli`` with this interpreter."""
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "cupellation":
        found = shutil.which("cupellation")
        if found is not None and os.path.realpath(found) == os.path.realpath(argv0):
            return "cupellation"
        relative = os.path.relpath(argv0)
        shown = argv0 if relative.startswith("..") else relative
        if os.sep not in shown:
            shown = os.path.join(".", shown)
        return shlex.quote(shown)
    return f"{shlex.quote(sys.executable)} -m cupellation.cli"


def require_cli_extra() -> None:
    """Refuse (exit 2, one line naming the extra) when ``rich`` is not installed."""
    if importlib.util.find_spec("rich") is None:
        raise CliError(CLI_EXTRA_HINT)
