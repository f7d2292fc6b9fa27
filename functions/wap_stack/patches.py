"""Attributes of moto's modules and classes replaced in the stack's moto process (moto_ranges, moto_overheads), each
kept with what it was, so that a test's process can have moto's own behaviour back after a block."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class Patches:
    """One module's replacements: made once by its `install`, undone together by `restore`."""

    def __init__(self) -> None:
        self._originals: list[tuple[Any, str, Any]] = []

    @property
    def active(self) -> bool:
        return bool(self._originals)

    def replace(self, owner: Any, name: str, value: Any) -> None:
        """`owner.name = value`, remembering what the owner itself held (a property or function as defined)."""
        self._originals.append((owner, name, vars(owner)[name] if name in vars(owner) else getattr(owner, name)))
        setattr(owner, name, value)

    def restore(self) -> None:
        for owner, name, original in reversed(self._originals):
            setattr(owner, name, original)
        self._originals.clear()

    @contextmanager
    def during(self, install: Callable[[], None]) -> Iterator[None]:
        """`install` for the length of a block, what was there before restored after it, unless it was installed
        already when the block began."""
        was = self.active
        install()
        try:
            yield
        finally:
            if not was:
                self.restore()
