"""The branches a run makes, and the clean-up that leaves none behind.

A lone file's branch is `wap-<ns>-<table>-<digest of its identity>-<random>`: review finds the file by the
digest, and every attempt at one object version shares the prefix, so a retry finds the earlier ones. A group's
branch is `wap-<ns>-<table>-<digest of the group>-b<unix time>t<attempt>`: never kept open (a rejected file is
rerun alone), so one older than the longest possible run belongs to a run that died and is deleted by the next
run of the table. A dry run's is `dryrun-...`, which neither the clean-up nor `wap branches` touches.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Sequence

from .errors import WapError
from .models import Branch, SourceObject, TableRef
from .naming import BRANCH_PREFIX, identity_digest
from .ports import CatalogBranches

DRY_RUN_PREFIX = "dryrun"
_GROUP_ATTEMPT = re.compile(r"b(\d+)t\d+")


def table_prefix(target: TableRef) -> str:
    return f"{BRANCH_PREFIX}-{target.namespace}-{target.name}-"


def branch_name_for(target: TableRef, sources: Sequence[SourceObject], attempt: int, *, dry_run: bool = False,
                    now: float = 0.0) -> str:
    if dry_run:
        return f"{DRY_RUN_PREFIX}-{target.namespace}-{target.name}-{secrets.token_hex(4)}"
    if len(sources) == 1:
        return f"{table_prefix(target)}{identity_digest(sources[0].identity)}-{secrets.token_hex(4)}"
    digest = identity_digest("\n".join(sorted(s.identity for s in sources)))
    return f"{table_prefix(target)}{digest}-b{int(now)}t{attempt}"


def group_started_at(name: str) -> int | None:
    """When a group's branch was made (from its name); None for any other branch."""
    parts = name.split("-")
    found = _GROUP_ATTEMPT.fullmatch(parts[-1]) if len(parts) == 5 else None
    return None if found is None else int(found.group(1))


class RunBranches:
    def __init__(self, catalog: CatalogBranches, *, clock: Callable[[], float], abandoned_after: float) -> None:
        self._catalog, self._clock, self._abandoned_after = catalog, clock, abandoned_after

    def clean_up(self, target: TableRef, sources: Sequence[SourceObject], keep: str | None = None,
                 extra: str | None = None) -> str:
        """One listing of the table's WAP branches; delete the other attempts at these object versions (an
        interrupted run's, or a concurrent duplicate delivery's), `extra`, and group branches of runs that died.
        A failure to delete is noted in the message, never raised."""
        digests = {identity_digest(s.identity) for s in sources}
        oldest = self._clock() - self._abandoned_after
        try:
            branches = self._catalog.list_branches(table_prefix(target))
        except WapError as exc:
            return f" (left-over branches could not be listed: {exc})"
        notes = []
        for found in branches:
            if found.name == keep:
                continue
            parts = found.name.split("-")
            started = group_started_at(found.name)
            mine = len(parts) == 5 and parts[3] in digests and started is None
            if found.name == extra or mine or (started is not None and started < oldest):
                notes.append(self.discard(found.name, found))
        return "".join(notes)

    def discard(self, name: str, known: Branch | None = None) -> str:
        """Delete a branch; say so in the message if that is impossible."""
        try:
            found = known or self._catalog.find_branch(name)
            if found is not None:
                self._catalog.delete_branch(found)
            return ""
        except WapError as exc:
            return f" (branch {name!r} could not be deleted and is left open: {exc})"

    def vanished(self, name: str) -> bool:
        """True if the branch is gone; False if it exists or the catalog cannot say (keep the original error)."""
        try:
            return self._catalog.find_branch(name) is None
        except WapError:
            return False
