"""`make outdated` (scripts/outdated.py): every pin the project keeps is read, from each file that keeps one, and
compared with the registries' latest by version order, not by text."""

from __future__ import annotations

import json

from scripts import outdated

from tests.paths import ROOT

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><properties>
  <iceberg.version>1.12.0</iceberg.version><nessie.version>0.99.0</nessie.version>
  <elasticmq.version>1.7.1</elasticmq.version><spark.binary>4.1_2.13</spark.binary>
  <scala.binary>2.13</scala.binary><spark.version>4.1.1</spark.version></properties></project>"""


def test_every_pin_of_the_checkout_is_listed() -> None:
    pins = {(p.kind, p.name): p.pinned for p in outdated.all_pins(ROOT)}
    requirements = [line for line in (ROOT / "requirements.txt").read_text().splitlines() if "==" in line
                    and not line.startswith("#")]
    assert sum(kind == "pypi" for kind, _ in pins) == len(requirements) + 1  # and the Makefile's uv
    assert pins[("pypi", "pyspark")] == pins[("maven", "org.apache.spark:spark-avro_2.13")]
    assert {name for kind, name in pins if kind == "maven"} == {
        "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13", "org.apache.iceberg:iceberg-aws-bundle",
        "org.apache.spark:spark-avro_2.13", "org.projectnessie.nessie:nessie-quarkus",
        "org.elasticmq:elasticmq-server_2.13"}
    assert ("npm", "serverless") in pins


def test_versions_compare_by_number_and_a_silent_registry_is_unknown() -> None:
    answers = {
        "https://pypi.org/pypi/pyiceberg/json": json.dumps({"info": {"version": "0.12.0"}}).encode(),
        "https://pypi.org/pypi/s3fs/json": json.dumps({"info": {"version": "2025.9.0"}}).encode(),
        "https://repo1.maven.org/maven2/org/apache/iceberg/iceberg-aws-bundle/maven-metadata.xml":
            b"<metadata><versioning><latest>1.13.0-rc1</latest><release>1.12.0</release></versioning></metadata>",
    }

    def get(url: str) -> bytes:
        if url not in answers:
            raise OSError("unreachable")
        return answers[url]

    pins = outdated.python_pins("pyiceberg[pyarrow]==0.9.10\ns3fs==2025.9.0  # why\nmoto==5.1.12\n# x==1\n")
    pins += [p for p in outdated.maven_pins(POM) if p.name.endswith("aws-bundle")]
    rows = {r.name: r for r in outdated.report(pins, get)}
    assert rows["pyiceberg"].behind and rows["pyiceberg"].pinned == "0.9.10"  # 0.12.0 > 0.9.10
    assert not rows["s3fs"].behind
    assert rows["moto"].latest is None and not rows["moto"].behind
    assert not rows["org.apache.iceberg:iceberg-aws-bundle"].behind  # the release, not the candidate
    text = outdated.table(list(rows.values()), everything=False)
    assert "pyiceberg" in text and "moto" in text and "unknown" in text and "s3fs" not in text
    assert text.endswith("1 of 4 pins behind their latest release; 1 unknown.")
