"""Version marks: what 0.3 and 0.4 added or changed says so in its docstring (Sphinx's
``.. versionadded::`` / ``.. versionchanged::``), and the documentation site shows each
mark as a note titled "Added in 0.4" rather than as the directive's text."""

from __future__ import annotations

import cupellation
from _docs_hooks import docs_hooks
from cupellation import (
    analytics,
    events,
    exceptions,
    integrations,
    otel,
    policy,
    reasons,
    settings,
    store,
    testing,
)

#: What CHANGELOG.md says 0.3 and 0.4 added or changed, and the mark each carries.
MARKS: tuple[tuple[object, str, str], ...] = (
    (events.RunDigest, "versionadded", "0.3"),
    (events.Verification, "versionadded", "0.3"),
    (events.RunLineEncoder, "versionadded", "0.3"),
    (exceptions.InvalidTextError, "versionadded", "0.3"),
    (analytics, "versionadded", "0.3"),
    (testing.expect, "versionadded", "0.3"),
    (testing.should, "versionadded", "0.3"),
    (otel.fetch_spans, "versionadded", "0.3"),
    (otel.SpanCollector, "versionchanged", "0.3"),
    (cupellation.MessageHistory, "versionadded", "0.3"),
    (otel.fetch_spans, "versionchanged", "0.4"),
    (otel, "versionchanged", "0.4"),
    (exceptions.CupelError, "versionchanged", "0.4"),
    (exceptions.BackendError, "versionchanged", "0.4"),
    (exceptions.RedirectRefusedError, "versionadded", "0.4"),
    (exceptions.MalformedAnswerError, "versionadded", "0.4"),
    (exceptions.FetchLimitError, "versionadded", "0.4"),
    (exceptions.PartialFetchError, "versionadded", "0.4"),
    (exceptions.StoreError, "versionadded", "0.4"),
    (exceptions.StoreInUseError, "versionadded", "0.4"),
    (exceptions.StoreSchemaError, "versionadded", "0.4"),
    (store, "versionadded", "0.4"),
    (settings, "versionadded", "0.4"),
    (integrations, "versionadded", "0.4"),
    (reasons.register_exclusion_reason, "versionadded", "0.4"),
    (reasons.unregister_exclusion_reason, "versionadded", "0.4"),
    (reasons.BaseExclusionReason, "versionadded", "0.4"),
    (analytics.message_units, "versionadded", "0.4"),
    (cupellation.ScoredItem, "versionchanged", "0.4"),
    (policy, "versionchanged", "0.4"),
    (cupellation.select_messages, "versionadded", "0.3"),
    (cupellation.select_messages, "versionchanged", "0.4"),
    (cupellation.SelectOptions, "versionadded", "0.4"),
    (cupellation.Pipeline, "versionchanged", "0.4"),
)


def test_what_0_3_and_0_4_added_or_changed_carries_its_version_mark() -> None:
    """Each name of the list (new modules, classes, functions and errors of 0.3 and
    0.4, and the names whose import path 0.4 changed) has its mark, on a line of its
    own, in its docstring."""
    missing = [f"{getattr(thing, '__name__', thing)}: {kind} {version}"
               for thing, kind, version in MARKS
               if f"\n.. {kind}:: {version}" not in "\n" + "\n".join(
                   line.strip() for line in (thing.__doc__ or "").splitlines())]
    assert missing == []


def test_the_site_shows_a_version_mark_as_a_note() -> None:
    """The docs hook turns a mark (as Markdown renders a docstring: one paragraph, the
    note on the lines under it) into a note titled "Added in 0.4" / "Changed in 0.4",
    leaves other paragraphs alone, and leaves no directive text."""
    hooks = docs_hooks()
    html = ("<p>Reads a trace.</p>\n<p>.. versionadded:: 0.3</p>\n"
            "<p>.. versionchanged:: 0.4\nOne deadline, <code>verify</code>.</p>")
    shown = hooks.on_page_content(html, None, None, None)
    assert shown == (
        "<p>Reads a trace.</p>\n"
        '<div class="admonition note version-mark"><p class="admonition-title">Added in 0.3'
        "</p></div>\n"
        '<div class="admonition note version-mark"><p class="admonition-title">Changed in 0.4'
        "</p><p>One deadline, <code>verify</code>.</p></div>")
    assert ".. version" not in shown
