"""EMR Serverless on the local stack.

`register` (at `wap stack up`): the job role in moto's IAM, the application in moto's EMR Serverless, and the
job's small artefacts in the lake bucket, so the function routes a large file exactly as in AWS and moto records
the submission. With WAP_EMR_MODE=local the stack also runs this module as a process (the runner): it polls the
application's job runs and runs each new one's entry point with `spark-submit` against the stack, from the very
request the function sent (entry point, arguments and package fetched from S3, catalog settings and driver
environment from its `--conf`s). Locally, the jars are the same pinned files from .cache/jars and the Python is
the project's environment, in place of the Python archive.

    python -m wap_stack.emr --application-id ID --work-dir DIR [--poll 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from wap_ingest.adapters.aws import parse_submit_parameters
from wap_ingest.adapters.engine import local_driver_options
from wap_stack.daemon import Control, log, stop_on_signals

APPLICATION_NAME = "wap-lake-local"
RELEASE_LABEL = "emr-spark-8.1.0"  # Spark 4.1.1, as infra/emr-application.json
ROLE_NAME = "wap-emr-job-role"
DRIVER_ENV = "spark.emr-serverless.driverEnv."
# What the runner supplies itself, locally: the jars, the package, the files, the Python.
_SUPPLIED_LOCALLY = ("spark.jars", "spark.archives", "spark.submit.pyFiles", "spark.files")


def register(clients: Any, lake_bucket: str) -> tuple[str, str]:
    """(application id, role ARN). `clients(service)` gives a boto3 client on moto."""
    from wap_ingest.entrypoints import emr_artifacts as artifacts

    iam = clients("iam")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole",
                                                     "Principal": {"Service": "emr-serverless.amazonaws.com"}}]}
    role = iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    app = clients("emr-serverless").create_application(name=APPLICATION_NAME, releaseLabel=RELEASE_LABEL,
                                                       type="SPARK")["applicationId"]
    audits = os.environ.get("WAP_AUDITS_FILE", "").strip()  # the job validates the suites the function uses
    with tempfile.TemporaryDirectory(prefix="wap-emr-artifacts-") as tmp:
        files = artifacts.build(Path(tmp), python=False, audits=Path(audits) if audits else None)
        artifacts.upload(files, Path(tmp), clients("s3"), f"s3://{lake_bucket}/emr/artifacts")
    return app, role



def _fetch(s3: Any, uri: str, directory: Path) -> Path:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    target = directory / Path(key).name
    s3.download_file(bucket, key, str(target))
    return target


def spark_submit_command(
    job: dict[str, Any], s3: Any, job_dir: Path, jars_dir: Path
) -> tuple[list[str], dict[str, str]]:
    """The local spark-submit for a job run's request, and the driver's environment."""
    driver = job["jobDriver"]["sparkSubmit"]
    conf = parse_submit_parameters(driver.get("sparkSubmitParameters", ""))
    jars = [jars_dir / uri.rsplit("/", 1)[-1] for uri in conf.get("spark.jars", "").split(",") if uri]
    missing = [str(j) for j in jars if not j.is_file()]
    if missing:
        raise FileNotFoundError(f"the job's jars are not in {jars_dir}: {', '.join(missing)} (make jars)")
    entry = _fetch(s3, driver["entryPoint"], job_dir)
    package = _fetch(s3, conf["spark.submit.pyFiles"], job_dir)
    audits = _fetch(s3, conf["spark.files"], job_dir)
    env = {k.removeprefix(DRIVER_ENV): v for k, v in conf.items() if k.startswith(DRIVER_ENV)}
    env |= {"WAP_STAGE": "download", "WAP_AUDITS_FILE": str(audits), "WAP_EMR_JOB_RUN_ID": job["jobRunId"],
            "WAP_WORK_DIR": str(job_dir / "work"), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)
    kept = {k: v for k, v in conf.items()
            if k not in _SUPPLIED_LOCALLY and not k.startswith((DRIVER_ENV, "spark.executorEnv."))}
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]", "--name", job["name"],
               "--driver-memory", "2g", "--jars", ",".join(str(j) for j in jars), "--py-files", str(package),
               "--conf", f"spark.local.dir={job_dir / 'spark'}",
               # started as the function's driver is (the class-data archive, the JIT and GC flags): each job is a
               # cold start, and EMR Serverless's own start-up is not what the local runner stands in for
               *local_driver_options(jars, os.environ)]
    for key, value in kept.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(entry), *driver.get("entryPointArguments", [])], env


def run_job(emr: Any, s3: Any, application_id: str, job_run_id: str, work_dir: Path, jars_dir: Path) -> int:
    job = emr.get_job_run(applicationId=application_id, jobRunId=job_run_id)["jobRun"]
    job_dir = work_dir / job_run_id
    (job_dir / "spark").mkdir(parents=True, exist_ok=True)
    command, env = spark_submit_command(job, s3, job_dir, jars_dir)
    log("job_started", job_run_id=job_run_id, name=job["name"], arguments=job["jobDriver"]["sparkSubmit"].get(
        "entryPointArguments"))
    started = time.monotonic()
    with (job_dir / "driver.log").open("wb") as out:
        code = subprocess.run(command, env=os.environ | env, stdout=out, stderr=subprocess.STDOUT,
                              check=False).returncode
    result = (job_dir / "driver.log").read_text(errors="replace").strip().splitlines()
    outcome = next((line for line in reversed(result) if line.startswith("{\"job_run_id\"")), None)
    log("job_finished", job_run_id=job_run_id, exit_code=code, seconds=round(time.monotonic() - started, 1),
        outcome=json.loads(outcome) if outcome else None, driver_log=str(job_dir / "driver.log"))
    return code


def run(application_id: str, work_dir: Path, jars_dir: Path, poll: float) -> None:
    import boto3

    emr, s3 = boto3.client("emr-serverless"), boto3.client("s3")
    done_file = work_dir / "handled.txt"
    work_dir.mkdir(parents=True, exist_ok=True)
    handled = set(done_file.read_text().split()) if done_file.is_file() else set()
    log("started", application_id=application_id)
    while Control.running:
        try:
            runs = emr.list_job_runs(applicationId=application_id).get("jobRuns", [])
        except Exception as exc:  # moto is stopping, or not yet asked for a job (no runs: ResourceNotFound)
            if "ResourceNotFound" not in str(exc):
                log("list_failed", error=str(exc))
            runs = []
        for job in sorted(runs, key=lambda j: str(j.get("createdAt"))):
            if job["id"] in handled or not Control.running:
                continue
            handled.add(job["id"])
            with done_file.open("a") as out:
                out.write(job["id"] + "\n")
            try:
                run_job(emr, s3, application_id, job["id"], work_dir, jars_dir)
            except Exception as exc:
                log("job_failed_to_start", job_run_id=job["id"], error=str(exc))
        time.sleep(poll)
    log("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the local stack's EMR Serverless job runs with spark-submit")
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--work-dir", type=Path, required=True)
    parser.add_argument("--jars", type=Path, required=True)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args(argv)
    stop_on_signals()
    run(args.application_id, args.work_dir, args.jars, args.poll)
    return 0


if __name__ == "__main__":
    sys.exit(main())
