"""Nessie client authentication: its settings, the Spark conf, the secret's sources and the adapters' wiring."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import requests
from botocore.exceptions import ClientError

from tests.paths import DATA
from wap_ingest import bootstrap
from wap_ingest.adapters.aws.secrets import secret_from_parameter
from wap_ingest.adapters.catalog import credentials as nessie_credentials
from wap_ingest.adapters.catalog.nessie import NessieBranches
from wap_ingest.adapters.catalog.oauth2 import BearerAuth, ClientCredentials
from wap_ingest.adapters.engine.session import spark_conf_for
from wap_ingest.bootstrap.config import Settings
from wap_ingest.bootstrap.variables import KNOWN_VARIABLES
from wap_ingest.core.errors import CatalogError, CatalogUnavailableError, ConfigError
from wap_ingest.core.models import Branch, TableRef

AUDITS = str(DATA / "audits.yml")
BASE = {"LAKE_BUCKET": "lake", "NESSIE_ENDPOINT": "https://nessie.example.com", "WAP_AUDITS_FILE": AUDITS}
SECRET = "client-secret-value-42"
AUTH = {
    "WAP_NESSIE_TOKEN_ENDPOINT": "https://wap-nessie-1.auth.us-east-1.amazoncognito.com/oauth2/token",
    "WAP_NESSIE_CLIENT_ID": "abc123",
    "WAP_NESSIE_CLIENT_SECRET_PARAMETER": "/wap/nessie-client-secret",
    "WAP_NESSIE_SCOPE": " nessie/catalog   other/scope ",
}
CAT = "spark.sql.catalog.nessie"


# --- settings ------------------------------------------------------------------------------------------

def test_every_new_variable_is_known() -> None:
    for name in (*AUTH, "WAP_NESSIE_CLIENT_SECRET"):
        assert KNOWN_VARIABLES.get(name), name


def test_no_auth_variable_means_no_authentication() -> None:
    assert Settings.from_env(BASE).nessie_auth is None


def test_the_auth_settings_are_read_and_the_scope_normalised() -> None:
    auth = Settings.from_env(BASE | AUTH).nessie_auth
    assert auth is not None
    assert (auth.token_endpoint, auth.client_id, auth.client_secret_parameter, auth.scope, auth.client_secret) == (
        AUTH["WAP_NESSIE_TOKEN_ENDPOINT"], "abc123", "/wap/nessie-client-secret", "nessie/catalog other/scope", None
    )


def test_a_direct_secret_is_accepted_and_never_in_the_repr() -> None:
    env = BASE | AUTH | {"WAP_NESSIE_CLIENT_SECRET_PARAMETER": "", "WAP_NESSIE_CLIENT_SECRET": SECRET}
    settings = Settings.from_env(env)
    assert settings.nessie_auth is not None and settings.nessie_auth.client_secret == SECRET
    assert SECRET not in repr(settings) and SECRET not in str(settings.nessie_auth)


@pytest.mark.parametrize(
    ("changes", "phrases"),
    [
        ({"WAP_NESSIE_CLIENT_ID": ""}, ["WAP_NESSIE_CLIENT_ID is not set", "WAP_NESSIE_TOKEN_ENDPOINT,"]),
        ({"WAP_NESSIE_TOKEN_ENDPOINT": ""}, ["WAP_NESSIE_TOKEN_ENDPOINT is not set", "Fix: set"]),
        ({"WAP_NESSIE_TOKEN_ENDPOINT": "", "WAP_NESSIE_CLIENT_ID": "", "WAP_NESSIE_SCOPE": ""},
         ["WAP_NESSIE_TOKEN_ENDPOINT is not set but Nessie client authentication is "
          "(WAP_NESSIE_CLIENT_SECRET_PARAMETER)"]),
        ({"WAP_NESSIE_CLIENT_SECRET_PARAMETER": ""}, ["WAP_NESSIE_CLIENT_SECRET_PARAMETER is not set", "abc"]),
        ({"WAP_NESSIE_CLIENT_SECRET": SECRET}, ["are both set"]),
        ({"WAP_NESSIE_TOKEN_ENDPOINT": "idp/oauth2/token"}, ["is not an http(s) URL"]),
        ({"WAP_NESSIE_TOKEN_ENDPOINT": "http://idp.example.com/token"}, ["plain http", "https"]),
    ],
)
def test_incomplete_or_unsafe_auth_settings_name_the_variable(changes: dict[str, str], phrases: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env(BASE | AUTH | changes)
    for phrase in phrases:
        assert phrase in str(info.value)
    assert SECRET not in str(info.value)


def test_a_secret_alone_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigError, match="WAP_NESSIE_TOKEN_ENDPOINT is not set") as info:
        Settings.from_env(BASE | {"WAP_NESSIE_CLIENT_SECRET": SECRET})
    assert SECRET not in str(info.value) and "WAP_NESSIE_CLIENT_SECRET" in str(info.value)


@pytest.mark.parametrize("host", ["127.0.0.1:8080", "localhost"])
def test_plain_http_is_accepted_on_loopback(host: str) -> None:
    auth = Settings.from_env(BASE | AUTH | {"WAP_NESSIE_TOKEN_ENDPOINT": f"http://{host}/token"}).nessie_auth
    assert auth is not None and auth.token_endpoint == f"http://{host}/token"


# --- Spark conf ----------------------------------------------------------------------------------------

@pytest.fixture
def jars(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "iceberg.jar").write_bytes(b"")
    return {"WAP_JARS_DIR": str(tmp_path)}


def test_spark_conf_without_auth_has_no_authentication_keys(jars: dict[str, str]) -> None:
    conf = spark_conf_for(bootstrap.spark_settings_for(Settings.from_env(BASE | jars)))
    assert not [k for k in conf if ".authentication." in k]


def test_spark_conf_with_auth_configures_the_nessie_oauth2_client(jars: dict[str, str]) -> None:
    settings = Settings.from_env(BASE | jars | AUTH)
    credentials = ClientCredentials(AUTH["WAP_NESSIE_TOKEN_ENDPOINT"], "abc123", SECRET, "nessie/catalog")
    conf = spark_conf_for(bootstrap.spark_settings_for(settings), credentials)
    assert {k: v for k, v in conf.items() if ".authentication." in k} == {
        f"{CAT}.authentication.type": "OAUTH2",
        f"{CAT}.authentication.oauth2.grant-type": "client_credentials",
        f"{CAT}.authentication.oauth2.token-endpoint": AUTH["WAP_NESSIE_TOKEN_ENDPOINT"],
        f"{CAT}.authentication.oauth2.client-id": "abc123",
        f"{CAT}.authentication.oauth2.client-secret": SECRET,
        f"{CAT}.authentication.oauth2.client-scopes": "nessie/catalog",
    }
    assert [k for k, v in conf.items() if SECRET in v] == [f"{CAT}.authentication.oauth2.client-secret"]


# (Spark's authentication failures, classified by their Java classes, are in
# tests/unit/adapters/engine/test_spark_errors.py.)


# --- the secret's sources ------------------------------------------------------------------------------

class FakeSsm:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get_parameter(self, Name: str, WithDecryption: bool) -> dict[str, Any]:  # noqa: N803 - boto3's names
        assert WithDecryption
        if Name not in self.values:
            raise ClientError({"Error": {"Code": "ParameterNotFound", "Message": "not found"}}, "GetParameter")
        return {"Parameter": {"Value": self.values[Name]}}


class FakeSecretsManager:
    def get_secret_value(self, SecretId: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return {"SecretString": f"{SECRET}\n"}


def test_secrets_come_from_ssm_or_secrets_manager() -> None:
    ssm = FakeSsm({"/wap/nessie-client-secret": SECRET})
    assert secret_from_parameter("/wap/nessie-client-secret", variable="V", what="w", ssm=ssm) == SECRET
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:nessie-AbCdEf"
    assert secret_from_parameter(arn, variable="V", what="w", secrets=FakeSecretsManager()) == SECRET


def test_a_missing_or_empty_secret_names_the_variable_and_parameter() -> None:
    with pytest.raises(ConfigError) as missing:
        secret_from_parameter("/wap/x", variable="WAP_NESSIE_CLIENT_SECRET_PARAMETER",
                              what="the Nessie OAuth2 client secret", ssm=FakeSsm({}))
    assert "WAP_NESSIE_CLIENT_SECRET_PARAMETER='/wap/x': cannot read the Nessie OAuth2 client secret" in str(
        missing.value)
    with pytest.raises(ConfigError, match="is empty"):
        secret_from_parameter("/wap/x", variable="V", what="w", ssm=FakeSsm({"/wap/x": "  "}))
    with pytest.raises(ConfigError, match="WAP_SLACK_TOKEN_PARAMETER='/wap/none': cannot read the Slack token"):
        secret_from_parameter("/wap/none", variable="WAP_SLACK_TOKEN_PARAMETER", what="the Slack token",
                              ssm=FakeSsm({}))


def test_botocore_does_not_log_the_response_while_a_secret_is_read(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    parsers = logging.getLogger("botocore.parsers")  # logs response bodies at DEBUG
    seen: list[bool] = []

    class Ssm(FakeSsm):
        def get_parameter(self, Name: str, WithDecryption: bool) -> dict[str, Any]:  # noqa: N803 - boto3's names
            seen.append(parsers.isEnabledFor(logging.DEBUG))
            return super().get_parameter(Name=Name, WithDecryption=WithDecryption)

    assert secret_from_parameter("/p", variable="V", what="w", ssm=Ssm({"/p": SECRET})) == SECRET
    assert seen == [False] and parsers.isEnabledFor(logging.DEBUG)


# --- wiring ---------------------------------------------------------------------------------------------

def test_bootstrap_reads_the_secret_once_and_shares_one_token_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[str] = []

    def fake_secret(name: str, **_: Any) -> str:
        reads.append(name)
        return SECRET

    monkeypatch.setattr(nessie_credentials, "secret_from_parameter", fake_secret)
    nessie_credentials.nessie_client.cache_clear()
    settings = Settings.from_env(BASE | AUTH | {"WAP_HTTP_TIMEOUT": "12"})
    credentials = bootstrap.nessie_credentials_for(settings)
    assert credentials == ClientCredentials(AUTH["WAP_NESSIE_TOKEN_ENDPOINT"], "abc123", SECRET,
                                            "nessie/catalog other/scope")
    catalog = bootstrap.catalog_for(settings)
    tokens = bootstrap.nessie_tokens_for(settings)
    assert isinstance(catalog._client._auth, BearerAuth) and catalog._http.auth is catalog._client._auth
    assert catalog._client._auth._tokens is tokens and bootstrap.reader_for(settings)._tokens is tokens
    assert reads == ["/wap/nessie-client-secret"]
    nessie_credentials.nessie_client.cache_clear()


def test_without_auth_the_clients_send_no_token() -> None:
    settings = Settings.from_env(BASE)
    assert bootstrap.nessie_credentials_for(settings) is None and bootstrap.nessie_tokens_for(settings) is None
    catalog = bootstrap.catalog_for(settings)
    assert catalog._client._auth is None and catalog._http.auth is None


class Refusing(requests.Session):
    def __init__(self, status: int) -> None:
        super().__init__()
        self.status = status

    def request(self, *_: Any, **__: Any) -> requests.Response:  # type: ignore[override]
        answer = requests.Response()
        answer.status_code = self.status
        answer._content = b'{"message": "Unauthorized"}'
        return answer


@pytest.mark.parametrize(
    ("status", "kind", "phrase"),
    [(401, ConfigError, "authentication failed (HTTP 401), and no OAuth2 client is configured"),
     (403, CatalogError, "denied the request (HTTP 403) for anonymous requests")],
)
def test_rest_v2_refusals_say_what_to_fix(status: int, kind: type[Exception], phrase: str) -> None:
    catalog = NessieBranches("http://nessie:19120", session=Refusing(status))
    for call in (lambda: catalog.merge(Branch("b", "1" * 16), "main", "0" * 16, "m", {}),
                 lambda: catalog.publications(TableRef("wap", "t"))):
        with pytest.raises(kind) as info:
            call()
        assert phrase in str(info.value) and not isinstance(info.value, CatalogUnavailableError)
