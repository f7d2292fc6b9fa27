"""`wap dlq list|redrive`: what is in the ingest queue's dead-letter queue, and replaying it.

Messages land there after WAP_MAX_RECEIVES failed attempts (each already alerted on its first and last attempt);
a CloudWatch alarm on the queue's depth reaches Slack too. Once the cause is fixed, `wap dlq redrive` sends them
back to the ingest queue, where each object is ingested as any event is (exactly once: published objects come
out as duplicates). A body is listed by allow list, never as it is (adapters/dead_letters.shown_body): the safe
fields of the messages this service reads (an S3 notification's objects, a publish request's branch and reason, a
Slack action's person, action and target), never a signature, token or response URL, and of anything else only its
size and a digest. A redriven publish request or Slack action does nothing: the service recorded it once under its
id (core.once), and another message carrying it is a copy.
"""

from __future__ import annotations

import argparse
import json
import os

from wap_ingest.core.errors import ConfigError

QUEUE_VARIABLES = (("WAP_QUEUE_URL", "WAP_STACK_QUEUE_URL"), ("WAP_DEAD_LETTER_QUEUE_URL", "WAP_STACK_DLQ_URL"))


def _url(given: str | None, names: tuple[str, str]) -> str:
    value = given or os.environ.get(names[0], "").strip() or os.environ.get(names[1], "").strip()
    if not value:
        raise ConfigError(f"{names[0]} is not set. Fix: export {names[0]}=<queue URL> (setup_aws.py prints it; "
                          f"locally: eval \"$(wap stack env)\"), or pass it as an option.")
    return value


def cmd_dlq(args: argparse.Namespace) -> int:
    from wap_ingest.bootstrap import dead_letter_commands

    letters = dead_letter_commands(_url(args.dlq_url, QUEUE_VARIABLES[1]), _url(args.queue_url, QUEUE_VARIABLES[0]))
    if args.action == "list":
        found = letters.peek(args.limit)
        if args.json:
            print(json.dumps({"messages": [m.to_dict() for m in found]}, indent=2))
        else:
            for message in found:
                print(message.line)
            print(f"{len(found)} message(s) in the dead-letter queue")
        return 0
    moved = letters.redrive(args.limit)
    print(json.dumps({"redriven": moved}) if args.json else f"{len(moved)} message(s) sent back to the ingest queue")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    dlq = sub.add_parser("dlq", help="list or replay the dead-letter queue",
                         description="list: show the messages in the ingest queue's dead-letter queue (each is hidden "
                         "for 30 s by the listing); redrive: send them back to the ingest queue.")
    dlq.add_argument("action", choices=["list", "redrive"])
    dlq.add_argument("--limit", type=int, default=100, help="at most this many messages (default 100)")
    dlq.add_argument("--json", action="store_true")
    dlq.add_argument("--queue-url", help="the ingest queue (default: $WAP_QUEUE_URL)")
    dlq.add_argument("--dlq-url", help="the dead-letter queue (default: $WAP_DEAD_LETTER_QUEUE_URL)")
    dlq.set_defaults(func=cmd_dlq)
