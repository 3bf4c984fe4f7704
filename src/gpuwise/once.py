"""`once`: a property worked out on its first read and kept in the instance's __dict__, as
functools.cached_property does, without the lock Python 3.11's takes on every first read (a plan
makes thousands of candidates, each read a few times). Not for objects shared between threads
while a value is still unread: two threads may both work it out (the same value, for a pure one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")
R = TypeVar("R")


class once(Generic[T, R]):  # lower case: read as a decorator, like property
    def __init__(self, func: Callable[[T], R]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> once[T, R]: ...

    @overload
    def __get__(self, obj: T, owner: type | None = None) -> R: ...

    def __get__(self, obj: T | None, owner: type | None = None) -> once[T, R] | R:
        if obj is None:
            return self
        value = self.func(obj)
        vars_: dict[str, Any] = obj.__dict__
        vars_[self.name] = value  # read from the instance from now on: `once` is not a data descriptor
        return value
