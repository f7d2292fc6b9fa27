"""Check the jars Maven copied against docker/jars.sha256, the committed SHA-256 of every one of them.

    python3 scripts/verify_jars.py .cache/jars                          # `make jars`: spark/ and nessie/
    python3 scripts/verify_jars.py --group spark /opt/wap/jars          # the image: the spark/ jars, copied flat
    python3 scripts/verify_jars.py --write .cache/jars                  # after changing a pin in docker/pom.xml

The manifest is in `sha256sum` format (`<hex>  spark/<file>.jar`), so `sha256sum -c` reads it too. A jar whose
digest differs, a listed jar that is missing and a jar that is not listed are each refused (exit status 1): Maven's
own checks (`mvn -C`) only prove that a download matches the repository's checksum file, this proves that it is
the very file the project reviewed. Standard library only: `make jars` runs it before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

MANIFEST = Path(__file__).resolve().parents[1] / "docker" / "jars.sha256"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(manifest: Path) -> dict[str, str]:
    """{relative path: sha256} from `<64 hex>  <path>` lines; blank lines and `#` comments are skipped."""
    entries: dict[str, str] = {}
    for number, raw in enumerate(manifest.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or not name:
            raise ValueError(f"{manifest}:{number}: not '<sha256>  <path>': {raw!r}")
        entries[name.lstrip("*")] = digest
    return entries


def expected(manifest: Path, group: str | None) -> dict[str, str]:
    """The entries to check, relative to the folder given: all of them, or one group's with its prefix dropped."""
    entries = read_manifest(manifest)
    if group is None:
        return entries
    prefix = group.rstrip("/") + "/"
    return {name.removeprefix(prefix): digest for name, digest in entries.items() if name.startswith(prefix)}


def verify(folder: Path, wanted: dict[str, str]) -> list[str]:
    """The problems found (empty when every jar is exactly the listed one and no other jar is there)."""
    if not wanted:
        return ["the manifest lists no jar for this folder"]
    problems = []
    for name, digest in sorted(wanted.items()):
        path = folder / name
        if not path.is_file():
            problems.append(f"{name}: missing")
        elif (actual := sha256(path)) != digest:
            problems.append(f"{name}: sha256 {actual}, expected {digest}")
    found = {path.relative_to(folder).as_posix() for path in folder.rglob("*.jar")}
    problems += [f"{name}: not in the manifest" for name in sorted(found - set(wanted))]
    return problems


def write(folder: Path, manifest: Path) -> None:
    lines = [f"{sha256(path)}  {path.relative_to(folder).as_posix()}" for path in sorted(folder.rglob("*.jar"))]
    header = manifest.read_text().splitlines() if manifest.exists() else []
    comments = [line for line in header if line.startswith("#")]
    manifest.write_text("\n".join([*comments, *lines]) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="the folder Maven copied the jars into")
    parser.add_argument("--manifest", type=Path, default=MANIFEST, help="default: docker/jars.sha256")
    parser.add_argument("--group", help="check only the manifest's entries under GROUP/, found directly in FOLDER")
    parser.add_argument("--write", action="store_true", help="rewrite the manifest from FOLDER instead of checking")
    args = parser.parse_args(argv)

    if args.write:
        write(args.folder, args.manifest)
        print(f"wrote {args.manifest}")
        return 0
    problems = verify(args.folder, expected(args.manifest, args.group))
    for problem in problems:
        print(f"verify_jars: {args.folder}/{problem}", file=sys.stderr)
    if problems:
        print(f"verify_jars: refused; the jars do not match {args.manifest}", file=sys.stderr)
        return 1
    print(f"verify_jars: {len(expected(args.manifest, args.group))} jars match {args.manifest.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
