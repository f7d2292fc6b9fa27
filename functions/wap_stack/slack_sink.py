"""A Slack for the local stack: the real slack-sdk clients talk to it, a person uses it in a browser.

- Web API (`POST /api/<method>`, JSON or form body, bearer token required but never recorded), answered like Slack:
  chat.postMessage, chat.update, chat.postEphemeral, views.open, conversations.history, usergroups.users.list.
- The channel page (`GET /?user=U0ALICE01`): the messages with their blocks and buttons, the private replies of the
  person looking, the form open for them (wap_stack/slack_page.py). A click or a sent form is posted to the app's
  interactivity URL exactly as Slack posts it: form-encoded `payload=`, signed with the app's signing secret
  (wap_stack/slack_workspace.py). The page's own calls are `/ui/state`, `/ui/click`, `/ui/submit`, `/ui/close`.
- Response URLs (`POST /response/<id>`): a click's private replies.
- With `--endpoint`, the app's interactivity endpoint itself, as its HTTP API route serves it in AWS
  (`POST /slack/actions`: the request as the route's Lambda event, payload format 2.0, to
  wap_ingest.entrypoints.slack_interactivity.handler, in this process; the environment is the stack's). The headers
  reach the handler as text decoded as UTF-8 (Python's http.server reads them as Latin-1, which would turn a UTF-8
  `²` into `Â²` and hide what the function gets), and a handler that raises is answered as API Gateway answers a
  failed invocation: `500 {"message":"Internal Server Error"}`.
`GET /messages` returns the channel as it reads now (an updated message with `edited_at`), `GET /ephemerals?user=` the
private replies, `GET /sent` the last requests posted to the app (headers, body, its answer, how long it took to come:
`seconds`, and when: `answered_at`), `GET /health` answers 200. Loopback only.

    python -m wap_stack.slack_sink --port 19122 --record .wap/stack/alerts.jsonl [--endpoint]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from wap_stack.slack_page import channel_html, modal_html, page
from wap_stack.slack_workspace import (
    GROUPS,
    USERS,
    Workspace,
    channel_id_for,
    read_ephemerals,
    read_messages,
)

__all__ = ["ENDPOINT_PATH", "HOST", "read_ephemerals", "read_messages", "serve"]

HOST = "127.0.0.1"
ENDPOINT_PATH = "/slack/actions"
CHANNEL = "#wap-alerts"  # what the page shows (the stack's SLACK_CHANNEL)
HttpApiHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    server: _SinkServer

    def log_message(self, format: str, *args: Any) -> None:
        print(f"{self.address_string()} {format % args}", flush=True)

    def _reply(self, status: int, payload: Any, content_type: str = "application/json; charset=utf-8") -> None:
        body = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        workspace = self.server.workspace
        asked = query.get("user", "")
        user = asked if asked in USERS else next(iter(USERS))
        if url.path == "/health":
            self._reply(200, {"ok": True})
        elif url.path == "/messages":
            self._reply(200, read_messages(workspace.record))
        elif url.path == "/sent":  # the requests posted to the app, as sent (to see, or replay, what Slack sent)
            self._reply(200, workspace.sent)
        elif url.path == "/ephemerals":
            self._reply(200, read_ephemerals(workspace.record, query.get("user")))
        elif url.path == "/":
            self._reply(200, page(CHANNEL.lstrip("#"), user), "text/html; charset=utf-8")
        elif url.path == "/ui/state":
            view = workspace.views.get(user)
            self._reply(200, {"channel": channel_html(read_messages(workspace.record),
                                                      read_ephemerals(workspace.record, user)),
                              "view_id": None if view is None else view["id"], "modal": modal_html(view)})
        else:
            self._reply(404, {"ok": False, "error": "unknown_method"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8") if length else ""
        path = urlsplit(self.path).path.rstrip("/")
        if path == ENDPOINT_PATH and self.server.endpoint is not None:
            self._http_api(raw)
        elif path.startswith("/ui/"):
            self._ui(path.removeprefix("/ui/"), json.loads(raw or "{}"))
        elif path.startswith("/response/"):
            error = self.server.workspace.respond(path.removeprefix("/response/"), json.loads(raw or "{}"))
            self._reply(404 if error == "expired_url" else 200 if error is None else 400, error or "ok",
                        "text/plain")
        elif not self.headers.get("Authorization", "").startswith("Bearer "):
            self._reply(200, {"ok": False, "error": "not_authed"})
        else:
            self._api(path.removeprefix("/api/"), raw)

    def _arguments(self, raw: str) -> dict[str, Any]:
        if "json" in (self.headers.get("Content-Type") or ""):
            args: dict[str, Any] = json.loads(raw or "{}")
        else:
            args = {k: v[-1] for k, v in parse_qs(raw).items()}
        for name in ("blocks", "view"):
            if isinstance(args.get(name), str):
                args[name] = json.loads(args[name])
        return args

    def _api(self, method: str, raw: str) -> None:
        args, workspace = self._arguments(raw), self.server.workspace
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral", "conversations.history") \
                and not channel:
            self._reply(200, {"ok": False, "error": "channel_not_found"})
        elif method == "chat.postMessage":
            message = workspace.post(channel, str(args.get("text", "")), list(args.get("blocks") or []))
            self._reply(200, {"ok": True, "channel": message["channel_id"], "ts": message["ts"],
                              "message": {"text": message["text"]}})
        elif method == "chat.update":
            error = workspace.update(channel, ts, str(args.get("text", "")), list(args.get("blocks") or []))
            self._reply(200, {"ok": False, "error": error} if error else {"ok": True, "channel": channel, "ts": ts})
        elif method == "chat.postEphemeral":
            line = workspace.ephemeral(channel, str(args.get("user")), str(args.get("text", "")),
                                       list(args.get("blocks") or []))
            self._reply(200, {"ok": True, "message_ts": line["ts"]})
        elif method == "views.open":
            error = workspace.open_view(str(args.get("trigger_id")), dict(args.get("view") or {}))
            self._reply(200, {"ok": False, "error": error} if error else {"ok": True})
        elif method == "conversations.history":
            wanted, latest = channel_id_for(channel), float(args.get("latest") or "inf")
            found = [m for m in read_messages(workspace.record) if m["channel_id"] == wanted
                     and float(m["ts"]) <= latest]
            limit = int(args.get("limit") or 100)
            self._reply(200, {"ok": True, "messages": list(reversed(found))[:limit], "has_more": False})
        elif method == "usergroups.users.list":
            group = str(args.get("usergroup") or "")
            self._reply(200, {"ok": True, "users": list(GROUPS[group])} if group in GROUPS
                        else {"ok": False, "error": "no_such_subteam"})
        else:
            self._reply(200, {"ok": False, "error": "unknown_method"})

    def _ui(self, what: str, body: dict[str, Any]) -> None:
        """What the person in the page did, sent to the app as Slack sends it; the app's answer."""
        workspace, user = self.server.workspace, str(body.get("user"))
        if user not in USERS:
            self._reply(400, {"error": f"unknown user {user!r}"})
            return
        try:
            if what == "click":
                status, answer = workspace.deliver(workspace.click(user, CHANNEL, str(body.get("ts")),
                                                                   str(body.get("action_id"))))
            elif what == "submit":
                reason = str(body.get("reason") or "")
                if not reason.strip():  # Slack's client refuses an empty required field before sending anything
                    self._reply(200, {"status": 0, "errors": {"reason": "This field is required."}})
                    return
                status, answer = workspace.deliver(workspace.submit(user, reason))
            elif what == "close":
                workspace.close(user)
                self._reply(200, {"status": 200})
                return
            else:
                self._reply(404, {"error": what})
                return
        except LookupError as exc:
            self._reply(200, {"status": 0, "body": str(exc)})
            return
        errors = _form_errors(answer) if what == "submit" and status == 200 else None
        if what == "submit" and status == 200 and errors is None:
            workspace.close(user)  # Slack closes the form when the app answers a submission with an empty 200
        self._reply(200, {"status": status, "body": answer, **({"errors": errors} if errors else {})})

    def _http_api(self, raw: str) -> None:
        """The interactivity endpoint, served as its HTTP API route serves it (payload format 2.0)."""
        assert self.server.endpoint is not None
        event = {"version": "2.0", "routeKey": f"POST {ENDPOINT_PATH}", "rawPath": ENDPOINT_PATH, "rawQueryString": "",
                 "body": raw, "isBase64Encoded": False,
                 "headers": {k.lower(): _as_text(v) for k, v in self.headers.items()},
                 "requestContext": {"http": {"method": "POST", "path": ENDPOINT_PATH,
                                             "sourceIp": self.client_address[0]}}}
        try:
            answer = self.server.endpoint(event, None)
        except Exception as exc:  # the function failed: API Gateway's answer, the traceback in this log only
            print(f"the interactivity endpoint raised {type(exc).__name__}: {exc}", flush=True)
            self._reply(500, {"message": "Internal Server Error"})
            return
        headers = answer.get("headers") or {}
        self._reply(int(answer.get("statusCode", 200)), str(answer.get("body") or ""),
                    str(headers.get("Content-Type", "text/plain")))


def _as_text(value: str) -> str:
    """A header as an HTTP API hands it to the function: its bytes (http.server read them as Latin-1) as UTF-8 text,
    or as read when they are not UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _form_errors(answer: str) -> dict[str, str] | None:
    try:
        document = json.loads(answer) if answer.strip() else {}
    except ValueError:
        return None
    if isinstance(document, dict) and document.get("response_action") == "errors":
        return {str(k): str(v) for k, v in (document.get("errors") or {}).items()}
    return None


class _SinkServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, record: Path, endpoint: HttpApiHandler | None = None) -> None:
        super().__init__((HOST, port), _Handler)
        base = f"http://{HOST}:{self.server_address[1]}"
        self.workspace = Workspace(record, interactivity_url=f"{base}{ENDPOINT_PATH}" if endpoint else None,
                                   base_url=base)
        self.endpoint = endpoint


def serve(port: int, record: Path, endpoint: HttpApiHandler | None = None) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    record.touch()
    with _SinkServer(port, record, endpoint) as server:
        print(f"slack sink on http://{HOST}:{port}/api/ recording to {record}; the channel: http://{HOST}:{port}/"
              + (f"; the interactivity endpoint: http://{HOST}:{port}{ENDPOINT_PATH}" if endpoint else ""), flush=True)
        server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("--endpoint", action="store_true",
                        help="serve the app's interactivity endpoint here too (needs the stack's environment)")
    args = parser.parse_args(argv)
    endpoint: HttpApiHandler | None = None
    if args.endpoint:
        from wap_ingest.entrypoints.slack_interactivity import handler  # the app's side: only with --endpoint

        endpoint = handler
    serve(args.port, args.record, endpoint)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
