"""The item columns check a float column by one C-level sum (issue 26): the column
written, and the error raised for a value no span can carry, are those of checking
every value, whatever the mix of None, zeros, numbers and non-finite values."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from cupellation._model.wire import ITEM_FIELDS, _finite_value, column_writer
from cupellation.exceptions import InvalidValueError

_HINT = [field for field in ITEM_FIELDS if field.name == "future_relevance_hint"]
_KEY = "cupel.item.future_relevance_hint"
_write = column_writer(_HINT, "cupel.item.")


def _expected(values: list[Any]) -> dict[str, list[Any]] | InvalidValueError:
    """What checking every value gives: the column, nothing when all are None, or the
    error for the first non-finite value."""
    for value in values:
        if value is not None:
            try:
                _finite_value(_KEY, value)
            except InvalidValueError as exc:
                return exc
    return {} if values.count(None) == len(values) else {_KEY: values}


@pytest.mark.parametrize("values", [
    [], [None, None], [0.0, None, 0.5], [1e308, 1e308, None], [None, 0.25, float("nan")],
    [float("inf"), None, float("-inf")], [0.0, float("-inf")], [3, 0.5, None],
    [0.1, float("nan"), float("inf")],
])
def test_a_hint_column_is_what_checking_every_value_gives(values: list[Any]) -> None:
    """Columns of hints: written as they are when every value is finite (a sum that
    overflows included), and refused naming the first non-finite value otherwise."""
    out: dict[str, list[Any]] = {}
    expected = _expected(values)
    if isinstance(expected, InvalidValueError):
        with pytest.raises(InvalidValueError) as raised:
            _write([SimpleNamespace(future_relevance_hint=v) for v in values], out)
        assert str(raised.value) == str(expected)
    else:
        _write([SimpleNamespace(future_relevance_hint=v) for v in values], out)
        assert out == expected
