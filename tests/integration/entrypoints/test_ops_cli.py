"""The operator commands against the real stack, and the commands an alert suggests, pasted as they are."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import requests

from tests.conftest import Lake, parquet_bytes
from wap_ingest.bootstrap import OperatorCommands, Service
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.alerts import Alert, alert_for_outcome, plain_text
from wap_ingest.core.audits import AuditSuite, AuditSuites, RowCount
from wap_ingest.core.models import OutcomeStatus
from wap_ingest.entrypoints import ops_cli
from wap_ingest.entrypoints.cli import main
from wap_ingest.entrypoints.ops_schema import SCHEMAS

pytestmark = [pytest.mark.stack, pytest.mark.spark]


def rejected_branch(lake: Lake, table: str, rows: int = 20, nulls: int = 3) -> str:
    lake.service.ingest(lake.put(f"{table}/base.parquet", parquet_bytes(5)))
    outcome = lake.service.ingest(lake.put(f"{table}/bad.parquet", parquet_bytes(rows, nulls=nulls)))
    assert outcome.status is OutcomeStatus.REJECTED and outcome.branch
    return outcome.branch


def wap(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_show_reports_the_new_rows_from_metadata(lake: Lake, table_name: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "show", branch, "--json")
    shown = valid("show", out)
    assert code == 0
    assert shown["table"] == f"wap.{table_name}" and shown["rows_added"] == 20 and shown["rows_on_main"] == 5
    assert shown["null_counts"] == {"my_col_0": 0, "my_col_1": 3, "my_col_2": 0}
    assert shown["source"] == f"s3://{lake.inbox_bucket}/{table_name}/bad.parquet"
    code, listed, _ = wap(capsys, "branches", "--json")
    assert branch in [b["branch"] for b in json.loads(listed)["branches"]]


def main_log(lake: Lake) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = requests.get(f"{lake.env['NESSIE_ENDPOINT']}/api/v2/trees/main/history",
                                                 timeout=10).json()["logEntries"]
    return entries


def valid(command: str, out: str) -> dict[str, Any]:
    """The command's --json output, checked against its published schema (fails on any violation)."""
    document: dict[str, Any] = json.loads(out)
    jsonschema.validate(document, SCHEMAS[command])
    return document


def test_publish_refuses_while_the_reaudit_still_fails(lake: Lake, table_name: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    main_before = lake.main_hash()
    code, _, err = wap(capsys, "publish", branch, "--reason", "looks fine to me")
    assert code == 1 and "still fails the audit" in err and "not_null(my_col_1): 3 nulls" in err
    assert f"wap publish {branch} --no-reaudit --reason" in err
    code, out, _ = wap(capsys, "publish", branch, "--json")
    refused = valid("publish", out)
    assert code == 1 and refused["action"] == "refused" and refused["reaudit"]["passed"] is False
    [not_null] = [c for c in refused["reaudit"]["checks"] if c["check"] == "not_null"]
    assert {k: not_null[k] for k in ("target", "status", "measured", "expected")} == {
        "target": "my_col_1", "status": "failed", "measured": "3 nulls", "expected": "0 nulls"}
    assert len(not_null["samples"]) == 3  # the failing rows the report shows
    code, _, err = wap(capsys, "publish", branch, "--no-reaudit")
    assert code == 1 and "say why with --reason" in err
    assert branch in lake.wap_branches() and lake.main_hash() == main_before


def test_publish_without_reaudit_records_the_override_and_is_idempotent(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "publish", branch, "--no-reaudit", "--reason", "nulls are expected here", "--json")
    published = valid("publish", out)
    assert code == 0 and published["action"] == "published" and published["reaudit"] is None
    assert published["already"] is False and published["source"] == f"s3://inbox/{table_name}/bad.parquet"
    assert lake.count(f"wap.{table_name}") == 25
    assert branch not in lake.wap_branches()
    props = main_log(lake)[0]["commitMeta"]["allProperties"]
    assert props["wap.decision.reason"] == ["nulls are expected here"] and props["wap.decision.branch"] == [branch]
    assert props["wap.decision.reaudit"] == ["skipped"] and props["wap.source.key"] == [f"{table_name}/bad.parquet"]
    code, out, _ = wap(capsys, "publish", branch, "--no-reaudit", "--reason", "again")
    assert code == 0 and "was already published" in out and "nulls are expected here" in out
    code, out, _ = wap(capsys, "publish", branch, "--json")
    again = valid("publish", out)
    assert code == 0 and again["already"] is True and again["merged_hash"] == published["merged_hash"]
    assert lake.count(f"wap.{table_name}") == 25


def test_publish_after_fixing_the_audit_suite_reaudits_and_merges(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    branch = rejected_branch(lake, table_name)
    fixed = tmp_path / "audits.yml"  # the data owner says my_col_1 may be null in this table
    fixed.write_text(f"tables:\n  {table_name}:\n    - check: row_count\n      min: 1\n")
    monkeypatch.setenv("WAP_AUDITS_FILE", str(fixed))
    code, out, err = wap(capsys, "publish", branch, "--json")
    published = valid("publish", out)
    assert code == 0, err
    reaudit = published["reaudit"]
    assert (reaudit["table"], reaudit["rows"], reaudit["passed"]) == (f"wap.{table_name}", 20, True)
    assert [{k: c[k] for k in ("check", "target", "status", "measured", "expected")} for c in reaudit["checks"]] == [
        {"check": "row_count", "target": "rows", "status": "passed", "measured": "20 rows", "expected": ">= 1"}]
    assert published["reason"] == "re-audit passed" and lake.count(f"wap.{table_name}") == 25
    props = main_log(lake)[0]["commitMeta"]["allProperties"]
    assert props["wap.decision.reaudit"] == ["passed"] and props["wap.rows"] == ["20"]


def test_publish_of_a_branch_whose_file_was_published_since_says_so(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    relaxed = lake.service.replaced(suites=AuditSuites(by_table={}, default=AuditSuite((RowCount(min=1),))))
    again = relaxed.ingest(lake.put(f"{table_name}/bad.parquet", parquet_bytes(20, nulls=3)))
    assert again.status is OutcomeStatus.PUBLISHED and branch not in lake.wap_branches()
    code, out, _ = wap(capsys, "publish", branch, "--json")
    said = valid("publish", out)
    assert code == 0 and said["already"] is True and said["merged_hash"] == again.merged_hash
    assert said["source"] == f"s3://inbox/{table_name}/bad.parquet" and lake.count(f"wap.{table_name}") == 25


def test_discard_deletes_the_branch_records_the_decision_and_leaves_main(
        lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    main_before = lake.main_hash()
    code, out, _ = wap(capsys, "discard", branch, "--reason", "producer will resend", "--json")
    discarded = valid("discard", out)
    assert code == 0 and discarded["action"] == "discarded" and discarded["already"] is False
    assert branch not in lake.wap_branches() and lake.main_hash() == main_before
    where = discarded["recorded_at"]
    assert where.startswith(f"s3://{lake.env['LAKE_BUCKET']}/wap-decisions/wap.{table_name}/")
    bucket, key = where.removeprefix("s3://").split("/", 1)
    record = json.loads(lake.s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert record["branch"] == branch and record["reason"] == "producer will resend"
    assert record["source"] == f"s3://inbox/{table_name}/bad.parquet"
    code, out, _ = wap(capsys, "discard", branch, "--reason", "twice")
    assert code == 0 and "was already discarded" in out and "producer will resend" in out
    code, _, err = wap(capsys, "publish", branch, "--no-reaudit", "--reason", "changed my mind")
    assert code == 1 and "was discarded by" in err and f"wap ingest s3://inbox/{table_name}/bad.parquet" in err
    code, out, _ = wap(capsys, "history", table_name, "--json")
    newest, *_ = valid("history", out)["entries"]
    assert newest["action"] == "discarded" and newest["branch"] == branch and newest["how"] == "by hand"
    code, text, _ = wap(capsys, "history", table_name)
    assert f"discarded branch {branch} (by hand)" in text and "producer will resend" in text


def test_publish_is_refused_when_main_changed_the_table(lake: Lake, table_name: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    assert lake.service.ingest(lake.put(f"{table_name}/later.parquet", parquet_bytes(2))).status.value == "published"
    code, _, err = wap(capsys, "publish", branch, "--no-reaudit", "--reason", "looks fine")
    assert code == 1 and "discard the branch and ingest the file again" in err
    assert branch in lake.wap_branches() and lake.count(f"wap.{table_name}") == 7


def test_non_wap_branches_are_not_touched(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = wap(capsys, "discard", "main", "--reason", "oops")
    assert code == 1 and "is not a WAP branch" in err
    assert lake.main_hash()


def test_the_alert_commands_work_when_pasted(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    lake.service.ingest(lake.put(f"{table_name}/base.parquet", parquet_bytes(5)))
    outcome = lake.service.ingest(lake.put(f"{table_name}/bad.parquet", parquet_bytes(9, nulls=1)))
    alert = alert_for_outcome(outcome)
    assert alert is not None
    commands = {label: plain_text(command) for label, command in alert.commands}  # as Slack shows them
    inspect = shlex.split(commands["Inspect"].split("#")[0])
    assert inspect[0] == "wap"
    code, out, _ = wap(capsys, *inspect[1:])
    assert code == 0 and "my_col_1=1" in out
    reaudit = shlex.split(commands["Re-audit and publish (after fixing the audit suite)"]
                          .replace("<what was fixed>", "nothing yet"))
    code, _, err = wap(capsys, *reaudit[1:])
    assert code == 1 and "still fails the audit" in err  # the suite was not fixed: refused, as it should be
    publish = shlex.split(commands["Publish after review"].replace("<why it is fine>", "reviewed"))
    code, _, err = wap(capsys, *publish[1:])
    assert code == 0, err
    assert lake.count(f"wap.{table_name}") == 14


def test_history_lists_publications_and_reviewed_decisions(lake: Lake, table_name: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    wap(capsys, "publish", branch, "--no-reaudit", "--reason", "accepted by data owner")
    code, out, _ = wap(capsys, "history", table_name, "--json")
    entries = valid("history", out)["entries"]
    assert code == 0 and len(entries) == 2
    newest, oldest = entries
    assert newest["properties"]["wap.decision.reason"] == "accepted by data owner"
    assert oldest["properties"]["wap.source.key"] == f"{table_name}/base.parquet"
    assert oldest["properties"]["wap.rows"] == "5"
    code, text, _ = wap(capsys, "history", table_name)
    assert "reviewed publish of branch" in text and "published 5 rows from s3://inbox/" in text
    assert "published without re-audit" in text


def test_branches_filter_by_table_and_age(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    branch = rejected_branch(lake, table_name)
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--json")
    [listed] = valid("branches", out)["branches"]
    assert code == 0 and listed["branch"] == branch and listed["table"] == f"wap.{table_name}"
    assert listed["head_commit_time"] and 0 <= listed["age_seconds"] < 600
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--older-than", "0m", "--json")
    assert [b["branch"] for b in json.loads(out)["branches"]] == [branch]
    code, out, _ = wap(capsys, "branches", "--table", table_name, "--older-than", "2w")
    assert code == 0 and out.strip() == f"No open WAP branches for wap.{table_name} older than 2w."
    code, out, _ = wap(capsys, "branches", "--older-than", "0m")
    assert branch in out and f"wap.{table_name}" in out and " old" in out
    code, _, err = wap(capsys, "branches", "--older-than", "7 days")
    assert code == 2 and "is not a duration. Fix:" in err


class Recorder:
    def __init__(self) -> None:
        self.alerts: list[Alert] = []

    def notify(self, alert: Alert) -> bool:
        self.alerts.append(alert)
        return True


def test_prune_discards_old_branches_with_one_alert(lake: Lake, table_name: str, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = Recorder()
    monkeypatch.setattr(ops_cli, "operator_commands",
                        lambda: OperatorCommands(Service(Settings.from_env()).replaced(notifier=recorder)))
    branch = rejected_branch(lake, table_name)
    main_before = lake.main_hash()
    code, out, _ = wap(capsys, "prune", "--older-than", "2w", "--table", table_name)
    assert code == 0 and "No open WAP branches older than 2w." in out and branch in lake.wap_branches()
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name, "--dry-run")
    assert code == 0 and f"would discard  {branch}" in out and branch in lake.wap_branches()
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name, "--dry-run", "--json")
    dry = valid("prune", out)
    assert dry["dry_run"] is True and [b["branch"] for b in dry["would_discard"]] == [branch] and dry["discarded"] == []
    assert recorder.alerts == [] and branch in lake.wap_branches()
    code, out, _ = wap(capsys, "history", table_name, "--json")
    assert [e["action"] for e in valid("history", out)["entries"]] == ["published"]  # a dry run records nothing
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name, "--json")
    pruned = valid("prune", out)
    assert code == 0 and [b["branch"] for b in pruned["discarded"]] == [branch] and pruned["unrecorded"] == []
    assert pruned["reason"] == "pruned: older than 0m"
    assert branch not in lake.wap_branches() and lake.main_hash() == main_before
    [alert] = recorder.alerts
    assert ("Reason", "pruned: older than 0m") in alert.fields and f"{branch} (wap.{table_name})" in alert.details
    code, out, _ = wap(capsys, "prune", "--older-than", "0m", "--table", table_name)
    assert code == 0 and "No open WAP branches" in out and len(recorder.alerts) == 1  # nothing pruned: no alert
    code, out, _ = wap(capsys, "history", table_name, "--json")
    newest = valid("history", out)["entries"][0]
    assert newest["action"] == "discarded" and newest["how"] == "pruned" and newest["branch"] == branch
    assert newest["reason"] == "pruned: older than 0m"
