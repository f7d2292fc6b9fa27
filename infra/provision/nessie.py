"""The Nessie catalog server on Lightsail: a container service running our Nessie image (docker/nessie), with its
JDBC2 version store in a Lightsail managed PostgreSQL database.

The database password is never in the container's environment: it goes to an SSM SecureString, which the
image's entry point reads at start with a key that can read only that parameter (infra/provision/nessie_secrets.py).
The image is whatever WAP_NESSIE_IMAGE names (pushed with `aws lightsail push-container-image`, docs/deploy.md);
without it, a re-run keeps the image already deployed, and a first run creates the service without a deployment.

moto has no Lightsail, so every Lightsail call goes through `LightsailNessie` (tests drive it with
botocore's Stubber, which checks each request against the real Lightsail service model).
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from infra.provision import documents, nessie_secrets
from infra.provision.context import Client, Context, Outcome, ProvisionError

_DB = "lightsail database"
_SERVICE = "lightsail container service"
IMAGE_VARIABLE = "WAP_NESSIE_IMAGE"
PARAMETER_VARIABLE = "WAP_DB_PASSWORD_PARAMETER"  # in the environment of a deployment of our image only


def _is_not_found(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") in ("NotFoundException", "DoesNotExist")


def _matches(wanted: Any, current: Any) -> bool:
    """Every setting in `wanted` is in `current` with the same value (Lightsail adds defaults of its own)."""
    if isinstance(wanted, dict):
        return isinstance(current, dict) and all(_matches(v, current.get(k)) for k, v in wanted.items())
    return bool(wanted == current)


class LightsailNessie:
    """The Lightsail calls of the Nessie deployment, and nothing else."""

    def __init__(self, client: Client, service_name: str, database_name: str) -> None:
        self._ls = client
        self.service_name = service_name
        self.database_name = database_name

    def database(self) -> dict[str, Any] | None:
        try:
            response = self._ls.get_relational_database(relationalDatabaseName=self.database_name)
            return dict(response["relationalDatabase"])
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise

    def create_database(self, spec: dict[str, Any], tags: list[dict[str, str]]) -> None:
        self._ls.create_relational_database(relationalDatabaseName=self.database_name, tags=tags, **spec)

    def database_password(self) -> str:
        response = self._ls.get_relational_database_master_user_password(
            relationalDatabaseName=self.database_name, passwordVersion="CURRENT"
        )
        return str(response["masterUserPassword"])

    def delete_database(self, *, final_snapshot: str | None) -> None:
        if final_snapshot is None:
            self._ls.delete_relational_database(relationalDatabaseName=self.database_name, skipFinalSnapshot=True)
        else:
            self._ls.delete_relational_database(
                relationalDatabaseName=self.database_name,
                skipFinalSnapshot=False,
                finalRelationalDatabaseSnapshotName=final_snapshot,
            )

    def service(self) -> dict[str, Any] | None:
        try:
            services = self._ls.get_container_services(serviceName=self.service_name)["containerServices"]
        except ClientError as exc:
            if _is_not_found(exc):
                return None
            raise
        return dict(services[0]) if services else None

    def create_service(
        self, power: str, scale: int, deployment: dict[str, Any] | None, tags: list[dict[str, str]]
    ) -> None:
        extra = {} if deployment is None else {"deployment": deployment}
        self._ls.create_container_service(serviceName=self.service_name, power=power, scale=scale, tags=tags, **extra)

    def resize_service(self, power: str, scale: int) -> None:
        self._ls.update_container_service(serviceName=self.service_name, power=power, scale=scale)

    def deploy(self, deployment: dict[str, Any]) -> None:
        self._ls.create_container_service_deployment(serviceName=self.service_name, **deployment)

    def delete_service(self) -> None:
        self._ls.delete_container_service(serviceName=self.service_name)


def lightsail_nessie(ctx: Context) -> LightsailNessie:
    return LightsailNessie(ctx.clients("lightsail"), ctx.names.nessie_service, ctx.names.nessie_database)


def _tags(ctx: Context) -> list[dict[str, str]]:
    return [{"key": "wap:prefix", "value": ctx.names.prefix}]


def _ensure_database(ctx: Context, nessie: LightsailNessie) -> dict[str, Any] | None:
    """The database once available (None in a dry run where it does not exist yet)."""
    database = nessie.database()
    if database is None:
        spec = documents.load("nessie-database.yml")
        ctx.pending(lambda: nessie.create_database(spec, _tags(ctx)), _DB, nessie.database_name,
                    f"{spec['relationalDatabaseBlueprintId']}, JDBC2 version store")
        if ctx.dry_run:
            return None
    else:
        ctx.report(Outcome.UNCHANGED, _DB, nessie.database_name, f"state {database.get('state')}")
    latest = {"database": database}

    def available() -> bool:
        latest["database"] = nessie.database()
        return (latest["database"] or {}).get("state") == "available"

    if (database or {}).get("state") != "available":
        if ctx.dry_run:
            return None
        ctx.wait_until(available, f"{_DB} {nessie.database_name} to be available")
    return latest["database"]


def _deployments(service: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The deployment being rolled out first, then the active one."""
    service = service or {}
    return [d for d in (service.get("nextDeployment"), service.get("currentDeployment")) if d]


def _image(ctx: Context, service: dict[str, Any] | None) -> str | None:
    """WAP_NESSIE_IMAGE, else the image of a deployment of our image (one that reads the password parameter)."""
    wanted = ctx.environ.get(IMAGE_VARIABLE, "").strip()
    if wanted:
        return wanted
    for deployment in _deployments(service):
        container = (deployment.get("containers") or {}).get("nessie") or {}
        if PARAMETER_VARIABLE in (container.get("environment") or {}):
            return str(container["image"])
    return None


def _deployment(
    ctx: Context, database: dict[str, Any], image: str, key: nessie_secrets.AccessKey | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    endpoint = database.get("masterEndpoint") or {}
    if not endpoint.get("address"):
        raise ProvisionError(f"{_DB} {database.get('name')} has no endpoint yet; run create again in a few minutes.")
    values = ctx.template_values() | {
        "DbHost": str(endpoint["address"]),
        "DbPort": str(endpoint.get("port", 5432)),
        "DbName": str(database.get("masterDatabaseName", "nessie")),
        "DbUser": str(database.get("masterUsername", "nessie")),
        "DbPasswordParameter": ctx.names.nessie_db_password_parameter,
        "NessieImage": image,
        # a dry run that would make a new key shows the deployment as changing
        "SecretsKeyId": key.key_id if key else "<new access key>",
        "SecretsKeySecret": key.secret if key else "<new access key>",
    }
    spec: dict[str, Any] = documents.load_rendered("nessie-service.yml", values)
    return spec, {"containers": spec["containers"], "publicEndpoint": spec["publicEndpoint"]}


def _converge_service(
    ctx: Context, nessie: LightsailNessie, service: dict[str, Any], spec: dict[str, Any], deployment: dict[str, Any],
    *, restart: bool = False,
) -> Outcome:
    """`restart`: deploy even an unchanged deployment (Nessie reads the password only when it starts)."""
    deployed = service.get("nextDeployment") or service.get("currentDeployment") or {}
    resize = service.get("power") != spec["power"] or service.get("scale") != spec["scale"]
    changed = not _matches(deployment, {key: deployed.get(key) for key in deployment})
    redeploy = changed or restart
    changes = ["power/scale"] * resize + ["deployment (image, environment, ports or health check)"] * changed
    changes += ["restart (the database password changed)"] * (restart and not changed)

    def apply() -> None:
        if resize:
            nessie.resize_service(spec["power"], int(spec["scale"]))
        if redeploy:
            nessie.deploy(deployment)

    return ctx.converge(changes, apply, _SERVICE, nessie.service_name)


def ensure_nessie(ctx: Context) -> Outcome:
    nessie = lightsail_nessie(ctx)
    database = _ensure_database(ctx, nessie)
    if database is None:  # dry run: nothing to compare against yet
        ctx.report(Outcome.WOULD_CREATE, "ssm parameter", ctx.names.nessie_db_password_parameter, "SecureString")
        nessie_secrets.ensure_user(ctx)
        return ctx.report(Outcome.WOULD_CREATE, _SERVICE, nessie.service_name, "Nessie with JDBC2 and OIDC")
    stored = nessie_secrets.ensure_password_parameter(ctx, nessie.database_password())
    nessie_secrets.ensure_user(ctx)
    service = nessie.service()
    image = _image(ctx, service)
    if image is None:
        return _without_image(ctx, nessie, service)
    key = nessie_secrets.access_key(ctx, nessie_secrets.deployed_keys(_deployments(service)))
    spec, deployment = _deployment(ctx, database, image, key)
    if service is None:
        outcome = ctx.pending(
            lambda: nessie.create_service(spec["power"], int(spec["scale"]), deployment, _tags(ctx)),
            _SERVICE, nessie.service_name, f"{image}, power {spec['power']}",
        )
    else:
        restart = stored in (Outcome.UPDATED, Outcome.WOULD_UPDATE)
        outcome = _converge_service(ctx, nessie, service, spec, deployment, restart=restart)
    if outcome.changes and key is not None:
        nessie_secrets.retire(ctx, key)
    if outcome.changes:
        service = nessie.service()
    _print_endpoint(ctx, service or {})
    return outcome


def _without_image(ctx: Context, nessie: LightsailNessie, service: dict[str, Any] | None) -> Outcome:
    """No image to deploy yet: the service is made empty, so that the image can be pushed to it."""
    if service is None:
        spec = documents.load("nessie-service.yml")
        ctx.pending(lambda: nessie.create_service(spec["power"], int(spec["scale"]), None, _tags(ctx)),
                    _SERVICE, nessie.service_name, f"power {spec['power']}, no deployment yet")
    return ctx.report(
        Outcome.SKIPPED, "nessie deployment", nessie.service_name,
        f"{IMAGE_VARIABLE} is not set: push docker/nessie with `aws lightsail push-container-image` "
        f"(docs/deploy.md), export {IMAGE_VARIABLE}=<the image it names> and run create again",
    )


def _print_endpoint(ctx: Context, service: dict[str, Any]) -> None:
    url = str(service.get("url", "")).rstrip("/")
    if url:
        ctx.state["NessieEndpoint"] = url
        ctx.note(f"Nessie endpoint (service state {service.get('state')}): export NESSIE_ENDPOINT={url}")


def remove_nessie(ctx: Context) -> Outcome:
    nessie = lightsail_nessie(ctx)
    ctx.removal(nessie.service() is not None, nessie.delete_service, _SERVICE, nessie.service_name)
    nessie_secrets.remove(ctx)
    snapshot = None if ctx.force else f"{nessie.database_name}-final-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}"
    detail = "no final snapshot (--force)" if snapshot is None else f"final snapshot {snapshot}"
    return ctx.removal(
        nessie.database() is not None, lambda: nessie.delete_database(final_snapshot=snapshot), _DB,
        nessie.database_name, detail,
    )
