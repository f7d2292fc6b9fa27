"""What the audit asks the engine to measure of a run's new rows (MeasurementPlan) and the engine's answers
(Measurements): the core builds the plan from the suite's checks, every engine adapter (and the fake) answers it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

Scalar = str | int | float | bool


@dataclass(frozen=True)
class RowRule:
    """A condition every new row must meet (null values are left to `not_null`). The engine counts the
    rows that break it and keeps a few of them as samples. `key` names it in the Measurements."""

    key: str
    kind: str  # accepted_values | range | regex
    column: str
    values: tuple[Scalar, ...] = ()
    low: int | float | None = None
    high: int | float | None = None
    pattern: str | None = None


@dataclass(frozen=True)
class Reference:
    """Every non-null value of `column` in the new rows must be a `key` of `table` (qualified) as the run's branch has
    it: main's rows, and those of the same load written before (core.audits.cross)."""

    column: str
    table: str
    key: str

    @property
    def name(self) -> str:
        return f"{self.column} in {self.table}.{self.key}"


@dataclass(frozen=True)
class Reconciliation:
    """An aggregate of the audited table as the run's branch has it after the load (main's rows and the new ones)
    against an aggregate of another table (qualified) as the branch has it (core.audits.cross). Each aggregate is
    (function, column): count with column None is count(*)."""

    ours: tuple[str, str | None]
    table: str
    theirs: tuple[str, str | None]

    @property
    def name(self) -> str:
        return f"{aggregate_text(self.ours)} = {self.table}.{aggregate_text(self.theirs)}"


def aggregate_text(aggregate: tuple[str, str | None]) -> str:
    return f"{aggregate[0]}({aggregate[1] or '*'})"


T = TypeVar("T")


def _union(first: tuple[T, ...], second: tuple[T, ...]) -> tuple[T, ...]:
    return tuple(dict.fromkeys(first + second))


@dataclass(frozen=True)
class MeasurementPlan:
    """What the audit needs measured on the new rows. Built by the core, answered by the engine."""

    null_count_columns: tuple[str, ...] = ()
    rules: tuple[RowRule, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()  # duplicated keys within the new rows
    existing_keys: tuple[tuple[str, ...], ...] = ()  # new keys already in the table before this append
    max_columns: tuple[str, ...] = ()  # the newest value of these columns (freshness)
    queries: tuple[str, ...] = ()  # custom SQL over the view `new_rows`: the rows it returns
    profile_columns: tuple[str, ...] = ()  # a ColumnProfile of each (anomaly checks)
    references: tuple[Reference, ...] = ()  # values that must be keys of another table
    reconciliations: tuple[Reconciliation, ...] = ()  # this table's aggregate against another table's
    samples: int = 5

    def merged(self, other: MeasurementPlan) -> MeasurementPlan:
        return MeasurementPlan(
            null_count_columns=_union(self.null_count_columns, other.null_count_columns),
            rules=_union(self.rules, other.rules),
            unique_keys=_union(self.unique_keys, other.unique_keys),
            existing_keys=_union(self.existing_keys, other.existing_keys),
            max_columns=_union(self.max_columns, other.max_columns),
            queries=_union(self.queries, other.queries),
            profile_columns=_union(self.profile_columns, other.profile_columns),
            references=_union(self.references, other.references),
            reconciliations=_union(self.reconciliations, other.reconciliations),
            samples=max(self.samples, other.samples),
        )

    @property
    def bounded_columns(self) -> tuple[str, ...]:
        """The columns whose bounds the plan can use from a data file's metrics: the range rules' and the newest
        values'."""
        return tuple(dict.fromkeys([r.column for r in self.rules if r.kind == "range"] + list(self.max_columns)))

    @property
    def reads_rows(self) -> bool:
        """False when the snapshot summary and the files' metrics can answer everything."""
        return bool(self.rules or self.unique_keys or self.existing_keys or self.queries or self.profile_columns
                    or self.references or self.reconciliations)


Sample = Mapping[str, str]  # one row, values as text


@dataclass(frozen=True)
class ColumnProfile:
    """A cheap profile of one column over the new rows, measured in the pass the audit already makes. None: the
    figure does not exist for these rows (no rows; no value; min, max and mean of a column that is not numeric)."""

    null_share: float | None = None  # null rows / rows
    distinct: float | None = None  # an estimate of the distinct non-null values
    min: float | None = None
    max: float | None = None
    mean: float | None = None


@dataclass(frozen=True)
class Measurements:
    """The engine's answers for the rows one run appended. Keys of the mappings: column names, the
    RowRule keys, the key column tuples and the queries of the plan. Samples are keyed by `sample_key`."""

    row_count: int
    null_counts: Mapping[str, int] = field(default_factory=dict)
    columns: tuple[str, ...] = ()
    types: Mapping[str, str] = field(default_factory=dict)  # column -> engine type name (bigint, string...)
    violations: Mapping[str, int] = field(default_factory=dict)  # RowRule.key -> rows breaking it
    duplicates: Mapping[tuple[str, ...], int] = field(default_factory=dict)  # key -> rows beyond the first
    existing: Mapping[tuple[str, ...], int] = field(default_factory=dict)  # key -> new rows whose key exists
    newest: Mapping[str, int | None] = field(default_factory=dict)  # column -> max, microseconds since epoch
    query_rows: Mapping[str, int] = field(default_factory=dict)  # query -> rows returned
    samples: Mapping[str, tuple[Sample, ...]] = field(default_factory=dict)
    added_columns: tuple[str, ...] = ()
    from_metadata: tuple[str, ...] = ()  # what the files' metrics answered without reading rows
    profile: Mapping[str, ColumnProfile] = field(default_factory=dict)  # column -> its profile
    missing: Mapping[str, int] = field(default_factory=dict)  # Reference.name -> new rows whose value is no key
    absent: tuple[str, ...] = ()  # referenced tables the branch does not have (every value is missing)
    # Reconciliation.name -> (this table's aggregate, the other's); None: no value (no rows, or no such table)
    reconciled: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)


def sample_key(kind: str, target: object) -> str:
    """The key of a check's samples in Measurements.samples: `not_null:col`, `unique:a,b`, a RowRule key..."""
    if isinstance(target, tuple):
        target = ",".join(str(t) for t in target)
    return f"{kind}:{target}"
