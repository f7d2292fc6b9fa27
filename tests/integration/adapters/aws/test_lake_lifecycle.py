"""The lake bucket's lifecycle rules (wap_ingest.adapters.aws.lake_lifecycle: staging copies, request answers, reports
expire; the warehouse, EMR records and decisions never): created by setup_aws.py on moto over HTTP (a second run changes
nothing, a changed rule is put back) and present on the local stack's lake bucket."""

from __future__ import annotations

import boto3
import pytest

from tests.integration.setup_aws_harness import client, names_for, run
from wap_ingest.adapters.aws.lake_lifecycle import EXPIRY_DAYS, lake_lifecycle_rules

pytestmark = pytest.mark.stack


def _by_prefix(rules: list[dict[str, object]]) -> dict[str, object]:
    return {rule["Filter"]["Prefix"]: rule["Expiration"]["Days"] for rule in rules}  # type: ignore[index]


def test_setup_aws_puts_the_rules_on_the_lake_bucket_and_keeps_them(moto_url: str) -> None:
    names = names_for("cycle")
    assert run(moto_url, names, "-v", "create", "--skip", "nessie").code == 0
    s3 = client(moto_url, "s3")
    rules = s3.get_bucket_lifecycle_configuration(Bucket=names.lake_bucket)["Rules"]
    assert _by_prefix(rules) == EXPIRY_DAYS and "warehouse/" not in _by_prefix(rules)
    again = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"unchanged     s3 lifecycle {names.lake_bucket}" in again.out, again.out
    changed = [r | {"Expiration": {"Days": 3650}} for r in lake_lifecycle_rules()]
    s3.put_bucket_lifecycle_configuration(Bucket=names.lake_bucket, LifecycleConfiguration={"Rules": changed})
    fixed = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"s3 lifecycle {names.lake_bucket}" in fixed.out and "unchanged     s3 lifecycle" not in fixed.out
    assert _by_prefix(s3.get_bucket_lifecycle_configuration(Bucket=names.lake_bucket)["Rules"]) == EXPIRY_DAYS
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie", "--force").code == 0


def test_the_local_stacks_lake_bucket_has_the_same_rules(stack_env: dict[str, str]) -> None:
    s3 = boto3.client("s3", endpoint_url=stack_env["AWS_ENDPOINT_URL"], region_name=stack_env["AWS_REGION"])
    rules = s3.get_bucket_lifecycle_configuration(Bucket=stack_env["LAKE_BUCKET"])["Rules"]
    assert _by_prefix(rules) == EXPIRY_DAYS
