"""A read-only property that only forwards: ``Forward`` (used by the partition model and the public API, whose
many properties are an attribute of an attribute)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Forward(property, Generic[T]):
    """A read-only property that only returns an attribute of an attribute (``topic = Forward[str]("tp.topic")``
    reads ``self.tp.topic``) or what ``get(self)`` returns; ``doc`` is its docstring."""

    def __init__(self, get: str | Callable[[Any], T], doc: str | None = None) -> None:
        if isinstance(get, str):
            get = operator.attrgetter(get)

        def fget(obj: Any) -> Any:  # a function of its own: it carries the docstring (docs/api.md reads fget's)
            return get(obj)

        fget.__doc__ = doc
        super().__init__(fget)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forward[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return super().__get__(obj, owner)
