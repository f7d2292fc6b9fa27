"""The EMR Serverless application that runs the WAP pipeline for large files (emr-spark-8.1.0: Spark 4.1).

infra/emr-application.json holds its settings; its `networkConfiguration` (the private subnets and security group
its jobs reach Nessie, Cognito and Slack through) is added here from the network step (infra/provision/network.py)
or from --subnet-ids/--security-group-ids, set on create and converged on update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from infra.provision import documents
from infra.provision.context import Client, Context, Outcome, ProvisionError

_KIND = "emr-serverless application"
_GONE = ("TERMINATED",)
_COMPARED = ("releaseLabel", "type", "architecture", "autoStartConfiguration", "autoStopConfiguration",
             "maximumCapacity", "networkConfiguration")
_UPDATABLE = ("releaseLabel", "architecture", "autoStartConfiguration", "autoStopConfiguration", "maximumCapacity",
              "networkConfiguration")


def network_configuration(ctx: Context) -> dict[str, list[str]] | None:
    """The jobs' subnets and security groups: given by the operator, or made by the network step (None when
    `--skip network` left both out: the application's network is then neither set nor compared)."""
    if ctx.given_network is not None:
        subnets, groups = list(ctx.given_network.subnet_ids), list(ctx.given_network.security_group_ids)
    else:
        subnets = [s for s in ctx.state.get("EmrSubnetIds", "").split(",") if s]
        groups = [g for g in ctx.state.get("EmrSecurityGroupIds", "").split(",") if g]
    return {"subnetIds": subnets, "securityGroupIds": groups} if subnets and groups else None


def application_spec(ctx: Context) -> dict[str, Any]:
    spec: dict[str, Any] = documents.load_rendered("emr-application.json", ctx.template_values())
    network = network_configuration(ctx)
    if network is not None:
        spec["networkConfiguration"] = network
    return spec


def find_application(emr: Client, name: str) -> dict[str, Any] | None:
    for page in emr.get_paginator("list_applications").paginate():
        for app in page.get("applications", []):
            if app.get("name") == name and app.get("state") not in _GONE:
                return dict(emr.get_application(applicationId=app["id"])["application"])
    return None


def _normalised(key: str, value: Any) -> Any:
    """EMR answers `Spark` for the `SPARK` it was given, and lists ids in its own order."""
    if key == "networkConfiguration" and isinstance(value, dict):
        return {k: sorted(v) for k, v in value.items() if v}
    return value.upper() if key == "type" and isinstance(value, str) else value


def _remember(ctx: Context, application_id: str) -> None:
    ctx.state["EmrApplicationId"] = application_id
    ctx.state["EmrApplicationArn"] = ctx.account.emr_application_arn(application_id)


def _create(ctx: Context, spec: dict[str, Any]) -> None:
    created = ctx.clients("emr-serverless").create_application(**spec)
    _remember(ctx, created["applicationId"])


def ensure_application(ctx: Context) -> Outcome:
    emr, spec = ctx.clients("emr-serverless"), application_spec(ctx)
    app = find_application(emr, spec["name"])
    if app is None:
        _remember(ctx, "<pending>")
        return ctx.pending(lambda: _create(ctx, spec), _KIND, spec["name"], spec["releaseLabel"])
    _remember(ctx, app["applicationId"])
    ctx.detail(f"application id {app['applicationId']}, state {app.get('state')}")
    # A setting the service does not report (moto omits `architecture`) cannot be compared; an application made
    # before the network was (no networkConfiguration) gets it.
    changes = [
        key for key in _COMPARED
        if key in spec and (key in app or key == "networkConfiguration")
        and _normalised(key, app.get(key)) != _normalised(key, spec[key])
    ]
    if "type" in changes:
        raise ProvisionError(f"{_KIND} {spec['name']} exists with type {app.get('type')}: delete it first.")
    update = {key: spec[key] for key in _UPDATABLE if key in spec}

    def apply() -> None:
        _stop(ctx, app)  # EMR updates only a CREATED or STOPPED application; it auto-starts on the next job
        emr.update_application(applicationId=app["applicationId"], **update)

    return ctx.converge(changes, apply, _KIND, spec["name"])


def _stop(ctx: Context, app: dict[str, Any]) -> None:
    emr, app_id = ctx.clients("emr-serverless"), app["applicationId"]
    if app.get("state") in ("STARTING", "STARTED"):
        emr.stop_application(applicationId=app_id)
        ctx.wait_until(
            lambda: emr.get_application(applicationId=app_id)["application"]["state"] == "STOPPED",
            f"{_KIND} {app.get('name')} to stop",
        )


def _stop_then_delete(ctx: Context, app: dict[str, Any]) -> None:
    _stop(ctx, app)
    ctx.clients("emr-serverless").delete_application(applicationId=app["applicationId"])


def remove_application(ctx: Context) -> Outcome:
    name = ctx.names.emr_application
    app = find_application(ctx.clients("emr-serverless"), name)
    return ctx.removal(app is not None, lambda: _stop_then_delete(ctx, app or {}), _KIND, name)


# --- the job's artefacts (`make emr-artifacts` builds them into dist/emr) ------------------------------

ARTIFACTS_DIR = Path(__file__).resolve().parents[2] / "dist" / "emr"
_ARTIFACTS_KIND = "emr job artefacts"


def artifacts_prefix(_ctx: Context) -> str:
    return "emr/artifacts"


def _remote_sizes(ctx: Context) -> dict[str, int]:
    s3, sizes = ctx.clients("s3"), dict[str, int]()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=ctx.names.lake_bucket,
                                                             Prefix=f"{artifacts_prefix(ctx)}/"):
        sizes |= {item["Key"]: int(item["Size"]) for item in page.get("Contents", [])}
    return sizes


def ensure_artifacts(ctx: Context, source: Path = ARTIFACTS_DIR) -> Outcome:
    """Upload what `make emr-artifacts` built (the entry point, package, Python archive, audits, jars) to
    s3://<lake>/emr/artifacts, where the function's job requests point (WAP_EMR_ARTIFACTS)."""
    where = f"s3://{ctx.names.lake_bucket}/{artifacts_prefix(ctx)}"
    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else []
    if not files:
        ctx.note(f"{'':<13} - {_ARTIFACTS_KIND}: {source} is empty; run `make emr-artifacts` (it builds and uploads "
                 f"them to {where}), or build them and run this again.")
        return ctx.report(Outcome.UNCHANGED, _ARTIFACTS_KIND, where, "nothing built")
    try:
        remote = _remote_sizes(ctx)
    except Exception:  # a dry run before the lake bucket exists
        remote = {}
    keys = {f"{artifacts_prefix(ctx)}/{p.relative_to(source).as_posix()}": p for p in files}
    changed = [key for key, path in keys.items() if remote.get(key) != path.stat().st_size]

    def upload() -> None:
        for key in changed:
            ctx.clients("s3").upload_file(str(keys[key]), ctx.names.lake_bucket, key)

    return ctx.converge([k.rsplit("/", 1)[-1] for k in changed], upload, _ARTIFACTS_KIND, where)


def remove_artifacts(ctx: Context) -> Outcome:
    where = f"s3://{ctx.names.lake_bucket}/{artifacts_prefix(ctx)}"
    try:
        remote = _remote_sizes(ctx)
    except Exception:  # the lake bucket is already gone
        remote = {}

    def delete() -> None:
        for key in remote:
            ctx.clients("s3").delete_object(Bucket=ctx.names.lake_bucket, Key=key)

    return ctx.removal(bool(remote), delete, _ARTIFACTS_KIND, where, f"{len(remote)} objects")
