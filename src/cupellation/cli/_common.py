"""What every command shares: one-line errors, strict UTF-8 input, atomic output
files, output-path checks, and text that is safe to show on a terminal."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import write_whole_file
from ._logread import safe

__all__ = [
    "EXIT_CODES",
    "EXIT_STATUS_LINE",
    "FAILED",
    "INTERNAL",
    "INTERRUPTED",
    "NOT_WHOLE",
    "OK",
    "PIPE_CLOSED",
    "USAGE",
    "CliError",
    "Output",
    "check_file_destination",
    "check_folder_destination",
    "console",
    "console_class",
    "decode_utf8",
    "dumps_items",
    "describe",
    "html_for_terminal",
    "json_for_terminal",
    "read_input",
    "read_input_bytes",
    "safe",
    "value_text",
    "write_outputs",
]

OK = 0
#: The selection failed (PinnedBudgetError, BudgetOverflowError under Throw, ...),
#: or nothing was found (no run in the logs, no matching item).
FAILED = 1
#: Bad input or usage: exactly one line on standard error.
USAGE = 2
#: The data was not whole: ``export``'s backend did not take every span, or
#: ``report``'s rebuilt report is incomplete.
NOT_WHOLE = 3
#: Interrupted with Ctrl-C (128 + SIGINT).
INTERRUPTED = 130
#: The reader of standard output went away (``cupellation demo | head``), or the
#: command was started with standard output closed: 128 + SIGPIPE.
PIPE_CLOSED = 141
#: A bug in cupellation, the last resort for an exception nothing else expects:
#: not one of the statuses the command promises (the one line says how to see the
#: traceback).
INTERNAL = 70

#: Every exit status, in one line (the commands' epilogs).
EXIT_STATUS_LINE = """\
exit status: 0 success; 1 the selection failed, or nothing was found; 2 bad input
or usage, with one line on standard error; 3 the data was not whole (export: the
backend did not take every span; report: the rebuilt report is incomplete; replay: some
runs could not be replayed); 130 interrupted (Ctrl-C); 141 standard output was closed
early (e.g. '| head')."""

#: ``select`` and ``demo``'s exit statuses, in detail.
EXIT_CODES = """\
exit status:
  0    success
  1    the selection failed (pinned items over the window, BudgetOverflowError
       under the Throw overflow strategy, a count requirement under Throw); the
       report, events and HTML files are still written, the items are not
  2    bad input or usage; nothing is written; one line on standard error, e.g.
       'cupellation: items.jsonl:3: tokens: must be an integer, not str'
  130  interrupted (Ctrl-C)
  141  standard output was closed early (e.g. '| head')"""


class CliError(Exception):
    """A problem to report as one line on standard error, with an exit status."""

    def __init__(self, message: str, status: int = USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def value_text(value: Any, limit: int = 60) -> str:
    """A short, terminal-safe ``repr`` of an offending value."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return safe(text)


def describe(exc: BaseException, *, source: str | None = None, line: int | None = None,
             prefix: str | None = None) -> str:
    """One line for ``exc``: ``SOURCE:LINE: FIELD: PROBLEM (got VALUE)``.

    ``prefix`` is put before the error's own field (``items[3]`` + ``tokens`` gives
    ``items[3].tokens``); ``line`` is used when the error has none of its own.
    """
    field = getattr(exc, "field", None)
    problem = getattr(exc, "problem", None)
    own_line = getattr(exc, "line", None)
    if own_line is not None:
        line = own_line
    if not isinstance(field, str) or not isinstance(problem, str):
        body = safe(str(exc) or type(exc).__name__, 400)
    else:
        if prefix:
            field = (f"{prefix}{field}" if field.startswith("[")
                     else f"{prefix}.{field}" if field else prefix)
        value = getattr(exc, "value", None)
        got = "" if value is None else f" (got {value_text(value)})"
        body = f"{safe(field, 200)}: {safe(problem, 300)}{got}" if field else \
            f"{safe(problem, 300)}{got}"
    where = ""
    if source is not None:
        where = f"{safe(source, 200)}:{line}: " if line is not None else f"{safe(source, 200)}: "
    elif line is not None:
        where = f"line {line}: "
    return where + body


# -- input --------------------------------------------------------------------------


def read_input(name: str, *, what: str = "file") -> tuple[str, str]:
    """The text of file ``name`` (``-``: standard input), decoded as strict UTF-8
    (a leading byte-order mark is dropped), and the name to use in messages."""
    data, shown = read_input_bytes(name, what=what)
    return decode_utf8(data, shown), shown


def read_input_bytes(name: str, *, what: str = "file") -> tuple[bytes, str]:
    """The bytes of file ``name`` (``-``: standard input) and the name to use in
    messages; a file that cannot be read is a :class:`CliError` naming it."""
    shown = "<stdin>" if name == "-" else name
    try:
        if name == "-":
            return sys.stdin.buffer.read(), shown
        with open(name, "rb") as handle:
            return handle.read(), shown
    except FileNotFoundError:
        raise CliError(f"{safe(shown)}: no such {what}") from None
    except IsADirectoryError:
        raise CliError(f"{safe(shown)}: is a folder, not a {what}") from None
    except PermissionError:
        raise CliError(f"{safe(shown)}: permission denied") from None
    except OSError as exc:
        raise CliError(f"{safe(shown)}: cannot read: {safe(exc.strerror or str(exc))}") \
            from None


def decode_utf8(data: bytes, source: str) -> str:
    """``data`` as strict UTF-8, or a :class:`CliError` naming the byte and line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start:exc.end].hex(" ")
        raise CliError(f"{safe(source)}: not UTF-8 at byte {exc.start} (line {line}): "
                       f"0x{bad} (save the file as UTF-8)") from None
    return text.removeprefix("\ufeff")


# -- output -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Output:
    """One output file: where, what, and how to describe it."""

    path: Path
    text: str
    label: str


def _nearest_existing(path: Path) -> Path:
    current = path.absolute()
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def check_file_destination(option: str, path: Path) -> None:
    """Refuse, before anything runs, an output file that cannot be written. A
    device or FIFO is written in place, a symbolic link's target is replaced: the
    folder that matters is the target's."""
    shown = safe(str(path))
    try:
        existing: os.stat_result | None = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        existing = None
    except OSError as exc:  # a loop of symbolic links, a name too long, ...
        raise CliError(f"{option} {shown}: {safe(exc.strerror or str(exc))}") from None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise CliError(f"{option} {shown}: is a folder, not a file")
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        if not os.access(path, os.W_OK):
            raise CliError(f"{option} {shown}: cannot write it (permission denied)")
        return
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.exists():
        raise CliError(f"{option} {shown}: the folder {safe(str(parent))} does not exist")
    if not parent.is_dir():
        raise CliError(f"{option} {shown}: {safe(str(parent))} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CliError(f"{option} {shown}: cannot write in {safe(str(parent))} "
                       "(permission denied)")


def check_folder_destination(option: str, path: Path) -> None:
    """Refuse, before anything runs, an output folder that cannot be made or used."""
    if str(path) == "-":
        raise CliError(f"{option} needs a folder; '-' (standard output) is not one "
                       "(for the report on standard output use 'cupellation select ... "
                       "--report -')")
    if path.exists():
        if not path.is_dir():
            raise CliError(f"{option} {safe(str(path))}: is a file, not a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise CliError(f"{option} {safe(str(path))}: cannot write there "
                           "(permission denied)")
        return
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise CliError(f"{option} {safe(str(path))}: {safe(str(existing))} is a file, "
                       "not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise CliError(f"{option} {safe(str(path))}: cannot create it in "
                       f"{safe(str(existing))} (permission denied)")


def write_outputs(outputs: Sequence[Output], folders: Iterable[Path] = ()) -> None:
    """Encode every output first (so nothing is written if one cannot be), make
    ``folders``, then write each file whole (:func:`cupellation.files.write_whole_file`:
    a regular file is replaced through a temporary file, a symbolic link's target
    likewise, a device or FIFO is written in place)."""
    encoded = [(output, output.text.encode("utf-8")) for output in outputs]
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(f"cannot create the folder {safe(str(folder))}: "
                           f"{exc.strerror or exc}") from None
    for output, data in encoded:
        try:
            write_whole_file(output.path, data)
        except OSError as exc:
            raise CliError(f"cannot write {safe(str(output.path))}: "
                           f"{safe(exc.strerror or str(exc), 200)}") from None


# -- terminal text ------------------------------------------------------------------


def _escape_line(line: str) -> str:
    out = []
    for char in line:
        if char.isprintable():
            out.append(char)
            continue
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out)


def json_for_terminal(text: str) -> str:
    """JSON text with every non-printable character inside it (format characters
    such as bidi overrides, C1 controls, DEL) written as a ``\\u`` escape: the same
    JSON value, nothing a terminal would act on."""
    lines = text.split("\n")
    return "\n".join(line if line.isprintable() else _escape_line(line) for line in lines)


def html_for_terminal(text: str) -> str:
    """An HTML page with every non-printable character (escape sequences, bidi
    overrides) written as a character reference: the same document, nothing a
    terminal would act on."""
    lines = text.split("\n")
    return "\n".join(line if line.isprintable() else "".join(
        char if char.isprintable() or char == "\t" else f"&#x{ord(char):x};"
        for char in line) for line in lines)


def dumps_items(items: Iterable[Any]) -> str:
    """Items as the wire format's JSON array (``ContextItem.to_dict`` each), indented."""
    return json.dumps([item.to_dict() for item in items], indent=2, ensure_ascii=False,
                      allow_nan=False) + "\n"


_CONSOLE_CLASS: list[Any] = []


def console_class() -> Any:
    """rich's Console, except that a closed pipe raises ``BrokenPipeError`` (for
    ``main`` to handle) instead of rich's own ``SystemExit(1)``."""
    if not _CONSOLE_CLASS:
        from rich.console import Console  # noqa: PLC0415 - rich is the cli extra's

        class _Console(Console):
            def on_broken_pipe(self) -> None:
                self.quiet = True
                raise BrokenPipeError

        _CONSOLE_CLASS.append(_Console)
    return _CONSOLE_CLASS[0]


def console(*, stderr: bool = False) -> Any:
    """A rich console on standard output (or error): no markup, no highlighting,
    wide enough in a pipe that rows stay whole."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return console_class()(file=stream, highlight=False, markup=False, emoji=False,
                           soft_wrap=not terminal, width=None if terminal else 160)
