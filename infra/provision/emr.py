"""The EMR Serverless application that runs the WAP pipeline for large files (emr-7.x: Spark 3.5)."""

from __future__ import annotations

from typing import Any

from infra.provision import documents
from infra.provision.context import Client, Context, Outcome, ProvisionError

_KIND = "emr-serverless application"
_GONE = ("TERMINATED",)
_COMPARED = ("releaseLabel", "type", "architecture", "autoStartConfiguration", "autoStopConfiguration",
             "maximumCapacity")
_UPDATABLE = ("releaseLabel", "architecture", "autoStartConfiguration", "autoStopConfiguration", "maximumCapacity")


def application_spec(ctx: Context) -> dict[str, Any]:
    spec: dict[str, Any] = documents.load_rendered("emr-application.json", ctx.template_values())
    return spec


def find_application(emr: Client, name: str) -> dict[str, Any] | None:
    for page in emr.get_paginator("list_applications").paginate():
        for app in page.get("applications", []):
            if app.get("name") == name and app.get("state") not in _GONE:
                return dict(emr.get_application(applicationId=app["id"])["application"])
    return None


def _normalised(key: str, value: Any) -> Any:
    """EMR answers `Spark` for the `SPARK` it was given."""
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
    # A setting the service does not report (moto omits `architecture`) cannot be compared.
    changes = [
        key for key in _COMPARED
        if key in spec and key in app and _normalised(key, app[key]) != _normalised(key, spec[key])
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
