"""The lake's files (issue 33, item 5): which files under a table's location the catalog still needs, and the port
that lists, reads and removes them. A run that is discarded, pruned or loses a merge conflict leaves its files in
the table's location (a registered file's whole copy, a rewrite's data files, manifests, metadata files), and no
reference of the catalog refers to them; `wap maintain` removes them (core.pipeline.sweep).

What counts as referenced is decided over the whole catalog, never over one branch's view: every reference (every
branch and every tag), every commit in each one's history (not only its head: a Nessie commit hash reads the table as
it was, so time travel through Nessie's history keeps working), every table metadata file those commits name, every
snapshot each metadata file lists, and every manifest list, manifest, data and delete file and statistics file of
those snapshots. Deleting what only older commits refer to (a compaction's replaced files) is Nessie GC's job, with
a cutoff chosen by the operator; this sweep removes only what no live commit refers to at all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .models import TableRef

DAY = 86_400
LISTED_IN_JSON = 1000  # files a report's JSON names (the Lambda's answer is bounded); the command's text names all


@dataclass(frozen=True)
class StoredFile:
    """An object under a table's location, as the store lists it."""

    path: str  # s3://bucket/key
    size: int
    modified: datetime  # aware (UTC): when it was written


@dataclass(frozen=True)
class TableFiles:
    """What one reading of the catalog (every reference, every commit of each) says of a table."""

    table: str
    locations: tuple[str, ...]  # the table's locations (s3://bucket/prefix, no trailing slash): what is swept
    referenced: frozenset[str]  # files a live commit needs: they must exist (one missing aborts the sweep)
    kept: frozenset[str] = frozenset()  # files a live metadata file names but no reader needs (its metadata log,
    # statistics, files a snapshot deleted): never removed, and not missed when gone
    references: int = 0  # branches and tags read
    commits: int = 0  # commits read across them
    metadata_files: int = 0  # table metadata files read across the catalog


@dataclass(frozen=True)
class SweepPolicy:
    """How the sweep decides: files written less than `grace_seconds` before the sweep began are never removed (a run
    in flight may write a file and commit it later: the grace period is longer than the longest run), and nothing
    outside the warehouse is removed."""

    grace_seconds: float
    warehouse: str  # s3://bucket/prefix: every table location swept must lie under it

    def cutoff(self, started: datetime) -> datetime:
        return started - timedelta(seconds=self.grace_seconds)


@dataclass(frozen=True)
class FilesSwept:
    """What the sweep of one table found and did."""

    table: str
    status: str  # "removed", "dry run", "nothing to remove", "aborted", "deferred"
    removable: tuple[StoredFile, ...] = ()  # removed, or (dry run) would be
    listed: int = 0  # objects under the table's locations
    referenced: int = 0  # of those, needed or kept by a live reference
    too_young: int = 0  # of those, unreferenced but within the grace period
    grace_seconds: float = 0.0
    message: str = ""
    recorded_at: str | None = None  # where the removal is recorded (the decision log), when it is

    @property
    def removed_bytes(self) -> int:
        return sum(f.size for f in self.removable)

    def describe(self) -> str:
        """One line: `removed 3 file(s) (12,345 bytes) no reference uses, older than 3d; 2 younger kept`."""
        if self.status in ("aborted", "deferred"):
            return f"sweep {self.status}: {self.message}"
        grace = age_text(self.grace_seconds)
        verb = "would remove" if self.status == "dry run" else "removed"
        young = f"; {self.too_young} unreferenced file(s) younger than {grace} kept" if self.too_young else ""
        if not self.removable:
            return f"no file to remove ({self.listed} listed, {self.referenced} referenced{young})"
        metadata = sum(1 for f in self.removable if "/metadata/" in f.path)
        return (f"{verb} {len(self.removable)} file(s) ({self.removed_bytes:,} bytes; {metadata} metadata, "
                f"{len(self.removable) - metadata} data) that no reference of the catalog uses, older than "
                f"{grace}{young}")

    def to_dict(self) -> dict[str, object]:
        return {"table": self.table, "status": self.status, "listed": self.listed, "referenced": self.referenced,
                "too_young": self.too_young, "grace_seconds": self.grace_seconds, "message": self.message,
                "removed_bytes": self.removed_bytes, "recorded_at": self.recorded_at,
                "removable": len(self.removable),
                "files": [{"path": f.path, "size": f.size, "modified": f.modified.isoformat()}
                          for f in self.removable[:LISTED_IN_JSON]]}


def age_text(seconds: float) -> str:
    """`3d`, `12h`, `30m` or `45s`: the largest unit that divides it, else seconds."""
    for unit, size in (("d", DAY), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def under(path: str, location: str) -> bool:
    """Whether `path` lies strictly inside `location` (a prefix ending at a path separator, never a sibling such as
    `orders_quarantine` beside `orders`)."""
    return path.startswith(location.rstrip("/") + "/")


def location_problem(table: str, locations: Iterable[str], warehouse: str) -> str | None:
    """Why these locations must not be swept, or None: each one lies strictly inside the warehouse."""
    for location in locations:
        if not location.startswith("s3://") or not under(location, warehouse) or "/../" in f"{location}/":
            return (f"{table}: its location {location} is not inside the warehouse {warehouse}; the sweep removes "
                    f"files only there. Fix: nothing to do if the table lives elsewhere on purpose (its files are not "
                    f"swept); else check WAP_WAREHOUSE.")
    return None


@dataclass
class Sorted:
    """The objects under a table's locations, sorted by the rules (core.pipeline.sweep)."""

    removable: list[StoredFile] = field(default_factory=list)
    referenced: int = 0
    too_young: int = 0
    listed: int = 0


def sort_stored(found: TableFiles, location: str, stored: Sequence[StoredFile], cutoff: datetime,
                into: Sorted, seen: set[str]) -> str | None:
    """Sort what is stored under `location` into `into`; returns why the sweep must stop instead (a file a live
    reference needs is not there: the table is broken, or the catalog's paths and the listing differ), or None."""
    names = {f.path for f in stored}
    missing = sorted(p for p in found.referenced if under(p, location) and p not in names)
    if missing:
        return (f"{found.table}: {len(missing)} file(s) that a live reference of the catalog needs are not under "
                f"{location} (first: {missing[0]}): the table is damaged, or the catalog names its files otherwise "
                f"than the store lists them; nothing was removed. Fix: restore the file, or discard the branch whose "
                f"commits need it (wap branches), then run wap maintain again.")
    for stored_file in stored:
        if stored_file.path in seen or not under(stored_file.path, location) or stored_file.path.endswith("/"):
            continue
        seen.add(stored_file.path)
        into.listed += 1
        if stored_file.path in found.referenced or stored_file.path in found.kept:
            into.referenced += 1
        elif stored_file.modified >= cutoff:
            into.too_young += 1
        else:
            into.removable.append(stored_file)
    return None


class LakeFiles(ABC):
    """The lake's files as the catalog's references see them, and as the object store holds them."""

    @abstractmethod
    def referenced(self, table: TableRef, since: datetime) -> TableFiles | None:
        """What the catalog's live references need of `table`, from a reading of the whole catalog begun at or after
        `since` (a reading may serve several tables): every branch and tag, every commit in each one's history, every
        metadata file, snapshot, manifest and data file they name, of every table (a file under this table's location
        that another table uses counts too). None when no live reference has the table. Raises a WapError when any
        of it cannot be read (the catalog down, a metadata file missing): nothing may then be removed."""

    @abstractmethod
    def stored(self, location: str) -> list[StoredFile]:
        """Every object under `location` + '/', with its size and time of writing. Raises a WapError."""

    @abstractmethod
    def remove(self, location: str, paths: Sequence[str]) -> None:
        """Delete these objects, each of which must lie under `location` + '/' (anything else is refused with a
        WapError before any is deleted). Raises a WapError if any could not be deleted."""
