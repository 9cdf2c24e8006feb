"""``select`` and ``demo`` record the service that ran them (``--service``, else the
environment, else ``cupellation``) in every file and span they write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _cli_support import assert_one_line_error, run_main


@pytest.fixture(autouse=True)
def _no_service_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)


def _started(path: Path) -> dict[str, Any]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return next(line for line in lines if line["type"] == "run_started")


def test_the_cli_records_service_option_then_environment_then_its_own_name(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``demo --audit-log`` records ``--service``; without it OTEL_SERVICE_NAME; with
    neither ``cupellation`` (the name --otlp's resource takes by default), in the audit
    log and in the demo's own events file and spans alike; a blank --service is exit 2
    with one line naming the option."""
    def recorded(*extra: str) -> str:
        out = tmp_path / f"d{len(list(tmp_path.iterdir()))}"
        result = run_main(capsys, "demo", "-q", "--out", out, "--audit-log", out / "a.log",
                          *extra)
        assert result.code == 0, result.err
        events = _started(out / "events.jsonl")["service"]
        trace_text = (out / "trace.jsonl").read_text()
        assert f'"stringValue":"{events}"' in trace_text.replace(" ", "")
        assert _started(out / "a.log")["service"] == events
        return str(events)

    assert recorded() == "cupellation"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    assert recorded() == "from-env"
    assert recorded("--service", "agent-7") == "agent-7"
    assert_one_line_error(run_main(capsys, "demo", "-q", "--out", tmp_path / "x",
                                   "--service", " "), 2, "--service")
