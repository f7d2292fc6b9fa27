"""A decoded column's Parquet leaves, each as the sequence of its level entries (pyarrow; in the isolation worker).

Parquet stores a nested column as one leaf column per primitive field, each a sequence of entries: one per value,
and one (without a value) for a null or empty list or map and for a null struct above the leaf. A leaf's value count
(`num_values`), its null count (entries without a value, as Arrow's and parquet-java's writers count them) and its
pages' ranges are all in entries, so the figures that check a file's claims are taken on `Leaf.entries`: an Arrow
array holding one slot per entry (null where the entry has no value). `rows` gives each top-level row's number of
entries (None: one each), from which a page's first row and its row count follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa


class UnsupportedLeafError(ValueError):
    """A column type whose leaves this module does not lay out (the file is then rewritten, never registered)."""


@dataclass(frozen=True)
class Leaf:
    entries: pa.Array
    rows: np.ndarray[Any, Any] | None  # entries per top-level row (None: one each)
    repeated: bool  # inside a list or a map


def leaves_of(column: pa.Array) -> list[Leaf]:
    """The Parquet leaves of one top-level column's decoded values, depth first (Parquet's column order)."""
    kind = column.type
    if pa.types.is_dictionary(kind) and not pa.types.is_nested(kind.value_type):
        return [Leaf(column, None, False)]  # (a string column read as a dictionary: parquet_figures measures it so)
    if pa.types.is_dictionary(kind):
        return leaves_of(column.dictionary_decode())
    if pa.types.is_struct(kind):
        return [leaf for child in column.flatten() for leaf in leaves_of(child)]  # flatten: the struct's nulls too
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_map(kind):
        return _repeated(column)
    if pa.types.is_fixed_size_list(kind) or pa.types.is_union(kind) or pa.types.is_list_view(kind) or \
            pa.types.is_large_list_view(kind):
        raise UnsupportedLeafError(f"a column of type {kind}")
    return [Leaf(column, None, False)]


def _repeated(column: Any) -> list[Leaf]:
    """A list's (or a map's: a list of key-value structs) leaves: a null or empty slot is one entry without a value;
    any other slot, the entries of its elements."""
    offsets = np.asarray(column.offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    if column.null_count:
        lengths = np.where(np.asarray(column.is_valid(), dtype=bool), lengths, 0)
    empty = lengths == 0
    found = []
    for child in leaves_of(column.values):
        child_rows = child.rows if child.rows is not None else np.ones(len(child.entries), dtype=np.int64)
        ends = np.concatenate(([0], np.cumsum(child_rows)))  # each value slot's first entry, and the last's end
        first, last = ends[offsets[:-1]], ends[offsets[1:]]
        counts = np.where(empty, 1, last - first)
        total = int(counts.sum())
        before = np.cumsum(counts) - counts
        index = np.repeat(first - before, counts) + np.arange(total, dtype=np.int64)
        mask = np.repeat(empty, counts)
        same = not mask.any() and total == len(child.entries) and (total == 0 or int(first[0]) == 0)
        found.append(Leaf(child.entries if same else child.entries.take(pa.array(index, mask=mask)), counts, True))
    return found


def row_starts(leaf: Leaf) -> np.ndarray[Any, Any]:
    """The entry at which each top-level row starts."""
    if leaf.rows is None:
        return np.arange(len(leaf.entries), dtype=np.int64)
    starts: np.ndarray[Any, Any] = np.cumsum(leaf.rows) - leaf.rows
    return starts
