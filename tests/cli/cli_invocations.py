"""Generated command lines for every ``cupellation`` subcommand, valid and hostile.

:data:`GENERATORS` maps each subcommand to a function that draws one command line
for it: every option of the command, each either left out, given a valid value or
given a hostile one (missing, empty, huge, binary and invalid-UTF-8 files, folders,
FIFOs, devices made with mknod, bad numbers, regular expressions and dates, URLs on
127.0.0.1 where nothing listens). A later issue that adds a command adds its
generator here; ``test_cli_generated_inputs`` checks that every option the parser
knows is drawn.

A :class:`Workspace` holds the files the generators name. It never names a real
device file: the null and full devices are made with mknod in its own folder.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import random
import socket
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from _special_files import fifo_reader, fifo_writer, make_full, make_null

from _loopback import RawServer, Step, drip, raw_server
from _tampering import tamper_lines
from cupellation.cli import main
from cupellation.events import ContentCapture, RunLineEncoder
from cupellation.logs import read_runs

__all__ = [
    "GENERATORS",
    "Draw",
    "Invocation",
    "Workspace",
    "build_workspace",
    "draw_invocation",
    "feeding",
]

#: The budget that fits every small input.
_BUDGET = ("--max-tokens", "1000", "--target-tokens", "500")

_VECTOR = """\
[test]
name = "chronological placing, generated-input workspace"
stage = "placing"
placer = "chronological"

[[items]]
content = "old"
tokens = 1
score = 0.5
timestamp = 2024-01-01T00:00:00Z

[[items]]
content = "new"
tokens = 1
score = 0.9
timestamp = 2024-06-01T00:00:00Z

[expected]
ordered_contents = ["old", "new"]
"""

_CHAT = [{"role": "system", "content": "You are terse."},
         {"role": "user", "content": "hello\u2028there", "timestamp": "2024-01-01T00:00:00Z"},
         {"role": "assistant", "content": "hi", "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "done"}]


@dataclass
class Workspace:
    """The files the generated command lines name, made once in ``root``."""

    root: Path
    closed_port: int
    #: A loopback server answering ``/h/CASE/...`` with the hostile answer CASE
    #: (see :data:`HOSTILE_ANSWERS`); empty until the workspace is built.
    hostile_url: str = ""
    files: dict[str, Path] = field(default_factory=dict)
    stdin_data: dict[str, bytes] = field(default_factory=dict)
    _serial: Iterator[int] = field(default_factory=itertools.count)

    def __getitem__(self, name: str) -> str:
        return str(self.files[name])

    def fresh(self, stem: str) -> Path:
        """A path nothing has used yet, under ``root/fresh``."""
        return self.root / "fresh" / f"{stem}-{next(self._serial)}"


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


@contextmanager
def _held_port() -> Iterator[int]:
    """A 127.0.0.1 port bound and never listening, for the block: nothing can answer
    there, and no other process can take it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


def _hostile_answers(closed_port: int) -> dict[str, list[Step]]:
    """What the hostile server answers, by case: malformed HTTP, redirects that must
    be refused, a slow drip and a body over the default size limit."""
    def head(*lines: str) -> bytes:
        return ("\r\n".join(["HTTP/1.1 200 OK", *lines]) + "\r\n\r\n").encode()

    def moved(where: str) -> list[Step]:
        return [(0.0, f"HTTP/1.1 302 Found\r\nLocation: {where}\r\n"
                      "Content-Length: 0\r\n\r\n".encode())]

    return {
        "status-line": [(0.0, b"HTTP/1.1 two hundred\r\n\r\n")],
        "http-0.9": [(0.0, b'{"data": []}')],
        "headers-101": [(0.0, head(*(f"X-{i}: v" for i in range(101))))],
        "header-64k": [(0.0, head("X-Long: " + "a" * 70_000))],
        "short-body": [(0.0, head("Content-Length: 500") + b'{"data": [')],
        "bad-chunk": [(0.0, head("Transfer-Encoding: chunked") + b"zz\r\n{}\r\n0\r\n\r\n")],
        "no-answer": [],
        "other-port": moved(f"http://127.0.0.1:{closed_port}/x"),
        "ftp": moved("ftp://127.0.0.1/x"),
        "loop": moved("/h/loop/again"),
        "drip": drip(head("Content-Length: 40"), b" " * 40, 0.3),
        "huge": [(0.0, head("Content-Length: 900000000") + b"{}")],
    }


#: The cases of the hostile server (``Workspace.hostile_url + "/h/CASE"``).
HOSTILE_ANSWERS = tuple(_hostile_answers(0))


@contextmanager
def _hostile_server(closed_port: int) -> Iterator[RawServer]:
    answers = _hostile_answers(closed_port)

    def answer(path: str) -> list[Step]:
        case = path.split("/")[2] if path.count("/") >= 2 else ""
        return answers.get(case, answers["no-answer"])

    with raw_server(answer) as server:
        yield server


@contextmanager
def build_workspace(root: Path) -> Iterator[Workspace]:
    """Make every file the generators use in ``root`` (a demo's audit log and trace,
    items, chats, policies, vectors, damaged and special files), and start the
    hostile loopback server ``report --from`` is pointed at."""
    with _held_port() as port, _hostile_server(port) as hostile:
        space = Workspace(root, port, hostile.url)
        f = space.files
        (root / "fresh").mkdir()
        demo = root / "demo"
        assert main(["demo", "-q", "--out", str(demo), "--audit-log",
                     str(root / "audit.jsonl")]) == 0
        assert main(["demo", "-q", "--out", str(root / "demo2"), "--audit-log",
                     str(root / "audit.jsonl"), "--target-tokens", "200"]) == 0
        log = (root / "audit.jsonl").read_bytes()
        assert main(["store", "load", str(root / "audit.jsonl"), "--into",
                     f"chdb://{root / 'store'}"]) == 0
        items = [{"content": f"item {k}", "tokens": k + 1, "priority": k,
                  "timestamp": f"2024-01-0{k + 1}T00:00:00Z"} for k in range(6)]
        f |= {
            "audit": root / "audit.jsonl",
            "store_dir": root / "store",
            "trace": demo / "trace.jsonl",
            "candidates": demo / "candidates.json",
            "report_a": demo / "report.json",
            "report_b": root / "demo2" / "report.json",
            "demo_policy": demo / "policy.toml",
            "items": _write(root / "items.json", json.dumps(items)),
            "items_jsonl": _write(root / "items.jsonl",
                                  "".join(json.dumps(i) + "\n" for i in items)),
            "items_separators": _write(root / "sep.jsonl", json.dumps(
                {"content": "a\u2028b\u2029c\u0085d", "tokens": 1}, ensure_ascii=False) + "\n"),
            "chat": _write(root / "chat.json", json.dumps(_CHAT, ensure_ascii=False)),
            "chat_jsonl": _write(root / "chat.jsonl", "".join(
                json.dumps(m, ensure_ascii=False) + "\n" for m in _CHAT)),
            "anthropic": _write(root / "anthropic.json", json.dumps(
                {"system": "s", "messages": [{"role": "user", "content": "q",
                                              "created_at": -62135596800}]})),
            "edge_time": _write(root / "edge.json", json.dumps(
                [{"role": "user", "content": "x", "timestamp": "9999-12-31T23:59:59.999999Z"},
                 {"role": "assistant", "content": "y"}])),
            "edge_item_time": _write(root / "edge-item.json", json.dumps(
                [{"content": "x", "tokens": 1, "timestamp": "0001-01-01T00:00:00+05:00"}])),
            "bad_tokens": _write(root / "bad-tokens.json",
                                 '[{"content": "a", "tokens": -5}, {"content": "b", '
                                 '"tokens": "many"}]'),
            "pinned_over": _write(root / "pinned.json", json.dumps(
                [{"content": "p", "tokens": 5000, "pinned": True}])),
            "empty": _write(root / "empty.json", b""),
            "blank": _write(root / "blank.json", b" \n\t\n"),
            "binary": _write(root / "binary.bin", random.Random(7).randbytes(4096)),
            "latin1": _write(root / "latin1.json", b'[{"content": "caf\xe9", "tokens": 1}]'),
            "bom": _write(root / "bom.json", b"\xef\xbb\xbf" + json.dumps(items).encode()),
            "nan": _write(root / "nan.json", '[{"content": "a", "tokens": 1, '
                                             '"futureRelevanceHint": NaN}]'),
            "surrogate": _write(root / "surrogate.json", '[{"content": "x\\ud800", "tokens": 1}]'),
            "deep": _write(root / "deep.json", "[" * 50_000 + "]" * 50_000),
            "huge": _write(root / "huge.jsonl", "".join(
                json.dumps({"content": f"line {k} " + "x" * 300, "tokens": 80}) + "\n"
                for k in range(6000))),
            "big_number": _write(root / "big.json", '[{"content": "a", "tokens": 1'
                                                    + "0" * 400 + "}]"),
            "folder": root / "folder",
            "missing": root / "no" / "such.json",
            "log_gz": _write(root / "audit.jsonl.gz", gzip.compress(log)),
            "log_corrupt_gz": _write(root / "corrupt.jsonl.gz",
                                     _garble(gzip.compress(log))),
            "log_cut_gz": _write(root / "cut.jsonl.gz", gzip.compress(log)[:-50]),
            "log_cut": _write(root / "cut.jsonl", b"\n".join(log.split(b"\n")[:-4]) + b"\n"),
            # Signed with a key the reader lacks, and tampered with by someone without
            # it (issue 22): "signature not checked", never a clean exit.
            "log_keyed": _write(root / "keyed.jsonl", _keyed(root / "audit.jsonl")),
            "log_tampered": _write(root / "tampered.jsonl", tamper_lines(
                _keyed(root / "audit.jsonl"), "plain")),
            "trace_gz": _write(root / "trace.jsonl.gz", gzip.compress(
                (demo / "trace.jsonl").read_bytes())),
            "trace_corrupt": _write(root / "trace-bad.jsonl", b'{"resourceSpans": [{"x": 1}'),
            "log_garbage": _write(root / "garbage.jsonl", b"hello\n{\"schema\": 99}\n"
                                  b"{\"run_id\": 5, \"seq\": \"x\"}\n\xff\xfe\n"),
            "rotated": _write(root / "rot.jsonl", log[: len(log) // 2]),
            "policy_toml": _write(root / "policy.toml", (demo / "policy.toml").read_text()),
            "policy_json": _write(root / "policy.json", json.dumps(
                {"scorer": {"type": "recency"}, "slicer": {"type": "greedy"},
                 "placer": {"type": "chronological"}})),
            "policy_1e308": _write(root / "p1e308.toml",
                                   '[scorer]\ntype = "composite"\n[[scorer.children]]\n'
                                   'type = "recency"\nweight = 1e308\n[[scorer.children]]\n'
                                   'type = "kind"\nweight = 1e308\n'),
            "policy_bad": _write(root / "bad.toml", "[[[\n"),
            "policy_negative": _write(root / "neg.toml", '[scorer]\ntype = "composite"\n'
                                      '[[scorer.children]]\ntype = "recency"\n'
                                      "weight = -1\n"),
            "policy_budget": _write(root / "budget.toml", '[scorer]\ntype = "recency"\n'
                                    "[budget]\nmax_tokens = 10\ntarget_tokens = 20\n"),
            "vectors": root / "vectors",
            "vector_ok": _write(root / "vectors" / "ok.toml", _VECTOR),
            "vector_wrong": _write(root / "wrong" / "wrong.toml",
                                   _VECTOR.replace('["old", "new"]', '["new"]')),
            "vector_junk": _write(root / "junk" / "junk.toml", "[[[\n"),
            "vector_binary": _write(root / "binvec" / "bin.toml", b"\xff\x00\xfe"),
            "empty_folder": root / "empty-folder",
            "existing_output": _write(root / "existing.json", "old"),
            "a_file": _write(root / "a-file", "not a folder"),
            "null": make_null(root),
            "full": make_full(root),
            "link_target": root / "link-target.json",
            "link": root / "link.json",
            "dangling": root / "dangling.json",
            "loop": root / "loop",
            "input_link": root / "input-link.json",
        }
        (root / "rot.jsonl.1").write_bytes(log[len(log) // 2:])
        (root / "rot.jsonl.2.gz").write_bytes(gzip.compress(b"{}\n"))
        f["folder"].mkdir()
        f["empty_folder"].mkdir()
        f["link"].symlink_to(f["link_target"])
        f["dangling"].symlink_to(root / "nowhere" / "target.json")
        f["loop"].symlink_to(f["loop"])
        f["input_link"].symlink_to(f["items"])
        space.stdin_data = {
            "items": f["items"].read_bytes(), "chat": f["chat"].read_bytes(), "log": log,
            "trace": (demo / "trace.jsonl").read_bytes(), "gzip_log": gzip.compress(log),
            "garbage": random.Random(3).randbytes(600), "empty": b"",
        }
        yield space


#: The key the keyed logs of the workspace were signed with (never set at the reader
#: of the generated command lines: they read those logs without it).
_KEY = b"generated-input-key"


def _keyed(log: Path) -> bytes:
    """The runs of ``log`` as event lines signed with :data:`_KEY`."""
    writer = RunLineEncoder(ContentCapture.FULL, _KEY)
    return b"".join(writer.lines(run.events) for run in read_runs(log, keep_events=True))


def _garble(data: bytes) -> bytes:
    packed = bytearray(data)
    for position in range(12, min(60, len(packed))):
        packed[position] ^= 0x5A
    return bytes(packed)


# -- drawing ----------------------------------------------------------------------------------


@dataclass
class Invocation:
    """One command line, with what must be fed to it: standard input, and the FIFOs
    it may open (each with a writer, or a reader, of its own)."""

    argv: list[str]
    stdin: bytes | None = None
    fifo_inputs: dict[str, bytes] = field(default_factory=dict)
    fifo_outputs: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        words = [f"{k}={v!r}" for k, v in self.env.items()] + ["cupellation", *self.argv]
        return " ".join(repr(a) if not a or " " in a else a for a in words)


class Draw:
    """The random choices of one command line, and the FIFOs and input it needs."""

    def __init__(self, rng: random.Random, space: Workspace, *, in_process: bool) -> None:
        self.rng = rng
        self.space = space
        self.in_process = in_process
        self.invocation = Invocation([])
        #: Half the command lines are drawn from valid values only, so that the runs
        #: get past the checks; in the other half any value may be hostile.
        self.hostile = rng.random() < 0.5

    def chance(self, probability: float) -> bool:
        """True with ``probability``."""
        return self.rng.random() < probability

    def choose(self, valid: Sequence[str], hostile: Sequence[str] = ()) -> str:
        """One of ``valid``, or in a hostile command line one of both lists."""
        return self.pick([*valid, *hostile] if self.hostile else valid)

    def bad(self, probability: float) -> bool:
        """True with ``probability`` in a hostile command line, never in a valid one."""
        return self.hostile and self.chance(probability)

    def pick(self, options: Sequence[str]) -> str:
        """One of ``options``."""
        return self.rng.choice(list(options))

    def stdin(self) -> str:
        """``-``, with one of the prepared inputs on standard input (in a hostile
        command line maybe garbage or nothing)."""
        if self.invocation.stdin is None:
            names = sorted(self.space.stdin_data)
            if not self.hostile:
                names = [n for n in names if n not in ("garbage", "empty")]
            self.invocation.stdin = self.space.stdin_data[self.pick(names)]
        return "-"

    def fifo_in(self, data: bytes) -> str:
        """A new FIFO a writer fills with ``data`` once it is opened."""
        path = str(self.space.fresh("fifo-in"))
        self.invocation.fifo_inputs[path] = data
        return path

    def fifo_out(self) -> str:
        """A new FIFO a reader drains once it is opened."""
        path = str(self.space.fresh("fifo-out"))
        self.invocation.fifo_outputs.append(path)
        return path

    def text(self) -> str:
        """A short string that may hold anything a command line can carry."""
        pool = ["", " ", "x", "-", "--", "é", "日本", "😀", "\x1b[31m", "\u202e", "\u2028",
                "\t", "a" * 5000, "0", "-1", "%s", "{run_id}", "\\", "'", '"', "null",
                "..", "/", "\x7f"]
        if self.in_process:
            pool += ["\ud800", "\udcff"]  # lone surrogates only fit an in-process argv
        return "".join(self.rng.choice(pool) for _ in range(self.rng.randint(1, 3)))

    # -- values ------------------------------------------------------------------------------

    def integer(self) -> str:
        """A token count: valid, or in a hostile command line maybe not."""
        if not self.bad(0.5):
            return str(self.rng.choice([0, 1, 50, 500, 1000, 4000, 10**6]))
        return self.pick(["", "-1", "-0", "1e3", "1.5", "nan", "inf", "abc", "9" * 40,
                          "1_000", " 5", "0x10", "\u0665", "99999999999999999999"])

    def number(self) -> str:
        """A float-ish value (weights, timeouts)."""
        if not self.bad(0.7):
            return self.pick(["1", "0.5", "3", "0.001", "86400", "2.5"])
        return self.pick(["0", "-1", "1e308", "1e309", "inf", "-inf", "nan", "1e-300",
                          "86401", "x", "", "1,5", "\u0661"])

    def moment(self) -> str:
        """A --since/--until value."""
        if not self.bad(0.6):
            return self.pick(["2024-01-01", "2020-01-01T00:00:00Z", "2999-01-01T00:00:00+02:00",
                              "9999-12-31T23:59:59.999999Z", "0001-01-01T00:00:00+05:00",
                              "0001-01-01", "2026-06-01T12:00:00-07:00"])
        return self.pick(["yesterday", "", "2024-13-45", "2024-01-01T25:00", "1e10", "-"])

    def regex(self) -> str:
        """A --match pattern, valid or not."""
        if not self.bad(0.7):
            return self.pick([".", "item", "^a", "(?i)SYSTEM", "x" * 2000, "", "refund|order"])
        return self.pick(["a{99999999999}", "(", "[", "\\", "(?P<x>", "a{2,1}", "(?<=a+)b",
                          "\\p{L}", "*"])

    def store(self) -> str:
        """A --store / --into URL: the workspace's chDB store (a fresh one in a
        subprocess, so that processes never share an engine's directory), or in a
        hostile command line a server where nothing listens, a URL with a password,
        a file as the store's directory, or no URL at all."""
        port = self.space.closed_port
        if not self.bad(0.6):
            where = (self.space["store_dir"] if self.in_process
                     else str(self.space.fresh("store")))
            return f"chdb://{where}"
        return self.pick([f"http://127.0.0.1:{port}/audit", f"https://127.0.0.1:{port}",
                          f"http://me:s3cret@127.0.0.1:{port}/db", "ftp://x", "chdb://", "",
                          f"http://127.0.0.1:{port}/bad-name!", f"chdb://{self.space['a_file']}",
                          f"chdb://{self.space['store_dir']}?database=bad-name"])

    def url(self) -> str:
        """An endpoint: every host is 127.0.0.1, and nothing listens at the port."""
        port = self.space.closed_port
        if not self.bad(0.6):
            return self.pick([f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1/traces",
                              f"https://127.0.0.1:{port}"])
        return self.pick([f"127.0.0.1:{port}", "http://127.0.0.1:0", "http://127.0.0.1:99999",
                          "http://127.0.0.1", "not a url", "", "http://",
                          f"grpc://127.0.0.1:{port}"])

    def remote_url(self) -> str:
        """A backend's URL for ``report --from``: nothing listening, the hostile
        loopback server with one of its cases, or a URL that is not one."""
        if self.chance(0.5):
            return f"{self.space.hostile_url}/h/{self.pick(list(HOSTILE_ANSWERS))}"
        return self.url()

    # -- paths -------------------------------------------------------------------------------

    def input_path(self, valid: Sequence[str]) -> str:
        """An input: one of the ``valid`` workspace files (maybe through standard input
        or a FIFO), or in a hostile command line maybe a hostile one."""
        space = self.space
        roll = self.rng.random()
        if roll < 0.12:
            return self.stdin()
        if roll < 0.24:
            data = space.files[self.pick(valid)]
            return self.fifo_in(data.read_bytes() if data.is_file() else b"")
        if not self.bad(0.6):
            return space[self.pick(valid)]
        return space[self.pick(["missing", "empty", "blank", "binary", "latin1", "folder",
                                "null", "huge", "deep", "loop", "input_link", "bom",
                                "log_garbage", "log_corrupt_gz", "log_cut_gz", "a_file",
                                "surrogate", "nan", "trace_corrupt", "big_number"])]

    def output_path(self, *, dash: bool = True) -> str:
        """An output file: a new path, an existing file, a link, a null device or a
        FIFO; in a hostile command line maybe a full device, a folder, a loop, ..."""
        space = self.space
        if self.chance(0.4):
            return str(space.fresh("out")) + self.pick([".json", ".html", ".jsonl", ""])
        choices = ["existing_output", "link", "dangling", "null", "fifo"]
        if self.hostile:
            choices += ["full", "folder", "loop", "missing", "a_file", "in-a-file", "empty",
                        "full", "folder"]
        pick = self.pick(choices + (["-"] if dash else []))
        if pick == "fifo":
            return self.fifo_out()
        if pick == "in-a-file":
            return str(space.files["a_file"] / "x.json")
        if pick == "empty":
            return ""
        if pick == "-":
            return "-"
        return space[pick]

    def folder_path(self) -> str:
        """An output folder: a new one, or in a hostile command line maybe a file, a
        device, '-', ..."""
        if not self.bad(0.6):
            return str(self.space.fresh("dir") / self.pick(["", "nested/deeper"]))
        return self.pick([self.space["folder"], self.space["a_file"], self.space["null"], "-",
                          "", str(self.space.files["a_file"] / "sub"), self.space["loop"]])


def _options(draw: Draw, table: Sequence[tuple[float, Callable[[Draw], list[str]]]]
             ) -> list[str]:
    """Each option of ``table`` with its probability, in a shuffled order."""
    chosen = [make(draw) for probability, make in table if draw.chance(probability)]
    draw.rng.shuffle(chosen)
    return [part for option in chosen for part in option]


def _budget_options(draw: Draw) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    if draw.hostile:
        return [(0.7, lambda d: ["--max-tokens", d.integer()]),
                (0.7, lambda d: ["--target-tokens", d.integer()]),
                (0.3, lambda d: ["--output-reserve", d.integer()])]
    window = draw.rng.choice([1000, 4000, 10**6])
    target = draw.rng.choice([0, 1, 50, window // 2, window])
    reserve = draw.rng.choice([0, 1, window // 4])
    both = draw.chance(0.85)
    return [(1.0 if both else 0.3, lambda d: ["--max-tokens", str(window)]),
            (1.0 if both else 0.3, lambda d: ["--target-tokens", str(target)]),
            (0.3, lambda d: ["--output-reserve", str(reserve)])]


def _policy_options(draw: Draw) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    def policy(d: Draw) -> list[str]:
        named = ["chat", "Rag", "ToolUse", "debugging"]
        files = ["policy_toml", "policy_json"]
        if d.hostile:
            named += ["nope", "", "-"]
            files += ["policy_1e308", "policy_bad", "policy_negative", "policy_budget",
                      "missing", "folder", "binary", "empty", "null"]
        return ["--policy", d.pick(named) if d.chance(0.4) else d.space[d.pick(files)]]

    def scorer(d: Draw) -> list[str]:
        names = ["recency", "priority", "kind", "frequency", "reflexive", "metadata_trust"]
        if d.hostile:
            names += ["decay", "tag", "bogus", ""]
        return ["--scorer", d.pick(names) + (f":{d.number()}" if d.chance(0.5) else "")]

    def pick(option: str, valid: list[str], hostile: list[str]) -> Callable[[Draw], list[str]]:
        return lambda d: [option, d.pick(valid + hostile if d.hostile else valid)]

    return [(0.4, policy), (0.3, scorer), (0.15, scorer),
            (0.2, pick("--slicer", ["greedy", "knapsack"], ["quota", "", "x"])),
            (0.2, pick("--placer", ["chronological", "u-shaped", "u_shaped"],
                       ["random", ""])),
            (0.2, pick("--overflow", ["throw", "truncate", "PROCEED"], ["x"])),
            (0.15, lambda d: ["--no-dedup"])]


def _otlp_options(draw: Draw) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    return [(0.08, lambda d: ["--otlp"]),
            (0.1, lambda d: ["--otlp-tier", d.choose(["StageOnly", "StageAndExclusions",
                                                      "Full"], ["full", ""])]),
            (0.1, lambda d: ["--otlp-content", d.choose(["none", "hash", "full"], ["x"])]),
            (0.1, lambda d: ["--service", d.choose(["agent-7", "support agent", "日本"],
                                                   ["", " ", "\t"])])]


def _select(draw: Draw) -> list[str]:
    items = draw.input_path(["items", "items_jsonl", "items_separators", "chat", "chat_jsonl",
                             "anthropic", "edge_time", "edge_item_time", "bad_tokens",
                             "pinned_over", "candidates"])
    table = [
        *_budget_options(draw), *_policy_options(draw), *_otlp_options(draw),
        (0.15, lambda d: ["--chat"]), (0.1, lambda d: ["--items"]),
        (0.15, lambda d: ["--chat-format", d.choose(["openai", "anthropic"], ["x"])]),
        (0.5, lambda d: ["--estimate-tokens"]),
        (0.25, lambda d: ["--format", d.choose(["json", "text"], ["yaml"])]),
        (0.2, lambda d: ["--report", d.output_path()]),
        (0.2, lambda d: ["--events", d.output_path()]),
        (0.2, lambda d: ["--html", d.output_path()]),
        (0.2, lambda d: [d.pick(["-o", "--output"]), d.output_path()]),
        (0.15, lambda d: ["--out", d.folder_path()]),
        (0.15, lambda d: ["--audit-log", d.output_path(dash=False)]),
        (0.4, lambda d: [d.pick(["-q", "--quiet"])]),
    ]
    return ["select", items, *_options(draw, table)]


def _demo(draw: Draw) -> list[str]:
    table = [
        (0.9, lambda d: ["--out", d.folder_path()]),
        (0.2, lambda d: ["--audit-log", d.output_path(dash=False)]),
        (0.6, lambda d: [d.pick(["-q", "--quiet"])]),
        *_budget_options(draw), *_policy_options(draw), *_otlp_options(draw),
    ]
    argv = ["demo", *_options(draw, table)]
    if "--out" not in argv:  # the default, out/demo, would land in the working folder
        argv += ["--out", str(draw.space.fresh("demo"))]
    return argv


def _presets(draw: Draw) -> list[str]:
    return ["presets", *_options(draw, [(0.6, lambda d: ["--format", d.choose(
        ["text", "json"], ["csv"])])])]


def _policy_file(draw: Draw) -> str:
    valid = ["policy_toml", "policy_json", "demo_policy"]
    if draw.hostile:
        valid += ["policy_1e308", "policy_bad", "policy_negative", "policy_budget"]
    return draw.input_path(valid)


def _policy_show(draw: Draw) -> list[str]:
    spec = (draw.choose(["chat", "Rag", "CODEREVIEW", "longrunning"], ["x", "", "-"])
            if draw.chance(0.4) else _policy_file(draw))
    table = [(0.4, lambda d: ["--format", d.choose(["toml", "json"], ["xml"])]),
             *_budget_options(draw)]
    return ["policy", "show", spec, *_options(draw, table)]


def _policy_check(draw: Draw) -> list[str]:
    if draw.bad(0.1):
        return ["policy"]  # no action: a usage error
    count = draw.rng.randint(0 if draw.hostile else 1, 3)
    specs = [draw.choose(["chat"], ["nope"]) if draw.chance(0.3) else _policy_file(draw)
             for _ in range(count)]
    return ["policy", "check", *specs]


def _log_inputs(draw: Draw) -> list[str]:
    valid = ["audit", "log_gz", "log_cut", "trace", "trace_gz", "rotated", "audit",
             "log_keyed", "log_tampered"]
    return [draw.input_path(valid) for _ in range(draw.rng.choice([1, 1, 1, 2]))]


def _log_options(draw: Draw, *, service: bool = True
                 ) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    table = [(0.2, lambda d: ["--no-rotated"]), (0.3, lambda d: ["--no-progress"]),
             (0.4, lambda d: ["--format", d.choose(["text", "json"], ["csv"])])]
    if service:
        table.append((0.1, lambda d: ["--service", d.choose(["web", ""], [d.text()])]))
    return table


def _run_filters(*, policy: tuple[str, ...] = ("--policy", "--strategy")
                 ) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    """The run filters (files and --store alike): any string is a value (one that
    matches nothing exits 1)."""
    def pick(option: str | tuple[str, ...], valid: list[str]) -> Callable[[Draw], list[str]]:
        names = (option,) if isinstance(option, str) else option
        return lambda d: [d.rng.choice(names), d.pick(valid) if d.chance(0.6) else d.text()]

    return [(0.08, pick("--session", ["s-1", "session-42"])),
            (0.08, pick("--user", ["u-1"])), (0.08, pick("--conversation", ["c-1"])),
            (0.1, pick("--reason", ["BudgetExceeded", "Deduplicated", "PinnedOverride"])),
            (0.1, pick("--kind", ["Message", "ToolOutput", "Document"])),
            (0.1, pick(policy, ["greedy", "knapsack", "true"]))]


def _log_or_store(draw: Draw) -> list[str]:
    """The logs to read, or (now and then) ``--store URL`` instead — or, in a hostile
    command line, both."""
    if not draw.chance(0.12):
        return _log_inputs(draw)
    both = _log_inputs(draw) if draw.bad(0.2) else []
    return [*both, "--store", draw.store()]


def _audit(draw: Draw) -> list[str]:
    table = [*_log_options(draw), (0.3, lambda d: ["--since", d.moment()]),
             (0.3, lambda d: ["--until", d.moment()]), (0.3, lambda d: ["--strict"]),
             *_run_filters()]
    return ["audit", *_log_or_store(draw), *_options(draw, table)]


def _report_from(draw: Draw) -> list[str]:
    """``report --from BACKEND URL``: nothing listens at the URL, or a hostile server
    answers (malformed HTTP, a refused redirect, a drip, a body over the limit: exit
    2, one line), or a usage error."""
    backend = draw.choose(["phoenix", "mlflow", "jaeger", "tempo"], ["zipkin", ""])
    table = [
        (0.4, lambda d: ["--trace", d.choose(["0af7651916cd43dd8448eb211c80319c",
                                              "tr-0af7651916cd43dd8448eb211c80319c"],
                                             ["xyz", d.text()])]),
        (0.3, lambda d: ["--run", d.text() if d.chance(0.5) else "315fe6a82ebab60e"]),
        (0.3, lambda d: ["--since", d.choose(["15m", "2h", "7d"], [d.moment()])]),
        (0.3, lambda d: ["--project", d.text()]),
        (0.3, lambda d: ["--experiment", d.choose(["1", "cupel"], [d.text()])]),
        (0.3, lambda d: ["--service", d.text()]),
        (0.3, lambda d: ["--header", d.choose(["authorization:Bearer s3cret", "x-a=b"],
                                              ["novalue", ":v", d.text()])]),
        (0.2, lambda d: ["--format", d.choose(["text", "json"], ["xml"])]),
        (0.2, lambda d: ["--allow-incomplete"]),
        (0.2, lambda d: ["--max-body-bytes", d.choose(["1000", "100000"], ["0", "-1"])]),
        (0.2, lambda d: ["--max-requests", d.choose(["1", "3"], ["0"])]),
        (0.1, lambda d: ["--insecure"]),
    ]
    argv = ["report", "--from", backend, draw.remote_url(), *_options(draw, table)]
    return [*argv, "--timeout", draw.number() if draw.bad(0.3) else draw.pick(["0.2", "1"])]


def _report(draw: Draw) -> list[str]:
    if draw.chance(0.25):
        return _report_from(draw)
    table = [*_log_options(draw, service=False),
             (0.3, lambda d: ["--run", d.text() if d.chance(0.5) else "315fe6a82ebab60e"]),
             (0.25, lambda d: ["--html", d.output_path()]),
             (0.3, lambda d: ["--allow-incomplete"]), *_run_filters()]
    if draw.chance(0.15):  # SelectionReport files (the demo's report.json)
        inputs = [draw.input_path(["report_a", "report_b"])
                  for _ in range(draw.rng.choice([1, 2]))]
        return ["report", *inputs, *_options(draw, table)]
    return ["report", *_log_or_store(draw), *_options(draw, table)]


def _why(draw: Draw) -> list[str]:
    which = (["--content", draw.text() if draw.chance(0.5) else "item 2"]
             if draw.chance(0.5) else ["--match", draw.regex()])
    if draw.bad(0.1):
        which = []  # neither: a usage error
    table = [*_log_options(draw), (0.2, lambda d: ["--since", d.moment()]),
             (0.2, lambda d: ["--until", d.moment()]),
             (0.3, _against), (0.15, _against),
             (0.2, lambda d: ["--budget-ceiling", d.integer()]),
             (0.15, lambda d: ["--limit", d.choose(["1", "3"], ["0", "-1", "x"])]),
             (0.15, lambda d: ["--offset", d.choose(["0", "2"], ["-3", "y"])]),
             *_run_filters()]
    return ["why", *_log_or_store(draw), *which, *_options(draw, table)]


def _against(draw: Draw) -> list[str]:
    """``--against`` / ``--policy`` of why and replay: a preset or a policy file."""
    named = ["chat", "Rag", "ToolUse", "debugging"]
    files = ["policy_toml", "policy_json", "demo_policy"]
    if draw.hostile:
        named += ["nope", "", "-"]
        files += ["policy_1e308", "policy_bad", "policy_negative", "missing", "folder",
                  "binary", "empty", "null"]
    return [draw.pick(["--against"]), draw.pick(named) if draw.chance(0.4)
            else draw.space[draw.pick(files)]]


def _replay(draw: Draw) -> list[str]:
    policy = _against(draw)[1:]
    if draw.bad(0.1):
        policy = []  # no --policy: a usage error
    table = [*_log_options(draw), (0.2, lambda d: ["--since", d.moment()]),
             (0.2, lambda d: ["--until", d.moment()]),
             (0.4, lambda d: ["--match", d.regex()]), *_run_filters(policy=("--strategy",))]
    return ["replay", *_log_or_store(draw), *(["--policy", *policy] if policy else []),
            *_options(draw, table)]


def _sim_source(draw: Draw) -> list[tuple[float, Callable[[Draw], list[str]]]]:
    """The input options of simulate and sensitivity (issue 24): how FILE is read, the
    chat options, the run options and filters, the budget flags and --format."""
    return [
        (0.15, lambda d: [d.pick(["--items", "--chat", "--runs"])]),
        (0.2, lambda d: ["--chat-format", d.choose(
            ["openai", "openai-responses", "anthropic", "langchain"], ["x"])]),
        (0.5, lambda d: ["--estimate-tokens"]),
        (0.2, lambda d: ["--trim", d.choose(["ToolOutput=20", "Message=5"],
                                            ["ToolOutput", "x=-1", "Nope=3", "=", d.text()])]),
        (0.15, lambda d: ["--run", d.pick(_run_ids(d.space)) if d.chance(0.6) else d.text()]),
        (0.1, lambda d: ["--no-rotated"]),
        (0.3, lambda d: ["--format", d.choose(["text", "json"], ["csv"])]),
        *_run_filters(policy=("--strategy",)),
    ]


def _sim_file(draw: Draw) -> str:
    return draw.input_path(["items", "items_jsonl", "chat", "chat_jsonl", "anthropic",
                            "candidates", "audit", "log_gz", "log_cut", "trace", "log_keyed",
                            "edge_time", "pinned_over", "bad_tokens"])


def _simulate(draw: Draw) -> list[str]:
    """``simulate FILE --budgets ... | --from --to --step`` over items, chats and runs."""
    def budgets(d: Draw) -> list[str]:
        return ["--budgets", d.choose(["10,100,1000", "500", "0,50"],
                                      ["", "1,,2", "-1", "x", ",".join(["7"] * 300)])]

    def ranged(d: Draw) -> list[str]:
        return ["--from", d.choose(["0", "10"], ["-5", "x"]), "--to",
                d.choose(["200", "1000"], ["1", "99999999"]), "--step",
                d.choose(["100", "250"], ["0", "1"])]

    table = [*_sim_source(draw), *_budget_options(draw),
             (0.3, lambda d: ["--policy", d.choose(["chat", "rag", "ToolUse"], ["nope"])
                              if d.chance(0.6) else d.space[d.pick(["policy_toml",
                                                                     "policy_json"])]])]
    form = [] if draw.bad(0.15) else budgets(draw) if draw.chance(0.6) else ranged(draw)
    if draw.bad(0.1):
        form += budgets(draw)  # both forms: a usage error
    return ["simulate", _sim_file(draw), *form, *_options(draw, table)]


def _sensitivity(draw: Draw) -> list[str]:
    """``sensitivity FILE --policy A --policy B`` over items, chats and runs."""
    count = draw.rng.choice([1, 2, 2, 3]) if draw.hostile else draw.rng.choice([2, 3])
    policies = [part for _ in range(count) for part in _against(draw)[1:]]
    argv = [part for spec in policies for part in ("--policy", spec)]
    table = [*_sim_source(draw), *_budget_options(draw)]
    return ["sensitivity", _sim_file(draw), *argv, *_options(draw, table)]


def _run_ids(space: Workspace) -> list[str]:
    """The run ids of the workspace's audit log, in order."""
    ids: list[str] = []
    for line in space.files["audit"].read_bytes().splitlines():
        run_id = json.loads(line).get("run_id")
        if run_id not in ids:
            ids.append(run_id)
    return ids


def _diff(draw: Draw) -> list[str]:
    table: list[tuple[float, Callable[[Draw], list[str]]]]
    if draw.chance(0.4):
        ids = _run_ids(draw.space)
        pair = [draw.pick(ids) if not draw.bad(0.3) else draw.text() for _ in range(2)]
        logs = [part for path in _log_inputs(draw) for part in ("--log", path)]
        if draw.chance(0.2):  # the runs in a store instead (a hostile line: both)
            logs = [*(logs if draw.bad(0.3) else []), "--store", draw.store()]
        table = [(0.2, lambda d: ["--no-rotated"])]
        argv = ["diff", *pair, *logs]
    else:
        reports = ["report_a", "report_b"]
        pair = [draw.input_path(reports) for _ in range(2)]
        table = []
        argv = ["diff", *pair]
    table.append((0.4, lambda d: ["--format", d.choose(["text", "json"], ["csv"])]))
    return [*argv, *_options(draw, table)]


def _export(draw: Draw) -> list[str]:
    to: str | None = None if draw.bad(0.1) else draw.choose(["otlp", "file", "file"], ["http"])
    table = [
        (0.2, lambda d: ["--protocol", d.choose(["http/protobuf", "grpc"], ["udp"])]),
        (0.25, lambda d: ["--endpoint", d.url()]),
        (0.2, lambda d: ["--header", d.choose(["x-a=b", "k=", "x-project-name=p q"],
                                              ["novalue", "=v", d.text()])]),
        (0.2, lambda d: ["--tier", d.choose(["StageOnly", "StageAndExclusions", "Full"],
                                            ["x"])]),
        (0.2, lambda d: ["--content-capture", d.choose(["full", "hash", "none"], ["all"])]),
        (0.2, lambda d: ["--service-name", d.text()]),
        (0.2, lambda d: ["--no-rotated"]), (0.5, lambda d: ["--quiet"]),
    ]
    argv = ["export", *_log_inputs(draw), *_options(draw, table)]
    if to is not None:
        argv += ["--to", to]
    if (to == "file" and not draw.bad(0.1)) or draw.bad(0.1):
        argv += ["--out", draw.output_path()]
    # A short timeout keeps every OTLP attempt short (nothing answers at the endpoint;
    # without one the SDK retries for 10 s); a hostile one sometimes.
    if to != "file" or draw.bad(0.1):
        argv += ["--timeout", draw.number() if draw.bad(0.3) else draw.pick(
            ["0.05", "0.2", "0.001", "0.3"])]
    return argv


def _store(draw: Draw) -> list[str]:
    """``store load FILE... --into URL``: logs and traces (valid, damaged, special
    files) into the workspace's store; now and then ``store accelerate --into URL``;
    or no action at all."""
    if draw.bad(0.1):
        return ["store"] if draw.chance(0.5) else ["store", "unload"]
    if draw.chance(0.15):
        into = [] if draw.bad(0.1) else ["--into", draw.store()]
        return ["store", "accelerate", *into, *_options(draw, [
            (0.4, lambda d: ["--materialize"]),
            (0.4, lambda d: ["--format", d.choose(["text", "json"], ["csv"])])])]
    files = [draw.input_path(["audit", "log_gz", "log_cut", "audit", "trace"])
             for _ in range(draw.rng.choice([1, 1, 2]))]
    table = [(0.3, lambda d: ["--service", d.choose(["web", ""], [d.text()])]),
             (0.3, lambda d: ["--strict"]), (0.3, lambda d: ["--no-progress"]),
             (0.4, lambda d: ["--format", d.choose(["text", "json"], ["csv"])])]
    into = [] if draw.bad(0.1) else ["--into", draw.store()]
    return ["store", "load", *files, *into, *_options(draw, table)]


def _stats(draw: Draw) -> list[str]:
    """``stats --store URL``: fleet statistics in SQL over the workspace's store (or a
    hostile URL), every option drawn, bad values too."""
    table = [(0.3, lambda d: ["--since", d.moment()]), (0.3, lambda d: ["--until", d.moment()]),
             (0.3, lambda d: ["--service", d.choose(["web", "cupellation"], [d.text()])]),
             (0.3, lambda d: ["--bucket", d.choose(["hour", "day", "week", "none"],
                                                   ["month", ""])]),
             (0.3, lambda d: ["--top", d.choose(["0", "3", "10"], ["-1", "x", d.number()])]),
             (0.4, lambda d: ["--format", d.choose(["text", "json", "csv"], ["xml"])]),
             (0.3, lambda d: ["--table", d.choose(["exclusions", "utilization", "failures",
                                                   "sources"], ["runs"])]),
             (0.2, lambda d: ["--html", d.output_path()]), (0.3, lambda d: ["--strict"])]
    store = [] if draw.bad(0.1) else ["--store", draw.store()]
    return ["stats", *store, *_options(draw, table)]


def _conformance(draw: Draw) -> list[str]:
    space = draw.space
    paths = [space[draw.choose(["vectors", "vector_ok", "vector_wrong", "vectors"],
                               ["vector_junk", "vector_binary", "empty_folder", "missing",
                                "binary", "null", "folder"])]
             for _ in range(draw.rng.randint(0 if draw.hostile else 1, 2))]
    return ["conformance", *paths, *_options(draw, [(0.3, lambda d: [
        d.pick(["-v", "--verbose"])])])]


def _top_level(draw: Draw) -> list[str]:
    lines: list[list[str]] = [["--version"], ["--help"], ["-h"], ["select", "--help"],
                              ["report", "-h"], ["policy", "show", "--help"]]
    if draw.hostile:
        lines += [[], ["frobnicate"], ["-x"], ["--"], [draw.text()]]
    return list(draw.rng.choice(lines))


#: Subcommand -> generator of one command line for it. Later commands add theirs.
GENERATORS: dict[str, Callable[[Draw], list[str]]] = {
    "audit": _audit,
    "conformance": _conformance,
    "demo": _demo,
    "export": _export,
    "policy check": _policy_check,
    "policy show": _policy_show,
    "presets": _presets,
    "replay": _replay,
    "report": _report,
    "diff": _diff,
    "select": _select,
    "sensitivity": _sensitivity,
    "simulate": _simulate,
    "stats": _stats,
    "store": _store,
    "why": _why,
    "": _top_level,
}


def draw_invocation(seed: str, index: int, space: Workspace, *, in_process: bool
                    ) -> Invocation:
    """Invocation ``index`` of the run seeded ``seed``: the subcommands in turn, each
    command line drawn at random (reproducible from ``seed`` and ``index``)."""
    rng = random.Random(f"{seed}:{index}:{in_process}")
    names = sorted(GENERATORS)
    draw = Draw(rng, space, in_process=in_process)
    argv = GENERATORS[names[index % len(names)]](draw)
    if draw.bad(0.06):  # a stray positional or an unknown option anywhere
        argv.insert(rng.randint(0, len(argv)), rng.choice(["--bogus", "extra", "-Z"]))
    draw.invocation.argv = argv
    if draw.chance(0.15):  # the variables the commands and the exporters read
        draw.invocation.env = {
            "CUPELLATION_CAPTURE_CONTENT": draw.choose(["full", "hash", "none"], ["bogus", ""]),
            "OTEL_EXPORTER_OTLP_HEADERS": draw.choose(["x-a=b"], ["a", "=", "%zz=1"]),
            "OTEL_EXPORTER_OTLP_COMPRESSION": draw.choose(["gzip", "none"], ["zip"]),
            "OTEL_SERVICE_NAME": draw.choose(["svc", "my service"], ["\u202e", "日本", ""]),
        }
    return draw.invocation


@contextmanager
def feeding(invocation: Invocation) -> Iterator[None]:
    """The FIFOs of ``invocation`` made and served (a writer per input, a reader per
    output) for the block; the ones the command never opened are released after."""
    with ExitStack() as stack:
        for path, data in invocation.fifo_inputs.items():
            stack.enter_context(fifo_writer(Path(path), data))
        for path in invocation.fifo_outputs:
            stack.enter_context(fifo_reader(Path(path)))
        yield


def stdin_stream(data: bytes) -> io.TextIOWrapper:
    """A standard input holding ``data``, for an in-process run."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def is_device(path: str) -> bool:
    """True when ``path`` is a character device (the guard on the real ones)."""
    return stat.S_ISCHR(os.lstat(path).st_mode)
