"""The bad-input matrix, through the real event path (S3 notification -> SQS -> worker -> the handler under the
Lambda emulator -> Spark, Nessie -> Slack sink): each bad file is INVALID, alerted once with a message naming the
object and the fix, leaves main unchanged and no branch behind; and the function goes on publishing good files."""

from __future__ import annotations

import json
import resource
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import bad_inputs, corruption
from tests.conftest import Lake, parquet_bytes
from tests.e2e.test_event_path import _sqs, alerts_about, table_rows, wait_for
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]

# (case, suffix, bytes, words the INVALID message must contain)
FILES: list[tuple[str, str, bytes, tuple[str, ...]]] = [
    ("corrupt_page", "parquet", bad_inputs.parquet_corrupt_page(), ("cannot be ingested", "Fix")),
    ("truncated", "parquet", bad_inputs.parquet_truncated(), ("cannot be ingested", "Fix")),
    ("unbalanced_quote", "csv", bad_inputs.csv_unbalanced_quote(), ("Fix",)),
    ("extra_fields", "csv", bad_inputs.csv_extra_fields(), ("Fix",)),
    ("latin1", "csv", bad_inputs.csv_latin1(), ("UTF-8",)),
    ("utf16", "csv", bad_inputs.csv_utf16(), ("UTF-8",)),
    ("utf16_no_bom", "csv", bad_inputs.csv_utf16(bom=False), ("UTF-8",)),
    *[(f"header_{name}", "csv", bad_inputs.csv_header(names), ("column", "Fix"))
      for name, names in bad_inputs.BAD_HEADERS.items()],
    ("zero_bytes", "csv", bad_inputs.empty_file(), ("empty",)),
    # damage the engine alone would hang on (a page longer than its data) or die of (sizes past the end): issue 24
    ("page_longer", "parquet", corruption.parquet_page_longer_than_its_data("snappy"), ("column 'x'", "Fix")),
    ("footer_past_end", "parquet", corruption.parquet_footer_past_the_end(), ("cannot be ingested", "Fix")),
    ("checksum", "parquet", bad_inputs.parquet_checksum_mismatch(), ("checksum", "column 'd'")),
    ("orc_postscript", "orc", corruption.orc_postscript_lie(3, 1_900_000_000), ("postscript", "Fix")),
    ("orc_stripe", "orc", corruption.orc_damaged_stripe(), ("stripe 0", "Fix")),
    ("avro_block", "avro", corruption.avro_block_larger_than_the_file(corruption.avro_container()),
     ("block 0", "Fix")),
]


def outcomes_of(state: StackState, uri: str) -> list[dict[str, Any]]:
    """What the worker recorded for this object, from the function's partial batch responses."""
    log = state.state_dir / "logs" / "worker.log"
    found = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            found += [o for o in entry.get("objects") or [] if o.get("object") == uri]
    return found


def _invalid_once(lake: Lake, state: StackState, bucket: str, key: str, words: tuple[str, ...]) -> dict[str, Any]:
    uri = f"s3://{bucket}/{key}"
    [outcome] = wait_for(lambda: outcomes_of(state, uri) or None, f"the outcome of {uri}")
    assert outcome["status"] == "invalid", outcome
    [alert] = wait_for(lambda: alerts_about(state, key) or None, f"the alert about {key}")
    assert "invalid" in alert["text"].lower() or "cannot" in alert["text"].lower(), alert["text"]
    for word in words:
        assert word.lower() in alert["text"].lower(), (word, alert["text"])
    return alert


def test_every_bad_file_is_invalid_alerted_once_and_leaves_main_unchanged(lake: Lake, local_stack: StackState
                                                                          ) -> None:
    run = uuid.uuid4().hex[:8]
    tables = {case: f"bad_{case}_{run}" for case, *_ in FILES}
    # every Parquet file here fits its new table, so the default (write: auto) registers the sound ones: their pages
    # are decoded before they are registered, as the rewrite path decodes what it reads
    for case, suffix, body, _ in FILES:
        lake.drop(f"{tables[case]}/{case}.{suffix}", body)
    good_table = f"good_{run}"
    lake.drop(f"{good_table}/after.parquet", parquet_bytes(6))  # the function still publishes afterwards
    for case, suffix, _, words in FILES:
        key = f"{tables[case]}/{case}.{suffix}"
        _invalid_once(lake, local_stack, lake.source_bucket, key, words)
        assert table_rows(lake, f"wap.{tables[case]}") is None  # main never saw the table
        assert [b for b in lake.wap_branches() if tables[case] in b] == []
    assert wait_for(lambda: table_rows(lake, f"wap.{good_table}"), "the good file on main") == 6
    time.sleep(2)
    for case, suffix, _, _ in FILES:  # alerted once, not once per retry: the file's fault is never retried
        assert len(alerts_about(local_stack, f"{tables[case]}/{case}.{suffix}")) == 1


def test_keys_with_odd_characters(lake: Lake, local_stack: StackState, table_name: str) -> None:
    """Under a valid table prefix the file name may hold `{`, `[`, `:` or `%00`; as a table prefix they are
    refused with the fix."""
    names = ["a{b}.parquet", "c[1].parquet", "d:e.parquet", "f%00g.parquet"]
    for i, name in enumerate(names):  # 2 + 3 + 4 + 5 rows
        lake.drop(f"{table_name}/{name}", parquet_bytes(2 + i))
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}") == 14 or None, "the four files on main")
    for prefix in ("t{x}", "t[1]", "t:y", "t%00z"):
        key = f"{prefix}_{table_name}/file.parquet"
        lake.drop(key, parquet_bytes(2))
        _invalid_once(lake, local_stack, lake.source_bucket, key, ("not a valid identifier", "Fix"))


def _announce(lake: Lake, state: StackState, bucket: str, key: str, size: int | None = None) -> None:
    """An S3 notification for an object, sent as S3 would (the object itself is where the test put it)."""
    record: dict[str, Any] = {"eventSource": "aws:s3", "eventName": "ObjectCreated:Put",
                              "s3": {"bucket": {"name": bucket}, "object": {"key": key.replace(" ", "+")}}}
    if size is not None:
        record["s3"]["object"]["size"] = size
    _sqs(lake).send_message(QueueUrl=state.queue_url, MessageBody=json.dumps({"Records": [record]}))


def test_an_event_for_the_lake_bucket_is_refused_and_nothing_is_read(lake: Lake, local_stack: StackState,
                                                                     table_name: str) -> None:
    lake.service.ingest(lake.put(f"{table_name}/base.parquet", parquet_bytes(3)))
    listed = lake.s3.list_objects_v2(Bucket=lake.env["LAKE_BUCKET"], Prefix=f"warehouse/wap/{table_name}")
    data_file = next(o["Key"] for o in listed["Contents"] if o["Key"].endswith(".parquet"))
    _announce(lake, local_stack, lake.env["LAKE_BUCKET"], data_file)
    _invalid_once(lake, local_stack, lake.env["LAKE_BUCKET"], data_file, ("not a source bucket",))
    assert table_rows(lake, "wap.warehouse") is None and lake.count(f"wap.{table_name}") == 3


def test_an_event_whose_size_lies_is_routed_by_the_stores_size(lake: Lake, local_stack: StackState,
                                                               table_name: str) -> None:
    small = f"{table_name}/small.parquet"
    lake.put(small, parquet_bytes(4))  # the inbox is a source bucket without notifications
    _announce(lake, local_stack, lake.inbox_bucket, small, size=10**12)  # claims a terabyte
    [outcome] = wait_for(lambda: outcomes_of(local_stack, f"s3://{lake.inbox_bucket}/{small}") or None, "outcome")
    assert outcome["status"] == "published"  # run in the function: the store says it is small
    assert lake.count(f"wap.{table_name}") == 4


def test_a_file_deleted_before_its_download_is_invalid(lake: Lake, local_stack: StackState, table_name: str) -> None:
    key = f"{table_name}/gone.parquet"
    lake.put(key, parquet_bytes(3))
    lake.s3.delete_object(Bucket=lake.inbox_bucket, Key=key)
    _announce(lake, local_stack, lake.inbox_bucket, key)
    _invalid_once(lake, local_stack, lake.inbox_bucket, key, ("Fix",))
    assert table_rows(lake, f"wap.{table_name}") is None


def test_a_half_gib_line_fails_fast_with_bounded_memory(lake: Lake, table_name: str, tmp_path: Path) -> None:
    """512 MiB without a newline, through the pipeline in this process (the function's path, not EMR): refused
    before Spark reads it, and this process's peak memory grows far less than the line: under 64 MiB, one part of
    its download (8 parts of 64 MiB in flight at once, each streamed to disk in 1 MiB chunks: 38 MiB measured; a
    download that held its parts whole grew by 128 MiB and more). 1 GiB showed the same and cost the suite two
    minutes of moto serving the bytes."""
    path = tmp_path / "line.csv"
    with path.open("wb") as out:
        out.write(b"id,name\n1,")
        chunk = b"x" * (8 << 20)
        for _ in range(64):
            out.write(chunk)
    key = f"{table_name}/long.csv"
    lake.s3.upload_file(str(path), lake.inbox_bucket, key)
    path.unlink()
    here = lake.service.replaced(large_files=None)
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    outcome = here.ingest(here.objects.head(lake.inbox_bucket, key))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    assert outcome.status.value == "invalid" and "Fix" in outcome.message, outcome.message
    assert grown_mib < 64, f"peak memory grew by {grown_mib:.0f} MiB for a 512 MiB line"
    assert table_rows(lake, f"wap.{table_name}") is None
