"""The Nessie image's entry point, run for real: bash runs docker/nessie/entrypoint.sh, which runs FetchParameter
(compiled here with this machine's JDK, as the image's JDK stage does) against moto server's SSM over HTTP, then
execs a command that stands in for Nessie and records a hash of the password it received.

The database password must arrive in that command's environment, and nowhere else: not on stdout or stderr, and
the access key must be gone from the command's environment. A fake SSM endpoint checks FetchParameter's
Signature Version 4 against botocore's signer (moto does not check signatures)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto.server import ThreadedMotoServer

from tests.paths import ROOT
from wap_stack.processes import free_ports

IMAGE_DIR = ROOT / "docker" / "nessie"
REGION = "us-east-1"
PARAMETER = "/entry/nessie/db-password"
# every kind of character a JSON answer escapes, plus shell metacharacters
PASSWORD = 'pw-"quoted"\\back/slash $HOME `id` \u00e9\u2603 tab\tend'
RECORDER = (
    "import hashlib, json, os, sys; "
    "password = os.environ.get('QUARKUS_DATASOURCE_POSTGRESQL_PASSWORD', ''); "
    "json.dump({'sha256': hashlib.sha256(password.encode()).hexdigest(), 'argv': sys.argv[1:], "
    "'leftover': sorted(k for k in os.environ if k.startswith('WAP_SECRETS_'))}, open(sys.argv[1], 'w'))"
)


@pytest.fixture(scope="module")
def fetcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """FetchParameter.class, compiled from the file the image compiles."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail("javac is missing: the entry point's test compiles docker/nessie/FetchParameter.java (JDK 17+)")
    classes = tmp_path_factory.mktemp("fetcher")
    subprocess.run([javac, "--release", "17", "-d", str(classes), str(IMAGE_DIR / "FetchParameter.java")],
                   check=True, capture_output=True, timeout=120)
    return classes


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    [port] = free_ports(1)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@dataclass
class Started:
    code: int
    stdout: str
    stderr: str
    record: dict[str, Any] | None


def start(fetcher: Path, tmp_path: Path, endpoint: str, key: tuple[str, str], **extra: str) -> Started:
    """The entry point with the image's environment, the exec target replaced by the recorder."""
    record = tmp_path / "record.json"
    env = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8",
        "AWS_REGION": REGION, "WAP_DB_PASSWORD_PARAMETER": PARAMETER,
        "WAP_SECRETS_ACCESS_KEY_ID": key[0], "WAP_SECRETS_SECRET_ACCESS_KEY": key[1],
        "WAP_SSM_ENDPOINT": endpoint, "WAP_FETCHER_CLASSPATH": str(fetcher),
    } | extra
    env = {k: v for k, v in env.items() if v}
    result = subprocess.run(
        ["bash", str(IMAGE_DIR / "entrypoint.sh"), sys.executable, "-c", RECORDER, str(record)],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    recorded = json.loads(record.read_text()) if record.exists() else None
    return Started(result.returncode, result.stdout, result.stderr, recorded)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def reader_key(moto_url: str) -> tuple[str, str]:
    """An IAM user's access key in moto, as setup_aws.py makes for the container."""
    iam = boto3.client("iam", endpoint_url=moto_url, region_name=REGION,
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    iam.create_user(UserName="entry-nessie-secrets")
    key = iam.create_access_key(UserName="entry-nessie-secrets")["AccessKey"]
    return str(key["AccessKeyId"]), str(key["SecretAccessKey"])


def ssm(moto_url: str) -> Any:
    return boto3.client("ssm", endpoint_url=moto_url, region_name=REGION,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def test_the_password_reaches_nessie_only(
    fetcher: Path, moto_url: str, reader_key: tuple[str, str], tmp_path: Path
) -> None:
    ssm(moto_url).put_parameter(Name=PARAMETER, Value=PASSWORD, Type="SecureString", Overwrite=True)

    started = start(fetcher, tmp_path, moto_url, reader_key)

    assert started.code == 0, started.stderr
    assert started.record is not None
    assert started.record["sha256"] == _sha(PASSWORD)
    assert started.record["leftover"] == []  # the access key is not handed to Nessie
    assert started.record["argv"] == [str(tmp_path / "record.json")]  # the command's own arguments, untouched
    assert f"read the database password from SSM parameter {PARAMETER}" in started.stderr
    for secret in (PASSWORD, "pw-", reader_key[1]):
        assert secret not in started.stdout and secret not in started.stderr


def test_a_missing_parameter_stops_the_start_and_names_the_parameter(
    fetcher: Path, moto_url: str, reader_key: tuple[str, str], tmp_path: Path
) -> None:
    started = start(fetcher, tmp_path, moto_url, reader_key, WAP_DB_PASSWORD_PARAMETER="/entry/nessie/missing")

    assert started.code == 1
    assert started.record is None  # Nessie was not started
    assert "ParameterNotFound" in started.stderr
    assert "could not read the database password from SSM parameter /entry/nessie/missing" in started.stderr
    assert "Nessie was not started" in started.stderr


def test_unreachable_ssm_fails_fast_with_the_parameter_named(fetcher: Path, tmp_path: Path) -> None:
    [port] = free_ports(1)  # nothing listens there

    started = start(fetcher, tmp_path, f"http://127.0.0.1:{port}", ("AKIAEXAMPLE", "secret-key-not-printed"))

    assert started.code == 1
    assert started.record is None
    assert f"cannot read SSM parameter {PARAMETER}" in started.stderr
    assert "secret-key-not-printed" not in started.stderr + started.stdout


def test_without_the_parameter_name_it_refuses_to_start(fetcher: Path, tmp_path: Path) -> None:
    started = start(fetcher, tmp_path, "http://127.0.0.1:9", ("AKIAEXAMPLE", "x"), WAP_DB_PASSWORD_PARAMETER="")

    assert started.code == 1
    assert started.record is None
    assert "WAP_DB_PASSWORD_PARAMETER is not set" in started.stderr


# --- the signature, checked against botocore's SigV4 signer ------------------------------------------------

class SigningCheck(BaseHTTPRequestHandler):
    """A stand-in SSM endpoint that recomputes the request's signature with botocore and answers GetParameter."""

    secret = "fake-secret-access-key/with+chars"
    seen: list[dict[str, Any]] = []  # noqa: RUF012 (one server per test)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        authorization = self.headers["Authorization"]
        match = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                             r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", authorization)
        assert match is not None, authorization
        key_id, _, region, service, signed_headers, signature = match.groups()
        request = AWSRequest(method="POST", url=f"http://{self.headers['Host']}/", data=body,
                             headers={name: self.headers[name] for name in signed_headers.split(";")})
        request.context["timestamp"] = self.headers["X-Amz-Date"]
        signer = SigV4Auth(Credentials(key_id, self.secret), service, region)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        self.seen.append({"signed_headers": signed_headers, "service": service, "region": region,
                          "valid": expected == signature, "target": self.headers["X-Amz-Target"],
                          "body": json.loads(body)})
        answer = json.dumps({"Parameter": {"Name": PARAMETER, "Type": "SecureString", "Value": PASSWORD,
                                           "Version": 1, "ARN": "arn:aws:ssm:us-east-1:1:parameter/x"}})
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.end_headers()
        self.wfile.write(answer.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_the_request_is_signed_as_botocore_signs_it(fetcher: Path, tmp_path: Path) -> None:
    SigningCheck.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SigningCheck)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        started = start(fetcher, tmp_path, endpoint, ("AKIAFETCHTEST", SigningCheck.secret))
    finally:
        server.shutdown()
        server.server_close()

    assert started.code == 0, started.stderr
    assert started.record is not None and started.record["sha256"] == _sha(PASSWORD)
    [seen] = SigningCheck.seen
    assert seen["valid"], seen
    assert (seen["service"], seen["region"], seen["target"]) == ("ssm", REGION, "AmazonSSM.GetParameter")
    assert seen["signed_headers"] == "content-type;host;x-amz-date;x-amz-target"
    assert seen["body"] == {"Name": PARAMETER, "WithDecryption": True}
