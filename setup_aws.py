"""Create or delete wap-lake's AWS resources (everything except the Lambda function, which
`serverless deploy` makes). Idempotent: a second `create` changes nothing and says so, resource by resource.

    python setup_aws.py -v create -n nessie-wap [--prefix wap] [--dry-run] [--verbose]
    python setup_aws.py -v delete -n nessie-wap [--force]

Buckets come from SOURCE_BUCKET / LAKE_BUCKET (or --source-bucket / --lake-bucket); the Slack token from
SLACK_TOKEN at create time (stored as an SSM SecureString, never printed). The EMR jobs' network is created
(a VPC with a NAT gateway, infra/provision/network.py) unless --subnet-ids and --security-group-ids (or
WAP_EMR_SUBNET_IDS / WAP_EMR_SECURITY_GROUP_IDS) name your own. `--endpoint-url` points every
client at another endpoint (e.g. a local moto server; moto has no Lightsail: add `--skip nessie`).
Resource settings live in infra/ (IAM policies, queue, EMR application, Nessie service); see docs/deploy.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError
from infra.provision import plan
from infra.provision.context import Client, Clients, Context, JobNetwork, ProvisionError
from infra.provision.documents import TemplateError
from infra.provision.names import Account, InvalidNameError, ResourceNames

COMPONENTS = ("storage", "events", "image", "network", "emr", "iam", "secrets", "nessie")


def _value(text: str) -> str:
    return text.removeprefix("=")


def _ids(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _given_network(parser: argparse.ArgumentParser, args: argparse.Namespace) -> JobNetwork | None:
    subnets, groups = _ids(args.subnet_ids), _ids(args.security_group_ids)
    if not subnets and not groups:
        return None
    if not subnets or not groups:
        parser.error("--subnet-ids and --security-group-ids go together (or WAP_EMR_SUBNET_IDS and "
                     "WAP_EMR_SECURITY_GROUP_IDS): pass both to use your own network, neither to have it created.")
    for flag, values, start in (("--subnet-ids", subnets, "subnet-"), ("--security-group-ids", groups, "sg-")):
        wrong = [v for v in values if not v.startswith(start)]
        if wrong:
            parser.error(f"{flag}: {', '.join(wrong)} is not a {start}... id; pass them comma-separated.")
    return JobNetwork(subnets, groups)


def parse_args(argv: Sequence[str] | None, environ: Mapping[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="setup_aws.py", description=__doc__.split("\n\n")[0])
    # `-v=create -n=nessie-service` (the reference system's spelling) works too.
    parser.add_argument("-v", dest="action", required=True, type=_value, choices=("create", "delete"),
                        help="what to do")
    parser.add_argument("-n", dest="name", required=True, type=_value,
                        help="Nessie container service name (hyphens only)")
    parser.add_argument("--prefix", default="wap", help="prefix of every resource name (default: wap)")
    parser.add_argument("--source-bucket", default=environ.get("SOURCE_BUCKET", ""), help="default: $SOURCE_BUCKET")
    parser.add_argument("--lake-bucket", default=environ.get("LAKE_BUCKET", ""), help="default: $LAKE_BUCKET")
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    parser.add_argument("--region", default=region, help=f"default: $AWS_REGION ({region})")
    parser.add_argument("--endpoint-url", default=None, help="send every AWS call here (e.g. http://127.0.0.1:5000)")
    parser.add_argument("--subnet-ids", default=environ.get("WAP_EMR_SUBNET_IDS", ""),
                        help="the EMR jobs' private subnets (comma-separated, with a NAT route): nothing is created "
                        "for the network (default: $WAP_EMR_SUBNET_IDS)")
    parser.add_argument("--security-group-ids", default=environ.get("WAP_EMR_SECURITY_GROUP_IDS", ""),
                        help="the EMR jobs' security groups, with --subnet-ids (default: $WAP_EMR_SECURITY_GROUP_IDS)")
    parser.add_argument("--skip", action="append", default=[], choices=COMPONENTS, help="leave a component out")
    parser.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    parser.add_argument("--force", action="store_true", help="delete: also delete data (bucket objects, images)")
    parser.add_argument("--verbose", action="store_true", help="print ARNs, ids and other details")
    args = parser.parse_args(argv)
    for flag, value, variable in (("--source-bucket", args.source_bucket, "SOURCE_BUCKET"),
                                  ("--lake-bucket", args.lake_bucket, "LAKE_BUCKET")):
        if not value:
            parser.error(f"{flag} is required: pass it or export {variable}=<bucket name>")
    args.given_network = _given_network(parser, args)
    return args


def build_context(
    args: argparse.Namespace, environ: Mapping[str, str], overrides: Mapping[str, Client] | None
) -> Context:
    names = ResourceNames.build(args.prefix, args.source_bucket, args.lake_bucket, args.name)
    clients = Clients(boto3.session.Session().client, region=args.region, endpoint_url=args.endpoint_url,
                      overrides=overrides)
    account_id = str(clients("sts").get_caller_identity()["Account"])
    return Context(clients=clients, names=names, account=Account(account_id, args.region), dry_run=args.dry_run,
                   force=args.force, verbose=args.verbose, environ=environ, given_network=args.given_network)


def main(
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> int:
    """Exit codes: 0 done, 1 refused or AWS error, 2 usage error."""
    env = os.environ if environ is None else environ
    args = parse_args(argv, env)
    try:
        ctx = build_context(args, env, overrides)
        skip = frozenset(args.skip)
        return plan.create(ctx, skip) if args.action == "create" else plan.delete(ctx, skip)
    except InvalidNameError as exc:
        print(f"setup_aws.py: {exc}", file=sys.stderr)
        return 2
    except (ProvisionError, TemplateError) as exc:
        print(f"setup_aws.py: {exc}", file=sys.stderr)
        return 1
    except (ClientError, BotoCoreError) as exc:
        print(f"setup_aws.py: AWS error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
