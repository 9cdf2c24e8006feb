"""The run selection pushed into SQL is never narrower than the reader's answer: the
literal a regular expression requires is in every text it matches."""

from __future__ import annotations

import re

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cupellation.store import required_literal

_PIECES = ["a", "b", "ab", "é", ".", "*", "+", "?", "|", "(", ")", "[ab]", "[^a]", "\\.",
           "\\d", "{2}", "{1,3}", "^", "$", "x", "(?:", "\\b", "]", "{"]


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=8),
       text=st.text(alphabet="abxé.1{}[]", max_size=12))
def test_the_required_literal_is_in_every_match(pieces: list[str], text: str) -> None:
    """For generated patterns (groups, classes, quantifiers, alternation, escapes) and
    texts: whenever Python's pattern finds a match, the literal pushed into SQL is in
    the text — so the store never leaves out a run the file reader would keep."""
    pattern = "".join(pieces)
    try:
        compiled = re.compile(pattern)
    except re.error:
        assume(False)
        return
    literal = required_literal(pattern)
    if literal is not None and compiled.search(text):
        assert literal in text


def test_literals_found_and_given_up() -> None:
    """Plain text is its own literal; quantified characters, classes, groups and
    escapes split it; alternation and inline flags push nothing."""
    assert required_literal("contract 4711") == "contract 4711"
    assert required_literal("refund.*order") == "refund"
    assert required_literal("ab?c") == "a"
    assert required_literal(r"v\.2") == "v.2"
    assert required_literal("(group)tail") == "tail"
    assert required_literal("a|b") is None
    assert required_literal("(?i)abc") is None
    assert required_literal(".*") is None
