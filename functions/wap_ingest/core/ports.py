"""The ports: one abstract class per outside capability. Adapters implement them; fakes subclass them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from .alerts import Alert
from .formats import FormatOptions
from .layout import Layout
from .ledger import LedgerEntry
from .maintenance import MaintenanceSettings, MaintenanceWork, TableHealth
from .models import (
    Appended,
    AppendResult,
    Branch,
    DecisionRecord,
    FileFormat,
    JobRun,
    MeasurementPlan,
    Measurements,
    Publication,
    QuarantinePlan,
    SourceObject,
    TableRef,
)

if TYPE_CHECKING:
    from .downstream import DownstreamEvent


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
        """Make sure `namespace` exists on branch `on`; returns the head hash of `on` afterwards.

        Run on main before branching: a namespace holds no rows, and it gives a new repository's main
        its first commit (Nessie cannot merge into a main that has no commit yet)."""

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
    def head_commit_time(self, name: str) -> datetime | None:
        """When the head commit of branch `name` was committed (timezone-aware), None if the branch has no
        commit. A WAP branch's age. Raises BranchNotFoundError."""

    @abstractmethod
    def publications(self, table: TableRef, on: str = "main", limit: int = 100) -> list[Publication]:
        """The merges into `on` that published to `table`, newest first."""

    @abstractmethod
    def list_tables(self, ref: str) -> list[TableRef]:
        """The Iceberg tables on `ref`, in name order (`wap maintain --all`)."""

    @abstractmethod
    def record_published(self, branch: str, entries: Sequence[LedgerEntry]) -> Branch:
        """Commit these ledger entries (core.ledger) on `branch`, in one commit, creating the ledger's namespace
        there if `branch` lacks it; returns the branch at its new head (what to merge). Raises BranchNotFoundError,
        or CatalogError when an entry exists on `branch` already. Nessie merges these entries without conflict
        checks (they are namespaces): two publications of one version are serialized by the table they both
        change, whose key conflicts."""

    @abstractmethod
    def find_published(self, ref: str, table: TableRef, identities: Sequence[str]) -> dict[str, LedgerEntry]:
        """The ledger entries on `ref` of these object versions in `table`, by identity (absent: never published
        there). One lookup by key for all of them: its cost does not grow with the table's history."""


class TableWriter(ABC):
    """The engine: appends files into an Iceberg table on a branch and measures each file's new rows."""

    @abstractmethod
    def append(
        self,
        files: Sequence[tuple[SourceObject, FileFormat]],
        table: TableRef,
        branch: str,
        plan: MeasurementPlan,
        *,
        keep: Callable[[SourceObject, Measurements], bool] | None = None,
        allow_new_columns: bool = False,
        read_options: FormatOptions = (),
        quarantine: QuarantinePlan | None = None,
        layout: Layout | None = None,
        keep_snapshots: int | None = None,
    ) -> Appended:
        """Append the files' rows to `table` on `branch` in one snapshot stamped with their lineage
        (core.lineage.snapshot_properties), creating the table from the first file's schema if missing, and
        measure each file's new rows for `plan` (never the whole table).

        One file: raises a BadInputError subclass when the file is the problem (SchemaDriftError, with the
        difference, when its columns do not fit the table's). Several files: a file that cannot be read or written
        together with the others is reported in `left_out`, never raised. `keep`: an engine that measures before
        writing leaves the files it refuses out of the snapshot (they are still measured); one that measures after
        writing ignores it. With `allow_new_columns` the files' extra columns are added on `branch` only.
        `read_options`: the table's format options (core.formats), for the formats they apply to. `quarantine`
        (one file only): the rows failing its checks go to its table on `branch` instead, with the names of the
        checks and the source, when at most its `max_fraction` of the rows fail (`Appended.quarantined` says so).
        `layout`: the table's partition spec, sort order and write properties, set when the table is created and
        evolved on `branch` when they differ (None: the table's own stay). `keep_snapshots`: an engine whose table
        metadata lists every snapshot keeps it bounded (more than twice this many: the oldest are dropped from the
        current metadata, never a file).
        Raises a WapError (never another exception) for infrastructure failures."""

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


class ObjectStore(ABC):
    """Where source files live (S3)."""

    @abstractmethod
    def head(self, bucket: str, key: str) -> SourceObject:
        """The object's current version. Raises SourceNotFoundError."""

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


class ReportStore(ABC):
    """Where the audit reports of rejected runs are kept, by branch, so `wap show BRANCH` prints them later."""

    @abstractmethod
    def save(self, branch: str, document: Mapping[str, object]) -> str:
        """Store the document (an outcome's `to_dict()`) for `branch`; returns where it is (a URI)."""

    @abstractmethod
    def load(self, branch: str) -> dict[str, object] | None:
        """The document saved for `branch`, or None if there is none."""


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
