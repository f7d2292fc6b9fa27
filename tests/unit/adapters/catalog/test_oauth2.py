"""The client-credentials token provider, with a fake token endpoint and a fake clock (no sleeping, no network)."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest
import requests

from wap_ingest.adapters.catalog.oauth2 import BearerAuth, ClientCredentials, TokenProvider
from wap_ingest.core.errors import CatalogUnavailableError, ConfigError

SECRET = "sup3r+secret/value=="  # needs form-urlencoding inside HTTP Basic (RFC 6749 2.3.1)
CREDENTIALS = ClientCredentials("https://idp.example.com/oauth2/token", "client-1", SECRET, "nessie/catalog")


class Records(logging.Handler):
    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.caplog = caplog

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    @property
    def text(self) -> str:
        return "\n".join([*self.lines, self.caplog.text])


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[Records]:
    """Every record at DEBUG: the provider's own (attached to its logger, which the Lambda handler's Powertools
    set-up may have stopped from propagating) and everything else caplog sees (requests, urllib3...)."""
    caplog.set_level(logging.DEBUG)
    records, logger = Records(caplog), logging.getLogger("wap_ingest.adapters.catalog.oauth2")
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    try:
        yield records
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def response(status: int, body: Any) -> requests.Response:
    answer = requests.Response()
    answer.status_code = status
    answer._content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return answer


class FakeEndpoint:
    """A requests.Session stand-in for the token endpoint: records calls, answers from a script."""

    def __init__(self, *answers: requests.Response | Exception, delay: float = 0.0) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []
        self.delay = delay
        self.issued = 0

    def post(self, url: str, **kwargs: Any) -> requests.Response:
        self.calls.append({"url": url, **kwargs})
        if self.delay:
            time.sleep(self.delay)
        answer = self.answers.pop(0) if self.answers else None
        if isinstance(answer, Exception):
            raise answer
        if answer is not None:
            return answer
        self.issued += 1
        return response(200, {"access_token": f"token-{self.issued}", "token_type": "Bearer", "expires_in": 300})


def provider(endpoint: FakeEndpoint, clock: Clock | None = None, **kwargs: Any) -> TokenProvider:
    return TokenProvider(CREDENTIALS, timeout=7.0, session=endpoint, clock=clock or Clock(), **kwargs)  # type: ignore[arg-type]


def test_the_grant_request_authenticates_the_client_with_basic_and_asks_for_the_scope() -> None:
    endpoint = FakeEndpoint()
    assert provider(endpoint).token() == "token-1"
    [call] = endpoint.calls
    assert call["url"] == CREDENTIALS.token_endpoint and call["timeout"] == 7.0
    assert call["data"] == {"grant_type": "client_credentials", "scope": "nessie/catalog"}
    prepared = requests.Request("POST", call["url"], auth=call["auth"]).prepare()
    user, _, password = base64.b64decode(prepared.headers["Authorization"][6:]).decode().partition(":")
    assert (user, password) == ("client-1", "sup3r%2Bsecret%2Fvalue%3D%3D")


def test_the_token_is_cached_until_shortly_before_it_expires() -> None:
    clock, endpoint = Clock(), FakeEndpoint()
    tokens = provider(endpoint, clock)
    assert tokens.token() == "token-1"
    clock.now += 239  # expires_in 300, refreshed 60 s before
    assert tokens.token() == "token-1"
    clock.now += 1
    assert tokens.token() == "token-2"
    assert len(endpoint.calls) == 2


def test_short_lived_tokens_are_refreshed_at_half_their_life_and_missing_expiry_means_60_s() -> None:
    clock = Clock()
    endpoint = FakeEndpoint(response(200, {"access_token": "a", "token_type": "bearer", "expires_in": 40}),
                            response(200, {"access_token": "b", "token_type": "bearer"}),
                            response(200, {"access_token": "c"}))
    tokens = provider(endpoint, clock)
    assert tokens.token() == "a"
    clock.now += 19.9
    assert tokens.token() == "a"
    clock.now += 0.1
    assert tokens.token() == "b"
    clock.now += 29.9
    assert tokens.token() == "b"
    clock.now += 0.1
    assert tokens.token() == "c"


def test_invalidate_forgets_only_the_token_it_names() -> None:
    endpoint = FakeEndpoint()
    tokens = provider(endpoint)
    first = tokens.token()
    tokens.invalidate("some-other-token")
    assert tokens.token() == first
    tokens.invalidate(first)
    assert tokens.token() == "token-2"


def test_concurrent_callers_share_one_fetch() -> None:
    endpoint = FakeEndpoint(delay=0.05)
    tokens = provider(endpoint)
    seen: list[str] = []
    start = threading.Barrier(16)

    def call() -> None:
        start.wait()
        seen.append(tokens.token())

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["token-1"] * 16 and len(endpoint.calls) == 1


def test_bearer_auth_sets_the_header_and_a_401_makes_the_provider_fetch_a_new_token() -> None:
    endpoint = FakeEndpoint()
    auth = BearerAuth(provider(endpoint))
    prepared = auth(requests.Request("GET", "http://nessie/api/v2/trees").prepare())
    assert prepared.headers["Authorization"] == "Bearer token-1"
    for hook in prepared.hooks["response"]:
        hook(response(200, {}))
    assert auth(requests.Request("GET", "http://nessie").prepare()).headers["Authorization"] == "Bearer token-1"
    for hook in prepared.hooks["response"]:
        hook(response(401, {}))
    assert auth(requests.Request("GET", "http://nessie").prepare()).headers["Authorization"] == "Bearer token-2"


@pytest.mark.parametrize(
    ("answer", "kind", "phrases"),
    [
        (response(401, {"error": "invalid_client"}), ConfigError,
         ["refused client 'client-1' (HTTP 401, invalid_client)", "WAP_NESSIE_CLIENT_ID"]),
        (response(400, {"error": "invalid_client", "error_description": f"bad secret {SECRET}"}), ConfigError,
         ["refused client 'client-1' (HTTP 400, invalid_client, bad secret ***)"]),
        (response(400, {"error": "unauthorized_client"}), ConfigError, ["client-credentials grant"]),
        (response(401, b"<html>nope</html>"), ConfigError, ["refused client 'client-1' (HTTP 401)"]),
        (response(400, {"error": "invalid_scope"}), ConfigError, ["scope 'nessie/catalog'", "WAP_NESSIE_SCOPE"]),
        (response(404, b"not found"), ConfigError, ["answered HTTP 404", "WAP_NESSIE_TOKEN_ENDPOINT"]),
        (response(200, {"token_type": "bearer"}), ConfigError, ["without a bearer access token"]),
        (response(200, {"access_token": "x", "token_type": "mac"}), ConfigError, ["without a bearer access token"]),
        (response(503, {"error": "temporarily_unavailable"}), CatalogUnavailableError,
         ["failed (HTTP 503, temporarily_unavailable)"]),
        (response(429, {}), CatalogUnavailableError, ["failed (HTTP 429)"]),
        (requests.ConnectionError(f"refused {CREDENTIALS.token_endpoint}"), CatalogUnavailableError,
         ["is unreachable (ConnectionError)", "WAP_NESSIE_TOKEN_ENDPOINT"]),
        (requests.Timeout("read timed out"), CatalogUnavailableError, ["is unreachable (Timeout)"]),
    ],
)
def test_failures_are_translated_and_never_show_the_secret(
    answer: requests.Response | Exception, kind: type[Exception], phrases: list[str], logs: Records
) -> None:
    tokens = provider(FakeEndpoint(answer))
    with pytest.raises(kind) as info:
        tokens.token()
    assert type(info.value) is kind
    for phrase in phrases:
        assert phrase in str(info.value)
    assert SECRET not in str(info.value) and SECRET not in logs.text
    assert CREDENTIALS.token_endpoint in str(info.value)


def test_after_a_failure_the_next_call_tries_again() -> None:
    endpoint = FakeEndpoint(response(503, {}))
    tokens = provider(endpoint)
    with pytest.raises(CatalogUnavailableError):
        tokens.token()
    assert tokens.token() == "token-1"


def test_no_repr_or_log_shows_the_secret_or_the_token(logs: Records) -> None:
    tokens = provider(FakeEndpoint())
    tokens.token()
    for shown in (repr(CREDENTIALS), repr(tokens), repr(BearerAuth(tokens)), str(CREDENTIALS)):
        assert SECRET not in shown and "client-1" in shown
    text = logs.text
    assert "OAuth2 access token obtained for client client-1" in text
    assert SECRET not in text and "token-1" not in text


def test_form_body_is_what_the_endpoint_parses() -> None:
    endpoint = FakeEndpoint()
    provider(endpoint).token()
    body = requests.Request("POST", "http://x", data=endpoint.calls[0]["data"]).prepare().body
    assert parse_qs(str(body)) == {"grant_type": ["client_credentials"], "scope": ["nessie/catalog"]}


def test_subject_of_reads_the_sub_claim_of_a_jwt() -> None:
    import base64
    import json

    from wap_ingest.adapters.catalog.oauth2 import subject_of

    def part(value: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    assert subject_of(f"{part({'alg': 'RS256'})}.{part({'sub': 'client-7'})}.sig") == "client-7"
    assert subject_of(f"{part({'alg': 'RS256'})}.{part({'scope': 'x'})}.sig") is None
    assert subject_of("opaque-token") is None
