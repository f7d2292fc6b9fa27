"""S3ObjectStore: the ObjectStore port on S3 (or any S3 API such as the local moto server).

Also downloads a source object version to local scratch for the engine: the Lambda path reads
files from /tmp, which avoids the Hadoop S3A jars in the image (EMR reads s3:// natively). An object of more than
one part is fetched as byte ranges of that version in parallel (one GET stream is bound by one connection's rate).
For a file the engine registers as it is (a Parquet file that fits its table), the object's tail (its footer) is
read by one ranged GET, and the object is copied server-side into the table's location: exactly the announced
version, never downloaded and uploaded again (in parts, in parallel, above S3's 5 GiB limit of one CopyObject).
The tails of source versions it read are kept a little while (adapters/aws/s3_tails.py): weighing a Parquet file,
judging its footer and downloading a file smaller than its tail are one GET of it, not three.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from wap_ingest.adapters import Verdict
from wap_ingest.adapters.aws.errors import S3, Failure, aws_error, failure_of
from wap_ingest.adapters.aws.s3_tails import Tails
from wap_ingest.adapters.formats import weigh
from wap_ingest.core.errors import (
    EmptySourceError,
    OutOfTimeError,
    SourceNotFoundError,
    UnreadableSourceError,
    WapError,
)
from wap_ingest.core.models import FileFormat, SourceObject
from wap_ingest.core.ports import ObjectStore
from wap_ingest.core.weights import Weight

# What a failure means when the object is a source (a producer's file), where the table's default does not apply
SOURCE: dict[Failure, Verdict] = {
    Failure.MISSING: Verdict(SourceNotFoundError, "no such object (deleted or renamed since the event?)",
                             "upload it again"),
    Failure.NO_BUCKET: Verdict(SourceNotFoundError, "the bucket does not exist", "check the bucket name"),
    Failure.PRECONDITION: Verdict(SourceNotFoundError, "the object changed since it was announced",
                                  "none needed: the newer version has its own event"),
    Failure.ARCHIVED: Verdict(UnreadableSourceError, "the object is in an archive storage class (Glacier, Deep "
                              "Archive) and cannot be read", "restore it, or upload it again in a readable class"),
}
# ... when it is copied (it was just headed: a missing bucket is the target, the lake bucket, a setting)
COPIED: dict[Failure, Verdict] = {failure: verdict for failure, verdict in SOURCE.items()
                                  if failure is not Failure.NO_BUCKET}
# ... and when it is a manifest read as a range (S3 answers 416 for a range of an empty object)
MANIFEST = SOURCE | {Failure.UNSATISFIABLE_RANGE: Verdict(EmptySourceError, "the manifest is empty",
                                                          "upload it again with its list of files")}
# ... and when its tail is read (S3 answers 416 for a suffix range of an empty object)
TAIL = SOURCE | {Failure.UNSATISFIABLE_RANGE: Verdict(EmptySourceError, "the object is empty",
                                                      "upload the file with its data")}
PART_BYTES = 8 * 1024 * 1024  # the smallest ranged GET of a parallel download (an object of one part: one plain GET)
MAX_PART_BYTES = 64 * 1024 * 1024  # the largest: above PARALLEL_PARTS of these, the parts come in several waves
PARALLEL_PARTS = 8  # ranged GETs in flight at once
STREAM_BYTES = 1024 * 1024  # what a part's reader holds at once: it writes each chunk at its offset as it comes
COPY_MAX_BYTES = 5 * 1024**3  # S3's limit for one CopyObject; larger objects are copied in parts (UploadPartCopy)
COPY_PART_BYTES = 512 * 1024**2  # one part of a multipart copy (S3: at least 5 MiB, at most 10,000 parts)


def s3_client_for(region: str, endpoint_url: str | None, timeout: float) -> Any:
    """With an S3-compatible endpoint (the local stack's moto), response checksums are validated only when the
    operation requires it: moto answers a full GET of a multipart-uploaded object with the checksum of one part,
    which boto3's default validation rejects (FlexibleChecksumError), so files uploaded in parts (over 8 MB with
    `aws s3 cp`/`upload_file`) could not be ingested locally. Against AWS the defaults apply."""
    compatible: dict[str, Any] = {"response_checksum_validation": "when_required"} if endpoint_url else {}
    config = Config(
        region_name=region,
        connect_timeout=min(timeout, 10.0),
        read_timeout=timeout,
        retries={"mode": "standard", "max_attempts": 3},
        s3={"addressing_style": "path"} if endpoint_url else {},
        **compatible,
    )
    return boto3.client("s3", endpoint_url=endpoint_url, config=config)


def _exact_version(source: SourceObject) -> dict[str, str]:
    """GetObject's arguments for exactly the headed version: its version id, else a guard on its ETag."""
    if source.version_id:
        return {"VersionId": source.version_id}
    return {"IfMatch": source.etag} if source.etag else {}


def _size_of(answer: Mapping[str, Any], read: int) -> int:
    """The object's size from a ranged GET's Content-Range (`bytes 0-9/1234`), else the bytes read (a whole one)."""
    total = str(answer.get("ContentRange") or "").rpartition("/")[2]
    return int(total) if total.isascii() and total.isdigit() else read


def _staged_name(source: SourceObject) -> str:
    """`<digest of the version>-<random><suffix>`: concurrent runs never share a staged file."""
    suffix = "".join(Path(source.key).suffixes[-2:]) or ".bin"
    digest = hashlib.sha256(source.identity.encode()).hexdigest()[:16]
    return f"{digest}-{uuid.uuid4().hex[:8]}{suffix}"


class S3ObjectStore(ObjectStore):
    def __init__(self, client: Any) -> None:
        self._s3 = client
        self._tails = Tails()  # the source tails read last, by exact version

    @property
    def client(self) -> Any:
        return self._s3

    def head(self, bucket: str, key: str, version_id: str | None = None) -> SourceObject:
        uri = f"s3://{bucket}/{key}"
        try:
            meta = self._s3.head_object(Bucket=bucket, Key=key, **({"VersionId": version_id} if version_id else {}))
        except (ClientError, BotoCoreError) as exc:
            special = SOURCE if version_id is None else SOURCE | {Failure.MISSING: Verdict(
                SourceNotFoundError, f"version {version_id} no longer exists (deleted since it was announced); "
                "nothing was read", "upload the file again if it is still wanted (a newer version has its own "
                "event)")}
            raise _source_error(exc, "reading the metadata of", uri, special) from exc
        return SourceObject(
            bucket=bucket,
            key=key,
            size=int(meta.get("ContentLength", 0)),
            etag=str(meta.get("ETag", "")).strip('"') or None,
            version_id=_version(meta.get("VersionId")),
        )

    def weigh(self, source: SourceObject, fmt: FileFormat) -> Weight:
        def read(byte_range: str) -> bytes:
            answer = self._s3.get_object(Bucket=source.bucket, Key=source.key, Range=byte_range,
                                         **_exact_version(source))
            body = bytes(answer["Body"].read())
            size = _size_of(answer, len(body))
            if byte_range.startswith("bytes=-") or len(body) == size:  # a tail (the whole object is one too)
                self._tails.keep(source, body, size)
            return body

        try:
            return weigh(source, fmt, read)
        except (ClientError, BotoCoreError) as exc:
            raise _source_error(exc, "weighing", source.uri) from exc

    def read_bytes(self, source: SourceObject, max_bytes: int) -> bytes:
        try:
            answer = self._s3.get_object(Bucket=source.bucket, Key=source.key, Range=f"bytes=0-{max_bytes}",
                                         **_exact_version(source))
            body = bytes(answer["Body"].read())
        except (ClientError, BotoCoreError) as exc:
            raise _source_error(exc, "reading the manifest", source.uri, MANIFEST) from exc
        if len(body) > max_bytes:
            raise UnreadableSourceError(f"{source.uri}: larger than {max_bytes} bytes, too large for a manifest. Fix: "
                                        f"list fewer files per load, and upload it again.")
        return body

    def list_objects(self, bucket: str, prefix: str) -> list[SourceObject]:
        uri = f"s3://{bucket}/{prefix}"
        found: list[SourceObject] = []
        try:
            for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
                for item in page.get("Contents", []):
                    if item["Key"].endswith("/"):
                        continue
                    found.append(
                        SourceObject(
                            bucket=bucket, key=item["Key"], size=int(item.get("Size", 0)),
                            etag=str(item.get("ETag", "")).strip('"') or None,
                        )
                    )
        except (ClientError, BotoCoreError) as exc:
            raise _source_error(exc, "listing", uri) from exc
        return sorted(found, key=lambda o: o.key)

    def download(self, source: SourceObject, directory: Path, stop: Callable[[], bool] = lambda: False) -> Path:
        """Fetch exactly the version that was headed (by version id, else guarded by ETag); `stop` is asked before
        each ranged part (the invocation's deadline: an OutOfTimeError, and nothing is left on disk)."""
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / _staged_name(source)
        whole = self._tails.whole(source)
        if whole is not None:  # read whole already, as its tail
            target.write_bytes(whole)
            return target
        try:
            if source.size and source.size > PART_BYTES:
                self._download_ranges(source, target, source.size, stop)
            else:
                body = self._s3.get_object(Bucket=source.bucket, Key=source.key, **_exact_version(source))["Body"]
                with target.open("wb") as out:
                    shutil.copyfileobj(body, out, length=PART_BYTES)
        except (ClientError, BotoCoreError) as exc:
            target.unlink(missing_ok=True)
            raise _source_error(exc, "downloading", source.uri) from exc
        return target

    def _download_ranges(self, source: SourceObject, target: Path, size: int, stop: Callable[[], bool]) -> None:
        """`size` bytes of exactly the headed version, as ranges fetched in parallel, each written at its offset; a
        part shorter than asked (the object changed under an unversioned key) fails the download. The parts are as
        large as one wave of PARALLEL_PARTS requests needs (between PART_BYTES and MAX_PART_BYTES): every request
        in flight at once, and no more of them than that takes (fewer, larger parts: S3 bills and answers each
        request). The local stack's moto serves a range at the range's cost, as S3 does (wap_stack/moto_ranges.py;
        moto alone reads the whole object for each: a 97 MiB file took 0.6 s in 8 parts there, 0.09 s now, measured).
        Each part is streamed to its offset in chunks of STREAM_BYTES, so memory holds at most a chunk per part in
        flight, whatever the part's size."""
        exact = _exact_version(source)
        part = part_bytes(size)

        def fetch(start: int) -> None:
            if stop():
                raise OutOfTimeError(f"{source.uri}: staging stopped at byte {start} of {size}, the invocation is "
                                     f"nearly out of time; back to the queue.")
            end = min(start + part, size) - 1
            body = self._s3.get_object(Bucket=source.bucket, Key=source.key, Range=f"bytes={start}-{end}",
                                       **exact)["Body"]
            offset = start
            while chunk := body.read(STREAM_BYTES):  # streamed: one chunk per part in memory, never the whole part
                os.pwrite(descriptor, chunk, offset)
                offset += len(chunk)
                if offset > end + 1:
                    break
            if offset != end + 1:
                raise UnreadableSourceError(f"{source.uri}: bytes {start}-{end} came back as {offset - start} bytes "
                                            f"(the object changed while it was read?). Fix: upload it again.")

        descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(descriptor, size)
            with ThreadPoolExecutor(max_workers=PARALLEL_PARTS, thread_name_prefix="s3-range") as pool:
                list(pool.map(fetch, range(0, size, part)))  # the first failure is raised here
        except BaseException:
            os.close(descriptor)
            target.unlink(missing_ok=True)
            raise
        os.close(descriptor)

    def copy_to(self, source: SourceObject, bucket: str, prefix: str = "wap-staging") -> str:
        """A server-side copy of exactly the headed version under `bucket/prefix`, for an engine that reads S3
        itself (the EMR job's executors): returns its s3:// URI. Removed with `remove` after the append."""
        uri = f"s3://{bucket}/{prefix}/{_staged_name(source)}"
        self.copy_into(source, uri)
        return uri

    def copy_into(self, source: SourceObject, uri: str) -> None:
        """A server-side copy of exactly the headed version (its version id, else guarded by its ETag) to `uri`
        (s3://bucket/key, e.g. a data file's place in a table's location): one CopyObject, or parts copied in
        parallel above COPY_MAX_BYTES. Nothing passes through this process."""
        bucket, _, key = uri.split("://", 1)[-1].partition("/")
        copy: dict[str, str] = {"Bucket": source.bucket, "Key": source.key}
        extra: dict[str, str] = {}
        if source.version_id:
            copy["VersionId"] = source.version_id
        elif source.etag:
            extra["CopySourceIfMatch"] = source.etag
        try:
            if source.size is not None and source.size > COPY_MAX_BYTES:
                self._copy_parts(bucket, key, copy, extra, source.size)
            else:
                self._s3.copy_object(Bucket=bucket, Key=key, CopySource=copy, **extra)
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service=S3, doing=f"copying to s3://{bucket}/{key} the object", resource=source.uri,
                            setting="LAKE_BUCKET", special=COPIED) from exc

    def _copy_parts(self, bucket: str, key: str, copy: Mapping[str, str], extra: Mapping[str, str],
                    size: int) -> None:
        """A multipart copy: ranges of the source version copied as parts in parallel, then completed (aborted on
        any failure, so no incomplete upload is left behind)."""
        part = max(COPY_PART_BYTES, -(-size // 10_000))
        upload = self._s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]

        def copy_part(number: int) -> dict[str, Any]:
            start = (number - 1) * part
            answer = self._s3.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload, PartNumber=number,
                                               CopySource=dict(copy), CopySourceRange=f"bytes={start}-"
                                               f"{min(start + part, size) - 1}", **extra)
            return {"PartNumber": number, "ETag": answer["CopyPartResult"]["ETag"]}

        try:
            with ThreadPoolExecutor(max_workers=PARALLEL_PARTS, thread_name_prefix="s3-copy") as pool:
                parts = list(pool.map(copy_part, range(1, -(-size // part) + 1)))
            self._s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                               MultipartUpload={"Parts": parts})
        except BaseException:
            with contextlib.suppress(ClientError, BotoCoreError):
                self._s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
            raise

    def read_tail(self, source: SourceObject, max_bytes: int) -> tuple[bytes, int]:
        """The last `max_bytes` bytes of exactly the headed version (all of it when smaller), and the object's size:
        one ranged GET (a Parquet file's footer), none when a tail of that version read before has them. Raises
        SourceNotFoundError, EmptySourceError for an empty object."""
        kept = self._tails.tail(source, max_bytes)
        if kept is not None:
            return kept
        try:
            answer = self._s3.get_object(Bucket=source.bucket, Key=source.key, Range=f"bytes=-{max_bytes}",
                                         **_exact_version(source))
            body = bytes(answer["Body"].read())
        except (ClientError, BotoCoreError) as exc:
            raise _source_error(exc, "reading the footer of", source.uri, TAIL) from exc
        size = _size_of(answer, len(body))
        if size == 0:  # S3 answers 416 for a range of an empty object; some S3 APIs the whole (empty) object
            raise EmptySourceError(f"{source.uri}: the object is empty (0 bytes); nothing to ingest. Fix: upload the "
                                   f"file with its data.")
        self._tails.keep(source, body, size)
        return body, size

    def write(self, uri: str, data: bytes, *, overwrite: bool) -> None:
        """`data` as the object at `uri` (s3://bucket/key), in one PutObject; with `overwrite` False, only if no
        object is there yet (a conditional put: FileExistsError when one is). A table commit's small files (a
        manifest, a manifest list, a metadata file) go this way (adapters/catalog/lake_io.py)."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        try:
            self._s3.put_object(Bucket=bucket, Key=key, Body=data, **({} if overwrite else {"IfNoneMatch": "*"}))
        except (ClientError, BotoCoreError) as exc:
            if not overwrite and failure_of(exc) is Failure.PRECONDITION:
                raise FileExistsError(f"{uri} exists already") from exc
            raise aws_error(exc, service=S3, doing="writing a table's metadata to", resource=uri,
                            setting="LAKE_BUCKET") from exc

    def remove(self, uri: Path | str) -> None:
        """Delete a staged copy (an s3:// URI from `copy_to`); quietly, the lake's lifecycle rule is the backstop."""
        text = str(uri)
        if text.startswith("s3://"):
            bucket, _, key = text.removeprefix("s3://").partition("/")
            with contextlib.suppress(ClientError, BotoCoreError):
                self._s3.delete_object(Bucket=bucket, Key=key)


def part_bytes(size: int) -> int:
    """The part size of a parallel download of `size` bytes: one wave of PARALLEL_PARTS, within the bounds."""
    return min(MAX_PART_BYTES, max(PART_BYTES, -(-size // PARALLEL_PARTS)))


def _source_error(exc: ClientError | BotoCoreError, doing: str, uri: str,
                  special: Mapping[Failure, Verdict] = SOURCE) -> WapError:
    return aws_error(exc, service=S3, doing=doing, resource=uri, special=special)


def _version(value: object) -> str | None:
    text = str(value) if value else ""
    return None if text in ("", "null") else text
