"""cupellation.settings: the one module that reads the environment, its switch, and
the documentation generated from it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from _docs_hooks import docs_hooks
from cupellation import settings
from cupellation.chat._tokens import _tiktoken_cache_file
from cupellation.cli._tracelinks import trace_lines
from cupellation.events import ContentCapture, resolve_capture
from cupellation.exceptions import InvalidTypeError, InvalidValueError
from cupellation_exporters import otlp_resource, otlp_target, setup_otlp

ROOT = Path(__file__).resolve().parents[1]
#: What reads the environment in Python: os.environ / os.getenv / a mapping's
#: environ.get / urllib's proxy lookup.
_ENVIRONMENT_READ = re.compile(r"os\.environ|os\.getenv|environ\.get|environ\[|getproxies\(")
_TRACE = "0af7651916cd43dd8448eb211c80319c"

#: One value per variable the test sets: each is read differently from its default.
_SET = {
    settings.CAPTURE_ENV_VAR: "hash",
    settings.DIGEST_KEY_ENV_VAR: "k",
    settings.SERVICE_ENV_VAR: "svc-from-env",
    settings.RESOURCE_ATTRIBUTES_ENV_VAR: "openinference.project.name=agents,team=a",
    settings.STORE_USER_ENV_VAR: "auditor",
    settings.STORE_PASSWORD_ENV_VAR: "pw",
    settings.OTLP_ENDPOINT_ENV_VAR: "http://collector.invalid:4318",
    settings.OTLP_HEADERS_ENV_VAR: "authorization=Bearer%20s3cret",
    settings.OTLP_TIMEOUT_ENV_VAR: "3",
    settings.TIKTOKEN_CACHE_DIR_ENV_VAR: "/tmp/tiktoken-from-env",
    settings.HTTPS_PROXY_ENV_VAR: "http://proxy.invalid:3128",
}


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The variables of _SET in the environment; environment reading on again after."""
    for name, value in _SET.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    yield
    settings.use_environment(True)


def _readers() -> dict[str, object]:
    """What each reader of the environment decides now."""
    providers = setup_otlp(metrics=False)
    providers.shutdown()  # no span was made: nothing is sent, the batch thread ends
    processor = providers.span_processor
    exporter = processor.exporter.exporter
    cache = _tiktoken_cache_file("x")
    resource = otlp_resource().attributes
    return {
        "capture": resolve_capture(None, ContentCapture.FULL),
        "digest key": settings.resolve_digest_key(None),
        "service": settings.resolve_service(None),
        "store": settings.resolve_store_credentials(),
        "proxy": settings.proxy_for("https", "example.com"),
        "tiktoken": None if cache is None else str(cache.parent),
        "target": otlp_target(),
        "exporter": (getattr(exporter, "_endpoint", None), processor.shutdown_timeout_millis),
        "resource": (resource.get("service.name"), resource.get("team")),
        "hint": trace_lines("http://localhost:6006/v1/traces", [(_TRACE, "r")])[1],
    }


def test_only_the_settings_module_reads_the_environment() -> None:
    """No module of src/ or exporters/src/ but cupellation/settings.py reads the
    environment (os.environ, os.getenv, environ.get, urllib's getproxies): every
    variable goes through settings.read or settings.proxy_for. The pattern is checked
    on lines it must and must not flag."""
    readers = sorted({path.relative_to(base).as_posix()
                      for base in (ROOT / "src", ROOT / "exporters" / "src")
                      for path in base.rglob("*.py")
                      if _ENVIRONMENT_READ.search(path.read_text(encoding="utf-8"))})
    assert readers == ["cupellation/settings.py"]
    lines = {'os.environ.get("X")': True, 'os.getenv("X")': True, "environ.get(name)": True,
             'os.environ["X"]': True, "urllib.request.getproxies()": True,
             "read(CAPTURE_ENV_VAR)": False, "env.get(RESOURCE_ATTRIBUTES_ENV_VAR)": False}
    assert {line: bool(_ENVIRONMENT_READ.search(line)) for line in lines} == lines


def test_read_knows_only_the_declared_variables_and_the_switch_turns_them_off(
        environment: None) -> None:
    """settings.read gives a declared variable's value, refuses a name VARIABLES does
    not declare (naming it), and answers None for every variable once
    use_environment(False) is called (which takes a bool only)."""
    assert settings.environment_used()
    assert settings.read(settings.CAPTURE_ENV_VAR) == "hash"
    with pytest.raises(InvalidValueError, match="HOME"):
        settings.read("HOME")
    with pytest.raises(InvalidTypeError, match="enabled"):
        settings.use_environment("no")  # type: ignore[arg-type]
    settings.use_environment(False)
    assert not settings.environment_used()
    assert [v.name for v in settings.VARIABLES if settings.read(v.name) is not None] == []


def test_with_the_environment_off_every_reader_takes_its_documented_default(
        environment: None) -> None:
    """With the variables set, each reader follows them (content capture, digest key,
    service, store credentials, proxy, tiktoken's cache, the OTLP target, the SDK
    exporter's endpoint, the export timeout bounding shutdown, the resource, the CLI's
    read-back hint); after use_environment(False) each takes its default, the SDK
    exporter and the resource included (setup_otlp gives them explicit values)."""
    on = _readers()
    assert on == {
        "capture": ContentCapture.HASH, "digest key": b"k", "service": "svc-from-env",
        "store": ("auditor", "pw"), "proxy": "http://proxy.invalid:3128",
        "tiktoken": "/tmp/tiktoken-from-env",
        "target": ("http/protobuf", "http://collector.invalid:4318"),
        "exporter": ("http://collector.invalid:4318/v1/traces", 3000.0),
        "resource": ("svc-from-env", "a"),
        "hint": f"  read it back: cupellation report --from phoenix http://localhost:6006 "
                f"--trace {_TRACE} --project agents"}
    settings.use_environment(False)
    off = _readers()
    assert off["hint"] == str(on["hint"]).removesuffix(" --project agents")
    assert off["tiktoken"] != on["tiktoken"]
    del off["hint"], off["tiktoken"]
    assert off == {
        "capture": ContentCapture.FULL, "digest key": None, "service": None,
        "store": (None, None), "proxy": None,
        "target": ("http/protobuf", "http://localhost:4318"),
        "exporter": ("http://localhost:4318/v1/traces", 10_000.0),
        "resource": ("cupellation", None)}


def test_the_documentation_lists_exactly_the_variables_the_module_declares() -> None:
    """docs/settings.md holds the generated table; the table (scripts/docs_hooks.py's
    settings_table) has one row per entry of settings.VARIABLES; VARIABLES holds every
    *_ENV_VAR constant of the module once, each with its meaning and its readers."""
    assert "<!-- settings -->" in (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    table = docs_hooks().settings_table()
    documented = re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE)
    declared = [variable.name for variable in settings.VARIABLES]
    assert documented == declared
    constants = {getattr(settings, name) for name in settings.__all__
                 if name.endswith("_ENV_VAR")}
    assert sorted(constants) == sorted(declared)
    assert len(set(declared)) == len(declared)
    assert all(v.meaning and v.read_by for v in settings.VARIABLES)
