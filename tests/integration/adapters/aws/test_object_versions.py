"""Every read of a source object names the version the event announced (issue 24): on moto's versioned S3, an event
for an older version (a backlog, a retry, a redrive after the key was overwritten) publishes exactly that version's
rows, read in ranges of its own size; a version deleted since is INVALID, named, and nothing is read; on an
unversioned bucket the announced ETag is the version, and an overwrite since makes the event's version gone."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from tests.conftest import Lake
from wap_ingest.adapters.aws.s3 import PART_BYTES
from wap_ingest.core.models import OutcomeStatus, SourceObject

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def csv_rows(rows: int, width: int) -> bytes:
    """A header and `rows` rows of the tests' columns (the defaults suite: my_col_1 not null), each about `width`
    bytes."""
    pad = "x" * max(1, width - 30)
    return ("my_col_0,my_col_1,my_col_2\n" + "".join(f"{i},{pad}{i},{i / 2}\n" for i in range(rows))).encode()


@pytest.fixture
def versioned(lake: Lake) -> tuple[Lake, str]:
    bucket = f"versioned-{uuid.uuid4().hex[:8]}"
    lake.s3.create_bucket(Bucket=bucket)
    lake.s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    config = replace(lake.service.config, source_buckets=lake.service.config.source_buckets | {bucket})
    return Lake(service=lake.service.replaced(config=config), s3=lake.s3, env=lake.env), bucket


def test_an_older_version_is_read_whole_after_a_smaller_newer_one(versioned: tuple[Lake, str]) -> None:
    lake, bucket = versioned
    table = f"t_{uuid.uuid4().hex[:8]}"
    older = csv_rows(110_000, 100)  # larger than one ranged part: read in parallel ranges of its own size
    assert len(older) > PART_BYTES
    first = lake.s3.put_object(Bucket=bucket, Key=f"{table}/a.csv", Body=older)["VersionId"]
    lake.s3.put_object(Bucket=bucket, Key=f"{table}/a.csv", Body=csv_rows(1_000, 100))  # overwritten, smaller
    outcome = lake.service.ingest(SourceObject(bucket, f"{table}/a.csv", version_id=first))  # the first event
    assert outcome.status is OutcomeStatus.PUBLISHED, outcome.message
    assert outcome.rows == 110_000 and outcome.source.size == len(older) and outcome.source.version_id == first
    assert lake.count(f"wap.{table}") == 110_000


def test_a_version_deleted_since_its_event_is_invalid_and_nothing_is_read(versioned: tuple[Lake, str]) -> None:
    lake, bucket = versioned
    table = f"t_{uuid.uuid4().hex[:8]}"
    gone = lake.s3.put_object(Bucket=bucket, Key=f"{table}/a.csv", Body=csv_rows(10, 20))["VersionId"]
    lake.s3.put_object(Bucket=bucket, Key=f"{table}/a.csv", Body=csv_rows(20, 20))
    lake.s3.delete_object(Bucket=bucket, Key=f"{table}/a.csv", VersionId=gone)
    outcome = lake.service.ingest(SourceObject(bucket, f"{table}/a.csv", version_id=gone))
    assert outcome.status is OutcomeStatus.INVALID
    assert f"version {gone} no longer exists" in outcome.message
    assert not [b for b in lake.wap_branches() if table in b]


def test_on_an_unversioned_bucket_the_announced_etag_is_the_version(lake: Lake) -> None:
    table = f"t_{uuid.uuid4().hex[:8]}"
    key = f"{table}/a.csv"
    announced = lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=csv_rows(10, 20))["ETag"].strip('"')
    lake.s3.put_object(Bucket=lake.inbox_bucket, Key=key, Body=csv_rows(30, 20))  # overwritten since the event
    outcome = lake.service.ingest(SourceObject(lake.inbox_bucket, key, etag=announced))
    assert outcome.status is OutcomeStatus.INVALID
    assert f"the version announced (ETag {announced}) no longer exists" in outcome.message
    newer = lake.service.ingest(SourceObject(lake.inbox_bucket, key))  # the newer version's own event
    assert newer.status is OutcomeStatus.PUBLISHED and newer.rows == 30
