"""A Slack-compatible HTTP sink for the local stack: the real slack-sdk WebClient posts to it.

`POST /api/chat.postMessage` (JSON or form body, bearer token required but never recorded) appends the
message to a JSON-lines file and answers like Slack (`{"ok": true, "channel": ..., "ts": ...}`).
`GET /messages` returns what was received; `GET /health` answers 200. Loopback only.

    python -m wap_ingest.local.slack_sink --port 19122 --record .wap/stack/alerts.jsonl
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

HOST = "127.0.0.1"


def read_messages(record: Path) -> list[dict[str, Any]]:
    if not record.is_file():
        return []
    return [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines() if line.strip()]


class _Handler(BaseHTTPRequestHandler):
    server: _SinkServer

    def log_message(self, format: str, *args: Any) -> None:
        print(f"{self.address_string()} {format % args}", flush=True)

    def _reply(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._reply(200, {"ok": True})
        elif self.path == "/messages":
            self._reply(200, read_messages(self.server.record))
        else:
            self._reply(404, {"ok": False, "error": "unknown_method"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8") if length else ""
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            self._reply(200, {"ok": False, "error": "not_authed"})
            return
        if self.path.rstrip("/") != "/api/chat.postMessage":
            self._reply(200, {"ok": False, "error": "unknown_method"})
            return
        if "json" in (self.headers.get("Content-Type") or ""):
            args: dict[str, Any] = json.loads(raw or "{}")
        else:
            args = {k: v[-1] for k, v in parse_qs(raw).items()}
            if isinstance(args.get("blocks"), str):
                args["blocks"] = json.loads(args["blocks"])
        if not args.get("channel"):
            self._reply(200, {"ok": False, "error": "channel_not_found"})
            return
        ts = f"{time.time():.6f}"
        message = {"channel": args["channel"], "text": args.get("text", ""), "blocks": args.get("blocks", []), "ts": ts}
        with self.server.lock, self.server.record.open("a", encoding="utf-8") as out:
            out.write(json.dumps(message) + "\n")
        self._reply(200, {"ok": True, "channel": args["channel"], "ts": ts, "message": {"text": message["text"]}})


class _SinkServer(ThreadingHTTPServer):
    def __init__(self, port: int, record: Path) -> None:
        super().__init__((HOST, port), _Handler)
        self.record = record
        self.lock = threading.Lock()


def serve(port: int, record: Path) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    record.touch()
    with _SinkServer(port, record) as server:
        print(f"slack sink on http://{HOST}:{port}/api/ recording to {record}", flush=True)
        server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True)
    args = parser.parse_args(argv)
    serve(args.port, args.record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
