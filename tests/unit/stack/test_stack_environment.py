"""What the stack's processes take from the caller's shell (wap_stack/environment.py): the system's basics and the
function's tuning settings, never the caller's endpoints, buckets, credentials or catalog client."""

from __future__ import annotations

from pathlib import Path

from wap_stack.config import StackConfig
from wap_stack.environment import service_environment, system_environment
from wap_stack.trigger import function_environment

OPERATOR_SHELL = {  # `eval "$(wap stack env --role operator)"` on an --auth stack, over a developer's shell
    "PATH": "/usr/bin", "HOME": "/home/op", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "JAVA_HOME": "/opt/java",
    "TMPDIR": "/tmp/op", "PYTHONPATH": "/src", "WAP_TEST_SESSION": "s-1",
    "WAP_NESSIE_TOKEN_ENDPOINT": "http://127.0.0.1:1/token", "WAP_NESSIE_CLIENT_ID": "wap-operator",
    "WAP_NESSIE_CLIENT_SECRET_PARAMETER": "/wap/local/nessie/operator", "WAP_NESSIE_SCOPE": "nessie/operator",
    "WAP_PUBLISH_QUEUE_URL": "http://127.0.0.1:2/q", "AWS_ACCESS_KEY_ID": "ASIAOPERATOR",
    "AWS_SECRET_ACCESS_KEY": "op-secret", "AWS_SESSION_TOKEN": "op-token", "AWS_PROFILE": "prod",
    "AWS_ENDPOINT_URL_S3": "https://s3.example", "NESSIE_ENDPOINT": "http://old:1", "LAKE_BUCKET": "old-lake",
    "WAP_WAREHOUSE": "s3://prod/warehouse", "WAP_SLACK_TOKEN_PARAMETER": "/prod/slack", "SLACK_CHANNEL": "#prod",
    "WAP_EMR_ARTIFACTS": "s3://prod/emr", "WAP_STACK_QUEUE_URL": "http://old/q", "QUARKUS_HTTP_PORT": "1",
    "WAP_AUDITS_FILE": "/src/audits.yml", "WAP_RETRY_BASE_SECONDS": "1", "WAP_ABANDONED_BRANCH_SECONDS": "20",
}
STACK = {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "x",
         "NESSIE_ENDPOINT": "http://127.0.0.1:19120", "LAKE_BUCKET": "lake", "SOURCE_BUCKET": "source"}
BASICS = {"PATH", "HOME", "LANG", "LC_ALL", "JAVA_HOME", "TMPDIR", "PYTHONPATH", "WAP_TEST_SESSION"}
TUNED = {"WAP_AUDITS_FILE", "WAP_RETRY_BASE_SECONDS", "WAP_ABANDONED_BRANCH_SECONDS"}


def test_every_process_gets_the_systems_basics_and_nothing_else_of_the_caller() -> None:
    assert set(system_environment(OPERATOR_SHELL)) == BASICS


def test_the_service_gets_the_tuning_settings_and_the_stacks_own_settings_over_them() -> None:
    env = service_environment(STACK, OPERATOR_SHELL)
    assert set(env) == BASICS | TUNED | set(STACK)
    assert env["AWS_ACCESS_KEY_ID"] == "testing" and env["LAKE_BUCKET"] == "lake"


def test_the_function_of_a_stack_without_auth_gets_no_catalog_client_or_role_of_the_caller(tmp_path: Path) -> None:
    env = function_environment(StackConfig(state_dir=tmp_path), STACK, "lambda", OPERATOR_SHELL)
    assert not {n for n in env if n.startswith("WAP_NESSIE_")}
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "WAP_PUBLISH_QUEUE_URL", "WAP_WAREHOUSE",
                 "WAP_SLACK_TOKEN_PARAMETER", "SLACK_CHANNEL", "WAP_EMR_ARTIFACTS", "WAP_STACK_QUEUE_URL"):
        assert name not in env, name
    assert env["NESSIE_ENDPOINT"] == STACK["NESSIE_ENDPOINT"] and env["WAP_AUDITS_FILE"] == "/src/audits.yml"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] and env["WAP_WORK_DIR"] == str(tmp_path / "lambda-tmp")
