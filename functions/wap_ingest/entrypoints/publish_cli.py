"""`wap publish BRANCH` when WAP_PUBLISH_QUEUE_URL is set: ask the service to publish (the operator holds no write
on `main`; wap_ingest.core.publish_requests says why), wait for its answer, print it like a direct publish.

The request is signed with the operator's AWS credentials (the operator role) through STS and carries no token:
adapters/publish_requests.StsRequesters."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from wap_ingest.adapters.aws import queue_name_of
from wap_ingest.core.errors import ConfigError
from wap_ingest.core.publish_requests import QUEUE_VARIABLE, PublishRequest

if TYPE_CHECKING:
    from wap_ingest.bootstrap import PublishRequests

_FIELDS = {"table": None, "reason": None, "actor": None, "merged_hash": None, "already": False, "reaudit": None,
           "source": None, "recorded_at": None}


def publish_queue_url() -> str | None:
    """The queue that carries publish requests to the service (the ingest queue), or None: merge directly."""
    value = os.environ.get(QUEUE_VARIABLE, "").strip()
    if not value:
        return None
    if urlparse(value).scheme not in ("http", "https"):
        raise ConfigError(f"{QUEUE_VARIABLE}={value!r} is not a queue URL. Fix: export {QUEUE_VARIABLE}=<the ingest "
                          f"queue's URL> (setup_aws.py prints it; locally `wap stack env --role operator`).")
    return value


def ask_service(args: argparse.Namespace, requests: PublishRequests, queue_url: str) -> dict[str, Any] | None:
    """Send the request and wait for the answer (None: none within --wait seconds)."""
    request = requests.sign(PublishRequest(branch=args.branch, reason=args.reason, reaudit=args.reaudit,
                                           queue=queue_name_of(queue_url)))
    requests.send(queue_url, request)
    print(f"asked the service to publish {args.branch} (request {request.request_id}, valid for "
          f"{request.expires_at - request.issued_at} s); waiting up to {args.wait:g} s for its answer at "
          f"{requests.where(request.request_id)}", file=sys.stderr)
    answer = requests.wait(request.request_id, args.wait)
    if answer is None:
        print(f"wap: no answer to request {request.request_id} within {args.wait:g} s. The request stays on the "
              f"queue until the service answers it at {requests.where(request.request_id)} (refused as expired once "
              f"its {request.expires_at - request.issued_at} s have passed); see the function's logs (locally: wap "
              f"stack status). Nothing is published until then.", file=sys.stderr)
        return None
    return _FIELDS | answer


def answer_text(answer: dict[str, Any]) -> str:
    if answer.get("already"):
        where = f" (commit {str(answer['merged_hash'])[:12]})" if answer.get("merged_hash") else ""
        return (f"{answer['branch']} was already published{where} by {answer.get('actor')}: {answer.get('reason')}. "
                f"Nothing to do.")
    merged = f" (main is now at {str(answer['merged_hash'])[:12]})" if answer.get("merged_hash") else ""
    reaudit = answer.get("reaudit")
    audited = (f"\nre-audit passed: {reaudit['rows']} rows, {len(reaudit['checks'])} checks" if reaudit
               else "\nnot re-audited (--no-reaudit): the override is recorded on the merge commit")
    return (f"published {answer['branch']} for {answer.get('table')} by {answer.get('actor')} (through the "
            f"service): {answer.get('reason')}{merged}{audited}")
