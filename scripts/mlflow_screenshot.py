"""Take mlflow-trace.png, mlflow-stage.png and mlflow-traces.png: the demo's trace in
MLflow's trace view (the root span, then the Slice stage's span selected) and
MLflow's trace list, as a user meets them, in headless Chromium.

    .venv/bin/python scripts/mlflow_screenshot.py [--out-dir DIR] [--items N]

It starts MLflow (``scripts/install-mlflow.sh`` puts it in ``.mlflow-venv``; set
``MLFLOW_VENV`` for another place) on a free 127.0.0.1 port with a fresh sqlite
store, creates an experiment, runs ``cupellation demo --otlp`` against it (with
``--items N``: ``cupellation select --otlp`` on N candidates made from the demo's,
under the demo's policy; the pictures are then named ``mlflow-*-N.png``), and drives
Chromium with Selenium (the dev extra's ``selenium``, Debian's ``chromium-driver``):
MLflow's trace view chooses its span by a click, not by its URL. Its assistant panel
and first-visit hints are closed first, as a user would. The pictures go to
``--out-dir`` (default: ``docs/images``). Nothing is left running.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# (The shared helpers sit beside this script; a test may load it from elsewhere.)
from _screenshots import (
    ROOT,
    chromium,
    free_port,
    get_json,
    send_run,
    shot_args,
    temporary_profile,
    wait,
)

NAME = "mlflow_screenshot"
EXPERIMENT = "cupellation-demo"
#: A busy machine can take minutes to start MLflow.
STARTUP_SECONDS = float(os.environ.get("MLFLOW_STARTUP_SECONDS", "300"))
#: How long the page is given to draw after a load or a click (no timed assertion:
#: the picture is checked by looking at it).
SETTLE_SECONDS = 6.0
#: First-visit hints and panels closed before any picture (their data-component-id).
_DISMISS = ("mlflow.detect_issues.guidance.got_it", "mlflow.assistant.chat_panel.close")


def _start_mlflow(work: Path, port: int) -> subprocess.Popen[bytes]:
    venv = Path(os.environ.get("MLFLOW_VENV") or ROOT / ".mlflow-venv")
    executable = venv / "bin" / "mlflow"
    if not executable.exists():
        raise SystemExit(f"{NAME}: no MLflow at {executable}; run: "
                         "bash scripts/install-mlflow.sh")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("OTEL_", "MLFLOW_"))}
    # (MLflow 3's job consumers, six processes the traces API does not use: off.)
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    log = (work / "mlflow.log").open("wb")
    return subprocess.Popen(
        [str(executable), "server", "--host", "127.0.0.1", "--port", str(port), "--workers",
         "1", "--backend-store-uri", f"sqlite:///{work / 'mlflow.db'}",
         "--default-artifact-root", str(work / "artifacts")],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
        start_new_session=True, cwd=work)


@contextmanager
def _browser(size: str) -> Iterator[Any]:
    """A headless Chromium under Selenium, closed after."""
    try:
        from selenium import webdriver  # noqa: PLC0415 - only this script needs it
        from selenium.webdriver.chrome.service import Service  # noqa: PLC0415
    except ImportError:
        raise SystemExit(f"{NAME}: needs selenium (pip install -e '.[dev]')") from None
    driver_path = shutil.which("chromedriver")
    if driver_path is None:
        raise SystemExit(f"{NAME}: no chromedriver; run: apt-get install chromium-driver")
    with temporary_profile() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = chromium()
        for argument in shot_args(profile, size):
            options.add_argument(argument)
        driver = webdriver.Chrome(options=options, service=Service(driver_path))
        try:
            yield driver
        finally:
            driver.quit()


def _click(driver: Any, xpath: str) -> bool:
    """Click the last element ``xpath`` finds (a span's name in the tree); False if
    there is none."""
    from selenium.webdriver.common.by import By  # noqa: PLC0415

    found = driver.find_elements(By.XPATH, xpath)
    if not found:
        return False
    # (A script's click: an overlay fading out would take a pointer's click.)
    driver.execute_script("arguments[0].click();", found[-1])
    time.sleep(SETTLE_SECONDS)
    return True


def _dismiss(driver: Any) -> None:
    for component in _DISMISS:
        _click(driver, f"//*[@data-component-id='{component}']")


def _span(driver: Any, name: str, out: Path) -> None:
    """Select the span ``name`` in the open trace view and save the picture."""
    xpath = f"//*[text()='{name}']"
    wait(NAME, f"the span {name} in the trace view", lambda: _click(driver, xpath),
         STARTUP_SECONDS / 5)
    driver.save_screenshot(str(out))


def _pictures(base: str, experiment: str, trace_id: str, outs: tuple[Path, Path, Path]
              ) -> str:
    """The root, the Slice span and the trace list; the trace view's URL."""
    root_out, stage_out, list_out = outs
    traces = f"{base}/#/experiments/{experiment}/traces"
    url = f"{traces}?selectedEvaluationId=tr-{trace_id}"
    with _browser("1600,1400") as driver:
        driver.get(traces)
        time.sleep(SETTLE_SECONDS)
        _dismiss(driver)
        driver.get(url)
        time.sleep(SETTLE_SECONDS)
        _dismiss(driver)
        _span(driver, "cupel.pipeline", root_out)
        _span(driver, "cupel.stage.slice", stage_out)
        driver.get(traces)
        time.sleep(SETTLE_SECONDS)
        _dismiss(driver)
        driver.save_screenshot(str(list_out))
    return url


def main(argv: list[str] | None = None) -> int:
    """Start MLflow, send the run, take the three screenshots, stop MLflow."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--items", type=int, default=None, metavar="N",
                        help="send N candidates made from the demo's instead of the demo")
    args = parser.parse_args(argv)
    suffix = "" if args.items is None else f"-{args.items}"
    outs = tuple(args.out_dir / f"mlflow-{kind}{suffix}.png"
                 for kind in ("trace", "stage", "traces"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with temporary_profile() as work:
        mlflow = _start_mlflow(Path(work), port)
        try:
            wait(NAME, "MLflow's start", lambda: urllib.request.urlopen(
                f"{base}/health", timeout=5).status == 200, STARTUP_SECONDS)
            experiment = str(get_json(f"{base}/api/2.0/mlflow/experiments/create",
                                      {"name": EXPERIMENT})["experiment_id"])
            trace_id = send_run(NAME, {
                "OTEL_EXPORTER_OTLP_ENDPOINT": base,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_HEADERS": f"x-mlflow-experiment-id={experiment}",
                "OTEL_SERVICE_NAME": "cupellation-demo"}, Path(work), args.items)
            url = _pictures(base, experiment, trace_id, (outs[0], outs[1], outs[2]))
        finally:
            os.killpg(mlflow.pid, signal.SIGTERM)
            try:
                mlflow.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(mlflow.pid, signal.SIGKILL)
    print(f"wrote {', '.join(str(out) for out in outs)} ({url})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
