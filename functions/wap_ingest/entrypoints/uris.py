"""The command line's `s3://bucket/key` arguments."""

from __future__ import annotations

from urllib.parse import urlparse

from wap_ingest.core.errors import ConfigError


def parse_s3_uri(uri: str) -> tuple[str, str]:
    parsed = urlparse(uri)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ConfigError(f"{uri!r} is not an s3:// URI. Fix: use s3://bucket/key or s3://bucket/prefix/.")
    return parsed.netloc, parsed.path.lstrip("/")
