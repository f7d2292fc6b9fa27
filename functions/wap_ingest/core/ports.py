"""The ports: one abstract class per outside capability. Adapters implement them; fakes subclass them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .alerts import Alert
from .audit_results import METRIC_CHECK, ResultRow, history_of
from .formats import FormatOptions
from .job_sweep import SweepReport
from .layout import Layout
from .ledger import LedgerEntry
from .maintenance import MaintenanceSettings, MaintenanceWork, TableHealth
from .measurements import MeasurementPlan, Measurements
from .merge_plan import Changes, CommitInfo
from .models import (
    Appended,
    AppendResult,
    Branch,
    DecisionRecord,
    FileFormat,
    JobRun,
    Publication,
    QuarantinePlan,
    SourceObject,
    TableRef,
)
from .weights import Weight


@dataclass(frozen=True)
class DownstreamEvent:
    """One event for the jobs that consume the lake (core.downstream says which outcomes become one)."""

    detail_type: str
    detail: Mapping[str, object]


class CatalogBranches(ABC):
    """Branches of the versioned catalog (Nessie): the isolation WAP writes into."""

    @abstractmethod
    def reference_hash(self, name: str) -> str:
        """The head hash of a branch. Raises BranchNotFoundError."""

    @abstractmethod
    def find_branch(self, name: str) -> Branch | None:
        """The branch, or None if there is no reference with that name."""

    @abstractmethod
    def create_branch(self, name: str, from_hash: str) -> Branch:
        """Create `name` at `from_hash` (a hash on main). Raises BranchExistsError."""

    @abstractmethod
    def ensure_namespace(self, on: str, namespace: str) -> str:
        """Make sure `namespace` exists on branch `on` (a commit there if it does not); returns the head hash of
        `on` afterwards. A run's new namespaces are made on its branch (they reach main merged, with audited rows);
        on main only the ledger's, as a new repository's first commit (Nessie cannot merge into a main without one)."""

    @abstractmethod
    def has_namespace(self, ref: str, namespace: str) -> bool:
        """Whether `namespace` exists on `ref` (a namespace is never dropped: once seen, it may be remembered)."""

    @abstractmethod
    def merge(
        self,
        branch: Branch,
        onto: str,
        expected_hash: str,
        message: str,
        properties: Mapping[str, str],
    ) -> str:
        """Merge `branch` at its hash into `onto`, expecting `onto` at `expected_hash`.

        Returns the new head of `onto`. Raises MergeConflictError when `onto` changed the same content
        since `expected_hash`. Never forces.
        """

    @abstractmethod
    def delete_branch(self, branch: Branch) -> None:
        """Delete the branch at the given hash. Raises BranchNotFoundError or StaleHashError."""

    @abstractmethod
    def list_branches(self, prefix: str = "") -> list[Branch]:
        """Branches whose name starts with `prefix`."""

    @abstractmethod
    def head_commit(self, name: str) -> Publication | None:
        """The head commit of branch `name` (hash, time, message, properties), None if the branch has no commit.
        A WAP branch's age, and what a kept branch would publish. Raises BranchNotFoundError."""

    @abstractmethod
    def publications(self, table: TableRef | None, on: str = "main", limit: int = 100) -> list[Publication]:
        """The merges into `on` that published to `table` (None: to any table, in one read), newest first."""

    @abstractmethod
    def list_tables(self, ref: str) -> list[TableRef]:
        """The Iceberg tables on `ref`, in name order (`wap maintain --all`)."""

    @abstractmethod
    def record_published(self, branch: str, entries: Sequence[LedgerEntry],
                         properties: Mapping[str, str] | None = None) -> Branch:
        """Commit these ledger entries (core.ledger) on `branch`, in one commit carrying `properties`, creating the
        ledger's namespace there if `branch` lacks it; returns the branch at its new head (what to merge). Raises
        BranchNotFoundError, or CatalogError when an entry exists on `branch` already. Nessie merges these entries
        without conflict checks (they are namespaces): two publications of one version are serialized by the table
        they both change, whose key conflicts."""

    @abstractmethod
    def find_published(self, ref: str, table: TableRef, identities: Sequence[str]) -> dict[str, LedgerEntry]:
        """The ledger entries on `ref` of these object versions in `table`, by identity (absent: never published
        there). One lookup by key for all of them: its cost does not grow with the table's history."""

    @abstractmethod
    def changes(self, name: str, base: str) -> Changes:
        """What branch `name` changed since `base` (the main hash it was made from): every key whose content differs
        between `base` and the branch's current head, with its content on both sides, and that head (what a merge
        checked now takes). The transaction checks it against the run's plan before every merge (core.merge_plan).
        Raises BranchNotFoundError when the branch or `base` does not exist."""

    @abstractmethod
    def commit_log(self, name: str, *, until: str | None = None, limit: int = 1000) -> list[CommitInfo]:
        """The commits of branch `name`, newest first, down to `until` (a hash of its history, not included) or at
        most `limit` of them: hash, parent, committer (the principal the catalog authenticated, empty without
        authentication), message, properties and the keys each one's operations changed. Names the commit behind
        a refused merge, and finds a kept branch's plan commit. Raises BranchNotFoundError."""


@dataclass(frozen=True)
class WriteSpec:
    """How the files of one table are written on a run's branch: decided by the core once per attempt, frozen."""

    table: TableRef
    branch: str
    plan: MeasurementPlan  # what the audit needs measured on the new rows
    allow_new_columns: bool = False  # the files' extra columns are added to the table on the branch
    read_options: FormatOptions = ()  # the table's format options (core.formats), for the formats they apply to
    layout: Layout | None = None  # partition spec, sort order, write properties (None: the table's own stay)
    # a lone file only: its rows failing these checks go to the quarantine table on the branch, when at most
    # `max_fraction` of them fail (`Appended.quarantined` says so)
    quarantine: QuarantinePlan | None = None
    # the invocation's deadline, watched inside staging and the engine's jobs: once true, they stop and the call
    # raises an OutOfTimeError (the file goes back to the queue); None: no deadline
    out_of_time: Callable[[], bool] | None = field(default=None, compare=False)
    # how a file is taken into the table (the audits file's `write:`): "auto" registers a Parquet file that fits the
    # table as it is and rewrites any other, "register" refuses (BadInputError) a file it cannot register, "rewrite"
    # always rewrites; the engine says which it did and why (`Appended.write`)
    write: str = "auto"
    # a lone file's figures, handed over by an engine that measures its rows before it commits them (the register
    # path), right before that commit: the core audits them and records their results meanwhile (core.pipeline.beside);
    # the engine's answer then carries those very figures. None: not asked for
    before_commit: Callable[[Measurements], None] | None = field(default=None, compare=False)


class StagedFiles(ABC):
    """Files of one table staged and read together, each one's rows measured, nothing written yet: the core audits
    each file and chooses which to append. Leaving the context releases the staged copies and the rows read."""

    def __init__(self, measured: Mapping[str, Measurements], left_out: Mapping[str, str]) -> None:
        self.measured = measured  # by source identity, for every file read with the others
        self.left_out = left_out  # by source identity: files that could not be read with the others (they run alone)

    @abstractmethod
    def append(self, accepted: Sequence[SourceObject]) -> Appended:
        """Append the rows of these files (some of `measured`) in one snapshot stamped with their lineage. A file
        whose rows cannot be written with the others is in `left_out` of the result, never raised. Raises a WapError
        (never another exception) for infrastructure failures."""

    @abstractmethod
    def close(self) -> None:
        """Release the staged copies and the rows read (idempotent)."""

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TableWriter(ABC):
    """The engine: appends files into an Iceberg table on a branch and measures the new rows of each file."""

    def start(self, files: Sequence[tuple[WriteSpec, FileFormat]], *, together: bool = False) -> None:
        """These files are coming to `append` (each with how its table is written; the specs' branch is not made
        yet: empty), and, if `together`, some files to `stage`: begin starting the engine, in the background, if
        they will need it, so that the catalog steps before the
        first write (the ledger lookup, the branch) overlap its start. Never raises and never waits; what the start
        raises is raised by the first call that needs the engine. Default: nothing to start."""
        return

    @abstractmethod
    def append(self, spec: WriteSpec, source: SourceObject, fmt: FileFormat) -> Appended:
        """Append one file's rows to `spec.table` on `spec.branch` in one snapshot stamped with its lineage
        (core.lineage.snapshot_properties), creating the table from its schema if missing (with `spec.layout`), then
        measure the snapshot's new rows for `spec.plan` (never the whole table; metadata first). A file without rows
        commits nothing: `snapshot` None and a row count of 0. With `spec.write` "auto" or "register", a Parquet file
        whose schema fits the table is registered (the file itself, copied into the table's location, becomes the
        snapshot's data file, with the metrics of its footer) instead of rewritten; `Appended.write` says which and
        why. Raises a BadInputError subclass when the file is the problem (SchemaDriftError, with the difference,
        when its columns do not fit the table's; NotRegistrableError when `spec.write` is "register" and the file
        cannot be registered), a WapError (never another exception) for infrastructure failures."""

    @abstractmethod
    def stage(self, spec: WriteSpec, files: Sequence[tuple[SourceObject, FileFormat]]) -> StagedFiles:
        """Stage and read several files of `spec.table` together and measure each one's rows for `spec.plan`,
        writing nothing (`spec.quarantine` does not apply: a file of a group that fails runs alone). A file that
        cannot be staged or read with the others is in `left_out`. Files read together are rewritten (one read, one
        measuring pass and one data file for the group). Raises a WapError for infrastructure failures."""

    @abstractmethod
    def find_append(self, table: TableRef, ref: str, identity: str) -> AppendResult | None:
        """The recent append on `ref` (a WAP branch, or main right after a publish) that carries this source
        identity, among the newest lineage.RECENT_APPENDS snapshots, from the table's metadata (no engine job).
        None if not found or the table does not exist. Never the exactly-once lookup: that is the ledger's
        (CatalogBranches.find_published), which no expiry can lose."""

    @abstractmethod
    def measure_appended(
        self, table: TableRef, branch: str, appended: AppendResult, plan: MeasurementPlan
    ) -> Measurements:
        """Measure only the rows of `appended` (its snapshot), never the whole table (a re-audit)."""


class TableMaintainer(ABC):
    """The engine's upkeep of a table (core.maintenance): its health, and the maintenance work on a branch."""

    @abstractmethod
    def health(self, table: TableRef, ref: str, small_file_bytes: int) -> TableHealth | None:
        """The table's rows, data files (and how many are under `small_file_bytes`), bytes, manifests and snapshots
        on `ref`; None when there is no such table."""

    @abstractmethod
    def maintain(self, table: TableRef, branch: str, work: MaintenanceWork, settings: MaintenanceSettings,
                 layout: Layout) -> None:
        """Do `work` on `branch`: compact the small data files (within partitions, in the table's sort order when
        it has one, to the layout's target size), rewrite the manifests, drop the oldest snapshots from the current
        metadata (never a file), and set the table's Nessie-safe GC properties. The rows never change. Raises a
        WapError."""

    @abstractmethod
    def trim_snapshots(self, table: TableRef, branch: str, keep: int) -> int:
        """Drop all but the newest `keep` snapshots from the table's current metadata on `branch` (one metadata
        commit; no file is deleted, older metadata stays in the catalog's history); returns how many were dropped.
        Raises a WapError."""


class MaintenanceJobs(ABC):
    """The distributed engine that maintains tables too large for a function (EMR Serverless)."""

    @abstractmethod
    def submit_maintenance(self, table: TableRef) -> str:
        """Start a maintenance run for `table`, at most one per table and day (a second call the same day returns
        the first run's id); returns the run's id. Raises a WapError if the engine refuses."""


class LargeFileJobs(ABC):
    """The distributed engine that runs the whole pipeline for files too large for a function (EMR Serverless)."""

    @abstractmethod
    def submit(self, source: SourceObject, table: TableRef) -> JobRun:
        """Start one job run for this object version, at most once: a second call for the same version returns
        the first run with `already_submitted=True`. Raises a WapError if the engine refuses."""

    @abstractmethod
    def runs(self, table: TableRef | None = None) -> list[JobRun]:
        """The recorded job runs (newest first), with their current state."""

    def run_ended(self, application_id: str, job_run_id: str) -> JobRun | None:
        """The engine says a run ended: resubmit it if it was a recorded file's run and failed (the new run), else
        None. An engine without such notices keeps this default: a failed run is resubmitted by its redelivery."""
        return None

    def sweep(self) -> SweepReport:
        """The schedule's look at every recorded run: resubmit the failed, cancelled and overdue ones (or alert them
        once their attempts are used up), whether or not an event told of them. Default: nothing recorded."""
        return SweepReport()


class ObjectStore(ABC):
    """Where source files live (S3)."""

    @abstractmethod
    def head(self, bucket: str, key: str, version_id: str | None = None) -> SourceObject:
        """The object version `version_id` (None: the current one), with its own size and ETag. Raises
        SourceNotFoundError when that version (or the object) does not exist."""

    @abstractmethod
    def weigh(self, source: SourceObject, fmt: FileFormat) -> Weight:
        """What the engine will process of exactly this version (core.weights): its stored size, or what its
        compression or encoding inflates to, measured from its own bytes with bounded reads. Raises
        SourceNotFoundError when the version is gone, a BadInputError when its bytes are not what its name says."""

    @abstractmethod
    def list_objects(self, bucket: str, prefix: str) -> list[SourceObject]:
        """All objects under `prefix`, in key order."""

    @abstractmethod
    def read_bytes(self, source: SourceObject, max_bytes: int) -> bytes:
        """A small object's content (a manifest), exactly the version `source` names (its version id, else its
        ETag). Raises SourceNotFoundError; a BadInputError when it is larger than `max_bytes`."""


class Notifier(ABC):
    """Where alerts go (Slack, or the log). Delivery failures are the adapter's to log, never to raise:
    an alert outage must not change an ingestion's outcome."""

    @abstractmethod
    def notify(self, alert: Alert) -> bool:
        """Deliver the alert; True if it was delivered."""


class Retries(ABC):
    """When a message that failed or was deferred comes back (adapters/aws/sqs.SqsRetries: SQS's
    ChangeMessageVisibility). A failure to set it is the adapter's to log, never to raise: the message then waits for
    the queue's own visibility timeout."""

    @abstractmethod
    def back_off(self, queue_arn: str, receipt_handle: str, seconds: int) -> bool:
        """Make the message visible again in `seconds`; True if the queue took it."""


class ReportStore(ABC):
    """Where the audit reports of rejected runs are kept, by branch, so `wap show BRANCH` prints them later."""

    @abstractmethod
    def save(self, branch: str, document: Mapping[str, object]) -> str:
        """Store the document (an outcome's `to_dict()`) for `branch`; returns where it is (a URI)."""

    @abstractmethod
    def load(self, branch: str) -> dict[str, object] | None:
        """The document saved for `branch`, or None if there is none."""


class AuditResults(ABC):
    """Every audited load's measurements, kept in the lake (core.audit_results): one results table per audited table,
    written on the run's branch (merged with its load, or kept with it), read back from `main` by the anomaly
    checks."""

    @abstractmethod
    def record(self, branch: str, table: TableRef, rows: Sequence[ResultRow]) -> None:
        """Append `rows` to `table`'s results table on `branch` in one commit (the table is made there first if the
        branch has none). Raises a WapError (a conflict with another writer of the branch: StaleHashError)."""

    @abstractmethod
    def rows(self, table: TableRef, ref: str) -> list[ResultRow]:
        """Every row of `table`'s results on `ref` (none: no results table there), oldest load first."""

    def history(self, table: TableRef, ref: str, wanted: Mapping[str, int]) -> dict[str, tuple[float, ...]]:
        """The values of the `wanted` metrics (name -> how many loads) per load on `ref`, newest first."""
        return history_of(((r.load, r.metric or "", r.value, r.recorded_at) for r in self.rows(table, ref)
                           if r.check == METRIC_CHECK), wanted)


class DecisionLog(ABC):
    """A durable, append-only record of operator decisions on WAP branches.

    Publishing is recorded on its merge commit (atomically with the rows); a discard changes nothing on
    `main` and Nessie refuses a commit without operations, so discards are recorded here."""

    @abstractmethod
    def record(self, decision: DecisionRecord) -> str:
        """Store the decision; returns where it was stored (a URI). Never overwrites an earlier one."""

    @abstractmethod
    def decisions(self, table: TableRef, limit: int = 100) -> list[DecisionRecord]:
        """The decisions recorded for `table`, newest first."""


class EventSink(ABC):
    """Where downstream events go (an EventBridge bus; core.downstream says which events)."""

    @abstractmethod
    def publish(self, events: Sequence[DownstreamEvent]) -> None:
        """Send every event, in order; raises a WapError if any was not accepted."""
