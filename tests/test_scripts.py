"""scripts/test.sh, the README's test command: it installs each missing component or
stops with one line naming it and the command to run, never going on without it.

Each case runs a copy of the script in a temporary folder whose scripts/setup.sh and
scripts/install-phoenix.sh are stand-ins, with dpkg, id and apt-get replaced on PATH:
nothing is installed and the real suite is never started from inside itself."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APT_COMMAND = ("apt-get update && apt-get install -y --no-install-recommends "
               "chromium chromium-driver")


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text, encoding="utf-8")
    path.chmod(0o755)


def _run(tmp_path: Path, *, dpkg: str, uid: int, apt_get: str = "exit 0",
         phoenix: str = "exit 0", mlflow: str = "exit 0") -> subprocess.CompletedProcess[str]:
    """scripts/test.sh copied to ``tmp_path/repo``, run with stand-ins: ``dpkg``,
    ``id -u`` printing ``uid``, ``apt-get``, install-phoenix.sh and install-mlflow.sh
    (shell bodies), and a setup.sh that records it ran and stops the script with exit 3."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test.sh", repo / "scripts" / "test.sh")
    _executable(repo / "scripts" / "install-phoenix.sh", phoenix + "\n")
    _executable(repo / "scripts" / "install-mlflow.sh", mlflow + "\n")
    _executable(repo / "scripts" / "setup.sh", f"touch '{tmp_path}/setup-ran'\nexit 3\n")
    shims = tmp_path / "bin"
    _executable(shims / "dpkg", dpkg + "\n")
    _executable(shims / "id", f"echo {uid}\n")
    _executable(shims / "apt-get", f"echo \"apt-get $*\" >> '{tmp_path}/apt-calls'\n"
                + apt_get + "\n")
    env = {**os.environ, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", str(repo / "scripts" / "test.sh")], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_missing_chromium_without_root_is_one_line_naming_the_command(tmp_path: Path) -> None:
    """Not root and Chromium missing: exit 1, one line on stderr naming chromium and the
    apt-get command to run with sudo; apt-get is not tried, nothing else runs."""
    done = _run(tmp_path, dpkg="exit 1", uid=1000)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"scripts/test.sh: cannot install chromium (not root); run: sudo sh -c '{APT_COMMAND}'"]
    assert not (tmp_path / "apt-calls").exists()
    assert not (tmp_path / "setup-ran").exists()


def test_a_failing_apt_get_is_one_line_naming_its_log(tmp_path: Path) -> None:
    """Root, Chromium missing, apt-get failing: apt-get's own output goes to a log, and
    stderr has one line naming chromium, that log and the command; nothing else runs."""
    done = _run(tmp_path, dpkg="exit 1", uid=0, apt_get="echo 'E: no network' >&2; exit 100")
    assert done.returncode == 1
    log = tmp_path / "repo" / "out" / "install-logs" / "chromium.log"
    assert done.stderr.splitlines() == [
        f"scripts/test.sh: cannot install chromium (apt-get failed, its output is in {log}); "
        f"run: {APT_COMMAND}"]
    assert "E: no network" in log.read_text(encoding="utf-8")
    assert (tmp_path / "apt-calls").read_text(encoding="utf-8") == "apt-get update\n"
    assert not (tmp_path / "setup-ran").exists()


def test_missing_chromium_is_installed_with_apt_get_as_root(tmp_path: Path) -> None:
    """Root and Chromium missing: apt-get update, then install of both packages without
    recommends, and the script goes on (to setup.sh, whose stand-in stops it)."""
    done = _run(tmp_path, dpkg="exit 1", uid=0)
    assert done.returncode == 3
    assert (tmp_path / "apt-calls").read_text(encoding="utf-8").splitlines() == [
        "apt-get update",
        "apt-get install -y --no-install-recommends chromium chromium-driver"]
    assert (tmp_path / "setup-ran").exists()


@pytest.mark.parametrize("uid", [0, 1000])
def test_installed_chromium_is_left_alone_root_or_not(tmp_path: Path, uid: int) -> None:
    """dpkg says both packages are there: apt-get is never called, root or not, and
    the script goes on to Phoenix and setup."""
    done = _run(tmp_path, dpkg="exit 0", uid=uid)
    assert done.returncode == 3, done.stderr
    assert not (tmp_path / "apt-calls").exists()
    assert (tmp_path / "setup-ran").exists()


def test_a_failing_phoenix_install_is_one_line_naming_the_script(tmp_path: Path) -> None:
    """install-phoenix.sh failing: its output goes to a log, stderr has one line naming
    phoenix, the log and `bash scripts/install-phoenix.sh`; the tests are not run."""
    done = _run(tmp_path, dpkg="exit 0", uid=0,
                phoenix="echo 'pip: no matching distribution' >&2; exit 1")
    assert done.returncode == 1
    log = tmp_path / "repo" / "out" / "install-logs" / "phoenix.log"
    assert done.stderr.splitlines() == [
        "scripts/test.sh: cannot install phoenix (scripts/install-phoenix.sh failed, its "
        f"output is in {log}); run: bash scripts/install-phoenix.sh"]
    assert "no matching distribution" in log.read_text(encoding="utf-8")
    assert not (tmp_path / "setup-ran").exists()


def test_a_failing_mlflow_install_is_one_line_naming_its_log(tmp_path: Path) -> None:
    """install-mlflow.sh failing: exit 1, one line naming mlflow, the log and
    `bash scripts/install-mlflow.sh`; the tests are not run."""
    done = _run(tmp_path, dpkg="exit 0", uid=0, mlflow="echo 'no mlflow-skinny' >&2; exit 1")
    assert done.returncode == 1
    log = tmp_path / "repo" / "out" / "install-logs" / "mlflow.log"
    assert done.stderr.splitlines() == [
        "scripts/test.sh: cannot install mlflow (scripts/install-mlflow.sh failed, its "
        f"output is in {log}); run: bash scripts/install-mlflow.sh"]
    assert "no mlflow-skinny" in log.read_text(encoding="utf-8")
    assert not (tmp_path / "setup-ran").exists()
