"""How a file became part of its table: registered as it is, or rewritten by the engine, and why."""

from __future__ import annotations

from dataclasses import dataclass

REGISTERED = "registered"  # the source file itself became a data file of the table (copied into the lake as it is)
REWRITTEN = "rewritten"  # the file's rows were read and written as new data files by the engine


@dataclass(frozen=True)
class WritePath:
    """How the engine took a file into its table, and why (the adapter decides; the core records and reports it)."""

    how: str  # REGISTERED or REWRITTEN
    reason: str  # e.g. "the file's schema fits the table", "column ts: INT96 timestamps are not an Iceberg type"

    def __str__(self) -> str:
        return f"{self.how} ({self.reason})"
