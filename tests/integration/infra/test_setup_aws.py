"""setup_aws.py against a real moto server (HTTP, own port): create, create again (nothing changes), delete; the
refusal to delete data without --force; --dry-run; the Nessie container's access key reused. Lightsail goes through
botocore's Stubber (tests/integration/setup_aws_harness.py), and no request sent to it may hold the database
password."""

from __future__ import annotations

from typing import Any

import pytest
import setup_aws
from botocore.stub import Stubber

from tests.integration.setup_aws_harness import (
    DB_PASSWORD,
    NESSIE_URL,
    SLACK_TOKEN,
    Capture,
    _not_found,
    _parameter,
    assert_created,
    assert_deployment,
    assert_password_never_sent,
    client,
    names_for,
    run,
    snapshot,
    stub_delete,
    stub_first_create,
    stub_second_create,
)

pytestmark = pytest.mark.stack

def test_create_again_then_delete(moto_url: str, lightsail: tuple[Any, Stubber]) -> None:
    ls, stub = lightsail
    names = names_for("itest")
    captured = Capture()
    stub_first_create(stub, names, captured)

    first = run(moto_url, names, "-v", "create", lightsail=ls, slack=SLACK_TOKEN)

    assert first.code == 0, first.out
    stub.assert_no_pending_responses()
    state = snapshot(moto_url, names)
    assert_created(moto_url, names, state)
    ssm = client(moto_url, "ssm")
    assert ssm.get_parameter(Name=names.slack_token_parameter, WithDecryption=True)["Parameter"]["Value"] == SLACK_TOKEN
    env = captured.value["containers"]["nessie"]["environment"]
    assert env["NESSIE_VERSION_STORE_TYPE"] == "JDBC2"
    assert env["NESSIE_SERVER_AUTHENTICATION_ENABLED"] == "true"
    assert env["QUARKUS_OIDC_AUTH_SERVER_URL"].endswith(f"/{state['user_pool']}")
    [key_id] = state["secrets_user"]["keys"]
    assert_deployment(names, captured.value, key_id)
    assert_password_never_sent(ls)
    password = ssm.get_parameter(Name=names.nessie_db_password_parameter, WithDecryption=True)["Parameter"]
    assert (password["Value"], password["Type"]) == (DB_PASSWORD, "SecureString")
    assert captured.value["publicEndpoint"]["healthCheck"]["path"] == "/q/health/ready"
    assert f"export NESSIE_ENDPOINT={NESSIE_URL.rstrip('/')}" in first.out
    client_secret = ssm.get_parameter(Name=names.nessie_client_secret_parameter, WithDecryption=True)
    for secret in (SLACK_TOKEN, DB_PASSWORD, client_secret["Parameter"]["Value"], env["WAP_SECRETS_SECRET_ACCESS_KEY"]):
        assert secret not in first.out

    stub_second_create(stub, names, captured.value)
    second = run(moto_url, names, "-v", "create", lightsail=ls, slack=SLACK_TOKEN)

    assert second.code == 0, second.out
    stub.assert_no_pending_responses()
    assert snapshot(moto_url, names) == state  # the same access key, still deployed
    assert_password_never_sent(ls)
    resource_lines = [line for line in second.out.splitlines() if line.startswith(("unchanged", "created", "updated"))]
    assert len(resource_lines) >= 18
    assert f"unchanged     iam access key {key_id}" in second.out
    assert all(line.startswith("unchanged") for line in resource_lines), second.out
    assert "nothing changed" in second.out

    stub_delete(stub, names, captured.value)
    deleted = run(moto_url, names, "-v", "delete", lightsail=ls)

    assert deleted.code == 0, deleted.out
    stub.assert_no_pending_responses()
    gone = snapshot(moto_url, names)
    assert gone["buckets"] == dict.fromkeys(state["buckets"])
    assert gone["queues"] == dict.fromkeys(state["queues"])
    assert gone["roles"] == dict.fromkeys(state["roles"])
    assert gone["parameters"] == dict.fromkeys(state["parameters"])
    assert (gone["ecr"], gone["emr"], gone["user_pool"], gone["notification"]) == (None, None, None, None)
    assert gone["secrets_user"] is None


def test_delete_refuses_a_non_empty_lake_bucket_without_force(moto_url: str) -> None:
    names = names_for("refuse")
    assert run(moto_url, names, "-v", "create", "--skip", "nessie").code == 0
    # moto enforces the TLS-only bucket policy on plain-HTTP object writes: lift it for this one write,
    # then let `create` repair the drift.
    s3 = client(moto_url, "s3")
    s3.delete_bucket_policy(Bucket=names.lake_bucket)
    s3.put_object(Bucket=names.lake_bucket, Key="warehouse/t/data.parquet", Body=b"rows")
    repaired = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"updated       s3 bucket {names.lake_bucket} (TLS-only policy)" in repaired.out
    before = snapshot(moto_url, names)

    refused = run(moto_url, names, "-v", "delete", "--skip", "nessie")

    assert refused.code == 1
    assert f"s3://{names.lake_bucket} is not empty" in refused.out
    assert "--force" in refused.out
    assert snapshot(moto_url, names) == before

    forced = run(moto_url, names, "-v", "delete", "--skip", "nessie", "--force")

    assert forced.code == 0, forced.out
    after = snapshot(moto_url, names)
    assert after["buckets"] == dict.fromkeys(before["buckets"])
    assert after["roles"] == dict.fromkeys(before["roles"])


def test_dry_run_changes_nothing(moto_url: str, lightsail: tuple[Any, Stubber]) -> None:
    ls, stub = lightsail
    names = names_for("dry")
    _not_found(stub, "get_relational_database", {"relationalDatabaseName": names.nessie_database})
    before = snapshot(moto_url, names)

    result = run(moto_url, names, "-v", "create", "--dry-run", lightsail=ls, slack=SLACK_TOKEN)

    assert result.code == 0, result.out
    stub.assert_no_pending_responses()
    assert snapshot(moto_url, names) == before
    assert all(v is None for v in before["buckets"].values())
    assert "would create  s3 bucket" in result.out
    assert "nothing was changed" in result.out
    assert SLACK_TOKEN not in result.out


def test_dry_run_delete_changes_nothing(moto_url: str) -> None:
    names = names_for("drydel")
    assert run(moto_url, names, "-v", "create", "--skip", "nessie").code == 0
    before = snapshot(moto_url, names)

    result = run(moto_url, names, "-v", "delete", "--dry-run", "--skip", "nessie")

    assert result.code == 0
    assert "would delete  s3 bucket" in result.out
    assert snapshot(moto_url, names) == before
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie").code == 0


def test_without_slack_token_the_parameter_is_skipped(moto_url: str) -> None:
    names = names_for("noslack")

    result = run(moto_url, names, "-v", "create", "--skip", "nessie")

    assert result.code == 0
    assert f"skipped       ssm parameter {names.slack_token_parameter} (SLACK_TOKEN is not set" in result.out
    assert _parameter(moto_url, names.slack_token_parameter) is None
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie").code == 0


def test_the_slack_signing_secret_is_stored_as_a_secure_string_and_never_printed(moto_url: str) -> None:
    names = names_for("signing")
    secret = "0123456789abcdef0123456789abcdef"

    skipped = run(moto_url, names, "-v", "create", "--skip", "nessie")
    assert f"skipped       ssm parameter {names.slack_signing_secret_parameter} (SLACK_SIGNING_SECRET is not set" \
        in skipped.out
    result = run(moto_url, names, "-v", "create", "--skip", "nessie", environ={"SLACK_SIGNING_SECRET": secret})

    assert result.code == 0 and secret not in result.out
    stored = client(moto_url, "ssm").get_parameter(Name=names.slack_signing_secret_parameter, WithDecryption=True)
    assert (stored["Parameter"]["Type"], stored["Parameter"]["Value"]) == ("SecureString", secret)
    assert run(moto_url, names, "-v", "delete", "--skip", "nessie").code == 0
    assert _parameter(moto_url, names.slack_signing_secret_parameter) is None


def test_names_with_underscores_are_refused(moto_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["-v=create", "-n=nessie_wap", "--source-bucket", "a-src", "--lake-bucket", "a-lake",
            "--endpoint-url", moto_url]

    assert setup_aws.main(argv, environ={}) == 2
    assert "hyphens, not underscores" in capsys.readouterr().err


def test_buckets_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        setup_aws.main(["-v", "create", "-n", "nessie-wap"], environ={})

    assert exit_.value.code == 2
    assert "export SOURCE_BUCKET" in capsys.readouterr().err
