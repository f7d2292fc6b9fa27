"""A minimal OpenID Connect issuer for the local stack (`wap stack up --auth`) and the tests: enough for Quarkus
OIDC (the Nessie server) and the project's OAuth2 clients, never for production.

On 127.0.0.1 it serves `/.well-known/openid-configuration`, `/jwks` (the public half of an RSA key made at
start) and `/token`: the client-credentials grant (HTTP Basic or client_secret_post) for its known clients,
issuing RS256 JWT access tokens with iss, aud, sub (= the client id, as Cognito does), client_id, scope, iat,
nbf, exp. A client with `scopes` gets those it asks for (all of them if it asks for none) and `invalid_scope`
for any other, like Cognito; a client without (`scopes=None`) gets whatever it asks for. It records each token
request so tests can count them, and can be told to fail the next ones (`fail_with`).

Run in a thread (`running_issuer`) or as the stack's process: `python -m wap_stack.oidc --port P
--clients FILE` (FILE: {"<client id>": {"secret": ..., "scopes": [...]}}, readable by its owner only).
"""

from __future__ import annotations

import argparse
import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

HOST = "127.0.0.1"
AUDIENCE = "nessie"  # the aud of the issued tokens; Quarkus OIDC's client id on the Nessie side


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass(frozen=True)
class OidcClient:
    secret: str = field(repr=False)
    scopes: tuple[str, ...] | None = None  # None: any requested scope is granted


@dataclass
class TokenRequest:
    client_id: str | None
    scope: str | None
    at: float
    user_agent: str


@dataclass
class Issuer:
    """The running issuer: its URLs, its clients, and what it was asked."""

    port: int
    clients: dict[str, OidcClient]
    audience: str = AUDIENCE
    lifetime: int = 300
    requests: list[TokenRequest] = field(default_factory=list)
    fail_with: int | None = None  # answer token requests with this HTTP status while set

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"

    @property
    def client_id(self) -> str:
        """The first client's id (an issuer of one client, as most tests use)."""
        return next(iter(self.clients))

    @property
    def client_secret(self) -> str:
        return self.clients[self.client_id].secret

    def grant(self, client_id: str | None, secret: str | None, requested: str | None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, body) of a client-credentials token request."""
        client = self.clients.get(client_id or "")
        if client is None or secret != client.secret:
            return 401, {"error": "invalid_client", "error_description": "Client authentication failed"}
        asked = (requested or "").split()
        if client.scopes is not None:
            if any(scope not in client.scopes for scope in asked):
                return 400, {"error": "invalid_scope", "error_description": f"not allowed for {client_id}"}
            asked = asked or list(client.scopes)
        now = int(time.time())
        return 200, {"iss": self.url, "aud": self.audience, "sub": client_id, "client_id": client_id,
                     "scope": " ".join(asked), "iat": now, "nbf": now - 5, "exp": now + self.lifetime,
                     "jti": uuid.uuid4().hex}


class _Keys:
    def __init__(self) -> None:
        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:16]
        numbers = self.private.public_key().public_numbers()
        self.jwk = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid, "n": _uint(numbers.n),
                    "e": _uint(numbers.e)}

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        signature = self.private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"


def _handler(issuer: Issuer, keys: _Keys) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: no request lines (they would show client ids and timings only, but keep logs small)

        def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/.well-known/openid-configuration":
                self._send(200, {
                    "issuer": issuer.url,
                    "jwks_uri": f"{issuer.url}/jwks",
                    "token_endpoint": issuer.token_endpoint,
                    "response_types_supported": ["token"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                })
            elif self.path == "/jwks":
                self._send(200, {"keys": [keys.jwk]})
            else:
                self._send(404, {"error": "not_found"})

        def do_POST(self) -> None:
            if self.path != "/token":
                self._send(404, {"error": "not_found"})
                return
            form = {k: v[0] for k, v in parse_qs(self._body().decode()).items()}
            client_id, secret = self._client(form)
            issuer.requests.append(TokenRequest(client_id, form.get("scope"), time.time(),
                                                self.headers.get("User-Agent", "")))
            if issuer.fail_with is not None:
                self._send(issuer.fail_with, {"error": "temporarily_unavailable"})
                return
            if form.get("grant_type") != "client_credentials":
                self._send(400, {"error": "unsupported_grant_type"})
                return
            status, body = issuer.grant(client_id, secret, form.get("scope"))
            if status != 200:
                headers = {"WWW-Authenticate": 'Basic realm="issuer"'} if status == 401 else None
                self._send(status, body, headers)
                return
            self._send(200, {"access_token": keys.sign(body), "token_type": "Bearer", "expires_in": issuer.lifetime})

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = b""  # the Nessie Java client sends its form chunked
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            return body

        def _client(self, form: dict[str, str]) -> tuple[str | None, str | None]:
            basic = self.headers.get("Authorization", "")
            if basic.startswith("Basic "):
                user, _, password = base64.b64decode(basic[6:]).decode().partition(":")
                return unquote(user), unquote(password)
            return form.get("client_id"), form.get("client_secret")

    return Handler


def _serve(clients: Mapping[str, OidcClient], port: int, audience: str, lifetime: int
           ) -> tuple[ThreadingHTTPServer, Issuer]:
    keys = _Keys()
    server = ThreadingHTTPServer((HOST, port), BaseHTTPRequestHandler)
    issuer = Issuer(port=server.server_address[1], clients=dict(clients), audience=audience, lifetime=lifetime)
    server.RequestHandlerClass = _handler(issuer, keys)
    return server, issuer


@contextmanager
def running_issuer(clients: Mapping[str, OidcClient], *, audience: str = AUDIENCE, lifetime: int = 300
                   ) -> Iterator[Issuer]:
    """Start the issuer on a free port of 127.0.0.1 (in a thread of this process); stop it on exit."""
    server, issuer = _serve(clients, 0, audience, lifetime)
    thread = threading.Thread(target=server.serve_forever, name="oidc-issuer", daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def clients_from(document: Mapping[str, Any]) -> dict[str, OidcClient]:
    """The clients of a clients file's JSON document."""
    return {client_id: OidcClient(str(spec["secret"]), tuple(spec["scopes"]) if "scopes" in spec else None)
            for client_id, spec in document.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m wap_stack.oidc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clients", type=Path, required=True, help="JSON file of the clients")
    parser.add_argument("--lifetime", type=int, default=300, help="access token lifetime in seconds")
    args = parser.parse_args(argv)
    document = json.loads(args.clients.read_text())
    server, issuer = _serve(clients_from(document.get("clients", document)), args.port, AUDIENCE, args.lifetime)
    print(f"OIDC issuer {issuer.url} for clients {', '.join(issuer.clients)}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
