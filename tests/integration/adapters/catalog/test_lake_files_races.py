"""The catalog reading of the sweep (adapters/catalog/live.py) against a reference that moves while it is read, on the
real Nessie: a branch merged into main and deleted between the moment main was listed and the moment the branch would
have been is not lost (the references are listed again after the walks, and the new heads walked), and a reference
is walked from the hash it was listed at even once it is deleted (a detached read)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import requests

from tests.contract.test_lake_files_contract import Real
from wap_ingest.adapters.catalog.live import NessieLiveContents
from wap_ingest.core.errors import UnexpectedError
from wap_ingest.core.models import TableRef

pytestmark = [pytest.mark.stack]


@pytest.fixture
def stack_s3(stack_env: dict[str, str]) -> Any:
    from wap_ingest.adapters.aws.s3 import s3_client_for

    return s3_client_for(stack_env["AWS_REGION"], stack_env["AWS_ENDPOINT_URL"], 10.0)


class MovingCatalog(NessieLiveContents):
    """Lists the references as Nessie answers, except that the first listing misses `branch` (deleted before it was
    read), whose work is merged into main and the branch deleted right after that listing."""

    def __init__(self, endpoint: str, branch: str) -> None:
        super().__init__(endpoint, timeout=10)
        self.branch, self.listings, self.endpoint = branch, 0, endpoint

    def references(self) -> dict[str, str]:
        found = super().references()
        self.listings += 1
        if self.listings == 1:
            head = found.pop(f"BRANCH:{self.branch}")
            main = found["BRANCH:main"]
            requests.post(f"{self.endpoint}/api/v2/trees/main@{main}/history/merge", timeout=10,
                          json={"fromRefName": self.branch, "fromHash": head}).raise_for_status()
            requests.delete(f"{self.endpoint}/api/v2/trees/{self.branch}@{head}", timeout=10).raise_for_status()
        return found


def test_a_branch_merged_and_deleted_during_the_reading_is_not_lost(stack_env: dict[str, str], stack_s3: Any) -> None:
    from wap_ingest.adapters.catalog.iceberg_files import MetadataFiles, pyarrow_io
    from wap_ingest.adapters.catalog.lake_files import CatalogLakeFiles

    world = Real(stack_env, stack_s3)
    table = TableRef(f"c{uuid.uuid4().hex[:8]}", "moving")
    world.add_table(table)
    world.append(table)
    world.branch("moving")
    merged = world.append(table, "moving")
    catalog = MovingCatalog(stack_env["NESSIE_ENDPOINT"], f"moving-{world.token}")
    files = CatalogLakeFiles(catalog, MetadataFiles(pyarrow_io(stack_env["AWS_ENDPOINT_URL"],
                                                               stack_env["AWS_REGION"], 10)), stack_s3)
    found = files.referenced(table, datetime.now(UTC))
    assert catalog.listings == 2 and found is not None and merged in found.referenced


def test_a_reference_deleted_after_it_was_listed_is_read_at_its_listed_hash(stack_env: dict[str, str]) -> None:
    world = Real(stack_env, None)
    table = TableRef(f"c{uuid.uuid4().hex[:8]}", "gone")
    world.add_table(table)
    world.branch("gone")
    world.append(table, "gone")
    on_branch = world.metadata_of(table, "gone")

    class Listed(NessieLiveContents):
        """The first listing saw the branch; it is deleted before its history is read."""

        listings = 0

        def references(self) -> dict[str, str]:
            found = super().references()
            Listed.listings += 1
            if Listed.listings == 1:
                world.drop("gone")
            return found

    found = Listed(stack_env["NESSIE_ENDPOINT"], timeout=10).read()
    assert any(on_branch in c.metadata for c in found.contents.values() if table.qualified in c.keys)


def test_an_unexpected_failure_reading_metadata_is_a_wap_error(stack_env: dict[str, str], stack_s3: Any) -> None:
    from wap_ingest.adapters.catalog.lake_files import CatalogLakeFiles

    class Broken:
        def named(self, metadata_of: Any) -> Any:
            raise RuntimeError("a decoder's own bug")

    contents = NessieLiveContents(stack_env["NESSIE_ENDPOINT"], timeout=10)
    files = CatalogLakeFiles(contents, Broken(), stack_s3)  # type: ignore[arg-type]
    world = Real(stack_env, stack_s3)
    table = TableRef(f"c{uuid.uuid4().hex[:8]}", "broken")
    world.add_table(table)
    with pytest.raises(UnexpectedError, match="a decoder's own bug"):
        files.referenced(table, datetime.now(UTC))
