"""Build the Spark driver's class-data sharing (AppCDS) archive: the classes a cold start loads, pre-parsed and
pre-verified, mapped by the next JVM instead of read from ~270 jars (adapters/engine/session.py uses it).

    python scripts/build_cds_archive.py --jars .cache/jars/spark     # `make cds` (a part of `make setup`)
    python scripts/build_cds_archive.py --jars /opt/wap/jars         # the Lambda image's build

The archive is named by a key of the java and the classpath (adapters/spark_session.archive_key): nothing is done
when the archive for the current key exists, and a changed JVM or jar gets a new one (older archives in the folder
are deleted). It is made by a training run: a local SparkSession with the service's own settings that reads small
Parquet, CSV and JSON files, appends them to an Iceberg table (a local catalog; its data files through S3FileIO and
the AWS SDK to a minimal in-process S3), reads its metadata and runs the audits' kind of aggregates,
and touches the Nessie catalog (no server: its client's classes load, the call fails); the driver JVM dumps what it
loaded at exit (-XX:ArchiveClassesAtExit). The
archive is checked (`java -Xshare:on`, which refuses an archive it cannot use) before it takes its place.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from wap_ingest.adapters.engine.session import (
    SparkSettings,
    archive_complete,
    archive_path_for,
    spark_conf_for,
    spark_java,
    spark_session_for,
    startup_java_options,
    with_java_options,
)

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: refused at once, so the catalog and S3 calls fail fast


class ObjectStore(BaseHTTPRequestHandler):
    """Just enough of S3 (path style, in memory) for Iceberg's S3FileIO to write and read a table through the AWS
    SDK as it does against S3 (PUT, GET with ranges, HEAD, DELETE), so the training loads that path's classes."""

    objects: ClassVar[dict[str, bytes]] = {}

    def do_PUT(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if "aws-chunked" in self.headers.get("Content-Encoding", "") or self.headers.get(
                "x-amz-content-sha256", "").startswith("STREAMING"):
            body = _dechunk(body)
        self.objects[self.path.split("?")[0]] = body
        self._answer(200, b"", {"ETag": _etag(body)})

    def do_GET(self) -> None:
        data = self.objects.get(self.path.split("?")[0])
        if data is None:
            self._answer(404, b"<Error><Code>NoSuchKey</Code></Error>", {})
            return
        ranged = re.match(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged:
            end = int(ranged.group(2)) + 1 if ranged.group(2) else len(data)
            self._answer(206, data[int(ranged.group(1)):end], {"ETag": _etag(data)})
        else:
            self._answer(200, data, {"ETag": _etag(data)})

    def do_HEAD(self) -> None:
        data = self.objects.get(self.path.split("?")[0])
        self._answer(200 if data is not None else 404, b"", {"Content-Length": str(len(data or b"")),
                                                              "ETag": _etag(data or b"")}, body=False)

    def do_DELETE(self) -> None:
        self.objects.pop(self.path.split("?")[0], None)
        self._answer(204, b"", {})

    def _answer(self, status: int, data: bytes, headers: dict[str, str], body: bool = True) -> None:
        self.send_response(status)
        for name, value in ({"Content-Length": str(len(data)), "Last-Modified": "Mon, 23 Nov 2026 00:00:00 GMT"}
                            | headers).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def _etag(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'  # the SDK checks a PUT's ETag against the MD5 of what it sent


def _dechunk(body: bytes) -> bytes:
    """The payload of an aws-chunked body (`<hex size>;chunk-signature=...\\r\\n<data>\\r\\n`... up to a 0 chunk)."""
    out, at = bytearray(), 0
    while at < len(body):
        line_end = body.index(b"\r\n", at)
        size = int(body[at:line_end].split(b";")[0], 16)
        if size == 0:
            break
        out += body[line_end + 2:line_end + 2 + size]
        at = line_end + 2 + size + 2
    return bytes(out)


def train(spark: Any, work: Path) -> None:
    """What a first file makes the driver load, without a catalog server."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    rows = 1000
    table = pa.table({"my_col_0": pa.array(range(rows), pa.int32()),
                      "my_col_1": pa.array([f"v{i}" if i % 7 else None for i in range(rows)], pa.string()),
                      "my_col_2": pa.array([i / 2 for i in range(rows)], pa.float64())})
    pq.write_table(table, work / "in.parquet")
    (work / "in.csv").write_text("my_col_0,my_col_1,my_col_2\n" + "".join(f"{i},v{i},{i / 2}\n" for i in range(50)))
    (work / "in.json").write_text("".join(json.dumps({"my_col_0": i, "my_col_1": f"v{i}", "my_col_2": i / 2}) + "\n"
                                          for i in range(50)))
    frame = spark.read.parquet(str(work / "in.parquet"))
    frame.limit(0).writeTo("train.wap.t").tableProperty("format-version", "2").tableProperty(
        "write.data.path", "s3://train/data").create()  # data files through S3FileIO, metadata on local disk
    frame.writeTo("train.wap.t").option("snapshot-property.wap.source.identity", "train").append()
    for fmt in ("csv", "json"):
        reader = spark.read.format(fmt).option("header", "true").option("inferSchema", "true")
        other = reader.load(str(work / f"in.{fmt}"))
        other.select(*(F.col(c).cast(t) for c, t in (("my_col_0", "int"), ("my_col_1", "string"),
                                                       ("my_col_2", "double")))).writeTo("train.wap.t").append()
    spark.table("train.wap.t.snapshots").select("snapshot_id", "parent_id", "summary").collect()
    snapshot = spark.table("train.wap.t.snapshots").orderBy("committed_at").first()["snapshot_id"]
    new_rows = spark.read.option("versionAsOf", snapshot).table("train.wap.t")  # as writer.AS_OF
    checks = [F.count(F.lit(1)).alias("rows")]
    checks += [F.sum(F.col(c).isNull().cast("int")).alias(f"{c}_nulls") for c in new_rows.columns]
    checks += [F.min("my_col_2"), F.max("my_col_2"), F.countDistinct("my_col_0")]
    new_rows.agg(*checks).collect()
    good = new_rows.where(F.col("my_col_1").isNotNull())
    good.groupBy("my_col_0").count().orderBy("count").limit(5).collect()
    spark._jsparkSession.sessionState().sqlParser().parsePlan(
        "SELECT count(*) FROM train.wap.t WHERE my_col_2 > 1")
    register(spark, work)
    with contextlib.suppress(Exception):  # NessieCatalog's client: its classes load, the server is not there
        spark.sql("SHOW NAMESPACES IN nessie").collect()
    jvm = spark.sparkContext._jvm
    with contextlib.suppress(Exception):  # S3FileIO and the AWS SDK client, the same way
        io = jvm.org.apache.iceberg.aws.s3.S3FileIO()
        io.initialize({"s3.endpoint": UNREACHABLE, "s3.path-style-access": "true", "client.region": "us-east-1",
                       "s3.access-key-id": "training", "s3.secret-access-key": "training"})
        io.newInputFile("s3://train/warehouse/x.parquet").exists()


class TrainingCopies:
    """The register path's object store (adapters.spark_register.LakeCopies) on the in-process S3."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_tail(self, source: Any, max_bytes: int) -> tuple[bytes, int]:
        return self.data[-max_bytes:], len(self.data)

    def copy_into(self, source: Any, uri: str) -> None:
        ObjectStore.objects["/" + uri.removeprefix("s3://")] = self.data

    def remove(self, uri: str) -> None:
        ObjectStore.objects.pop("/" + uri.removeprefix("s3://"), None)


def register(spark: Any, work: Path) -> None:
    """What the register path still asks of the JVM (adapters/engine/register.py): a new table's schema from Spark's
    reading of the file's footer. Its append is committed from Python (adapters/catalog/tables.py): nothing to train."""
    from wap_ingest.adapters.engine import register as spark_register
    from wap_ingest.core.models import SourceObject

    data = (work / "in.parquet").read_bytes()
    footer, _ = spark_register.read_footer(TrainingCopies(data), SourceObject("train", "in.parquet"))
    spark_register._spark_schema(spark, footer.raw)


def build(jars: list[Path], target: Path) -> None:
    """A training run whose JVM dumps the archive at `target` (through a temporary file, checked first)."""
    from pyspark import SparkContext

    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tempfile.TemporaryDirectory(prefix="wap-cds-") as folder:
        work = Path(folder)
        settings = SparkSettings(nessie_uri=f"{UNREACHABLE}/api/v2", main_branch="main", warehouse="s3://train/wh",
                                 region="us-east-1", s3_endpoint=UNREACHABLE, http_timeout=2.0, driver_memory="1g",
                                 work_dir=work, jars=tuple(jars))
        store = ThreadingHTTPServer(("127.0.0.1", 0), ObjectStore)
        threading.Thread(target=store.serve_forever, daemon=True).start()
        train_catalog = "spark.sql.catalog.train"
        conf = spark_conf_for(settings) | {  # the service's settings, and a catalog that needs no server
            train_catalog: "org.apache.iceberg.spark.SparkCatalog",
            f"{train_catalog}.type": "hadoop",
            f"{train_catalog}.warehouse": (work / "warehouse").as_uri(),
            f"{train_catalog}.io-impl": "org.apache.iceberg.io.ResolvingFileIO",  # s3:// to S3FileIO
            f"{train_catalog}.s3.endpoint": f"http://127.0.0.1:{store.server_port}",
            f"{train_catalog}.s3.path-style-access": "true",
            f"{train_catalog}.s3.access-key-id": "training",
            f"{train_catalog}.s3.secret-access-key": "training",
            f"{train_catalog}.client.region": "us-east-1",
        }
        # -Xlog:cds=off: the dump lists every class it skips (not linked yet, from a signed jar...), thousands.
        conf = with_java_options(conf, [f"-XX:ArchiveClassesAtExit={partial}", "-Xlog:cds=off"])
        spark = spark_session_for(conf, work_dir=work, tuning=False)
        try:
            train(spark, work)
            classpath = spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path")
        finally:
            store.shutdown()
            gateway = SparkContext._gateway
            spark.stop()
            if gateway is not None and gateway.proc is not None:  # the JVM writes the archive as it exits
                gateway.proc.stdin.close()
                gateway.proc.wait(timeout=900)
    try:
        check(partial, classpath)
        # The record first, the archive last: an archive is used only beside a record of its size.
        target.with_suffix(".json").write_text(json.dumps({
            "archive": str(target), "bytes": partial.stat().st_size, "classpath": classpath,
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def check(archive: Path, classpath: str) -> None:
    """`java -Xshare:on` refuses (exit status 1) an archive it cannot map or whose classpath does not match; it runs
    with the driver's own start-up options (its JIT and GC flags), as the service maps it."""
    java = spark_java(os.environ)
    if not archive.is_file() or java is None:
        raise SystemExit(f"the training run left no archive at {archive} (java: {java})")
    done = subprocess.run([str(java), *startup_java_options(archive), "-Xshare:on", "-cp", classpath, "-version"],
                          capture_output=True, text=True, timeout=120, check=False, cwd=archive.parent)
    if done.returncode != 0:
        raise SystemExit(f"the JVM refuses the archive {archive}: {done.stderr.strip()[-500:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jars", type=Path, required=True, help="the folder of the pinned Spark jars (spark.jars)")
    parser.add_argument("--force", action="store_true", help="build even if the archive for this key exists")
    args = parser.parse_args(argv)
    jars = sorted(args.jars.resolve().glob("*.jar"))  # absolute: the classpath the archive records
    if not jars:
        parser.error(f"no jars in {args.jars}: run `make jars` first")
    target = archive_path_for(jars, os.environ)
    if target is None:
        parser.error("no java found (JAVA_HOME, or java on the PATH): Spark needs Java 17")
    if archive_complete(target) and not args.force:
        print(f"class-data archive up to date: {target}")
        return 0
    started = time.monotonic()
    build(jars, target)
    for stale in target.parent.glob("spark-*"):
        if stale.stem != target.stem:
            stale.unlink(missing_ok=True)
    size = target.stat().st_size / 2**20
    print(f"class-data archive built in {time.monotonic() - started:.0f}s: {target} ({size:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
