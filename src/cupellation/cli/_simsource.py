"""What ``simulate`` and ``sensitivity`` read: an items file (``select``'s input), a
chat file (every format ``select_messages`` reads: OpenAI Chat, OpenAI Responses,
Anthropic, LangChain dicts), or a file of runs (an audit log or event file, gzip or
not, or an OTLP/Jaeger trace file), each run re-run from its logged candidates."""

from __future__ import annotations

import argparse
import io
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from .._model import ContextItem
from ..chat import SelectOptions
from ..chat._messages import FORMATS
from ..exceptions import CupelError
from ..logs import LoggedRun
from ._common import CliError, decode_utf8, describe, read_input_bytes, safe
from ._inputs import parse_candidates
from ._logread import (
    READ_ERRORS,
    UsageError,
    is_trace_file,
    open_reader,
    read_failure,
    unreadable_sources,
)
from ._runfilters import add_run_filters

__all__ = ["Source", "add_source_arguments", "chat_options", "read_source", "runs_of"]

SourceKind = Literal["items", "chat", "runs"]
_WHITESPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Source:
    """The input read: its kind, its name in messages, and the items (``items``),
    the message document (``chat``: a list, or a mapping holding one) or the raw
    bytes of a file of runs (``runs``: read by :func:`runs_of`)."""

    kind: SourceKind
    shown: str
    items: list[ContextItem]
    document: Any
    data: bytes


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """FILE, how to read it, and the options of chat files and of files of runs."""
    parser.add_argument("file", metavar="FILE",
                        help="an items file, a chat file or a file of runs (audit log, event "
                             "file, trace file; gzip or not); '-' reads standard input")
    group = parser.add_argument_group("input")
    kind = group.add_mutually_exclusive_group()
    kind.add_argument("--items", dest="force", action="store_const", const="items",
                      help="read FILE as ContextItems")
    kind.add_argument("--chat", dest="force", action="store_const", const="chat",
                      help="read FILE as chat messages")
    kind.add_argument("--runs", dest="force", action="store_const", const="runs",
                      help="read FILE as logged runs (without these three: recognised)")
    group.add_argument("--chat-format", choices=list(FORMATS),
                       help="the chat file's format (default: recognised)")
    group.add_argument("--estimate-tokens", action="store_true",
                       help="chat files: count ceil(characters / 4) instead of o200k_base")
    group.add_argument("--trim", action="append", metavar="KIND=N",
                       help="chat files: cut a message or tool result of KIND over N tokens "
                            "to its head and tail, as select_messages(trim=) does "
                            "(repeatable; e.g. ToolOutput=800)")
    runs = parser.add_argument_group("files of runs")
    runs.add_argument("--run", metavar="RUN_ID", help="only the run with this id")
    runs.add_argument("--no-rotated", action="store_true",
                      help="read only the file named, not its rotated backups")
    add_run_filters(runs, policy=False)  # type: ignore[arg-type]  # a group adds alike


def _first_record(text: str) -> Any:
    """The first JSON value of ``text`` (a whole document, or its first line), or None."""
    stripped = text.lstrip(_WHITESPACE)
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(stripped.split("\n", 1)[0])
    except (ValueError, RecursionError):
        return None


def _sniff(data: bytes, name: str, text: str | None) -> SourceKind:
    # The bytes in hand decide: a FIFO or standard input cannot be opened again.
    if data[:2] == b"\x1f\x8b" or (os.path.isfile(name) and is_trace_file(name)):
        return "runs"
    first = _first_record(text or "")
    if isinstance(first, Mapping):
        if "run_id" in first or "resourceSpans" in first:
            return "runs"
        if any(key in first for key in ("messages", "input", "system")):
            return "chat"
    row = first[0] if isinstance(first, list) and first else first
    # A message has a role (LangChain's dicts and Responses items: a type); an item
    # has tokens.
    if isinstance(row, Mapping) and ("role" in row or "type" in row) and "tokens" not in row:
        return "chat"
    return "items"


def _chat_document(text: str, shown: str) -> Any:
    """A chat file's messages: a JSON document (a list, or a mapping holding one), or
    JSON Lines of messages."""
    try:
        return json.loads(text)
    except RecursionError:
        raise CliError(f"{safe(shown)}: JSON nested too deeply to read") from None
    except ValueError as exc:
        if not isinstance(exc, json.JSONDecodeError) or exc.msg != "Extra data":
            raise CliError(f"{safe(shown)}: not valid JSON: {safe(str(exc), 200)}") from None
    rows = []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip(_WHITESPACE):
            try:
                rows.append(json.loads(line))
            except (ValueError, RecursionError) as exc:
                raise CliError(f"{safe(shown)}:{number}: not valid JSON: "
                               f"{safe(str(exc), 200)}") from None
    return rows


def read_source(args: argparse.Namespace) -> Source:
    """The input ``args.file`` holds, read as ``--items``/``--chat``/``--runs`` say or
    as recognised. Raises :class:`CliError` (one line, exit 2)."""
    data, shown = read_input_bytes(args.file)
    gzipped = data[:2] == b"\x1f\x8b"
    text = None if gzipped else decode_utf8(data, shown)
    kind: SourceKind = args.force or _sniff(data, args.file, text)
    if kind == "runs":
        return Source("runs", shown, [], None, data)
    if text is None:
        raise CliError(f"{safe(shown)}: gzip data is read as a file of runs only (--runs)")
    if not text.strip(_WHITESPACE):
        raise CliError(f"{safe(shown)}: empty: expected items, chat messages or runs")
    if kind == "chat":
        return Source("chat", shown, [], _chat_document(text, shown), b"")
    return Source("items", shown, parse_candidates(text, shown, mode="items").items, None, b"")


def chat_options(args: argparse.Namespace) -> SelectOptions:
    """The reading options of a chat file: format, token counter and ``--trim``."""
    limits: dict[str, int] = {}
    for spec in args.trim or []:
        kind, sep, number = spec.partition("=")
        try:
            limit = int(number) if sep else -1
        except ValueError:
            limit = -1
        if limit < 0:
            raise CliError(f"--trim {safe(spec)}: expected KIND=N (N a whole number of "
                           "tokens), e.g. ToolOutput=800")
        limits[kind.strip()] = limit
    try:
        return SelectOptions(format=args.chat_format, trim=limits or None,
                             token_counter="estimate" if args.estimate_tokens else "auto")
    except CupelError as exc:
        raise CliError(f"--trim: {describe(exc)}") from None


@contextmanager
def runs_of(args: argparse.Namespace, source: Source, command: str
            ) -> Iterator[Iterator[LoggedRun]]:
    """The runs of a file of runs (filtered by ``--run`` and the run filters), read
    with their candidates; a read error is a :class:`CliError` (one line, exit 2)."""
    namespace = argparse.Namespace(**vars(args))
    namespace.logs = [args.file]
    namespace.no_progress = True
    namespace.store = None
    # Standard input, a FIFO or a device was read whole to recognise it: the reader
    # reads those bytes. A regular file is read again, by name, so that its rotated
    # backups and a trace file are read as the other commands read them.
    sources = None if os.path.isfile(args.file) else [io.BytesIO(source.data)]
    options: dict[str, Any] = {"keep_candidates": True}
    if args.run is not None:
        options["run_id"] = args.run
    reader = None
    try:
        with open_reader(namespace, sources, **options) as reader:
            yield iter(reader)
            broken = unreadable_sources(reader.stats)
    except UsageError as exc:
        raise CliError(f"{command}: {exc}") from None
    except READ_ERRORS as exc:
        raise CliError(read_failure(exc, reader.stats if reader else None)) from None
    if broken is not None:
        raise CliError(broken)
