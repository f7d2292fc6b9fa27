"""A lake whose Nessie server requires OIDC bearer tokens, for tests/integration/adapters/catalog/test_nessie_auth.py.

Separate from the session stack of tests/conftest.py (which runs Nessie without authentication): its own
moto server and Nessie server on free ports, built from the local stack's parts (used read-only), with
`nessie.server.authentication.enabled=true` and Quarkus OIDC pointed at tests/oidc_issuer.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from wap_ingest.adapters.catalog.authz import nessie_environment
from wap_stack.oidc import Issuer
from wap_stack.processes import spawn, stop_processes, wait_ready
from wap_stack.stack import (  # the stack's public API (its modules are being reorganised)
    ACCESS_KEY,
    HOST,
    MOTO,
    NESSIE,
    SECRET_KEY,
    StackConfig,
    default_nessie_jar,
    find_java,
    free_ports,
    moto_command,
    moto_health,
    nessie_command,
    nessie_health,
)

AUDIENCE = "nessie"  # Quarkus OIDC's client id; aud of the issued tokens
SECRET_PARAMETER = "/wap/nessie-client-secret"


@dataclass(frozen=True)
class AuthLake:
    config: StackConfig
    issuer: Issuer

    @property
    def moto_url(self) -> str:
        return f"http://{HOST}:{self.config.moto_port}"

    @property
    def nessie_url(self) -> str:
        return f"http://{HOST}:{self.config.nessie_port}"

    @property
    def health_url(self) -> str:
        return f"http://{HOST}:{self.config.nessie_management_port}/q/health/ready"

    def aws_env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.moto_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": self.config.region,
                "AWS_DEFAULT_REGION": self.config.region}

    def service_env(self, work_dir: Path, audits: Path) -> dict[str, str]:
        """The service's settings for this lake, the client secret read from (moto's) SSM."""
        return self.aws_env() | {
            "LAKE_BUCKET": self.config.lake_bucket, "SOURCE_BUCKET": self.config.source_bucket,
            "NESSIE_ENDPOINT": self.nessie_url, "WAP_WORK_DIR": str(work_dir), "WAP_AUDITS_FILE": str(audits),
            "WAP_NESSIE_TOKEN_ENDPOINT": self.issuer.token_endpoint,
            "WAP_NESSIE_CLIENT_ID": self.issuer.client_id,
            "WAP_NESSIE_CLIENT_SECRET_PARAMETER": SECRET_PARAMETER,
            "WAP_NESSIE_SCOPE": "nessie/catalog",
        }

    def client(self, service: str) -> object:
        import boto3

        return boto3.session.Session().client(
            service, endpoint_url=self.moto_url, aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
            region_name=self.config.region,
        )


def authorization_environment() -> dict[str, str]:
    """The catalog's authorization rules as the deployed container gets them: environment variables."""
    return nessie_environment()


def authenticated_nessie_command(config: StackConfig, java: Path, issuer: Issuer) -> list[str]:
    """The local stack's Nessie command with authentication on (properties of Nessie 0.99's
    application.properties: `quarkus.oidc.tenant-enabled=${nessie.server.authentication.enabled}`)."""
    command = nessie_command(config, java)
    jar_at = command.index("-jar")
    auth = [
        "-Dnessie.server.authentication.enabled=true",
        f"-Dquarkus.oidc.auth-server-url={issuer.url}",
        f"-Dquarkus.oidc.client-id={AUDIENCE}",
    ]
    return command[:jar_at] + auth + command[jar_at:]


@contextmanager
def running_auth_lake(state_dir: Path, issuer: Issuer, timeout: float = 90.0, *, authorization: bool = False
                      ) -> Iterator[AuthLake]:
    """With `authorization`, Nessie also applies the catalog's rules (wap_ingest.adapters.catalog.authz), given in
    environment variables as infra/nessie-service.yml gives them to the deployed container."""
    moto_port, nessie_port, management_port = free_ports(3)
    config = StackConfig(state_dir=state_dir, moto_port=moto_port, nessie_port=nessie_port,
                         nessie_management_port=management_port, startup_timeout=timeout)
    lake = AuthLake(config, issuer)
    pids: dict[str, int] = {}
    try:
        moto_log = config.log_for(MOTO)
        pids[MOTO] = spawn(MOTO, moto_command(config), moto_log, os.environ | {"MOTO_PORT": str(moto_port)})
        wait_ready(MOTO, pids[MOTO], moto_log, lambda: moto_health(moto_port), timeout)
        s3 = lake.client("s3")
        for bucket in (config.lake_bucket, config.source_bucket):
            s3.create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
        java = find_java(None, os.environ.get("JAVA_HOME"))
        jar = default_nessie_jar()
        if not jar.is_file():
            raise FileNotFoundError(f"{jar} is missing: run `make jars`")
        nessie_log = config.log_for(NESSIE)
        env = os.environ | (authorization_environment() if authorization else {})
        pids[NESSIE] = spawn(NESSIE, authenticated_nessie_command(config, java, issuer), nessie_log, env)
        wait_ready(NESSIE, pids[NESSIE], nessie_log, lambda: nessie_health(management_port), timeout)
        yield lake
    finally:
        stop_processes(pids)
