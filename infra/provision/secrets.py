"""Secrets as SSM SecureString parameters (KMS key aws/ssm). Values are compared, never printed."""

from __future__ import annotations

from botocore.exceptions import ClientError

from infra.provision.context import Client, Context, Outcome

_KIND = "ssm parameter"
SLACK_TOKEN_VARIABLE = "SLACK_TOKEN"
SIGNING_SECRET_VARIABLE = "SLACK_SIGNING_SECRET"


def get_secret(ssm: Client, name: str) -> str | None:
    try:
        return str(ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"])
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "ParameterNotFound":
            return None
        raise


def put_secret(ctx: Context, name: str, value: str, description: str) -> Outcome:
    """Create or overwrite the SecureString `name` so that it holds `value`."""
    ssm = ctx.clients("ssm")
    current = get_secret(ssm, name)

    def write(overwrite: bool) -> None:
        kwargs = {"Name": name, "Value": value, "Type": "SecureString", "Description": description}
        if overwrite:
            ssm.put_parameter(**kwargs, Overwrite=True)
        else:
            ssm.put_parameter(**kwargs, Tags=[{"Key": "wap:prefix", "Value": ctx.names.prefix}])

    if current is None:
        return ctx.pending(lambda: write(False), _KIND, name, "SecureString")
    return ctx.converge([] if current == value else ["value"], lambda: write(True), _KIND, name)


def ensure_slack_token(ctx: Context) -> Outcome:
    name = ctx.names.slack_token_parameter
    token = ctx.environ.get(SLACK_TOKEN_VARIABLE, "").strip()
    if token:
        return put_secret(ctx, name, token, "Slack bot token for wap-lake alerts")
    if get_secret(ctx.clients("ssm"), name) is not None:
        return ctx.report(Outcome.UNCHANGED, _KIND, name, f"{SLACK_TOKEN_VARIABLE} unset: kept the stored token")
    return ctx.report(
        Outcome.SKIPPED, _KIND, name, f"{SLACK_TOKEN_VARIABLE} is not set: alerts go to the log; export it and re-run"
    )


def ensure_slack_signing_secret(ctx: Context) -> Outcome:
    """The Slack app's signing secret (Basic Information > App Credentials): the interactivity endpoint verifies every
    request with it."""
    name = ctx.names.slack_signing_secret_parameter
    secret = ctx.environ.get(SIGNING_SECRET_VARIABLE, "").strip()
    if secret:
        return put_secret(ctx, name, secret, "Slack app signing secret for wap-lake's interactivity endpoint")
    if get_secret(ctx.clients("ssm"), name) is not None:
        return ctx.report(Outcome.UNCHANGED, _KIND, name, f"{SIGNING_SECRET_VARIABLE} unset: kept the stored secret")
    return ctx.report(Outcome.SKIPPED, _KIND, name, f"{SIGNING_SECRET_VARIABLE} is not set: the alerts' buttons are "
                      "refused (nothing can verify them); export it and re-run (docs/deploy.md)")


def remove_slack_signing_secret(ctx: Context) -> Outcome:
    return remove_parameter(ctx, ctx.names.slack_signing_secret_parameter)


def remove_parameter(ctx: Context, name: str) -> Outcome:
    ssm = ctx.clients("ssm")
    exists = get_secret(ssm, name) is not None
    return ctx.removal(exists, lambda: ssm.delete_parameter(Name=name), _KIND, name)


def remove_slack_token(ctx: Context) -> Outcome:
    return remove_parameter(ctx, ctx.names.slack_token_parameter)
