"""The EMR job's Python archive comes from the image's lock, hashes kept, without what EMR brings (Spark) or the job
does not need (the Lambda runtime client); `make emr-artifacts` installs it with --require-hashes."""

from __future__ import annotations

from pathlib import Path

from wap_ingest.entrypoints.emr_artifacts import REPO, job_requirements


def test_the_job_requirements_keep_each_entry_with_its_hashes_and_drop_spark(tmp_path: Path) -> None:
    lock = tmp_path / "runtime.lock"
    lock.write_text("# generated\nboto3==1.0 \\\n    --hash=sha256:aa\n    # via -r x\npyspark==3.5.7 \\\n"
                    "    --hash=sha256:bb\npy4j==0.10 \\\n    --hash=sha256:cc\nawslambdaric==3.0 \\\n"
                    "    --hash=sha256:dd\npyarrow==20.0.0 \\\n    --hash=sha256:ee \\\n    --hash=sha256:ff\n")
    assert job_requirements(lock) == ("boto3==1.0 \\\n    --hash=sha256:aa\npyarrow==20.0.0 \\\n"
                                      "    --hash=sha256:ee \\\n    --hash=sha256:ff\n")


def test_the_real_lock_gives_every_kept_package_a_hash() -> None:
    text = job_requirements(REPO / "requirements-runtime.lock")
    names = [line.split("==")[0] for line in text.splitlines() if "==" in line]
    assert "pyarrow" in names and "pyspark" not in names and "awslambdaric" not in names
    assert text.count("==") == len(names) and text.count("--hash=sha256:") >= len(names)
