"""wap_stack/moto_emr.py: moto's EMR Serverless accepts AWS's emr-spark-X.Y.Z labels and still refuses the rest."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from tests.paths import ROOT
from wap_stack.moto_emr import accept_emr_spark_labels


def test_the_applications_label_is_registered_as_given_and_other_labels_as_before() -> None:
    label = json.loads((ROOT / "infra" / "emr-application.json").read_text())["releaseLabel"]
    accept_emr_spark_labels()
    accept_emr_spark_labels()  # idempotent
    with mock_aws():
        emr = boto3.client("emr-serverless", region_name="us-east-1")
        created = emr.create_application(name="a", releaseLabel=label, type="SPARK")["applicationId"]
        older = emr.create_application(name="b", releaseLabel="emr-7.9.0", type="SPARK")["applicationId"]

        assert emr.get_application(applicationId=created)["application"]["releaseLabel"] == label == "emr-spark-8.1.0"
        assert emr.get_application(applicationId=older)["application"]["releaseLabel"] == "emr-7.9.0"
        for wrong in ("emr-fake", "emr-spark-8.1", "emr-spark-8.1.0; x"):
            with pytest.raises(ClientError, match="not supported for release label"):
                emr.create_application(name="c", releaseLabel=wrong, type="SPARK")
