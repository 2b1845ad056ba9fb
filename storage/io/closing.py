"""``with`` for the objects that hold a file, a mapping or a lock until their ``close()``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Self


class Closing(ABC):
    """A base for a class with ``close()``: ``with obj:`` gives the object and closes it on the way out."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unmap(close: Callable[[], object]) -> None:
    """Call ``close`` (an mmap's ``close``, a memoryview's ``release``, a mapped index's ``close``); while views of
    the mapping are still alive (``BufferError``) it is left to go when they do."""
    try:
        close()
    except BufferError:
        pass


__all__ = ["Closing", "unmap"]
