"""Fixtures for the integration tests: a session-wide real Phoenix, and an
environment free of the caller's OTEL_* variables for every test here."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator

import pytest

from .phoenix import Phoenix, run_phoenix

_PHOENIX_KEY = pytest.StashKey[Phoenix]()


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory,
            request: pytest.FixtureRequest) -> Iterator[Phoenix]:
    """A Phoenix started once for the session on free 127.0.0.1 ports, stopped
    (SIGTERM, then SIGKILL after a bound) at the end. Fails if it is not installed."""
    with run_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        request.config.stash[_PHOENIX_KEY] = server
        yield server


@pytest.fixture(autouse=True)
def _no_ambient_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests here set the OTEL_* variables they mean; none leak in from the caller."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                     pytest.TestReport]:
    """Attach the tail of Phoenix's log to the report of a failed Phoenix test."""
    report = yield
    if report.failed and "phoenix" in getattr(item, "fixturenames", ()):
        server = item.config.stash.get(_PHOENIX_KEY, None)
        if server is not None:
            report.sections.append(("Phoenix log", server.log_tail()))
    return report
