"""The documentation site (mkdocs.yml): it builds in strict mode with no network, every
page the issue asks for is there with its generated content, nothing in it is fetched
from elsewhere, and a broken internal link fails the build."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mkdocs.commands.build import build
from mkdocs.config import load_config
from mkdocs.exceptions import Abort

ROOT = Path(__file__).resolve().parents[2]
MKDOCS = Path(sys.executable).with_name("mkdocs")
#: A closed port on this machine: any HTTP(S) fetch by the build goes there and fails.
NO_NETWORK = "http://127.0.0.1:9"


def test_the_site_builds_strictly_with_no_network(tmp_path: Path) -> None:
    """``mkdocs build --strict`` passes with every HTTP(S) proxy pointing at a closed
    port; the pages hold their generated content (the README's telemetry reference,
    every command's --help, every example, an API page per public module with the
    docstrings), no page loads a script, stylesheet or font from another site, and none
    shows a docstring's "::" marker, a version mark's directive (it shows as a note,
    "Added in 0.4"), a private module's name or "the four agent loops above"."""
    env = {**os.environ, "HTTP_PROXY": NO_NETWORK, "HTTPS_PROXY": NO_NETWORK,
           "http_proxy": NO_NETWORK, "https_proxy": NO_NETWORK, "NO_PROXY": "", "no_proxy": ""}
    site = tmp_path / "site"
    result = subprocess.run([str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
                            stdin=subprocess.DEVNULL, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "WARNING" not in result.stderr

    def page(path: str) -> str:
        return (site / path / "index.html").read_text(encoding="utf-8")

    assert "cupel.exclusion.count" in page("telemetry")
    assert "ReportBuilder" in page("concepts")
    help_text = page("cli")
    for command in ("cupellation select", "cupellation why", "cupellation policy show"):
        assert f"<code>{command}</code>" in help_text
    assert "usage: cupellation select" in help_text
    examples = page("examples")
    assert all(f"<code>{p.name}</code>" in examples for p in (ROOT / "examples").glob("*.py"))
    assert "include_item_with_kind" in page("api/cupellation.testing")
    assert "select_messages" in page("api/cupellation")
    assert "The testing vocabulary" in page("decisions")
    assert 'version-mark"><p class="admonition-title">Added in 0.4</p>' in page(
        "api/cupellation.store")
    remote = []
    for html in (path for path in site.rglob("*.html") if path.is_file()):
        text = html.read_text(encoding="utf-8")
        remote += [f"{html.relative_to(site)}: {tag}" for tag in
                   re.findall(r"<(?:script|link|img)\b[^>]*?(?:src|href)=\"(?:https?:)?//[^\"]*\"",
                              text)]
    assert remote == []
    # No docstring literal-block marker shows as text ("::" alone or ending a
    # paragraph), no page names a private module, no "above" points below.
    stray = []
    for html in (path for path in site.rglob("*.html") if path.is_file()):
        text = html.read_text(encoding="utf-8")
        shown = re.sub(r"<[^>]+>", " ", text)  # what a reader sees (tags, ids aside)
        stray += [f"{html.relative_to(site)}: {found}" for found in re.findall(
            r"<p>\s*::\s*</p>|\w::\s*</p>", text) + re.findall(
            r"cupellation(?:_exporters)?(?:\.\w+)*\._[a-z]\w*|the four agent loops above"
            r"|\.\. (?:versionadded|versionchanged|deprecated)::", shown)]
    assert stray == []


def test_a_broken_internal_link_fails_the_strict_build(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    """The same configuration over a copy of docs/ with a link to a page that does not
    exist, then to an anchor that does not exist, stops the build (internal links are
    checked)."""
    for broken in ("[gone](nowhere.md)", "[gone](decisions.md#no-such-section)"):
        docs = tmp_path / "docs"
        shutil.rmtree(docs, ignore_errors=True)
        shutil.copytree(ROOT / "docs", docs)
        with (docs / "testing.md").open("a", encoding="utf-8") as page:
            page.write(f"\nSee {broken}.\n")
        config = load_config(str(ROOT / "mkdocs.yml"), docs_dir=str(docs),
                             site_dir=str(tmp_path / "site"))
        caplog.clear()
        with pytest.raises(Abort, match="1 warnings in strict mode"):
            build(config)
        (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert "testing.md" in warning
        assert broken[broken.index("(") + 1:-1].split("#")[-1] in warning
