"""events_from_json_lines reads a list of lines or the whole text, split at "\\n" only."""

from __future__ import annotations

import json

import pytest

from cupellation.events import events_from_json_lines
from cupellation.exceptions import DecodeError, InvalidTypeError

from ._artifacts import demo_artifacts


def test_json_lines_take_the_whole_text_split_at_newlines_only() -> None:
    """events_from_json_lines given the whole text (str or bytes) splits it at "\\n"
    only, so a U+2028 inside a JSON string stays in its line; a line that is not text
    is a DecodeError naming it, and a non-iterable an InvalidTypeError."""
    text = demo_artifacts().events_jsonl.decode()
    events = list(events_from_json_lines(text))
    assert events == list(demo_artifacts().events)
    assert list(events_from_json_lines(text.encode())) == events
    record = json.loads(text.splitlines()[0])
    record["run_id"] = "a\u2028b"
    line = json.dumps(record, ensure_ascii=False)
    assert [e.run_id for e in events_from_json_lines(line + "\n")] == ["a\u2028b"]
    with pytest.raises(DecodeError) as info:
        list(events_from_json_lines([line, 7]))  # type: ignore[list-item]
    assert info.value.line == 2
    with pytest.raises(InvalidTypeError):
        list(events_from_json_lines(None))  # type: ignore[arg-type]
