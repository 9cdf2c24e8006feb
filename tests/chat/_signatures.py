"""Reading public signatures for ``Any`` (issue 27: the selection entry points say no
``Any``): shared by the chat tests and each integration's own tests, which import
their framework anyway."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints, is_typeddict

__all__ = ["anys_in", "getter", "holds_any"]


def getter(cls: type, name: str) -> Callable[..., object]:
    """The function behind the property ``name`` of ``cls``."""
    prop = inspect.getattr_static(cls, name)
    assert isinstance(prop, property)
    assert prop.fget is not None
    return prop.fget


def holds_any(hint: object, seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``hint`` is or holds ``Any`` (inside unions, generics, Unpack, a
    TypedDict's keys, a TypeVar's bound)."""
    if hint is Any:
        return True
    if id(hint) in seen:
        return False
    seen = seen | {id(hint)}
    if isinstance(hint, type) and is_typeddict(hint):
        return any(holds_any(value, seen) for value in get_type_hints(hint).values())
    if isinstance(hint, typing.TypeVar):
        return any(holds_any(value, seen) for value in (hint.__bound__, *hint.__constraints__)
                   if value is not None)
    arguments = [inner for argument in typing.get_args(hint) for inner in (
        argument if isinstance(argument, list) else [argument])]  # Callable[[A], R]
    return any(holds_any(argument, seen) for argument in arguments
               if argument is not Ellipsis and not isinstance(argument, str))


def anys_in(functions: Iterable[tuple[str, Callable[..., object]]]
            ) -> dict[str, dict[str, object]]:
    """Each named function (and each of its overloads) whose parameter or return
    hints hold ``Any``, with those hints; empty when none does."""
    found: dict[str, dict[str, object]] = {}
    for name, function in functions:
        for label, checked in ((name, function), *(
                (f"{name} (overload {number + 1})", overload)
                for number, overload in enumerate(typing.get_overloads(function)))):
            hints = {key: value for key, value in get_type_hints(
                checked, include_extras=True).items() if holds_any(value)}
            if hints:
                found[label] = hints
    return found
