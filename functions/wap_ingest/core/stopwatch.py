"""Per-stage wall-clock durations of one run, for the metrics the entry points emit."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class Stopwatch:
    """Seconds spent per named stage; a stage timed more than once (merge retries) accumulates."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._laps: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = self._clock()
        try:
            yield
        finally:
            self._laps[name] = self._laps.get(name, 0.0) + (self._clock() - started)

    def laps(self) -> dict[str, float]:
        """A copy: stage -> seconds, in the order the stages first ran."""
        return dict(self._laps)
