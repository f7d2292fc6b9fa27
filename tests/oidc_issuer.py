"""A minimal OpenID Connect issuer for tests, enough for Quarkus OIDC (the Nessie server) and OAuth2 clients.

On 127.0.0.1 it serves `/.well-known/openid-configuration`, `/jwks` (the public half of an RSA key made at
start) and `/token`: the client-credentials grant for one known client (HTTP Basic or client_secret_post),
issuing RS256 JWT access tokens with iss, aud, sub, scope, iat, nbf and exp. It records each token request
(client id, scope, time) so tests can count them, and can be told to fail the next requests.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(value: int) -> str:
    return _b64url(value.to_bytes((value.bit_length() + 7) // 8, "big"))


@dataclass
class TokenRequest:
    client_id: str | None
    scope: str | None
    at: float
    user_agent: str


@dataclass
class Issuer:
    """The running issuer: its URLs, its client, and what it was asked."""

    port: int
    client_id: str
    client_secret: str = field(repr=False)
    audience: str
    lifetime: int
    requests: list[TokenRequest] = field(default_factory=list)
    fail_with: int | None = None  # answer token requests with this HTTP status while set

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.url}/token"


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
            pass  # quiet: pytest shows failures, not every request

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
            agent = self.headers.get("User-Agent", "")
            issuer.requests.append(TokenRequest(client_id, form.get("scope"), time.time(), agent))
            if issuer.fail_with is not None:
                self._send(issuer.fail_with, {"error": "temporarily_unavailable"})
            elif form.get("grant_type") != "client_credentials":
                self._send(400, {"error": "unsupported_grant_type"})
            elif client_id != issuer.client_id or secret != issuer.client_secret:
                self._send(401, {"error": "invalid_client", "error_description": "Client authentication failed"},
                           {"WWW-Authenticate": 'Basic realm="issuer"'})
            else:
                now = int(time.time())
                claims = {"iss": issuer.url, "aud": issuer.audience, "sub": client_id, "client_id": client_id,
                          "scope": form.get("scope", ""), "iat": now, "nbf": now - 5, "exp": now + issuer.lifetime,
                          "jti": uuid.uuid4().hex}
                self._send(200, {"access_token": keys.sign(claims), "token_type": "Bearer",
                                 "expires_in": issuer.lifetime})

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


@contextmanager
def running_issuer(client_id: str, client_secret: str, *, audience: str = "nessie", lifetime: int = 300
                   ) -> Iterator[Issuer]:
    """Start the issuer on a free port of 127.0.0.1 (in a thread of this process); stop it on exit."""
    keys = _Keys()
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    issuer = Issuer(port=server.server_address[1], client_id=client_id, client_secret=client_secret,
                    audience=audience, lifetime=lifetime)
    server.RequestHandlerClass = _handler(issuer, keys)
    thread = threading.Thread(target=server.serve_forever, name="oidc-issuer", daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
