"""moto's server with IAM enforced the way AWS evaluates the service's policies, and every decision written down.

moto checks a request against the caller's IAM policies once `INITIAL_NO_AUTH_ACTION_COUNT` requests have passed
(`wap stack up --iam` sets it to 0 through moto's /moto-api/reset-auth once the stack's users exist). Its checker
(moto/iam/access_control.py) gives S3 requests their bucket and object ARNs, but every other service's request the
resource "*", which no statement scoped to an ARN matches, and it names the action after the API operation, which is
not always the IAM action AWS checks (`sqs:DeleteMessageBatch` is authorized as `sqs:DeleteMessage`, `s3:HeadBucket`
as `s3:ListBucket`). This module gives the requests of the services the stack's code calls (SQS, SSM, EventBridge,
EMR Serverless) the resource AWS authorizes, maps those operation names to IAM actions, and appends each decision
(principal, action, resource, allowed) to a JSON-lines file, from which the IAM tests tell a missing permission (a
denial) from an excess one (a statement or action no request used). Conditions are not evaluated by moto (except
StringEquals on the values it collects, none here), nor are resource policies: docs/deploy.md lists what that
leaves. A multi-object delete (DeleteObjects) is authorized as AWS does it, as s3:DeleteObject on each key (moto
asks about the bucket). Signatures are not checked: moto recomputes them with botocore, which disagrees with the
AWS SDK for Java's (Spark's S3FileIO) on streamed payloads and on keys with characters it escapes (`@`); the key
must still belong to a user, and every request is still authorized.

    python -m wap_stack.moto_iam --decisions FILE -H 127.0.0.1 -p PORT
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wap_stack.moto_emr import accept_emr_spark_labels

# API operation -> the IAM action AWS authorizes it as, where they differ (per service prefix).
IAM_ACTIONS = {
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "s3:HeadBucket": "s3:ListBucket",
}


def _param(response: Any, name: str) -> Any:
    try:
        return response._get_param(name)
    except Exception:  # the parameter is not there, or the body is not of this protocol
        return None


def _arn(response: Any, service: str, resource: str) -> str:
    return f"arn:aws:{service}:{response.region}:{response.current_account}:{resource}"


def sqs_resource(response: Any) -> str:
    name = _param(response, "QueueName")
    if not name:
        url = _param(response, "QueueUrl")
        if not url and response.querystring.get("QueueUrl"):
            url = response.querystring["QueueUrl"][0]
        name = str(url or response.path).rstrip("/").split("/")[-1]
    account = _param(response, "QueueOwnerAWSAccountId") or response.current_account
    return f"arn:aws:sqs:{response.region}:{account}:{name}" if name else "*"


def ssm_resource(response: Any) -> str:
    name = _param(response, "Name")
    return _arn(response, "ssm", f"parameter/{str(name).lstrip('/')}") if name else "*"


def events_resource(response: Any) -> str:
    entries = _param(response, "Entries") or []
    buses = {str(e.get("EventBusName") or "default") for e in entries if isinstance(e, dict)}
    if len(buses) != 1:
        return "*"
    [bus] = buses
    return bus if bus.startswith("arn:") else _arn(response, "events", f"event-bus/{bus}")


def emr_serverless_resource(response: Any) -> str:
    parts = response.path.split("?")[0].strip("/").split("/")
    if len(parts) >= 2 and parts[0] == "applications":
        resource = f"/applications/{parts[1]}"
        if len(parts) >= 4 and parts[2] == "jobruns":
            resource += f"/jobruns/{parts[3]}"
        return _arn(response, "emr-serverless", resource)
    return "*"


def _deleted_keys(body: bytes | str) -> list[str]:
    import xmltodict  # type: ignore[import-untyped]  # moto's own dependency

    objects = (xmltodict.parse(body, strip_whitespace=False).get("Delete") or {}).get("Object") or []
    return [str(o["Key"]) for o in (objects if isinstance(objects, list) else [objects])]


def _condition_context(action: str, path: str) -> dict[str, str]:
    """The condition keys of a request that the tests evaluate themselves (moto does not): `s3:prefix` of a list."""
    from urllib.parse import parse_qs, urlparse

    if action != "s3:ListBucket":
        return {}
    prefix = parse_qs(urlparse(path).query).get("prefix")
    return {"s3:prefix": prefix[0] if prefix else ""}


class DecisionLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()

    def write(self, principal: str, action: str, resource: str, allowed: bool, context: dict[str, str]) -> None:
        line = json.dumps({"principal": principal, "action": action, "resource": resource, "allowed": allowed,
                           "context": context})
        with self.lock, self.path.open("a") as out:
            out.write(line + "\n")


def install(decisions: Path) -> None:
    """Patch moto (in this process) as the module docstring says."""
    from moto.emrserverless.responses import EMRServerlessResponse
    from moto.events.responses import EventsHandler
    from moto.iam.access_control import IAMRequestBase
    from moto.s3.responses import S3Response
    from moto.sqs.responses import SQSResponse
    from moto.ssm.responses import SimpleSystemManagerResponse

    resolvers: dict[type, Callable[[Any], str]] = {
        SQSResponse: sqs_resource, SimpleSystemManagerResponse: ssm_resource, EventsHandler: events_resource,
        EMRServerlessResponse: emr_serverless_resource,
    }
    for cls, resolver in resolvers.items():
        cls._determine_resource = resolver  # type: ignore[attr-defined]

    log = DecisionLog(decisions)
    original_init = IAMRequestBase.__init__
    original_check = IAMRequestBase.check_action_permitted

    def check_signature(self: Any) -> None:
        """Authentication is by key (moto's IAMRequestBase finds the user or refuses); see the module docstring."""

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._action = IAM_ACTIONS.get(self._action, self._action)

    def check(self: Any, resource: str) -> None:
        principal = str(getattr(self._access_key, "arn", "?"))
        context = _condition_context(self._action, self._path)
        try:
            original_check(self, resource)
        except Exception:
            log.write(principal, self._action, resource, False, context)
            raise
        log.write(principal, self._action, resource, True, context)

    original_s3 = S3Response._authenticate_and_authorize_s3_action

    def authorize_s3(self: Any, bucket_name: str | None = None, key_name: str | None = None) -> None:
        if key_name is None and self.data.get("Action") == "DeleteObject" and self.is_delete_keys():
            for key in _deleted_keys(self.body):
                original_s3(self, bucket_name=bucket_name, key_name=key)
            return
        original_s3(self, bucket_name=bucket_name, key_name=key_name)

    S3Response._authenticate_and_authorize_s3_action = authorize_s3  # type: ignore[method-assign]
    IAMRequestBase.__init__ = init  # type: ignore[method-assign]
    IAMRequestBase.check_signature = check_signature  # type: ignore[method-assign]
    IAMRequestBase.check_action_permitted = check  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--decisions" not in args:
        print("usage: python -m wap_stack.moto_iam --decisions FILE [moto_server options]", file=sys.stderr)
        return 2
    at = args.index("--decisions")
    decisions = Path(args[at + 1])
    del args[at: at + 2]
    decisions.parent.mkdir(parents=True, exist_ok=True)
    install(decisions)
    accept_emr_spark_labels()  # the application's emr-spark-8.1.0 (wap_stack/moto_emr.py)
    from moto.server import main as moto_main

    moto_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
