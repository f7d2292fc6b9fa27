"""moto's EMR Serverless, taught the release labels of AWS's runtime for Apache Spark (emr-spark-X.Y.Z).

Every moto release (5.1.12 pinned here, 5.2.5 the newest checked) refuses a release label that does not match
`emr-X.Y.0`, so `emr-spark-8.1.0`, the label AWS's EMR release guide gives the 8.1 line (Spark 4.1.1) and the one the
service's application uses (infra/emr-application.json), could not be registered on the local stack. This accepts
that form of label and nothing else moto refuses: the application is created under a label moto's check passes and
then holds the real one, which every later call reads. Nothing else of moto changes.

    python -m wap_stack.moto_emr -H 127.0.0.1 -p PORT      # moto's server with the labels (the local stack)
    accept_emr_spark_labels()                               # the same in-process (ThreadedMotoServer, mock_aws)
"""

from __future__ import annotations

import re
import sys
from typing import Any

EMR_SPARK_LABEL = re.compile(r"emr-spark-[0-9]+\.[0-9]+\.[0-9]+")
_STAND_IN = "emr-7.0.0"  # a label moto's check accepts; replaced by the real one before the answer is made


def accept_emr_spark_labels() -> None:
    """Patch moto's EMR Serverless backend in this process (idempotent)."""
    from moto.emrserverless.models import EMRServerlessBackend

    original = EMRServerlessBackend.create_application
    if getattr(original, "accepts_emr_spark_labels", False):
        return

    def create_application(self: Any, **kwargs: Any) -> Any:
        label = kwargs.get("release_label")
        if not isinstance(label, str) or not EMR_SPARK_LABEL.fullmatch(label):
            return original(self, **kwargs)
        application = original(self, **(kwargs | {"release_label": _STAND_IN}))
        application.release_label = label
        return application

    create_application.accepts_emr_spark_labels = True  # type: ignore[attr-defined]
    EMRServerlessBackend.create_application = create_application  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> int:
    accept_emr_spark_labels()
    from moto.server import main as moto_main

    moto_main(list(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
