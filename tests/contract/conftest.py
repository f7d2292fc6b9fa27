"""Handles on the real stack for the contract suites: raw AWS clients on its moto server, fresh buckets."""

from __future__ import annotations

import uuid
from typing import Any

import pytest


@pytest.fixture(scope="session")
def stack_s3(stack_env: dict[str, str]) -> Any:
    """A boto3 S3 client on the stack's moto server, over HTTP, as the service builds it."""
    from wap_ingest.adapters.aws.s3 import s3_client_for

    return s3_client_for(stack_env["AWS_REGION"], stack_env["AWS_ENDPOINT_URL"], 10.0)


@pytest.fixture
def fresh_bucket(stack_s3: Any) -> str:
    """A new, empty bucket per test: listings see only what the test wrote."""
    name = f"contract-{uuid.uuid4().hex[:12]}"
    stack_s3.create_bucket(Bucket=name)
    return name
