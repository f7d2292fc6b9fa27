"""One column chunk's claims (parquet_claims) checked against its decoded values (parquet_leaves, parquet_figures).

`ChunkCheck` is fed the chunk's leaf entries in order, in one piece or several (a large chunk is decoded batch by
batch), measures the chunk and each of its data pages, and `finish` compares every claim: the chunk's value count,
statistics, encodings and level histograms; each page's header (values, a v2 page's nulls and rows, statistics);
the column index (null pages, bounds, null counts, boundary order, level histograms) and the offset index (each
page's place and first row). It returns the chunk's figures, what is false (`problems`) and what it cannot check
(`unchecked`); a file with either is rewritten, never registered as it is.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from wap_ingest.adapters.engine.parquet_claims import DATA_PAGE, DATA_PAGE_V2, ChunkClaims, StatsClaim
from wap_ingest.adapters.engine.parquet_figures import (
    Figures,
    KeyKind,
    UncheckableError,
    bounds_problem,
    claimed,
    measure,
)
from wap_ingest.adapters.engine.parquet_leaves import Leaf, row_starts


@dataclass
class _Page:
    start: int  # its first entry in the chunk
    end: int
    rows_before: int | None = None  # rows that start before it in the row group
    figures: Figures = field(default_factory=Figures)


class ChunkCheck:
    def __init__(self, claims: ChunkClaims, kind: KeyKind, label: str) -> None:
        self.claims, self.kind, self.label = claims, kind, label
        self.figures = Figures()
        self.pages: list[_Page] = []
        position = 0
        for page in claims.data_pages:
            self.pages.append(_Page(position, position + max(page.values, 0)))
            position += max(page.values, 0)
        self._chunk_distinct = claims.stats is not None and claims.stats.distinct is not None
        self._page_distinct = any(p.stats is not None and p.stats.distinct is not None for p in claims.data_pages)
        # pages are measured one by one only when something claims a figure of a page; else the chunk at once
        self._by_page = claims.column_index is not None or claims.offset_index is not None or any(
            p.stats is not None or p.kind == DATA_PAGE_V2 for p in claims.data_pages)
        self._next = 0  # the first page not wholly measured yet

    def feed(self, leaf: Leaf) -> None:
        """The next entries of the chunk (after those fed before)."""
        begin, count = self.figures.values, len(leaf.entries)
        if not self._by_page:
            piece = measure(leaf.entries, self.kind, distinct=self._chunk_distinct)
            piece.rows = len(leaf.entries) if leaf.rows is None else len(leaf.rows)
            self.figures.add(piece)
            return
        # Measured page by page, the chunk's figures are its pages' added up (as a chunk decoded in batches, or a
        # column over its row groups): each value is measured once. Only a chunk's distinct count, which does not
        # add up, needs the whole chunk measured at once.
        starts = None if leaf.rows is None else row_starts(leaf) + begin
        end = begin + count

        def rows_before(position: int) -> int:  # this piece's rows that start before entry `position`
            if starts is None:
                return min(max(position - begin, 0), count)
            return int(np.searchsorted(starts, position))

        whole = self._chunk_distinct
        piece = measure(leaf.entries, self.kind, distinct=True) if whole else Figures()
        earlier = self.figures.rows
        index, measured = self._next, begin
        while index < len(self.pages) and self.pages[index].start < end:
            page = self.pages[index]
            low, high = max(page.start, begin), min(page.end, end)
            if page.rows_before is None and page.start >= begin:
                page.rows_before = earlier + rows_before(page.start)
            if high > low:
                part = measure(leaf.entries.slice(low - begin, high - low), self.kind, distinct=self._page_distinct)
                part.rows = rows_before(high) - rows_before(low)
                page.figures.add(part)
                if not whole:
                    piece.add(part)
                measured = high
            if page.end > end:
                break
            index += 1
        self._next = index
        if not whole and measured < end:  # entries past the pages' claimed values (finish says so)
            piece.add(measure(leaf.entries.slice(measured - begin, end - measured), self.kind))
        piece.rows = count if starts is None else len(starts)
        self.figures.add(piece)

    def finish(self) -> tuple[Figures, list[str], list[str]]:
        problems: list[str] = []
        unchecked: list[str] = []
        claims, measured, label = self.claims, self.figures, self.label
        try:
            held = sum(max(p.values, 0) for p in claims.data_pages)
            if claims.values != held:
                problems.append(f"{label} num_values {claims.values}, its pages hold {held}")
            if measured.values != held:
                problems.append(f"{label}: its pages hold {held} values, {measured.values} decoded")
            problems += _stats_problems(claims.stats, measured, label, claims.physical, self.kind)
            problems += self._encoding_problems()
            problems += _histogram_problems(claims.definition_histogram, claims.repetition_histogram, measured,
                                            label)
            problems += self._page_problems()
            problems += self._index_problems()
        except UncheckableError as exc:
            unchecked.append(f"{label}: {exc}")
        return measured, problems, unchecked

    def _encoding_problems(self) -> list[str]:
        """A reader takes a chunk as wholly dictionary-encoded from its encodings (or encoding statistics), and then
        skips it when the dictionary lacks a value: every data page's encoding must be among those claimed."""
        claims = self.claims
        used = Counter((p.kind, p.encoding) for p in claims.pages)
        data_encodings = {e for (kind, e) in used if kind in (DATA_PAGE, DATA_PAGE_V2)}
        problems = []
        missing = {e for (_, e) in used if e is not None} - claims.encodings
        if missing:
            problems.append(f"{self.label} encodings {sorted(claims.encodings)}, its pages use {sorted(missing)}")
        if claims.encoding_stats is not None:
            said = Counter({(kind, encoding): count for kind, encoding, count in claims.encoding_stats})
            said_data = {e for (kind, e), n in said.items() if kind in (DATA_PAGE, DATA_PAGE_V2) and n > 0}
            if data_encodings - said_data:
                problems.append(f"{self.label} encoding_stats {sorted(said.items())}, its pages "
                                f"{sorted(used.items(), key=str)}")
        return problems

    def _page_problems(self) -> list[str]:
        problems = []
        for number, (claim, page) in enumerate(zip(self.claims.data_pages, self.pages, strict=True)):
            where, figures = f"{self.label} page {number}", page.figures
            if claim.kind == DATA_PAGE_V2:
                if claim.nulls != figures.nulls:
                    problems.append(f"{where} num_nulls {claim.nulls}, measured {figures.nulls}")
                if claim.rows != figures.rows:
                    problems.append(f"{where} num_rows {claim.rows}, measured {figures.rows}")
            problems += _stats_problems(claim.stats, figures, where, self.claims.physical, self.kind)
        return problems

    def _index_problems(self) -> list[str]:
        claims, problems = self.claims, []
        index, count = claims.column_index, len(self.pages)
        if index is not None:
            if not len(index.null_pages) == len(index.lows) == len(index.highs) == count or (
                    index.nulls is not None and len(index.nulls) != count):
                return [f"{self.label}: its column index lists another number of pages than its {count}"]
            keys: list[tuple[Any, Any] | None] = []
            for number, page in enumerate(self.pages):
                where, figures = f"{self.label} page {number} (column index)", page.figures
                if index.null_pages[number]:
                    if figures.values != figures.nulls:
                        problems.append(f"{where}: null page, measured {figures.values - figures.nulls} values")
                    keys.append(None)
                    continue
                problems += _bounded(index.lows[number], index.highs[number], figures, where, claims.physical,
                                     self.kind)
                keys.append((claimed(index.lows[number], claims.physical, self.kind),
                             claimed(index.highs[number], claims.physical, self.kind)))
                if index.nulls is not None and index.nulls[number] != figures.nulls:
                    problems.append(f"{where} null_count {index.nulls[number]}, measured {figures.nulls}")
            problems += _order_problems(index.order, keys, self.label)
            problems += self._page_histogram_problems(index.definition_histograms, index.repetition_histograms)
        offsets = claims.offset_index
        if offsets is not None:
            data = claims.data_pages
            if len(offsets) != count:
                return [*problems, f"{self.label}: its offset index lists {len(offsets)} pages, it has {count}"]
            for number, ((offset, size, first_row), claim, page) in enumerate(zip(offsets, data, self.pages,
                                                                                   strict=True)):
                if (offset, size, first_row) != (claim.offset, claim.length, page.rows_before):
                    problems.append(f"{self.label} page {number} (offset index): at {offset}, {size} bytes, first "
                                    f"row {first_row}; measured at {claim.offset}, {claim.length} bytes, first row "
                                    f"{page.rows_before}")
        return problems

    def _page_histogram_problems(self, definition: list[int] | None, repetition: list[int] | None) -> list[str]:
        problems = []
        count = len(self.pages)
        for histograms, is_definition in ((definition, True), (repetition, False)):
            if histograms is None:
                continue
            if count == 0 or len(histograms) % count:
                return [f"{self.label}: its column index's level histograms do not divide into its {count} pages"]
            width = len(histograms) // count
            for number, page in enumerate(self.pages):
                part = histograms[number * width:(number + 1) * width]
                problems += _histogram_problems(part if is_definition else None, None if is_definition else part,
                                                page.figures, f"{self.label} page {number} (column index)")
        return problems


def _stats_problems(stats: StatsClaim | None, measured: Figures, label: str, physical: str,
                    kind: KeyKind) -> list[str]:
    if stats is None:
        return []
    problems = []
    if stats.nulls is not None and stats.nulls != measured.nulls:
        problems.append(f"{label} null_count {stats.nulls}, measured {measured.nulls}")
    if stats.distinct is not None:
        if measured.distinct is None:
            raise UncheckableError("a distinct count over a chunk decoded in parts")
        if stats.distinct != measured.distinct:
            problems.append(f"{label} distinct_count {stats.distinct}, measured {measured.distinct}")
    problems += _bounded(stats.low, stats.high, measured, label, physical, kind)
    problems += _bounded(stats.old_low, stats.old_high, measured, f"{label} (deprecated)", physical, kind)
    for exact, data, key, word in ((stats.low_exact, stats.low, measured.low_key, "min"),
                                   (stats.high_exact, stats.high, measured.high_key, "max")):
        if exact and data is not None and claimed(data, physical, kind) != key:
            problems.append(f"{label} {word} claimed exact, measured {key!r}")
    return problems


def _bounded(low: bytes | None, high: bytes | None, measured: Figures, label: str, physical: str,
             kind: KeyKind) -> list[str]:
    problem = bounds_problem(low, high, measured, physical, kind)
    return [f"{label} {problem}"] if problem else []


def _order_problems(order: int, keys: list[tuple[Any, Any] | None], label: str) -> list[str]:
    """Readers binary-search a column index that says its pages are in order: the claimed bounds must be."""
    if order not in (1, 2):
        return [] if order == 0 else [f"{label}: its column index has an unknown boundary order {order}"]
    bounded = [k for k in keys if k is not None]
    for (low, high), (next_low, next_high) in pairwise(bounded):
        ordered = low <= next_low and high <= next_high if order == 1 else low >= next_low and high >= next_high
        if not ordered:
            return [f"{label}: its column index says its pages are {('ascending', 'descending')[order - 1]}, "
                    f"they are not"]
    return []


def _histogram_problems(definition: list[int] | None, repetition: list[int] | None, measured: Figures,
                        label: str) -> list[str]:
    """A level histogram counts entries per level: all of them; at the highest definition level, those with a value;
    at repetition level 0, the rows that start."""
    problems = []
    if definition:
        valued = measured.values - measured.nulls
        if sum(definition) != measured.values or definition[-1] != valued:
            problems.append(f"{label} definition level histogram {definition}, measured {measured.values} entries, "
                            f"{valued} with a value")
    if repetition and (sum(repetition) != measured.values or repetition[0] != measured.rows):
        problems.append(f"{label} repetition level histogram {repetition}, measured {measured.values} entries, "
                        f"{measured.rows} rows")
    return problems
