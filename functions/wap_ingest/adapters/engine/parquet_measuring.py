"""Measuring a Parquet file from its decoded pages, every claim of its own checked (in the isolation worker).

`Measuring` is made from the file's footer and schema, then fed each decoded column chunk (by columnar_checks, which
decodes every page anyway, two chunks at a time from two threads): it lays the values out as Parquet's leaf columns
(parquet_leaves), measures each leaf (entries, nulls, NaNs, min and max, rows per row group) and checks every claim
the file makes about it (parquet_check). `finish` gives the file's `Measured` figures and what is wrong, if anything.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa

from wap_ingest.adapters.engine.parquet_check import ChunkCheck
from wap_ingest.adapters.engine.parquet_claims import FileClaims, read_claims
from wap_ingest.adapters.engine.parquet_figures import Figures, UncheckableError, key_kind
from wap_ingest.adapters.engine.parquet_leaves import UnsupportedLeafError, leaves_of
from wap_ingest.adapters.engine.parquet_measured import DISAGREE, LeafFigures, Measured, file_footer, footer_digest

SHOWN_PROBLEMS = 3
log = logging.getLogger(__name__)


def _leaf_types(kind: pa.DataType, repeated: bool = False) -> list[tuple[pa.DataType, bool]]:
    if pa.types.is_dictionary(kind):
        return _leaf_types(kind.value_type, repeated)
    if pa.types.is_struct(kind):
        return [leaf for index in range(kind.num_fields) for leaf in _leaf_types(kind.field(index).type, repeated)]
    if pa.types.is_map(kind):
        return _leaf_types(kind.key_type, True) + _leaf_types(kind.item_type, True)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _leaf_types(kind.value_type, True)
    return [(kind, repeated)]


class Measuring:
    """The measuring of one file: made once its footer is read, fed each decoded (row group, column) in any order."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        footer = file_footer(path)
        self.schema = schema
        self.digest = footer_digest(footer)
        self.unchecked: list[str] = []
        self.problems: list[str] = []
        self._found: dict[tuple[int, int], tuple[list[str], list[str]]] = {}  # each chunk's, in the file's order
        with path.open("rb") as file:
            self.claims: FileClaims = read_claims(file, path.stat().st_size, footer)
        self.unchecked += self.claims.unchecked
        self.columns: dict[str, tuple[int, list[tuple[pa.DataType, bool]]]] = {}
        first = 0
        for field in schema:
            leaves = _leaf_types(field.type)
            if field.name in self.columns:
                self.unchecked.append(f"two columns named {field.name!r}")
            self.columns[field.name] = (first, leaves)
            first += len(leaves)
        self.results: dict[tuple[int, int], tuple[Figures, bool]] = {}
        self.group_rows: dict[tuple[int, str], int] = {}
        if any(len(group.chunks) != first for group in self.claims.groups):
            self.unchecked.append("row groups whose column chunks are not the schema's leaves")

    def chunk(self, group: int, name: str, pieces: Iterable[pa.Array]) -> None:
        """Check and measure column `name` of row group `group` from its decoded values, in order (one array, or
        several batches)."""
        if self.unchecked:
            for _ in pieces:  # decoded all the same: a damaged page is the file's fault either way
                pass
            return
        first, leaves = self.columns[name]
        chunks = self.claims.groups[group].chunks
        checks = [ChunkCheck(chunks[first + i], key_kind(kind), _label(chunks[first + i].path, group,
                                                                       len(self.claims.groups)))
                  for i, (kind, _) in enumerate(leaves)]
        rows, failed = 0, ""
        for piece in pieces:  # the decoder's errors are raised from here: the file's bytes
            rows += len(piece)
            if failed:
                continue
            try:
                for check, leaf in zip(checks, leaves_of(piece), strict=True):
                    check.feed(leaf)
            except (UnsupportedLeafError, UncheckableError, pa.ArrowException, ValueError, TypeError) as exc:
                log.warning("column %r of row group %d cannot be measured: %s: %s", name, group, type(exc).__name__,
                            exc)
                failed = f"column {name!r} cannot be measured ({type(exc).__name__}: {exc})"
        if failed:
            self.unchecked.append(failed)
            return
        self.group_rows[group, name] = rows
        for index, (check, (_, repeated)) in enumerate(zip(checks, leaves, strict=True)):
            figures, problems, unchecked = check.finish()
            self._found[group, first + index] = (problems, unchecked)
            self.results[group, first + index] = (figures, repeated)

    def finish(self) -> Measured:
        claims = self.claims
        for key in sorted(self._found):  # (the chunks were measured by two threads, in either order)
            problems, unchecked = self._found[key]
            self.problems += problems
            self.unchecked += unchecked
        measured_rows = 0
        for number, group in enumerate(claims.groups):
            counts = {rows for (g, _), rows in self.group_rows.items() if g == number}
            if len(counts) > 1:
                self.problems.append(f"row group {number}: its columns hold {sorted(counts)} rows")
            rows = max(counts, default=0)
            if rows != group.rows:
                self.problems.append(f"row group {number} num_rows {group.rows}, measured {rows}")
            measured_rows += rows
        if claims.rows != measured_rows:
            self.problems.append(f"num_rows {claims.rows}, measured {measured_rows}")
        leaves = self._leaves()
        problem = ""
        if self.unchecked:
            problem = "its footer makes claims the service does not check: " + _listed(self.unchecked)
        elif self.problems:
            problem = f"{DISAGREE}: {_listed(self.problems)}"
        return Measured(measured_rows, leaves, tuple(sorted({g.chunks[0].start for g in claims.groups if g.chunks})),
                        self.digest, problem)

    def _leaves(self) -> tuple[LeafFigures, ...]:
        if not self.claims.groups or self.unchecked:
            return ()
        found = []
        for index, chunk in enumerate(self.claims.groups[0].chunks):
            total, repeated = Figures(), False
            for number in range(len(self.claims.groups)):
                figures, repeated = self.results.get((number, index), (Figures(), False))
                total.add(figures)
            floating = chunk.physical in ("FLOAT", "DOUBLE")
            found.append(LeafFigures(
                path=chunk.path, physical=chunk.physical, values=total.values, nulls=total.nulls,
                nans=total.nans if floating else None, low=None if repeated else total.low,
                high=None if repeated else total.high, repeated=repeated,
                compressed=sum(g.chunks[index].compressed for g in self.claims.groups)))
        return tuple(found)


def _label(path: str, group: int, groups: int) -> str:
    return path if groups == 1 else f"{path} (row group {group})"


def _listed(items: Sequence[str]) -> str:
    shown = "; ".join(items[:SHOWN_PROBLEMS])
    return shown + (f"; and {len(items) - SHOWN_PROBLEMS} more" if len(items) > SHOWN_PROBLEMS else "")
