"""``cupellation select`` and ``cupellation demo``: run a policy on candidates (a
file, standard input or the bundled demo data) and write the placed items, the
report, the event stream, the HTML page and spans."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Literal

from .._collectors import DiagnosticTraceCollector, FanOutCollector, TraceDetailLevel
from .._model import ContextBudget, ContextItem
from .._report import SelectionReport
from ..chat import TokenEstimateWarning
from ..events import ContentCapture, PipelineEvent, RunInfo, RunLineEncoder, StageCompleted
from ..exceptions import BudgetOverflowError, CupelError, TableTooLargeError
from ..html import render_html
from ..logs import AuditLog
from ..placing import ChronologicalPlacer
from ..policy import Policy
from ..settings import resolve_digest_key
from ._common import (
    EXIT_CODES,
    FAILED,
    OK,
    CliError,
    Output,
    check_file_destination,
    check_folder_destination,
    console,
    dumps_items,
    html_for_terminal,
    json_for_terminal,
    read_input,
    safe,
    write_outputs,
)
from ._config import (
    DEFAULT_PRESET,
    add_budget_options,
    add_policy_options,
    apply_overrides,
    resolve_budget,
    resolve_policy,
)
from ._inputs import parse_candidates
from ._invocation import invoked_as, require_cli_extra
from ._summary import print_selection
from ._telemetry import (
    OTLP_INSTALL_HINT,
    Otlp,
    TraceFile,
    add_otlp_options,
    cli_service,
    load_exporters,
)

__all__ = ["add_demo_parser", "add_parser", "load_candidates", "run", "run_demo"]

#: The demo's budget when neither its policy nor a flag gives one.
DEMO_BUDGET = ContextBudget(max_tokens=1024, target_tokens=400, output_reserve=256)
_DEMO_ITEMS = "_data/demo_candidates.json"
_DEMO_POLICY = "_data/demo_policy.json"

_SELECT_DESCRIPTION = f"""\
Run a selection policy on candidate context items and explain every decision.

ITEMS is a JSON array of ContextItem objects (the wire format's shape: content, tokens,
kind, source, priority, tags, metadata, timestamp, futureRelevanceHint, pinned,
originalTokens), JSON Lines of them, or a chat transcript (an OpenAI-style list
of messages with roles, or an Anthropic-style {{"system", "messages"}} object,
also as JSON Lines): transcripts are recognised by their 'messages' or 'role'
keys, or forced with --chat; each tool exchange (the call and its results) is one
item, kept or left out whole. '-' reads standard input. Files are read as UTF-8.

The policy is --policy FILE|PRESET (default: the {DEFAULT_PRESET} preset: recency x3 and
kind x1, greedy slicing, chronological placement). The budget comes from the
policy's [budget] and the budget flags; one of them must give it (--target-tokens
defaults to --max-tokens).

Standard output gets exactly one thing: the placed items as a JSON array in
placed order (the wire format's item shape) by default; the summary tables with
--format text; or the one output named '-' (--report -, --events - or --html -)
instead. --quiet prints nothing there. Notes (such as a chronological placer
putting items without a timestamp after the timestamped ones) and errors go to
standard error, one line each. Output files are written whole (a temporary file
renamed into place) once the run is over, and not at all for bad input."""

_SELECT_EPILOG = f"""\
examples:
  cupellation select items.json --max-tokens 8000 --target-tokens 6000
  cupellation select chat.json --policy chat --max-tokens 8000 --target-tokens 6000 \\
      --report report.json --html report.html
  cupellation policy show chat --max-tokens 8000 --target-tokens 6000 > my.toml
  cat items.jsonl | cupellation select - --policy my.toml --report - | jq .excluded

{EXIT_CODES}"""


# -- parsers ----------------------------------------------------------------------------


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("outputs")
    group.add_argument("--format", choices=["json", "text"], default="json",
                       help="standard output: the placed items as JSON (default) or the "
                            "summary tables (text)")
    group.add_argument("--report", metavar="FILE", help="write the SelectionReport JSON "
                       "('-': to standard output, instead of the items)")
    group.add_argument("--events", metavar="FILE", help="write the event stream as JSON lines, "
                       "one event per line ('-': to standard output)")
    group.add_argument("--html", metavar="FILE", help="write the report as one self-contained "
                       "HTML page ('-': to standard output)")
    group.add_argument("-o", "--output", metavar="FILE",
                       help="write the placed items (JSON) to FILE instead of standard output")
    group.add_argument("--out", type=Path, metavar="DIR",
                       help="also write report.json, events.jsonl and report.html in DIR "
                            "(made if missing)")
    group.add_argument("--audit-log", type=Path, metavar="FILE",
                       help="append the run's events to FILE as JSON lines (the audit log "
                            "'cupellation audit', 'report' and 'why' read); content capture "
                            "follows CUPELLATION_CAPTURE_CONTENT (default full)")
    group.add_argument("-q", "--quiet", action="store_true",
                       help="print nothing on standard output (unless an output is '-') and "
                            "no notes; errors still go to standard error")


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``select`` sub-parser."""
    parser = subparsers.add_parser(
        "select", help="select context items from a file or standard input",
        description=_SELECT_DESCRIPTION, epilog=_SELECT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("items", metavar="ITEMS",
                        help="a JSON or JSON Lines file of ContextItems or chat messages; "
                             "'-' for standard input")
    group = parser.add_argument_group("input")
    kind = group.add_mutually_exclusive_group()
    kind.add_argument("--chat", action="store_true",
                      help="read ITEMS as a chat transcript (without it: recognised by its "
                           "keys)")
    kind.add_argument("--items", dest="force_items", action="store_true",
                      help="read ITEMS as ContextItems, never as a transcript")
    group.add_argument("--chat-format", choices=["openai", "anthropic"],
                       help="the transcript's format (default: recognised); a transcript "
                            "showing the other format is refused")
    group.add_argument("--estimate-tokens", action="store_true",
                       help="for transcripts, estimate tokens as ceil(characters / 4) instead "
                            "of counting with tiktoken (used when installed and its encoding "
                            "is available)")
    add_policy_options(parser, default_help=f"default: the {DEFAULT_PRESET} preset")
    add_budget_options(parser, defaults="with no budget in the policy, --max-tokens is "
                                        "required; --target-tokens defaults to it")
    _add_output_options(parser)
    otlp = parser.add_argument_group("OpenTelemetry")
    add_otlp_options(otlp, default_capture=None)
    return parser


_DEMO_DESCRIPTION = """\
Select context for a bundled support-agent conversation (22 candidates: a pinned
system prompt, messages, tool output, documents, memories, a duplicate and a
corrupted token count) and write in DIR (default out/demo):

  candidates.json  the bundled candidates, as 'cupellation select' reads them
  policy.toml      the policy and budget used (edit it, pass it to --policy)
  report.json      the SelectionReport
  events.jsonl     the event stream, one JSON object per line
  report.html      the report as a page to open in a browser
  trace.jsonl      the run's spans as OTLP/JSON lines (cupellation report DIR/trace.jsonl)

Then it prints the decisions (tables of the included items in placed order and
of the excluded ones with their reasons), each file written, and commands to try
next. The demo policy scores by recency, priority, kind and relevance hint and
places U-shaped, so the pinned system prompt comes first. It reads nothing but
its bundled data."""


def add_demo_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], /
) -> argparse.ArgumentParser:
    """Add the ``demo`` sub-parser."""
    parser = subparsers.add_parser(
        "demo", help="run the pipeline on the bundled support-agent conversation",
        description=_DEMO_DESCRIPTION, epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("out/demo"), metavar="DIR",
                        help="the folder to write in (default out/demo; made if missing)")
    parser.add_argument("--audit-log", type=Path, metavar="FILE",
                        help="also append the run's events to FILE as JSON lines (for "
                             "'cupellation audit', 'report' and 'why')")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="print nothing on standard output; errors still go to "
                             "standard error")
    add_policy_options(parser, default_help="default: the bundled demo policy "
                                            "(written to DIR/policy.toml)")
    add_budget_options(parser, defaults="default: max 1024, target 400, output reserve 256")
    otlp = parser.add_argument_group("OpenTelemetry")
    add_otlp_options(otlp, default_capture="full")
    return parser


# -- running ----------------------------------------------------------------------------


@dataclass(slots=True)
class Outcome:
    """What a run produced."""

    report: SelectionReport
    events: tuple[PipelineEvent, ...]
    placed: list[ContextItem] | None
    failure: CupelError | None
    trace_text: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str | None:
        """The run's id, from its events."""
        return self.events[0].run_id if self.events else None

    @property
    def stages(self) -> list[StageCompleted]:
        """The run's stage events: each stage's items in and out."""
        return [event for event in self.events if isinstance(event, StageCompleted)]


def _check_otlp_installed(args: argparse.Namespace) -> None:
    if not args.otlp:
        return
    if load_exporters() is None:
        raise CliError(OTLP_INSTALL_HINT)


def _execute(policy: Policy, budget: ContextBudget, items: list[ContextItem],
             args: argparse.Namespace, trace: TraceFile | None) -> Outcome:
    """Run the policy, feeding the report collector, the audit log, --otlp and the
    trace file; the audit log and the OTLP providers are closed before returning."""
    report_collector = DiagnosticTraceCollector(TraceDetailLevel.FULL)
    children: list[object] = [report_collector]
    service = cli_service(args)
    audit: AuditLog | None = None
    otlp: Otlp | None = None
    try:
        if args.otlp:
            otlp = Otlp(args.otlp_tier, args.otlp_content, service)
            children.append(otlp.collector)
        if args.audit_log is not None:
            _make_audit_folder(args)
            try:
                audit = AuditLog(args.audit_log)
            except OSError as exc:
                raise CliError(f"--audit-log {safe(str(args.audit_log))}: cannot open it: "
                               f"{exc.strerror or exc}") from None
            children.append(audit)
        if trace is not None:
            children.append(trace.collector)
        collector = (report_collector if len(children) == 1
                     else FanOutCollector(*children))  # type: ignore[arg-type]
        pipeline = policy.build_pipeline(budget)
        placed: list[ContextItem] | None = None
        failure: CupelError | None = None
        try:
            placed = pipeline.run(items, budget, collector, run_info=RunInfo(service=service))
        except CupelError as exc:
            failure = exc
    finally:
        if audit is not None:
            audit.close()
        if otlp is not None:
            otlp.close()
    if audit is not None and audit.lost_lines:
        # The log keeps whole lines only and says so, but the command was asked to
        # record the run: a log that lost lines is a failed output, like a full disk.
        raise CliError(f"--audit-log {safe(str(args.audit_log))}: cannot write it whole: "
                       f"{audit.lost_lines} lines lost (no space left, or a write error)")
    outcome = Outcome(report_collector.build_report(), report_collector.events, placed,
                      failure)
    if trace is not None:
        outcome.trace_text = trace.text()
    if placed is not None and isinstance(policy.placer, ChronologicalPlacer):
        note = _untimed_note(placed)
        if note:
            outcome.notes.append(note)
    return outcome


def _make_audit_folder(args: argparse.Namespace) -> None:
    """Make --out now when --audit-log is to go inside it (``--out NEW --audit-log
    NEW/a.log``): the log is opened before the run, the other files after it."""
    out: Path | None = getattr(args, "out", None)
    folder = args.audit_log.parent
    if out is None or folder.exists():
        return
    where, inside = folder.absolute(), out.absolute()
    if where == inside or inside in where.parents:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CliError(f"cannot create the folder {safe(str(folder))}: "
                           f"{safe(exc.strerror or str(exc))}") from None


def _untimed_note(placed: Sequence[ContextItem]) -> str | None:
    """A note when the chronological placer put items without a timestamp after
    timestamped ones (the specification's order, easily a surprise)."""
    first_timed = next((k for k, item in enumerate(placed) if item.timestamp is not None), None)
    if first_timed is None:
        return None
    late = [item for item in placed[first_timed:] if item.timestamp is None]
    if not late:
        return None
    pinned = [item for item in late if item.pinned]
    example = (pinned or late)[0]
    what = (f"the pinned {example.kind.value} " if example.pinned
            else f"the {example.kind.value} ")
    return (f"note: the chronological placer put {len(late)} item(s) without a timestamp "
            f"after the timestamped ones, {what}{safe(repr(example.content[:40]))} among them; "
            "give them timestamps, or place with --placer u-shaped (or --policy rag)")


def _failure_line(exc: CupelError) -> str:
    text = safe(str(exc), 400)
    if isinstance(exc, BudgetOverflowError):
        text += (" (the policy's overflow_strategy is Throw: --overflow truncate or proceed "
                 "keeps the selection)")
    elif isinstance(exc, TableTooLargeError):
        text += " (or choose --slicer greedy)"
    return f"cupellation: selection failed: {text}"


def _print_stdout(text: str, *, is_json: bool = True) -> None:
    """``text`` on standard output, in pieces, flushed as it goes: a reader that
    goes away (``| head``) is noticed at once, not at exit. JSON has its
    non-printable characters written as escapes (the same JSON value)."""
    text = json_for_terminal(text) if is_json else html_for_terminal(text)
    for start in range(0, len(text), 1 << 16):
        sys.stdout.write(text[start:start + (1 << 16)])
        sys.stdout.flush()


# -- select -----------------------------------------------------------------------------


def _stdout_target(args: argparse.Namespace) -> str:
    dashes = [name for name in ("report", "events", "html", "output")
              if getattr(args, name) == "-"]
    if "output" in dashes:
        dashes.remove("output")  # -o - is standard output, the default anyway
    if len(dashes) > 1:
        raise CliError("only one output can go to standard output: "
                       + " and ".join(f"--{name} -" for name in dashes))
    if dashes:
        if args.format == "text":
            raise CliError(f"--format text and --{dashes[0]} - both want standard output")
        return dashes[0]
    if args.output not in (None, "-") or args.quiet:
        return "none"
    return "text" if args.format == "text" else "items"


def _check_destinations(args: argparse.Namespace) -> None:
    for option in ("report", "events", "html", "output"):
        value = getattr(args, option)
        if value not in (None, "-"):
            check_file_destination(f"--{option}", Path(value))
    if args.out is not None:
        check_folder_destination("--out", args.out)
    if args.audit_log is not None and args.audit_log.is_dir():
        raise CliError(f"--audit-log {safe(str(args.audit_log))}: is a folder, not a file")


def load_candidates(path: Path | str, *,
                    mode: Literal["auto", "items", "chat"] = "auto") -> list[ContextItem]:
    """The candidates in a file (``-``: standard input), as ``select`` reads them.

    Raises :class:`~cupellation.cli._common.CliError` naming the file, the line
    or the JSON path, and the field.
    """
    text, shown = read_input(str(path))
    return parse_candidates(text, shown, mode=mode).items


def run(args: argparse.Namespace, /) -> int:
    """Run ``select``: 0 on success, 1 when the selection failed, 2 for bad input."""
    target = _stdout_target(args)
    _check_destinations(args)
    _check_otlp_installed(args)
    policy = apply_overrides(resolve_policy(args.policy or DEFAULT_PRESET), args)
    budget = resolve_budget(policy, args)
    if args.items == "-" and sys.stdin.isatty() and not args.quiet:
        print("cupellation: reading items from standard input (end with Ctrl-D)",
              file=sys.stderr)
    text, source = read_input(args.items)
    mode: Literal["auto", "items", "chat"] = (
        "chat" if args.chat else "items" if args.force_items else "auto")
    chat_options = {"format": args.chat_format, "use_tiktoken": not args.estimate_tokens}
    with warnings.catch_warnings():
        # A fallback to estimated counts is said once on the cupellation logger, which
        # the command prints as one line; Python's own two-line warning would repeat it.
        warnings.simplefilter("ignore", TokenEstimateWarning)
        loaded = parse_candidates(text, source, mode=mode, chat_options=chat_options)
    outcome = _execute(policy, budget, loaded.items, args, None)
    report = outcome.report

    outputs, folders, stdout_text = _select_outputs(args, target, outcome, budget, source)
    write_outputs(outputs, folders)
    if target == "text" and outcome.failure is None:
        print_selection(console(), report, budget, title=f"{source} with {_policy_name(policy)}",
                        stages=outcome.stages)
    elif stdout_text:
        _print_stdout(stdout_text, is_json=target != "html")
    if not args.quiet:
        for note in outcome.notes:
            print(f"cupellation: {note}", file=sys.stderr)
    if outcome.failure is not None:
        print(_failure_line(outcome.failure), file=sys.stderr)
        return FAILED
    return OK


def _select_outputs(args: argparse.Namespace, target: str, outcome: Outcome,
                    budget: ContextBudget, source: str
                    ) -> tuple[list[Output], list[Path], str]:
    """The files ``select`` writes, the folders it makes, and what goes to standard
    output (each text made once, only when asked for)."""
    report = outcome.report
    texts: dict[str, str] = {}

    def text(kind: str) -> str:
        if kind not in texts:
            texts[kind] = (report.to_json(indent=2) + "\n" if kind == "report"
                           else _events_text(outcome.events) if kind == "events"
                           else render_html(report, budget=budget,
                                            title=f"cupellation select {source}"))
        return texts[kind]

    outputs: list[Output] = []
    folders: list[Path] = []
    for kind, path in (("report", args.report), ("events", args.events), ("html", args.html)):
        if path not in (None, "-"):
            outputs.append(Output(Path(path), text(kind), kind))
    if args.output not in (None, "-") and outcome.placed is not None:
        outputs.append(Output(Path(args.output), dumps_items(outcome.placed), "items"))
    if args.out is not None:
        folders.append(args.out)
        outputs += [Output(args.out / name, text(kind), kind) for name, kind in (
            ("report.json", "report"), ("events.jsonl", "events"), ("report.html", "html"))]
    stdout_text = ""
    if target in ("report", "events", "html"):
        stdout_text = text(target)
    elif target == "items" and outcome.placed is not None:
        stdout_text = dumps_items(outcome.placed)
    return outputs, folders, stdout_text


def _events_text(events: Sequence[PipelineEvent]) -> str:
    # The sinks' own line form: the run's end line carries its digest, so `report` and
    # `audit` can tell a file edited afterwards from the run that wrote it; keyed with
    # CUPELLATION_DIGEST_KEY when it is set, as every sink that stores a run is.
    return RunLineEncoder(ContentCapture.FULL, resolve_digest_key(None)).lines(
        events).decode("utf-8")


def _policy_name(policy: Policy) -> str:
    return f"the {policy.name} policy" if policy.name else "the policy"


# -- demo -------------------------------------------------------------------------------


def _bundled(name: str) -> str:
    return resources.files("cupellation").joinpath(name).read_text(encoding="utf-8")


def run_demo(args: argparse.Namespace, /) -> int:
    """Run ``demo`` on the bundled data; write its files in ``--out``."""
    out: Path = args.out
    check_folder_destination("--out", out)
    if not args.quiet:
        require_cli_extra()  # before anything is written
    if args.audit_log is not None and args.audit_log.is_dir():
        raise CliError(f"--audit-log {safe(str(args.audit_log))}: is a folder, not a file")
    _check_otlp_installed(args)
    if args.policy is None:
        policy = Policy.from_json(_bundled(_DEMO_POLICY))
    else:
        policy = resolve_policy(args.policy)
    policy = apply_overrides(policy, args)
    budget = resolve_budget(policy, args, fallback=DEMO_BUDGET)
    candidates_text = _bundled(_DEMO_ITEMS)
    items = parse_candidates(candidates_text, "demo_candidates.json", mode="items").items
    trace = TraceFile.create(cli_service(args))
    outcome = _execute(policy, budget, items, args, trace)
    report = outcome.report
    policy_text = policy.with_budget(budget).to_toml()
    outputs = [
        Output(out / "candidates.json", candidates_text,
               f"the {len(items)} bundled candidates (ContextItem JSON)"),
        Output(out / "policy.toml", policy_text, "the policy and budget used"),
        Output(out / "report.json", report.to_json(indent=2) + "\n", "the SelectionReport"),
        Output(out / "events.jsonl", _events_text(outcome.events),
               f"the event stream, {len(outcome.events)} events, one per line"),
        Output(out / "report.html",
               render_html(report, budget=budget, title="cupellation demo"),
               "the report as a web page: open it in a browser"),
    ]
    if outcome.trace_text:
        outputs.append(Output(out / "trace.jsonl", outcome.trace_text,
                              "the run's spans as OTLP/JSON lines"))
    write_outputs(outputs, [out])
    if not args.quiet:
        if outcome.failure is None:
            print_selection(console(), report, budget,
                            title=f"The demo with {_policy_name(policy)}",
                            stages=outcome.stages)
            print()
        print("Wrote:")
        width = max(len(str(output.path)) for output in outputs)
        for output in outputs:
            print(f"  {safe(str(output.path)):<{width}}  {output.label}")
        if trace is None:
            print(f"  (no trace file: {TraceFile.why_not})")
        command = invoked_as()
        print("Next:")
        if outcome.trace_text:
            print(f"  {command} report {safe(str(out / 'trace.jsonl'))}")
        print(f"  {command} report {safe(str(out / 'report.json'))}")
        print(f"  {command} select {safe(str(out / 'candidates.json'))} --policy "
              f"{safe(str(out / 'policy.toml'))} --format text")
        print(f"  {command} presets")
    if outcome.failure is not None:
        print(_failure_line(outcome.failure), file=sys.stderr)
        return FAILED
    return OK
