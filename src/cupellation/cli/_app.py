"""The ``cupellation`` command: argument parsing, subcommand dispatch, and the one
place where every error becomes one line on standard error and an exit status."""

from __future__ import annotations

import argparse
import errno
import io
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, Protocol, cast

from .. import __version__
from ..exceptions import CupelError, PipelineError
from ..settings import DEBUG_ENV_VAR, read
from . import (
    _analytics,
    _auditcmd,
    _conformance,
    _demo,
    _export,
    _policycmds,
    _reportcmd,
    _select,
    _simulate,
    _statscmd,
    _storecmd,
    _whycmd,
)
from ._common import (
    EXIT_STATUS_LINE,
    FAILED,
    INTERNAL,
    INTERRUPTED,
    PIPE_CLOSED,
    USAGE,
    CliError,
    describe,
    safe,
)
from ._telemetry import one_line_warnings

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]

PROG = "cupellation"



class Subcommand(Protocol):
    """What a subcommand module provides (modules satisfy this protocol)."""

    def add_parser(
        self, subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
    ) -> argparse.ArgumentParser:
        """Add this subcommand's parser to ``subparsers`` and return it."""
        ...

    def run(self, args: argparse.Namespace, /) -> int:
        """Run the subcommand with the parsed ``args``; return the exit status."""
        ...


#: Subcommand name -> module. To add a subcommand, write a module with
#: ``add_parser(subparsers)`` (which calls ``subparsers.add_parser(<name>, ...)``
#: with the same name as its key here) and ``run(args) -> int``, and register it.
SUBCOMMANDS: dict[str, Subcommand] = {
    "audit": _auditcmd.AUDIT,
    "conformance": _conformance,
    "demo": _demo,
    "export": _export,
    "policy": _policycmds.POLICY,
    "presets": _policycmds.PRESETS,
    "report": _reportcmd.REPORT,
    "select": _select,
    "why": _whycmd.WHY,
    # issue 17: the auditor's next questions (cli/_analytics.py)
    "replay": _analytics.REPLAY,
    "diff": _analytics.DIFF,
    # issue 23: the fleet store (cli/_storecmd.py; --store on the reading commands)
    "store": _storecmd.STORE,
    "stats": _statscmd.STATS,
    # issue 24: the auditor's tools on messages (cli/_simulate.py)
    "simulate": _simulate.SIMULATE,
    "sensitivity": _simulate.SENSITIVITY,
}

_DESCRIPTION = """\
Context selection for LLMs, following the Cupel specification: pick the items
that fit a token budget and explain every decision.

Start with 'cupellation demo', then 'cupellation select ITEMS --policy chat
--max-tokens N --target-tokens N'. 'cupellation COMMAND --help' explains each."""

_EPILOG = EXIT_STATUS_LINE


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line naming the command and where to read more."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {safe(message, 400)} (see '{self.prog} "
                         "--help')\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse swallows every OSError here: --help into a closed pipe must still
        # end with 141, as any other output does.
        if not message:
            return
        stream = file if file is not None else sys.stderr
        if stream is None:
            return
        try:
            stream.write(message)
        except BrokenPipeError:
            if stream is sys.stdout:
                raise
        except (AttributeError, OSError):
            pass


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser, with one sub-parser per entry of :data:`SUBCOMMANDS`."""
    parser = _Parser(prog=PROG, description=_DESCRIPTION, epilog=_EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    subparsers = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
                      parser.add_subparsers(dest="command", metavar="COMMAND"))
    for module in SUBCOMMANDS.values():
        module.add_parser(subparsers).set_defaults(_cupellation_run=module.run)
    return parser


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's last flush of a
    closed pipe does not print "Exception ignored ... BrokenPipeError" (the
    recipe of the Python documentation on SIGPIPE)."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a captured or replaced stream
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, descriptor)
    finally:
        os.close(devnull)


def _say(message: str) -> None:
    stream = sys.stderr
    if stream is None:  # started without standard error: print() would use stdout
        return
    try:
        stream.write(f"{PROG}: {message}\n")
        stream.flush()
    except (OSError, ValueError):  # standard error itself is gone
        pass


def _dispatch(args: argparse.Namespace) -> int:
    try:
        status: int = args._cupellation_run(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _silence_stdout()
        return PIPE_CLOSED
    except KeyboardInterrupt:
        _say("interrupted")
        return INTERRUPTED
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else USAGE)
    except CliError as exc:
        _say(exc.message)
        return exc.status
    except PipelineError as exc:
        _say(f"selection failed: {safe(str(exc), 400)}")
        return FAILED
    except RecursionError:
        _say("the input is nested too deeply to read")
        return USAGE
    except MemoryError:
        _say("out of memory reading the input")
        return USAGE
    except UnicodeError as exc:
        _say(f"not valid Unicode text: {safe(str(exc), 300)}")
        return USAGE
    except ModuleNotFoundError as exc:
        extra = " 'cupellation[cli]'" if exc.name in ("rich", "tomli") else f" {exc.name}"
        _say(f"this needs the Python package {exc.name}: pip install{extra}")
        return USAGE
    except OSError as exc:
        where = f"{safe(str(exc.filename))}: " if exc.filename else ""
        _say(f"{where}{safe(exc.strerror or str(exc), 300)}")
        return USAGE
    except (CupelError, ValueError) as exc:
        _say(describe(exc))
        return USAGE
    except Exception as exc:
        if read(DEBUG_ENV_VAR):
            raise
        _say(f"internal error: {type(exc).__name__}: {safe(str(exc), 300)} (a bug in "
             f"cupellation; {DEBUG_ENV_VAR}=1 shows the traceback)")
        return INTERNAL


# -- closed standard streams ------------------------------------------------------------


class _ClosedOutput(io.TextIOBase):
    """Stands in for a standard output the command was started without (``>&-``):
    the first write raises ``BrokenPipeError``, so a command that prints ends with
    exit 141 and one that prints nothing is not disturbed."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise BrokenPipeError(errno.EPIPE, "standard output is closed")

    def isatty(self) -> bool:
        return False


class _Discarding(io.TextIOBase):
    """Stands in for a closed standard error (``2>&-``): messages are dropped, the
    exit status is the same as with standard error open."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)

    def isatty(self) -> bool:
        return False


class _ClosedInputBytes(io.RawIOBase):
    """The bytes of a closed standard input (``<&-``): reading is an error."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        raise OSError(errno.EBADF, "standard input is closed")


def _occupy_closed_descriptor(descriptor: int) -> None:
    """Open /dev/null (read and write; never renamed, never written by us) at a
    closed standard descriptor, so that no file this command opens lands on 0, 1
    or 2, where a C library or a child process would read or write it."""
    try:
        os.fstat(descriptor)
        return
    except OSError:
        pass
    try:
        opened = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    if opened != descriptor:
        try:
            os.dup2(opened, descriptor, inheritable=False)
        except OSError:
            pass
        finally:
            os.close(opened)


@contextmanager
def _standard_streams() -> Iterator[None]:
    """Stand-ins for the standard streams the process was started without
    (Python sets them to None), restored afterwards for in-process callers."""
    saved = (sys.stdin, sys.stdout, sys.stderr)
    if sys.stdin is None:
        _occupy_closed_descriptor(0)
        sys.stdin = io.TextIOWrapper(io.BufferedReader(_ClosedInputBytes()), encoding="utf-8")
    if sys.stdout is None:
        _occupy_closed_descriptor(1)
        sys.stdout = _ClosedOutput()
    if sys.stderr is None:
        _occupy_closed_descriptor(2)
        sys.stderr = _Discarding()
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _parse_and_dispatch(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(None if argv is None else list(argv))
    except SystemExit as exc:  # --help, --version and usage errors
        code = exc.code
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            return PIPE_CLOSED
        return code if isinstance(code, int) else (0 if code is None else USAGE)
    except BrokenPipeError:
        _silence_stdout()
        return PIPE_CLOSED
    if args.command is None:
        _say(f"error: a command is required: {', '.join(SUBCOMMANDS)} (see "
             f"'{PROG} --help')")
        return USAGE
    with one_line_warnings("cupellation") as warnings:
        status = _dispatch(args)
    if status != USAGE:  # bad input is one line: the error, not what came before it
        warnings.print()
    return status


@contextmanager
def _quiet_store_driver() -> Iterator[None]:
    """clickhouse-connect logs a failed request (at ERROR, through logging's last-resort
    handler when nothing is configured) before raising it; the command says it once,
    in the store error's one line. So its logger says nothing while a command runs."""
    logger = logging.getLogger("clickhouse_connect")
    handler, propagate = logging.NullHandler(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Never lets an exception out for anything a user can give: errors are one
    line on standard error (see the exit statuses in ``cupellation --help``).
    A closed standard output gives 141 at the first write, a closed standard
    error changes no status, and Ctrl-C at any point gives 130.
    """
    try:
        with _standard_streams(), _quiet_store_driver():
            return _parse_and_dispatch(argv)
    except KeyboardInterrupt:
        _say("interrupted")
        return INTERRUPTED
