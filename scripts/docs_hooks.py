"""mkdocs hooks (``hooks:`` in mkdocs.yml): the pages that are generated, so they never
drift from their source.

- An API page per public module (``cupellation``, each ``cupellation.<name>`` whose
  name has no leading underscore, ``cupellation_exporters``), rendered by mkdocstrings
  from the docstrings, and listed under "API reference" in the navigation. A module
  added to the package gets its page without an edit here.
- ``<!-- readme: HEADING -->`` in a page becomes that ``## HEADING`` section of
  README.md (its body, up to the next ``## ``): the README stays the one source of the
  telemetry reference, the concepts and the command summary.
- ``<!-- cli-help -->`` becomes the ``--help`` of ``cupellation`` and of every
  subcommand, from the parser itself (``cupellation.cli.build_parser``).
- ``<!-- examples -->`` becomes every script of examples/: its docstring, then its code.
- ``<!-- settings -->`` becomes the table of every environment variable cupellation
  reads, from ``cupellation.settings.VARIABLES`` (the one module that reads them).
- The docstrings' Sphinx roles (``:class:`~cupellation.X` ``) show as code, without the
  role (and, after ``~``, with the last name only), and their literal-block markers
  (a paragraph ending ``::``, or ``::`` alone) show as one colon, or nothing.
- The docstrings' version marks, Sphinx's ``.. versionadded:: 0.4`` and
  ``.. versionchanged:: 0.4`` (and ``.. deprecated::``) as a paragraph of their own,
  the version's note on the lines right under it (no blank line between), show as a
  note titled "Added in 0.4" / "Changed in 0.4": mkdocstrings renders the docstrings
  as Markdown, which would print the directive as text. The docstrings keep Sphinx's
  form, which ``help()`` and editors read as it is.

A placeholder whose source is missing (a README heading renamed, an empty examples/)
stops the build with an error naming it. Nothing here reaches the network.
"""

from __future__ import annotations

import argparse
import ast
import os
import pkgutil
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: Where the package's modules are found (the source tree, not what is installed).
_PACKAGE = ROOT / "src" / "cupellation"
_README_SECTION = re.compile(r"<!-- readme: (.+?) -->")
#: A Sphinx role the docstrings use (``:class:`~cupellation.X` ``), as Markdown renders it.
_ROLE = re.compile(r":(?:func|class|meth|attr|mod|exc|data|obj):<code>(~?)([^<]*)</code>")
#: A docstring's literal-block marker, as Markdown renders it: "::" alone as a
#: paragraph, or at a paragraph's end.
_LONE_MARKER = re.compile(r"<p>\s*::\s*</p>\n?")
_END_MARKER = re.compile(r"(?<=[^\s:]):: ?</p>")
#: A docstring's version mark, as Markdown renders it: a paragraph starting
#: ``.. versionadded:: 0.4``, its note (if any) the rest of the paragraph.
_VERSION_MARK = re.compile(
    r"<p>\.\. (versionadded|versionchanged|deprecated):: ([\w.]+)[ \t]*\n?(.*?)</p>", re.S)
_VERSION_TITLES = {"versionadded": "Added in", "versionchanged": "Changed in",
                   "deprecated": "Deprecated since"}


def api_modules() -> list[str]:
    """The modules that get an API page, in navigation order."""
    names = ["cupellation"]
    names += sorted(f"cupellation.{info.name}" for info in pkgutil.iter_modules([str(_PACKAGE)])
                    if not info.name.startswith("_"))
    names.append("cupellation_exporters")
    return names


def _api_page(module: str) -> str:
    return f"# `{module}`\n\n::: {module}\n"


def on_config(config: Any) -> Any:
    """Add the API pages to the navigation, after the hand-written pages."""
    nav = config["nav"]
    nav.append({"API reference": [{module: f"api/{module}.md"} for module in api_modules()]})
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add a generated API page per public module."""
    from mkdocs.structure.files import File  # noqa: PLC0415 - mkdocs is the caller

    for module in api_modules():
        files.append(File.generated(config, f"api/{module}.md", content=_api_page(module)))
    return files


def readme_section(heading: str) -> str:
    """The body of README.md's ``## heading`` section (without the heading line)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    if match is None:
        raise ValueError(f"docs: README.md has no '## {heading}' section")
    return match.group(1).strip() + "\n"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps the subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_help() -> str:
    """The ``--help`` of the command and of every subcommand, nested ones included."""
    from cupellation.cli import build_parser  # noqa: PLC0415 - only when the page asks

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: make it one width
    try:
        parts: list[str] = []

        def add(path: str, parser: argparse.ArgumentParser) -> None:
            parts.append(f"### `{path}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
            for name, child in _subcommands(parser).items():
                add(f"{path} {name}", child)

        add("cupellation", build_parser())
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(parts)


def examples() -> str:
    """Every script of examples/ with its docstring, then its code."""
    parts: list[str] = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(source)) or ""
        parts.append(f"## `{path.name}`\n\n```text\n{doc}\n```\n\n"
                     f"```python\n{source.rstrip()}\n```\n")
    if not parts:
        raise ValueError("docs: examples/ holds no script")
    return "\n".join(parts)


def settings_table() -> str:
    """The environment variables of ``cupellation.settings.VARIABLES`` as a Markdown
    table: name, whose convention it is, what it sets, what reads it."""
    from cupellation.settings import VARIABLES  # noqa: PLC0415 - the package, when asked

    rows = ["| Variable | Convention | What it sets | Read by |", "|---|---|---|---|"]
    rows += [f"| `{v.name}` | {v.owner} | {v.meaning} | {v.read_by} |" for v in VARIABLES]
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fill the placeholders of a page."""
    markdown = _README_SECTION.sub(lambda m: readme_section(m.group(1)), markdown)
    if "<!-- cli-help -->" in markdown:
        markdown = markdown.replace("<!-- cli-help -->", cli_help())
    if "<!-- examples -->" in markdown:
        markdown = markdown.replace("<!-- examples -->", examples())
    if "<!-- settings -->" in markdown:
        markdown = markdown.replace("<!-- settings -->", settings_table())
    return markdown


def _role(match: re.Match[str]) -> str:
    name = match.group(2)
    return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"


def _version_mark(match: re.Match[str]) -> str:
    kind, version, note = match.group(1), match.group(2), match.group(3).strip()
    body = f"<p>{note}</p>" if note else ""
    return (f'<div class="admonition note version-mark"><p class="admonition-title">'
            f"{_VERSION_TITLES[kind]} {version}</p>{body}</div>")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Show the docstrings' Sphinx roles as plain code, their literal-block markers
    as one colon (or nothing), and their version marks as notes."""
    html = _LONE_MARKER.sub("", _ROLE.sub(_role, html))
    html = _VERSION_MARK.sub(_version_mark, html)
    return _END_MARKER.sub(":</p>", html)
