"""Extract the Lambda Runtime Interface Emulator for this machine's architecture from the aws-sam-cli wheel.

    python scripts/extract_rie.py aws_sam_cli-<ver>-py3-none-any.whl .cache/rie/aws-lambda-rie
"""

from __future__ import annotations

import platform
import stat
import sys
import zipfile
from pathlib import Path


def main(wheel: str, target: str) -> int:
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}[platform.machine().lower()]
    out = Path(target)
    staged = out.with_name(out.name + ".new")
    with zipfile.ZipFile(wheel) as archive:
        staged.write_bytes(archive.read(f"samcli/local/rapid/aws-lambda-rie-{arch}"))
    staged.chmod(staged.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    staged.replace(out)  # atomic: an emulator running from the old file keeps it ("text file busy" otherwise)
    print(f"extracted the {arch} emulator to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
