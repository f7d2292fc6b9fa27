"""adapters/catalog/http.py `endpoint_session`: the environment's proxy and CA bundle for the endpoint, read once (not
on every request), as requests itself would read them."""

from __future__ import annotations

import pytest
import requests

from wap_ingest.adapters.catalog.http import endpoint_session

URL = "http://127.0.0.1:19120/api"


@pytest.mark.parametrize("no_proxy", ["", "127.0.0.1,localhost"])
def test_the_settings_are_those_requests_reads_for_the_endpoint(monkeypatch: pytest.MonkeyPatch, no_proxy: str) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/bundle.pem")
    session = endpoint_session(URL)
    expected = requests.Session().merge_environment_settings(URL, {}, None, None, None)
    assert session.trust_env is False
    assert {k: v for k, v in session.proxies.items() if k == "http"} == {
        k: v for k, v in expected["proxies"].items() if k == "http"}
    assert session.verify == expected["verify"] == "/etc/ssl/bundle.pem"


def test_the_environment_is_not_read_again_per_request(monkeypatch: pytest.MonkeyPatch) -> None:
    session = endpoint_session(URL)
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert session.merge_environment_settings(URL, {}, None, None, None)["proxies"] == dict(session.proxies)
