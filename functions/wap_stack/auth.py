"""`wap stack up --auth`: the local stack's Nessie with authentication and the catalog's authorization rules
(wap_ingest.adapters.catalog.authz), its tokens signed by a local OIDC issuer (wap_stack.oidc) run as a process.

At start-up each role gets its own OAuth2 client (`wap-service`, `wap-operator`, `wap-reader`, scope
`nessie/<role>`) with a fresh random secret. The secrets are stored in moto's SSM as SecureStrings
(`/wap/stack/nessie-<role>-client-secret`), as in AWS, and, with the issuer's URL and pid, in
<state_dir>/auth.json (mode 0600). `role_environment` gives the WAP_NESSIE_* settings of one role (the stack's
own function and jobs use `service`); `wap stack env --role operator` prints them for a shell.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from wap_ingest.adapters.catalog import ROLES, SERVICE, nessie_properties, scope_for
from wap_ingest.core.errors import ConfigError
from wap_stack.components import ACCESS_KEY, HOST, OIDC, SECRET_KEY
from wap_stack.config import StackConfig
from wap_stack.environment import system_environment
from wap_stack.oidc import AUDIENCE
from wap_stack.processes import free_port, spawn, stop_processes, wait_ready

PARAMETER_PREFIX = "/wap/stack"


def auth_file(state_dir: Path) -> Path:
    return state_dir / "auth.json"


def client_id_for(role: str) -> str:
    return f"wap-{role}"


def secret_parameter_for(role: str) -> str:
    return f"{PARAMETER_PREFIX}/nessie-{role}-client-secret"


def nessie_auth_properties(issuer_url: str) -> dict[str, str]:
    """Authentication against the issuer (Quarkus OIDC, Nessie 0.99's `nessie.server.authentication.enabled`)
    plus the authorization rules."""
    return {
        "nessie.server.authentication.enabled": "true",
        "quarkus.oidc.auth-server-url": issuer_url,
        "quarkus.oidc.client-id": AUDIENCE,
    } | nessie_properties()


def with_auth(command: list[str], issuer_url: str) -> list[str]:
    """The Nessie command with the auth properties before its `-jar`."""
    at = command.index("-jar")
    return command[:at] + [f"-D{k}={v}" for k, v in nessie_auth_properties(issuer_url).items()] + command[at:]


def issuer_health(url: str) -> tuple[bool, str]:
    import requests

    try:
        status = requests.get(f"{url}/.well-known/openid-configuration", timeout=2).status_code
    except requests.RequestException as exc:
        return False, f"unreachable ({type(exc).__name__})"
    return status == 200, f"answers (HTTP {status})"


def _write(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(document, out)


def start_issuer(config: StackConfig) -> str:
    """Make the roles' clients, start the issuer and store the secrets in moto's SSM; return the issuer URL.
    The issuer's pid is in auth.json at once, so `stop_issuer` stops it whatever happens next."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    clients = {client_id_for(role): {"role": role, "secret": secrets.token_urlsafe(32), "scopes": [scope_for(role)]}
               for role in ROLES}
    path = auth_file(config.state_dir)
    document: dict[str, Any] = {"issuer_url": url, "clients": clients, "oidc_pid": None}
    _write(path, document)
    log = config.log_for(OIDC)
    command = [sys.executable, "-m", "wap_stack.oidc", "--port", str(port), "--clients", str(path)]
    document["oidc_pid"] = spawn(OIDC, command, log, system_environment())
    _write(path, document)
    wait_ready(OIDC, document["oidc_pid"], log, lambda: issuer_health(url), config.startup_timeout)
    _store_secrets(config, clients)
    return url


def _store_secrets(config: StackConfig, clients: dict[str, dict[str, Any]]) -> None:
    import boto3

    ssm = boto3.client("ssm", endpoint_url=f"http://{HOST}:{config.moto_port}", aws_access_key_id=ACCESS_KEY,
                       aws_secret_access_key=SECRET_KEY, region_name=config.region)
    for spec in clients.values():
        ssm.put_parameter(Name=secret_parameter_for(spec["role"]), Value=spec["secret"], Type="SecureString",
                          Overwrite=True)


def _read(state_dir: Path) -> dict[str, Any] | None:
    try:
        document: dict[str, Any] = json.loads(auth_file(state_dir).read_text())
    except FileNotFoundError:
        return None
    return document


def stop_issuer(config: StackConfig) -> None:
    """Stop the issuer (if one was started) and forget the clients."""
    document = _read(config.state_dir)
    if document is not None and isinstance(document.get("oidc_pid"), int):
        stop_processes({OIDC: document["oidc_pid"]})
    auth_file(config.state_dir).unlink(missing_ok=True)


def auth_enabled(state_dir: Path) -> bool:
    return auth_file(state_dir).is_file()


def role_environment(state_dir: Path, role: str = SERVICE) -> dict[str, str]:
    """The WAP_NESSIE_* settings of `role`'s client ({} for a stack without --auth). The secret is named by its
    SSM parameter (on the stack's moto), never given directly."""
    document = _read(state_dir)
    if document is None:
        return {}
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r} for the stack's catalog. Fix: use one of {', '.join(ROLES)}.")
    return {
        "WAP_NESSIE_TOKEN_ENDPOINT": f"{document['issuer_url']}/token",
        "WAP_NESSIE_CLIENT_ID": client_id_for(role),
        "WAP_NESSIE_CLIENT_SECRET_PARAMETER": secret_parameter_for(role),
        "WAP_NESSIE_SCOPE": scope_for(role),
    }
