"""``with`` for the objects that hold a file, a mapping or a lock until their ``close()``."""

from __future__ import annotations

from typing import Self


class Closing:
    """A base for a class with ``close()``: ``with obj:`` gives the object and closes it on the way out."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Closing"]
