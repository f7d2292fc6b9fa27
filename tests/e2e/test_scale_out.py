"""Scale-out through the real event path: large files to EMR Serverless (moto records the job run; the stack's
runner runs it with spark-submit), and a burst of small files in batches."""

from __future__ import annotations

import hashlib
import io
import json
import random
from typing import Any

import boto3
import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import parquet_lies as lies
from tests.conftest import LARGE_FILE_BYTES, Lake
from tests.downstream import about_object, events_about
from tests.e2e.test_event_path import alerts_about, table_rows, wait_for
from wap_ingest.adapters.aws.emr import parse_submit_parameters, record_key
from wap_ingest.adapters.aws.emr_records import EmrRecords
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.emr_request import AUDITS, ENTRY_POINT, audits_digest
from wap_ingest.core.models import SourceObject, TableRef
from wap_ingest.entrypoints.cli import main
from wap_ingest.entrypoints.ops_schema import SCHEMAS
from wap_stack.state import StackState

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def csv_bytes(rows: int, nulls: int = 0, start: int = 0) -> bytes:
    out = io.StringIO()
    out.write("my_col_0,my_col_1,my_col_2\n")
    for i in range(start, start + rows):
        out.write(f"{i},{'' if i - start < nulls else f'value-{i:012d}-' + 'x' * 20},{i / 2}\n")
    return out.getvalue().encode()


def emr_client(env: dict[str, str]) -> Any:
    return boto3.client("emr-serverless", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_REGION"])


def job_runs(env: dict[str, str], name_part: str) -> list[dict[str, Any]]:
    emr = emr_client(env)
    try:
        runs = emr.list_job_runs(applicationId=env["WAP_EMR_APPLICATION_ID"]).get("jobRuns", [])
    except emr.exceptions.ResourceNotFoundException:  # moto: no job run yet
        return []
    return [emr.get_job_run(applicationId=env["WAP_EMR_APPLICATION_ID"], jobRunId=r["id"])["jobRun"]
            for r in runs if name_part in r["name"]]


def ops(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMAS[args[0]])
    return document


def test_large_files_go_to_emr_once_and_publish_or_reject_like_the_function(
    lake: Lake, local_stack: StackState, stack_env: dict[str, str], table_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    good, bad = csv_bytes(60_000), csv_bytes(60_000, nulls=7, start=10**6)
    assert len(good) > LARGE_FILE_BYTES and len(bad) > LARGE_FILE_BYTES
    lake.drop(f"{table_name}/big.csv", good)
    lake.drop(f"{table_name}/big_nulls.csv", bad)

    [good_run] = wait_for(lambda: [r for r in job_runs(stack_env, table_name)
                                   if f"{table_name}/big.csv" in r["jobDriver"]["sparkSubmit"]["entryPointArguments"]],
                          "job run")
    # The request carries everything the job needs.
    driver = good_run["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == f"s3://{stack_env['LAKE_BUCKET']}/emr/artifacts/{ENTRY_POINT}"
    args = driver["entryPointArguments"]
    assert args[:6] == ["--bucket", stack_env["SOURCE_BUCKET"], "--key", f"{table_name}/big.csv", "--table",
                        f"wap.{table_name}"]
    assert "--size" in args and args[args.index("--size") + 1] == str(len(good))
    conf = parse_submit_parameters(driver["sparkSubmitParameters"])
    jars = {uri.rsplit("/", 1)[1] for uri in conf["spark.jars"].split(",")}
    pinned = ("iceberg-spark-runtime", "iceberg-aws-bundle", "spark-avro")
    assert {j for j in jars if j.startswith(pinned)} == jars
    assert len(jars) == 3
    assert conf["spark.archives"].endswith("/wap-pyenv.tar.gz#environment")
    assert conf["spark.sql.catalog.nessie.uri"] == f"{stack_env['NESSIE_ENDPOINT']}/api/v2"
    assert conf["spark.emr-serverless.driverEnv.LAKE_BUCKET"] == stack_env["LAKE_BUCKET"]
    assert not [k for k in conf if k.rsplit(".", 1)[-1] == "SLACK_TOKEN" or "secret" in k.lower()]
    assert good_run["executionRole"] == stack_env["WAP_EMR_EXECUTION_ROLE_ARN"]
    log_uri = good_run["configurationOverrides"]["monitoringConfiguration"]["s3MonitoringConfiguration"]["logUri"]
    assert log_uri == f"s3://{stack_env['LAKE_BUCKET']}/emr/logs"

    # Until its job has run, `wap branches` shows the large file as running on EMR (the runner takes one at a time).
    running = wait_for(lambda: [j for j in ops(capsys, "branches", "--table", table_name)["emr_jobs"]
                                if j["object"].endswith("/big_nulls.csv")], "big_nulls.csv running on EMR")
    assert running[0]["outcome"] is None and running[0]["table"] == f"wap.{table_name}"

    # The job (spark-submit on the stack) publishes the clean file and rejects the other, alerting.
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}"), "the large file on main", timeout=400) == 60_000
    [alert] = wait_for(lambda: alerts_about(local_stack, f"{table_name}/big_nulls.csv"), "the rejection alert",
                       timeout=400)
    assert "not_null(my_col_1): measured 7 nulls" in alert["text"]
    [branch] = [b for b in lake.wap_branches() if table_name in b]
    assert lake.count(f"wap.{table_name}", ref=branch) == 120_000  # main's rows + the rejected file's
    jobs = recorded_outcomes(capsys, table_name, 2)
    assert jobs["big.csv"]["outcome"] == "published" and jobs["big_nulls.csv"]["outcome"] == "rejected"
    assert jobs["big_nulls.csv"]["branch"] == branch
    # The job records the audit results as the function does: the published file's on main, the other's on its branch.
    on_main = lake.results(f"wap.{table_name}")
    assert {r["source"].rsplit("/", 1)[1] for r in on_main} == {"big.csv"}
    assert [r["value"] for r in on_main if r["metric"] == "row_count"] == [60_000.0]
    kept = [r for r in lake.results(f"wap.{table_name}", branch) if r["source"].endswith("/big_nulls.csv")]
    assert [(r["measured"], r["verdict"]) for r in kept if r["check"] == "not_null"] == [("7 nulls", "failed")]
    # The job announces its outcomes on the downstream bus, as the function does.
    [published] = events_about(stack_env, about_object(f"{table_name}/big.csv"), 1)
    [rejected] = events_about(stack_env, about_object(f"{table_name}/big_nulls.csv"), 1)
    assert published["detail-type"] == "Table Published" and published["detail"]["rows"] == 60_000
    assert rejected["detail-type"] == "File Rejected" and rejected["detail"]["branch"] == branch

    # A duplicate event for the same version does not start a second job run.
    sqs = boto3.client("sqs", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name=stack_env["AWS_REGION"])
    head = lake.s3.head_object(Bucket=stack_env["SOURCE_BUCKET"], Key=f"{table_name}/big.csv")
    event = {"Records": [{"eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "s3": {
        "bucket": {"name": stack_env["SOURCE_BUCKET"]},
        "object": {"key": f"{table_name}/big.csv", "size": head["ContentLength"], "eTag": head["ETag"].strip('"')}}}]}
    sqs.send_message(QueueUrl=stack_env["WAP_STACK_QUEUE_URL"], MessageBody=json.dumps(event))
    wait_for(lambda: _queue_empty(sqs, stack_env["WAP_STACK_QUEUE_URL"]), "the duplicate event to be consumed")
    assert len(job_runs(stack_env, table_name)) == 2  # one per file, none for the duplicate
    assert table_rows(lake, f"wap.{table_name}") == 60_000


def _queue_empty(sqs: Any, url: str) -> bool:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
    return attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def large_parquet(rows: int, *, nulls: int = 0, compression: str = "snappy") -> bytes:
    """A Parquet file above the stack's EMR threshold (random values: they do not compress); `nulls`: its first
    rows' my_col_1 is null."""
    rng = random.Random(27)
    table = pa.table({"my_col_0": pa.array(range(rows), pa.int32()),
                      "my_col_1": pa.array([None if i < nulls else f"{rng.getrandbits(64):016x}"
                                            for i in range(rows)]),
                      "my_col_2": pa.array([rng.random() for _ in range(rows)])})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression)
    return sink.getvalue()


def test_the_emr_job_registers_a_large_parquet_file_that_fits(
    lake: Lake, local_stack: StackState, stack_env: dict[str, str], table_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The job runs the function's pipeline, register path included: the file is copied into the table's location
    as it is (no Spark job rewrites it) and its history says so."""
    body = large_parquet(120_000)
    assert len(body) > LARGE_FILE_BYTES
    lake.drop(f"{table_name}/big.parquet", body)
    wait_for(lambda: job_runs(stack_env, table_name), "job run")
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}"), "the large file on main", timeout=400) == 120_000
    [entry] = ops(capsys, "history", table_name)["entries"]
    assert entry["write"] == "registered (a new table made from the file's schema)", entry
    spark = lake.service.ports.writer.spark
    [path] = [r["file_path"] for r in spark.sql(f"SELECT file_path FROM nessie.wap.{table_name}.files").collect()]
    bucket, _, key = str(path).removeprefix("s3://").partition("/")
    assert lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read() == body


def recorded_outcomes(capsys: pytest.CaptureFixture[str], table_name: str, runs: int) -> dict[str, dict[str, object]]:
    """`wap history`'s job runs by file name, once each of `runs` runs has recorded its outcome: the job alerts from
    inside its pipeline and records the outcome in its submission record after, so an alert seen says nothing yet."""
    def recorded() -> dict[str, dict[str, object]] | None:
        jobs = {j["object"].rsplit("/", 1)[1]: j for j in ops(capsys, "history", table_name)["emr_jobs"]}
        return jobs if len(jobs) == runs and all(j["outcome"] for j in jobs.values()) else None
    return wait_for(recorded, f"{runs} job runs' recorded outcomes", timeout=120)


def test_the_emr_job_measures_a_large_parquet_file_before_it_registers_it(
    lake: Lake, local_stack: StackState, stack_env: dict[str, str], table_name: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The job decodes and measures a file to register as the function does (issue 33): a large file with an intact
    footer and a damaged page is INVALID (before, the job registered it unread and it broke every later scan of
    the table); a large file whose footer hides its nulls is rewritten, and its nulls rejected."""
    damaged = bytearray(large_parquet(120_000, compression="gzip"))
    chunk = pq.ParquetFile(io.BytesIO(bytes(damaged))).metadata.row_group(0).column(1)
    start, end = (chunk.data_page_offset + chunk.total_compressed_size // 4,
                  chunk.data_page_offset + 3 * chunk.total_compressed_size // 4)
    damaged[start:end] = bytes((i * 151 + 17) % 256 for i in range(end - start))
    lying = lies.lie(large_parquet(120_000, nulls=30), lies.set_null_count(0, "my_col_1", 0))
    assert len(damaged) > LARGE_FILE_BYTES and len(lying) > LARGE_FILE_BYTES
    lake.drop(f"{table_name}/damaged.parquet", bytes(damaged))
    lake.drop(f"{table_name}/lying.parquet", lying)
    [invalid] = wait_for(lambda: alerts_about(local_stack, f"{table_name}/damaged.parquet"), "the damaged file's alert",
                         timeout=400)
    assert "cannot be ingested" in invalid["text"] and "my_col_1" in invalid["text"], invalid["text"]
    [rejected] = wait_for(lambda: alerts_about(local_stack, f"{table_name}/lying.parquet"), "the lying file's alert",
                          timeout=400)
    assert "not_null(my_col_1): measured 30 nulls" in rejected["text"], rejected["text"]
    jobs = recorded_outcomes(capsys, table_name, 2)
    assert jobs["lying.parquet"]["outcome"] == "rejected" and jobs["damaged.parquet"]["outcome"] != "published"
    assert table_rows(lake, f"wap.{table_name}") is None  # nothing reached main
    [branch] = [b for b in lake.wap_branches() if table_name in b]
    spark = lake.service.ports.writer.spark
    [summary] = [r["summary"] for r in spark.sql(
        f"SELECT summary FROM nessie.wap.`{table_name}@{branch}`.snapshots").collect()]
    assert summary["wap.write"] == "rewritten", summary
    assert summary["wap.write.reason"].startswith("footer statistics disagree with the pages: my_col_1"), summary


def test_a_table_above_its_emr_threshold_is_maintained_by_the_emr_job(
    lake: Lake, local_stack: StackState, stack_env: dict[str, str], capsys: pytest.CaptureFixture[str],
) -> None:
    """`wap maintain` of a table above its `emr_above_mb` (tests/data/audits.yml: emr_maintained, 0: every size)
    starts the job with `--maintain`; the stack's runner runs it with spark-submit, and the job merges the
    compaction into main."""
    table = "emr_maintained"
    for i in range(3):  # one at a time (not one SQS batch): three loads, one small data file each
        lake.drop(f"{table}/part{i}.csv", csv_bytes(2_000, start=i * 10**6))
        assert wait_for(lambda n=i: table_rows(lake, f"wap.{table}") == 2_000 * (n + 1) or None,
                        f"file {i} on main", timeout=400)
    capsys.readouterr()
    assert main(["maintain", table, "--json"]) == 0
    [sent] = json.loads(capsys.readouterr().out)["results"]
    assert sent["status"] == "sent to EMR" and sent["before"]["data_files"] == 3, sent
    [run] = wait_for(lambda: job_runs(stack_env, f"wap-maintain-wap.{table}"), "the maintenance job run")
    suite = audits_digest(Settings.from_env(stack_env).audits_file)  # the job checks it maintains with this suite
    assert run["jobDriver"]["sparkSubmit"]["entryPointArguments"] == ["--maintain", f"wap.{table}",
                                                                      "--audits-digest", suite]
    [done] = wait_for(lambda: [e for e in ops(capsys, "history", table)["entries"] if e["action"] == "maintained"],
                      "the maintenance merged by the job", timeout=400)
    assert "3 -> 1 data files" in done["how"]
    assert table_rows(lake, f"wap.{table}") == 6_000


def test_a_job_whose_audits_file_is_not_the_functions_refuses_until_fixed_then_the_sweep_publishes_it(
    lake: Lake, local_stack: StackState, stack_env: dict[str, str], table_name: str,
) -> None:
    """The artefacts carry yesterday's audits.yml (`make emr-artifacts` not run after a change): the job refuses
    before reading the file and says why; its run is FAILED, not consumed: once the artefacts are fixed, the
    schedule's sweep (no EventBridge locally: no event ever tells of the failed run) resubmits it and it publishes."""
    settings = Settings.from_env(stack_env)
    assert settings.emr is not None
    bucket, _, key = f"{settings.emr.artifacts}/{AUDITS}".removeprefix("s3://").partition("/")
    functions = lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert hashlib.sha256(functions).hexdigest() == audits_digest(settings.audits_file)  # as the stack uploaded it
    stale = functions + b"\n# yesterday's rules\n"
    lake.s3.put_object(Bucket=bucket, Key=key, Body=stale)
    try:
        lake.drop(f"{table_name}/suite.csv", csv_bytes(60_000))
        [alert] = wait_for(lambda: alerts_about(local_stack, f"{table_name}/suite.csv"), "the job's refusal",
                           timeout=400)
    finally:
        lake.s3.put_object(Bucket=bucket, Key=key, Body=functions)  # `make emr-artifacts`
    text = alert["text"]
    assert "refused to run: its audits.yml is not the function's" in text and "make emr-artifacts" in text
    assert audits_digest(settings.audits_file) in text and hashlib.sha256(stale).hexdigest() in text
    head = lake.s3.head_object(Bucket=stack_env["SOURCE_BUCKET"], Key=f"{table_name}/suite.csv")
    source = SourceObject(stack_env["SOURCE_BUCKET"], f"{table_name}/suite.csv", etag=head["ETag"].strip('"'),
                          version_id=head.get("VersionId"))
    records = EmrRecords(lake.s3, stack_env["LAKE_BUCKET"])
    refused = wait_for(lambda: (r := records.read(record_key(TableRef("wap", table_name), source))) and
                       r.body.get("final_state") == "FAILED" and r.body, "the refusal in the record")
    assert "not the function's" in refused["message"] and table_rows(lake, f"wap.{table_name}") is None

    report = lake.service.sweep_job_runs()

    assert report is not None
    [again] = [r for r in report.resubmitted if r.uri == source.uri]
    assert (again.failed_run, again.attempt) == (refused["job_run_id"], 2)
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}"), "the file on main", timeout=400) == 60_000
    [earlier] = records.read(record_key(TableRef("wap", table_name), source)).body["previous_runs"]  # type: ignore[union-attr]
    assert earlier["job_run_id"] == refused["job_run_id"] and "not the function's" in earlier["message"]


def test_a_burst_of_200_small_files_publishes_every_good_file_exactly_once(
    lake: Lake, local_stack: StackState, table_name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = set(random.Random(7).sample(range(200), 3))
    for i in range(200):
        lake.drop(f"{table_name}/part-{i:03d}.csv", csv_bytes(10, nulls=2 if i in bad else 0, start=i * 10))
    good_rows = 10 * (200 - len(bad))
    assert wait_for(lambda: table_rows(lake, f"wap.{table_name}") == good_rows or None,
                    f"{good_rows} rows on main", timeout=600)
    spark = lake.service.ports.writer.spark
    spark.catalog.refreshTable(f"nessie.wap.{table_name}")  # the session's catalog caches tables
    ids = spark.sql(f"SELECT my_col_0 FROM nessie.wap.{table_name}").collect()
    expected = {i * 10 + k for i in range(200) if i not in bad for k in range(10)}
    assert sorted(r["my_col_0"] for r in ids) == sorted(expected)  # every good file once, no bad row
    rejected = wait_for(lambda: [b for b in lake.wap_branches() if table_name in b] if len(
        [b for b in lake.wap_branches() if table_name in b]) == len(bad) else None, "one branch per bad file")
    assert len(rejected) == len(bad)
    history = ops(capsys, "history", table_name, "--limit", "500")["entries"]
    published = [e["source"] for e in history if e["action"] == "published"]
    assert sorted(published) == sorted(f"s3://{lake.source_bucket}/{table_name}/part-{i:03d}.csv"
                                       for i in range(200) if i not in bad)
    assert any(e["how"].startswith("audit passed (batch of") for e in history)  # batches, one line per file
