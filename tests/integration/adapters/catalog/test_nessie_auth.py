"""Nessie client authentication against a real Nessie server with authentication on.

A local OIDC issuer (tests/oidc_issuer.py) signs the tokens; a Nessie server of this module alone trusts it
(tests/integration/auth_stack.py). Without a token the adapters say that authentication failed; with the
OAuth2 client configured, pynessie, the REST v2 calls, PyIceberg and Spark (a `wap ingest` process, its
secret read from SSM at start-up) all work, and the client secret appears in no log, error or output.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.conftest import AUDITS, parquet_bytes
from tests.integration.auth_stack import SECRET_PARAMETER, AuthLake, running_auth_lake
from tests.oidc_issuer import Issuer, running_issuer
from wap_ingest.adapters.catalog.credentials import nessie_client
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.adapters.catalog.oauth2 import BearerAuth, ClientCredentials, TokenProvider
from wap_ingest.adapters.catalog.reader import IcebergRestReader
from wap_ingest.bootstrap import catalog_for, nessie_tokens_for, reader_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.models import Branch, TableRef

pytestmark = [pytest.mark.stack]

CLIENT_ID = "wap-ingest-test"
SECRET = f"s3cr3t-{secrets.token_urlsafe(24)}"  # distinctive, so a leak anywhere is found by a substring search


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    with running_issuer(CLIENT_ID, SECRET) as running:
        yield running


@pytest.fixture(scope="module")
def auth_lake(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthLake]:
    with running_auth_lake(tmp_path_factory.mktemp("auth-stack"), issuer) as lake:
        lake.client("ssm").put_parameter(  # type: ignore[attr-defined]
            Name=SECRET_PARAMETER, Value=SECRET, Type="SecureString", Overwrite=True
        )
        yield lake


@pytest.fixture(scope="module")
def service_env(auth_lake: AuthLake, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The service's variables, exported for this process (boto3 reads the SSM parameter through them)."""
    env = auth_lake.service_env(tmp_path_factory.mktemp("auth-work"), AUDITS)
    patch = pytest.MonkeyPatch()
    for name, value in env.items():
        patch.setenv(name, value)
    try:
        yield env
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def settings(service_env: dict[str, str]) -> Settings:
    return Settings.from_env(service_env)


def tokens(issuer: Issuer, secret: str = SECRET) -> TokenProvider:
    return TokenProvider(ClientCredentials(issuer.token_endpoint, CLIENT_ID, secret, "nessie/catalog"), timeout=10)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def put_table(catalog: NessieBranches, branch: str, namespace: str, table: str) -> str:
    """Commit a table entry on `branch` through the authenticated pynessie client; returns the new head."""
    from pynessie.model import ContentKey, IcebergTable, Put

    head = catalog.reference_hash(branch)
    location = f"s3://lake/warehouse/{namespace}/{table}/metadata/{uuid.uuid4().hex}.metadata.json"
    content = IcebergTable(id=None, metadata_location=location, snapshot_id=1, schema_id=0, spec_id=0,
                           sort_order_id=0)
    put = Put(ContentKey([namespace, table]), content)
    return str(catalog._client.commit(branch, head, "put table", None, put).hash_)


# --- the server --------------------------------------------------------------------------------------

def test_health_stays_anonymous_and_the_api_needs_a_token(auth_lake: AuthLake, issuer: Issuer) -> None:
    assert requests.get(auth_lake.health_url, timeout=10).json()["status"] == "UP"
    assert requests.get(f"{auth_lake.nessie_url}/api/v2/config", timeout=10).status_code == 401
    token = tokens(issuer).token()
    answer = requests.get(f"{auth_lake.nessie_url}/api/v2/config", timeout=10,
                          headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200 and answer.json()["defaultBranch"] == "main"


# --- without a token, or with a wrong secret: clear errors -------------------------------------------

def test_without_a_token_the_adapters_say_authentication_failed(auth_lake: AuthLake) -> None:
    catalog = NessieBranches(auth_lake.nessie_url, timeout=10)
    with pytest.raises(ConfigError) as listing:
        catalog.list_branches()
    with pytest.raises(ConfigError) as merging:  # the REST v2 call
        catalog.merge(Branch("b", "0" * 16), "main", "0" * 16, "m", {})
    with pytest.raises(ConfigError) as reading:  # PyIceberg through the Iceberg REST endpoint
        IcebergRestReader(auth_lake.nessie_url).row_count(TableRef("wap", "t"), "main")
    for error in (listing, merging, reading):
        assert "authentication failed (HTTP 401)" in str(error.value)
        assert "WAP_NESSIE_CLIENT_ID" in str(error.value)


def test_a_wrong_secret_is_refused_naming_the_client_never_the_secret(auth_lake: AuthLake, issuer: Issuer) -> None:
    wrong = f"wrong-{SECRET}"
    catalog = NessieBranches(auth_lake.nessie_url, timeout=10, auth=BearerAuth(tokens(issuer, wrong)))
    with pytest.raises(ConfigError) as info:
        catalog.list_branches()
    message = str(info.value)
    assert f"refused client {CLIENT_ID!r}" in message and "invalid_client" in message
    assert "WAP_NESSIE_CLIENT_ID" in message
    assert wrong not in message and SECRET not in message


# --- with the provider: everything works --------------------------------------------------------------

def test_branches_and_the_rest_v2_merge_work_with_tokens(
    settings: Settings, issuer: Issuer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # botocore logs every response body at DEBUG: the secret must not be one
    nessie_client.cache_clear()
    catalog = catalog_for(settings)  # the client secret read from SSM by bootstrap
    assert "GetParameter" in caplog.text
    before = len(issuer.requests)
    namespace, table = unique("ns"), unique("t")
    head = catalog.ensure_namespace("main", namespace)
    branch = catalog.create_branch(unique("auth-b"), head)
    assert catalog.find_branch(branch.name) == branch
    assert branch.name in [b.name for b in catalog.list_branches("auth-b")]
    moved = Branch(branch.name, put_table(catalog, branch.name, namespace, table))
    merged = catalog.merge(moved, "main", head, "publish with a token", {"wap.table": f"{namespace}.{table}"})
    assert catalog.reference_hash("main") == merged
    [published] = catalog.publications(TableRef(namespace, table))  # REST v2 history with a CEL filter
    assert published.message == "publish with a token"
    catalog.delete_branch(moved)
    assert catalog.find_branch(branch.name) is None
    assert len(issuer.requests) - before <= 1  # one token, reused for every call (cached by the provider)
    assert all(r.client_id == CLIENT_ID and r.scope == "nessie/catalog" for r in issuer.requests[before:])
    assert SECRET not in caplog.text


def test_a_refused_token_is_forgotten_and_replaced(auth_lake: AuthLake, issuer: Issuer) -> None:
    provider = tokens(issuer)
    stale = provider.token()
    catalog = NessieBranches(auth_lake.nessie_url, timeout=10, auth=BearerAuth(provider))
    provider._cached.token = "not-a-jwt"  # type: ignore[union-attr]  # as if the issuer had revoked it
    with pytest.raises(ConfigError, match="authentication failed"):
        catalog.list_branches()
    assert [b.name for b in catalog.list_branches("main")] == ["main"]  # the next call fetched a new token
    assert provider.token() != stale


# --- Spark (a `wap ingest` process) and PyIceberg --------------------------------------------------------

def wap_ingest(env: dict[str, str], uri: str, seen: set[str] | None = None) -> subprocess.CompletedProcess[str]:
    """`wap -v ingest` as an operator runs it: a separate process (its own SparkSession), logging at INFO. `seen`
    collects, while it runs, the command lines of every process on the machine that carry the client secret."""
    ours = ("WAP_", "SLACK_", "AWS_", "NESSIE_", "SOURCE_BUCKET", "LAKE_BUCKET")  # e.g. the session stack's
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    with subprocess.Popen([sys.executable, "-m", "wap_ingest.entrypoints.cli", "-v", "ingest", uri, "--json"],
                          env=inherited | env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        watching = threading.Event()

        def watch() -> None:  # what `ps` would show anyone on the machine: the driver JVM's arguments among them
            while not watching.wait(0.1):
                for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                    with contextlib.suppress(OSError):
                        if SECRET.encode() in cmdline.read_bytes() and seen is not None:
                            seen.add(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200])

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            stdout, stderr = process.communicate(timeout=300)
        finally:
            watching.set()
            watcher.join()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.mark.spark
def test_spark_with_oauth2_publishes_and_pyiceberg_reads_it(
    auth_lake: AuthLake, service_env: dict[str, str], settings: Settings, issuer: Issuer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    table = unique("t")
    key = f"{table}/clean.parquet"
    auth_lake.client("s3").put_object(  # type: ignore[attr-defined]
        Bucket=auth_lake.config.source_bucket, Key=key, Body=parquet_bytes(12)
    )
    before = len(issuer.requests)

    on_command_lines: set[str] = set()
    result = wap_ingest(service_env, f"s3://{auth_lake.config.source_bucket}/{key}", on_command_lines)

    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert on_command_lines == set()  # pyspark passes a builder's settings to spark-submit as arguments
    [outcome] = json.loads(result.stdout)["outcomes"]
    assert (outcome["status"], outcome["rows"], outcome["table"]) == ("published", 12, f"wap.{table}")
    # the process got tokens for pynessie/REST v2 (Python) and for the Nessie client inside Iceberg (Java)
    agents = {r.user_agent.split("/")[0] for r in issuer.requests[before:]}
    assert agents == {"python-requests", "Java-http-client"}
    assert all(r.client_id == CLIENT_ID and r.scope == "nessie/catalog" for r in issuer.requests[before:])
    assert "Nessie client authentication: OAuth2 client wap-ingest-test" in result.stderr
    assert SECRET not in result.stdout + result.stderr

    reader = reader_for(settings)  # PyIceberg: REST catalog + S3 requests signed by Nessie, with tokens
    changes = reader.branch_changes(TableRef("wap", table), "main")
    assert (changes.rows_added, changes.null_counts["my_col_1"]) == (12, 0)
    assert reader.row_count(TableRef("wap", table), "main") == 12
    assert SECRET not in caplog.text
    logs = sorted(auth_lake.config.logs_dir.glob("*.log"))  # the Nessie and moto servers' own logs
    assert [log.name for log in logs] == ["moto.log", "nessie.log"]
    for log in logs:
        assert SECRET not in log.read_text(errors="replace"), log


def test_the_secret_is_in_no_repr(settings: Settings) -> None:
    provider = nessie_tokens_for(settings)
    assert provider is not None
    for shown in (repr(settings), repr(settings.nessie_auth), repr(provider), repr(BearerAuth(provider)),
                  repr(provider._credentials)):
        assert SECRET not in shown
    assert CLIENT_ID in repr(provider)
